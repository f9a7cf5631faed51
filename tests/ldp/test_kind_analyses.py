"""Conditionals and means of the whole-report kinds (ldp/kind_analyses.py): exact on expected counts,
the covariance of two all-ones counts of one table against the empirical covariance, bias within
z*SE and coverage of the intervals by seeded simulation, and the presence test's false-positive rate."""

import math

import numpy as np
import pytest

from ldp_marginals.ldp import hadamard_reports, subset_reports
from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.hadamard import HadamardSampling, true_coefficients
from ldp_marginals.ldp.kind_analyses import KindMarginals
from ldp_marginals.ldp.means import feature_mean
from ldp_marginals.ldp.subset_rr import SubsetAccumulator, SubsetRR
from tests.ldp.test_hadamard import expected_accumulator, histogram, population
from tests.stats import Z, assert_coverage

N, D = 1500, 5
LOW, HIGH = 10.0, 50.0


def _kind_marginals(module, agg, window):
    return KindMarginals(module.window_marginals(agg, window), module.cell_variance_per_report)


def expected_hadamard(bits):
    mech = HadamardSampling(D, 3, 1.0)
    theta = true_coefficients(bits, mech.family)
    drawn = np.full(len(mech.family), 1000, dtype=np.int64)
    drawn[0] = 0
    acc, odd = expected_accumulator(mech, theta, drawn)
    agg = hadamard_reports.HadamardAggregator(mech)
    window = agg.create()
    window.cooc.counts = np.concatenate([[acc.n_reports], drawn[1:], odd[1:]])
    return _kind_marginals(hadamard_reports, agg, window)


def expected_subset(bits):
    mech = SubsetRR(D, 3, 2.0, width=4)
    agg = subset_reports.SubsetAggregator(mech)
    own = SubsetAccumulator(mech)
    for o in (1, 2, 3):
        p1, q1 = mech.projected(o)
        n_k = np.arange(len(mech.family.members(o)))[:, None] * 7.0 + 50.0
        truth = np.array([histogram(bits, s) for s in mech.family.members(o)])
        own.counts[o] = n_k * (q1 + (p1 - q1) * truth)
    window = agg.create()
    window.cooc.counts = np.concatenate([[float(len(bits))]] + [c.ravel() for c in own.counts[1:]])
    return _kind_marginals(subset_reports, agg, window)


@pytest.mark.parametrize("expected", [expected_hadamard, expected_subset])
def test_conditionals_and_means_are_exact_on_expected_counts(expected):
    bits = population(N, d=D, seed=0)
    est = expected(bits)
    freq = lambda s: bits[:, list(s)].all(axis=1).mean()   # noqa: E731
    for of, given in (((0,), (1,)), ((2,), (0, 4)), ((1, 3), (2,))):
        c = conditional(est, of, given)
        assert c.estimate == pytest.approx(freq(set(of) | set(given)) / freq(given), abs=1e-9)
        assert c.variance > 0 and c.present
    # bit 4 as a numeric feature's 1-bit encoding in [LOW, HIGH]: the mean is its marginal rescaled
    m = feature_mean(est, 4, LOW, HIGH)
    assert m.estimate == pytest.approx(LOW + (HIGH - LOW) * freq((4,)), abs=1e-9)
    m = feature_mean(est, 4, LOW, HIGH, given=(0, 2))
    assert m.estimate == pytest.approx(LOW + (HIGH - LOW) * freq((0, 2, 4)) / freq((0, 2)), abs=1e-9)
    with pytest.raises(ValueError, match="max_order"):
        conditional(est, (0, 1), (2, 3))   # four bits: over the kind's max_order


def _hadamard_windows(bits, rng):
    mech = HadamardSampling(D, 3, 2.0)
    agg = hadamard_reports.HadamardAggregator(mech)
    return _kind_marginals(hadamard_reports, agg, agg.add_packed(agg.create(),
                                                                  hadamard_reports.encode_reports(bits, mech, rng)))


def _subset_windows(bits, rng):
    mech = SubsetRR(D, 3, 2.0, width=4)
    agg = subset_reports.SubsetAggregator(mech)
    return _kind_marginals(subset_reports, agg, agg.add_packed(agg.create(),
                                                                subset_reports.encode_reports(bits, mech, rng)))


