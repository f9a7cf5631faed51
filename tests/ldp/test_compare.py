"""Changes between windows: with the same true frequency in two windows, the z score of their
estimates is standard normal (seeded simulation with the TMDH variances, which are conditional on
the windows' true reports), and Benjamini-Hochberg rejects what its step-up rule says."""
import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.compare import benjamini_hochberg, change
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh
from tests.simulate import noisy_histograms, window_fields
from tests.stats import Z, assert_variance_ratio, replicates_for

CHANNELS = ChannelSet((Channel(0.2, 0.8), Channel(0.1, 0.7)))
FAMILY = SetFamily(2, 2)


def window(n):
    """True reports with exactly the same pattern frequencies in every window (11: 18%, 10: 12%,
    01: 42%, 00: 28%): the windows' true joint frequency does not change."""
    counts = [round(n * f) for f in (0.18, 0.12, 0.42)]
    rows = [[1, 1]] * counts[0] + [[1, 0]] * counts[1] + [[0, 1]] * counts[2]
    return np.array(rows + [[0, 0]] * (n - len(rows)), dtype=np.uint8)


def frequencies(rng, n, windows):
    """The frequency of {0, 1} and its variance in ``windows`` randomizations of ``window(n)``."""
    histograms = noisy_histograms(window(n), CHANNELS.p, CHANNELS.q, windows, rng)

    def fields(bits):
        est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(bits), CHANNELS)
        return [est.mean((0, 1)) / n, est.variance((0, 1)) / n ** 2]
    f = window_fields(fields, histograms)
    return f[:, 0], f[:, 1]


@pytest.mark.statistical
def test_z_of_two_windows_of_one_population_is_standard_normal():
    rng = np.random.default_rng(4)
    windows = replicates_for()
    (f1, v1), (f2, v2) = frequencies(rng, 3000, windows), frequencies(rng, 2000, windows)
    zs = np.array([change(*pair).z for pair in zip(f1, v1, f2, v2)])
    assert abs(zs.mean()) <= Z / np.sqrt(len(zs))
    assert_variance_ratio(zs, 1.0)  # variances conditional on the true reports, as the job's


def test_change_algebra_and_benjamini_hochberg():
    c = change(0.2, 0.0001, 0.25, 0.0003, 0.95)
    assert c.difference == pytest.approx(0.05) and c.standard_error == pytest.approx(0.02)
    assert c.z == pytest.approx(2.5) and c.p_value == pytest.approx(0.012419, abs=1e-5)
    assert c.ci_low == pytest.approx(0.05 - 1.959964 * 0.02, abs=1e-6)
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205]   # thresholds k * 0.05 / 8
    assert benjamini_hochberg(p, 0.05) == [True, True] + [False] * 6
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.2], 0.05) == [True, False, False, False]
    assert benjamini_hochberg([0.04, 0.01, 0.03], 0.05) == [True, True, True]  # step-up: p(3) <= 0.05
    with pytest.raises(ValueError, match="variances must add up to > 0"):
        change(0.1, 0.0, 0.2, 0.0)
