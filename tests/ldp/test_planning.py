"""Planning formulas against the job's own estimator: seeded simulations of windows whose true
reports have the worst-case pattern, or a given frequency, with variance bands from tests/stats.py."""
import math

import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.planning import (
    frequency_variance,
    half_width,
    report_variances,
    reports_for_half_width,
    second_moments,
)
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh
from tests.stats import assert_variance_ratio

CHANNELS = ChannelSet((Channel(0.1, 0.85), Channel(0.25, 0.75), Channel(0.05, 0.7)))
P, Q = CHANNELS.p, CHANNELS.q


def simulated_frequencies(patterns, windows, seed):
    """The TMDH frequency of the set {0, 1, 2} in ``windows`` windows whose reports have ``patterns``."""
    family = SetFamily(3, 3)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(windows):
        noisy = randomize_bits(patterns, CHANNELS, rng)
        est = estimate_tmdh(CooccurrenceAccumulator(family).add_bits(noisy), CHANNELS)
        out.append(est.mean((0, 1, 2)) / len(patterns))
    return np.array(out)


def worst_pattern():
    """The pattern whose report adds the most variance (enumerated)."""
    m0, m1 = second_moments(P, Q)
    best, arg = -1.0, None
    for code in range(8):
        x = np.array([(code >> i) & 1 for i in range(3)])
        v = float(np.prod(np.where(x == 1, m1, m0))) - float(x.all())
        if v > best:
            best, arg = v, x
    return arg, best


@pytest.mark.statistical
def test_worst_case_variance_is_the_estimators_at_the_worst_pattern():
    x, v = worst_pattern()
    assert max(report_variances(P, Q)) == pytest.approx(v, rel=1e-12)
    n = 400
    freqs = simulated_frequencies(np.tile(x, (n, 1)).astype(np.uint8), 2000, seed=1)
    assert_variance_ratio(freqs, frequency_variance(P, Q, n))


@pytest.mark.statistical
def test_variance_at_a_frequency_with_the_others_at_their_worst_pattern_is_exact():
    all_ones, other = report_variances(P, Q)
    m0, m1 = second_moments(P, Q)
    others = [np.array([(c >> i) & 1 for i in range(3)]) for c in range(7)]  # every pattern but all ones
    x_other = max(others, key=lambda x: float(np.prod(np.where(x == 1, m1, m0))))
    n, f = 500, 0.3
    patterns = np.array([[1, 1, 1]] * int(f * n) + [x_other] * (n - int(f * n)), dtype=np.uint8)
    freqs = simulated_frequencies(patterns, 2000, seed=2)
    assert np.mean(freqs) == pytest.approx(f, abs=5 * math.sqrt(frequency_variance(P, Q, n, f) / 2000))
    assert_variance_ratio(freqs, frequency_variance(P, Q, n, f))
    assert frequency_variance(P, Q, n, f) == pytest.approx((f * all_ones + (1 - f) * other) / n)


def test_reports_for_a_half_width_is_the_inverse():
    for f in (None, 0.05, 0.5):
        n = reports_for_half_width(P, Q, 0.02, 0.95, f)
        assert half_width(P, Q, n, 0.95, f) <= 0.02 < half_width(P, Q, n - 1, 0.95, f)
    # symmetric channels: a single bit's variance does not depend on its frequency
    sym = Channel.symmetric(0.2)
    assert half_width([sym.p], [sym.q], 1000, 0.95, 0.01) == pytest.approx(half_width([sym.p], [sym.q], 1000))
    with pytest.raises(ValueError, match="target_half_width must be > 0"):
        reports_for_half_width(P, Q, 0.0)
    with pytest.raises(ValueError, match="n_reports must be >= 1"):
        half_width(P, Q, 0)