@pytest.mark.statistical
@pytest.mark.parametrize("windows", [_hadamard_windows, _subset_windows])
def test_the_covariance_of_one_tables_counts_is_the_empirical_one(windows):
    """400 seeded windows of fixed reports: the empirical covariance matrix of (t_U, t_B), U = {0, 1, 2},
    B = {1, 2}, matches the mean closed-form one entry by entry within z standard errors (the sample
    (co)variance's SE from its fourth moments, estimated). Taking the kind's marginal of B (another set of
    reports for subset RR) with covariance 0, or a covariance of the wrong sign, fails it."""
    bits = population(N, d=D, seed=0)
    rng = np.random.default_rng(5)
    r = 400
    counts, covs = np.empty((r, 2)), np.empty((r, 2, 2))
    for w in range(r):
        counts[w], covs[w] = windows(bits, rng).all_ones([(0, 1, 2), (1, 2)])
    centered = counts - counts.mean(axis=0)
    for i, j in ((0, 0), (1, 1), (0, 1)):
        prod = centered[:, i] * centered[:, j] * r / (r - 1)
        se = prod.std(ddof=1) / math.sqrt(r)
        assert abs(prod.mean() - covs[:, i, j].mean()) <= Z * se, (i, j, prod.mean(), covs[:, i, j].mean(), se)
    truth = [bits[:, [0, 1, 2]].all(axis=1).sum(), bits[:, [1, 2]].all(axis=1).sum()]
    for i in range(2):   # unbiased: within z SE of the closed-form variance
        assert abs(counts[:, i].mean() - truth[i]) <= Z * math.sqrt(covs[:, i, i].mean() / r)


@pytest.mark.statistical
@pytest.mark.parametrize("windows", [_hadamard_windows, _subset_windows])
def test_conditionals_and_means_are_unbiased_and_cover_at_their_level(windows):
    """600 seeded windows of 1500 reports; bit 4 is a numeric feature in [10, 50] encoded afresh each
    window (1 with probability u = (x - 10) / 40). Per statistic (P(0 | 1, 2), mean(x), mean(x | 0)):
    the mean estimate is within z*SE of the truth (SE from the mean closed-form variance) and the 95%
    intervals cover at their level (binomial band). Dropping the covariance term of the delta method, or
    the encoding's Bernoulli term of the mean, fails coverage."""
    rng = np.random.default_rng(17)
    bits = population(N, d=D, seed=0)
    x = LOW + (HIGH - LOW) * np.clip(0.25 + 0.5 * bits[:, 0] + 0.2 * rng.standard_normal(N), 0, 1)
    u = (x - LOW) / (HIGH - LOW)
    truths = (bits[:, :3].all(axis=1).sum() / bits[:, 1:3].all(axis=1).sum(), x.mean(), x[bits[:, 0] == 1].mean(),
              bits[:, :3].any(axis=1).sum(), bits[:, [1, 3]].all(axis=1).sum())
    r = 600
    est, var, cov = np.empty((r, 5)), np.empty((r, 5)), np.empty((r, 5), dtype=bool)
    for w in range(r):
        b = bits.copy()
        b[:, 4] = rng.random(N) < u
        k = windows(b, rng)
        stats = [conditional(k, (0,), (1, 2)), feature_mean(k, 4, LOW, HIGH), feature_mean(k, 4, LOW, HIGH, (0,))]
        for op, ext in (("or", (0, 1, 2)), ("and", (1, 3))):
            count, v = k.extreme(op, ext)
            half = 1.959963984540054 * math.sqrt(v)
            stats.append(type("S", (), dict(estimate=count, variance=v, ci_low=count - half, ci_high=count + half)))
        for i, (s, t) in enumerate(zip(stats, truths)):
            est[w, i], var[w, i], cov[w, i] = s.estimate, s.variance, s.ci_low <= t <= s.ci_high
    for i, t in enumerate(truths):
        assert abs(est[:, i].mean() - t) <= Z * math.sqrt(var[:, i].mean() / r), (i, est[:, i].mean(), t)
        assert_coverage(cov[:, i], 0.95)


@pytest.mark.statistical
@pytest.mark.parametrize("windows", [_hadamard_windows, _subset_windows])
def test_a_condition_that_never_holds_is_rarely_declared_present(windows):
    """300 seeded windows where bits 1 and 2 are never both 1: the presence test at alpha = 0.01 declares
    {1, 2} present in at most 3/300 + z binomial SEs (a threshold of 0 fires about half the time)."""
    bits = population(N, d=D, seed=3)
    bits[:, 2] &= 1 - bits[:, 1]
    rng = np.random.default_rng(8)
    fired = [conditional(windows(bits, rng), (0,), (1, 2), alpha=0.01).present for _ in range(300)]
    assert np.mean(fired) <= 0.01 + Z * math.sqrt(0.01 * 0.99 / 300)
