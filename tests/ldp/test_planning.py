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
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh
from tests.simulate import noisy_histograms, sampled_histograms, window_fields
from tests.stats import Z, assert_variance_ratio, replicates_for

CHANNELS = ChannelSet((Channel(0.1, 0.85), Channel(0.25, 0.75), Channel(0.05, 0.7)))
P, Q = CHANNELS.p, CHANNELS.q


WINDOWS = replicates_for()   # a band that catches a variance 5% off


def simulated_frequencies(patterns, windows, seed):
    """The TMDH frequency of the set {0, 1, 2} in ``windows`` windows whose reports have ``patterns``."""
    family = SetFamily(3, 3)
    histograms = noisy_histograms(patterns, P, Q, windows, np.random.default_rng(seed))
    return window_fields(lambda bits: estimate_tmdh(CooccurrenceAccumulator(family).add_bits(bits), CHANNELS)
                         .mean((0, 1, 2)) / len(patterns), histograms)[:, 0]


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
    freqs = simulated_frequencies(np.tile(x, (n, 1)).astype(np.uint8), WINDOWS, seed=1)
    assert_variance_ratio(freqs, frequency_variance(P, Q, n))


@pytest.mark.statistical
def test_variance_at_a_frequency_with_the_others_at_their_worst_pattern_is_exact():
    all_ones, other = report_variances(P, Q)
    m0, m1 = second_moments(P, Q)
    others = [np.array([(c >> i) & 1 for i in range(3)]) for c in range(7)]  # every pattern but all ones
    x_other = max(others, key=lambda x: float(np.prod(np.where(x == 1, m1, m0))))
    n, f = 500, 0.3
    patterns = np.array([[1, 1, 1]] * int(f * n) + [x_other] * (n - int(f * n)), dtype=np.uint8)
    freqs = simulated_frequencies(patterns, WINDOWS, seed=2)
    assert np.mean(freqs) == pytest.approx(f, abs=Z * math.sqrt(frequency_variance(P, Q, n, f) / WINDOWS))
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


def worst_cell_pattern(m0, m1, ones):
    """The pattern of a cell's bits (the first ``ones`` must be 1, the rest 0) adding the most variance."""
    best, arg = -1.0, None
    for code in range(1 << len(m0)):
        x = np.array([(code >> i) & 1 for i in range(len(m0))])
        square, mean = np.where(x == 1, m1, m0), x.astype(float)
        square[ones:], mean[ones:] = 1 - 2 * mean[ones:] + square[ones:], 1 - mean[ones:]
        v = float(np.prod(square) - np.prod(mean) ** 2)
        if v > best:
            best, arg = v, x
    return arg, best


@pytest.mark.statistical
def test_table_cell_worst_case_is_the_job_estimators_variance_at_the_worst_pattern():
    """Cell (a=false, os=mac, b=true) of the table (a, os, b), estimated by ldp.tables as the job
    does, in windows whose reports all have the cell's worst pattern."""
    from ldp_marginals.ldp.encoding import Feature, Layout
    from ldp_marginals.ldp.planning import cell_variance
    from ldp_marginals.ldp.tables import group_table
    layout = Layout((Feature.boolean("a"), Feature.categorical("os", ["mac", "win"]), Feature.boolean("b")))
    chans = ChannelSet((Channel(0.1, 0.85), Channel(0.25, 0.75), Channel(0.2, 0.8), Channel(0.05, 0.7)))
    ones, zeros = [1, 3], [0]   # os=mac and b must be 1, a must be 0
    m0, m1 = second_moments(chans.p[ones + zeros], chans.q[ones + zeros])
    x, v = worst_cell_pattern(m0, m1, len(ones))
    n = 400
    assert cell_variance(chans.p[ones], chans.q[ones], chans.p[zeros], chans.q[zeros], n) == pytest.approx(v / n)
    truth = np.zeros((n, 4), dtype=np.uint8)
    truth[:, 1], truth[:, 2] = x[0], 1 - x[0]   # os one-hot: mac if the pattern says so, else win
    truth[:, 3], truth[:, 0] = x[1], x[2]
    family = SetFamily(4, 3)
    histograms = noisy_histograms(truth, chans.p, chans.q, WINDOWS, np.random.default_rng(5))

    def cell(bits):
        est = estimate_tmdh(CooccurrenceAccumulator(family).add_bits(bits), chans,
                            exclusive_groups=layout.exclusive_groups)
        table = group_table(est, layout, ("a", "os", "b"))
        return table.estimate[table.cells.index(("false", "mac", "true"))] / n
    assert_variance_ratio(window_fields(cell, histograms)[:, 0], v / n)


@pytest.mark.statistical
def test_mean_worst_case_is_the_mean_estimators_variance_at_the_worst_mean():
    """Reports whose encoded bit is 1 with the worst probability u*: the planned variance is the
    variance of ldp.means' estimate (channel and encoding noise together)."""
    from ldp_marginals.ldp.means import feature_mean
    from ldp_marginals.ldp.planning import mean_variance
    chans = ChannelSet((Channel(0.3, 0.9),))
    m0, m1 = second_moments(chans.p, chans.q)
    u = float(np.clip((m1[0] - m0[0]) / 2, 0, 1))
    assert 0 < u < 1   # an interior worst case: the bound is not at an end of the range
    n, low, high = 500, 2.0, 12.0
    planned = mean_variance(chans.p[0], chans.q[0], low, high, n)
    for other in (0.0, 0.3, 1.0):   # any other mean gives less
        assert (high - low) ** 2 * ((1 - other) * m0[0] + other * m1[0] - other ** 2) / n <= planned + 1e-12
    family = SetFamily(1, 1)
    # reports encoded i.i.d. (1 with probability u), then randomized
    histograms = sampled_histograms([1 - u, u], n, chans.p, chans.q, WINDOWS, np.random.default_rng(8))
    means = window_fields(lambda bits: feature_mean(estimate_tmdh(CooccurrenceAccumulator(family).add_bits(bits), chans),
                                                    0, low, high).estimate, histograms)[:, 0]
    assert_variance_ratio(means, planned)
