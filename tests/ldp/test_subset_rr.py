"""Subset randomized response (ldp/subset_rr.py): exact algebra (expected counts, an exact enumeration
of the covariance, the privacy of a report, the closed-form choice of the width) and seeded
simulations of bias, covariance and coverage against the closed forms."""
import math
from itertools import combinations, product

import numpy as np
import pytest

from ldp_marginals.ldp.marginal_sampling import MarginalSampling, cell_variance
from ldp_marginals.ldp.subset_rr import (
    SubsetAccumulator,
    SubsetEstimate,
    SubsetRR,
    best_width,
    estimate_subset,
    holding_share,
    randomize_subset,
    table_covariance,
    table_variance_per_report,
)
from tests.ldp.test_hadamard import histogram, merged_shards, population
from tests.stats import Z, assert_coverage, assert_mean_close, assert_variance_ratio, replicates_for


def _accumulator(mech, subsets, patterns):
    return SubsetAccumulator(mech).add(np.asarray(subsets, dtype=np.int64), np.asarray(patterns, dtype=np.int64))


def test_expected_counts_give_the_truth():
    bits = population(1000, d=5)
    mech = SubsetRR(5, 3, 2.0, width=4)
    acc = SubsetAccumulator(mech)
    for o in (1, 2, 3):
        p1, q1 = mech.projected(o)
        n_k = np.arange(len(mech.family.members(o)))[:, None] * 7.0 + 50.0
        truth = np.array([histogram(bits, s) for s in mech.family.members(o)])
        acc.counts[o] = n_k * (q1 + (p1 - q1) * truth)          # E[counts | n_K], fractional: the estimator is linear
    est = estimate_subset(acc)
    for o in (1, 2, 3):
        for row, s in enumerate(mech.family.members(o)):
            np.testing.assert_allclose(est.frequencies(o)[row], histogram(bits, s), atol=1e-12)
    # projecting k-ary RR over 2^s patterns onto o of its bits is k-ary RR over 2^o cells
    p1, q1 = mech.projected(2)
    assert p1 + 3 * q1 == pytest.approx(1.0) and p1 - q1 == pytest.approx(mech.p - mech.q)


def test_covariance_is_exact_by_enumeration():
    """Three reports of 3 bits, subsets of 2: every draw of subsets (27, equally likely) and of sent
    patterns (64, weighted by p and q) through the accumulator and the estimator. Conditional on n_K the
    estimate's mean is the truth and its covariance is the closed form, for n_K = 1, 2 and 3 (at 2 the
    finite-population sampling weighs in, at 3 it vanishes)."""
    bits = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=np.uint8)
    mech = SubsetRR(3, 2, 1.1, width=2)
    pairs = list(combinations(range(3), 2))
    by_n = {1: {}, 2: {}}          # order -> n_K -> [(weight, estimate)]
    for choice in product(range(3), repeat=3):
        subsets = [sum(1 << b for b in pairs[c]) for c in choice]
        for sent in product(range(4), repeat=3):
            weight = 1.0
            patterns = []
            for r, (c, z) in enumerate(zip(choice, sent)):
                true = bits[r, pairs[c][0]] | bits[r, pairs[c][1]] << 1
                weight *= mech.p if z == true else mech.q
                patterns.append((z & 1) << pairs[c][0] | (z >> 1) << pairs[c][1])
            est = estimate_subset(_accumulator(mech, subsets, patterns))
            weight /= 27.0
            for o, cols in ((2, (0, 1)), (1, (2,))):
                row = [tuple(s) for s in mech.family.members(o)].index(cols)
                n_k = int(est.drawn(o)[row])
                if n_k:
                    by_n[o].setdefault(n_k, []).append((weight, est.frequencies(o)[row]))
    for o, cols in ((2, (0, 1)), (1, (2,))):
        truth = histogram(bits, cols)
        assert set(by_n[o]) == {1, 2, 3}
        for n_k, draws in by_n[o].items():
            w = np.array([d[0] for d in draws])
            x = np.array([d[1] for d in draws])
            w = w / w.sum()
            mean = w @ x
            cov = (x - mean).T @ ((x - mean) * w[:, None])
            np.testing.assert_allclose(mean, truth, atol=1e-12)
            np.testing.assert_allclose(cov, table_covariance(truth, n_k, 3, mech, o), atol=1e-12)


def test_width_k_is_margps_and_a_report_is_epsilon_ldp():
    mech, anchor = SubsetRR(6, 3, 1.7, width=3), MarginalSampling(6, 3, 1.7)
    assert (mech.p, mech.q) == pytest.approx((anchor.p, anchor.q))
    pi = np.array([0.5, 0.2, 0.1, 0.0, 0.05, 0.05, 0.06, 0.04])
    np.testing.assert_allclose(np.diagonal(table_covariance(pi, 40, 700, mech, 3)),
                               cell_variance(pi, 40, 700, anchor), rtol=1e-12)
    # a report (S, v): probability C(d, s)^-1 (p if v = x_S else q); S ignores x, so the worst ratio is p / q
    wide = SubsetRR(6, 3, 2.5, width=5)
    assert wide.p / wide.q == pytest.approx(math.exp(2.5)) and wide.p + 31 * wide.q == pytest.approx(1.0)


def test_best_width_minimizes_the_closed_form_which_is_the_covariance_trace_at_a_uniform_table():
    for d, eps, order in ((7, 4.0, 3), (20, 8.0, 3), (9, 1.0, 2)):
        s = best_width(d, order, eps)
        mech = SubsetRR(d, order, eps, width=s)
        big_n = 1e12
        n_k = holding_share(d, s, order) * big_n
        uniform = np.full(1 << order, 2.0 ** -order)
        trace = np.trace(table_covariance(uniform, n_k, big_n, mech, order)) * big_n
        assert trace == pytest.approx(mech.table_variance_per_report(), rel=1e-6)
        skewed = np.r_[0.7, np.full((1 << order) - 1, 0.3 / ((1 << order) - 1))]
        assert np.trace(table_covariance(skewed, n_k, big_n, mech, order)) * big_n < trace   # uniform is the worst
        assert all(table_variance_per_report(d, w, order, eps) >= trace * (1 - 1e-9) for w in range(order, d + 1))
    assert [best_width(7, 3, e) for e in (0.5, 1, 2, 4, 8)] == [4, 4, 4, 6, 7]
    assert best_width(20, 3, 8.0) == 10
    assert holding_share(7, 6, 3) == pytest.approx(6 * 5 * 4 / (7 * 6 * 5))


def test_client_is_seeded_validated_and_secure_by_default():
    bits = population(300, d=6)
    mech = SubsetRR(6, 3, 3.0, width=4)
    one = randomize_subset(bits, mech, np.random.default_rng(2))
    two = randomize_subset(bits, mech, np.random.default_rng(2))
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    assert (np.bitwise_count(one[0]) == 4).all() and not (one[1] & ~one[0]).any()
    sub, pat = randomize_subset(bits[0], mech)                 # the OS CSPRNG
    assert int(sub).bit_count() == 4 and not int(pat) & ~int(sub)
    with pytest.raises(ValueError, match="bits must be 0/1 with 6 columns"):
        randomize_subset(bits[:, :5], mech)
    with pytest.raises(ValueError, match=r"width must be in \[max_order=3, n_bits=6\]"):
        SubsetRR(6, 3, 1.0, width=2)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        SubsetRR(6, 3, -1.0)
    with pytest.raises(ValueError, match="every subset must hold width=4 bits"):
        _accumulator(mech, [0b111], [0])
    with pytest.raises(ValueError, match="patterns must set no bit outside their subset"):
        _accumulator(mech, [0b1111], [0b10000])
    with pytest.raises(ValueError, match="subsets must be bit masks of 6 bits"):
        _accumulator(mech, [0b1111000000], [0])


def test_accumulator_merges_shards_and_pickles():
    bits = population(900, d=6)
    mech = SubsetRR(6, 3, 4.0)
    reports = randomize_subset(bits, mech, np.random.default_rng(1))
    whole, back, parts = merged_shards(lambda: SubsetAccumulator(mech), *reports)
    assert back.n_reports == whole.n_reports == 900 and parts[1].n_reports == 500
    for o in (1, 2, 3):
        np.testing.assert_array_equal(back.counts[o], whole.counts[o])
    # every report adds one count to every table its subset holds
    assert whole.counts[3].sum() == 900 * math.comb(mech.width, 3)
    with pytest.raises(ValueError, match="different mechanisms"):
        back.merge(SubsetAccumulator(SubsetRR(6, 3, 1.0)))


@pytest.mark.statistical
def test_client_draws_uniform_subsets_and_sends_each_pattern_at_its_rate():
    """30,000 reports whose true pattern is 0: every subset is drawn 1/C(5, 3) of the time, the true
    pattern is sent at rate p and each of the 7 others at rate q (z bands at the suite's false-alarm
    rate): the law the vectorized simulation below draws from."""
    mech = SubsetRR(5, 2, 1.5, width=3)
    bits = np.zeros((30_000, 5), dtype=np.uint8)
    sub, pat = randomize_subset(bits, mech, np.random.default_rng(7))
    n = len(sub)
    drawn = np.bincount(np.unique(sub, return_inverse=True)[1])
    assert drawn.size == math.comb(5, 3)
    share = 1 / drawn.size
    assert np.all(np.abs(drawn - n * share) <= Z * math.sqrt(n * share * (1 - share)))
    bits_of = np.nonzero((sub[:, None] >> np.arange(5)) & 1)[1].reshape(n, 3)
    cells = (((pat[:, None] >> bits_of) & 1) << np.arange(3)).sum(axis=1)
    sent = np.bincount(cells, minlength=8)
    rates = np.r_[mech.p, np.full(7, mech.q)]
    assert np.all(np.abs(sent - n * rates) <= Z * np.sqrt(n * rates * (1 - rates))), (sent / n, rates)


def outcomes(mech):
    """Every report a device can send, ``(subsets, patterns)``, and the accumulator's counts of each
    alone, flattened over the orders: a window's counts are its histogram of outcomes times these."""
    d, s = mech.n_bits, mech.width
    subsets, patterns = [], []
    for chosen in combinations(range(d), s):
        for v in range(1 << s):
            subsets.append(sum(1 << b for b in chosen))
            patterns.append(sum(((v >> j) & 1) << b for j, b in enumerate(chosen)))
    rows = [np.concatenate([c.ravel() for c in _accumulator(mech, [a], [b]).counts[1:]])
            for a, b in zip(subsets, patterns)]
    return np.array(subsets), np.array(patterns), np.array(rows)


def simulated_estimates(bits, mech, windows, rng):
    """``windows`` independent randomizations of the true reports ``bits`` as one estimate whose counts
    have a leading window axis: per distinct true row one multinomial over every outcome (the subset
    uniform, the pattern by k-ary RR: the client's law, tested above), then the accumulator's counts of
    each outcome."""
    subsets, patterns, per_outcome = outcomes(mech)
    rows, counts = np.unique(bits, axis=0, return_counts=True)
    histogram = np.zeros((windows, len(subsets)), dtype=np.int64)
    for row, m in zip(rows, counts):
        true = (row.astype(np.int64) << np.arange(mech.n_bits)).sum() & subsets
        prob = np.where(patterns == true, mech.p, mech.q) / math.comb(mech.n_bits, mech.width)
        histogram += rng.multinomial(m, prob / prob.sum(), size=windows)
    flat = histogram @ per_outcome
    split, out = 0, [np.zeros((windows, 0, 1), dtype=np.int64)]
    for o in range(1, mech.max_order + 1):
        shape = (len(mech.family.members(o)), 1 << o)
        out.append(flat[:, split:split + shape[0] * shape[1]].reshape(windows, *shape))
        split += shape[0] * shape[1]
    return SubsetEstimate(mech, len(bits), tuple(out))


def test_simulated_windows_are_the_accumulator_of_real_ones():
    bits = population(400, d=4, seed=1)
    mech = SubsetRR(4, 3, 2.0, width=3)
    sub, pat = randomize_subset(bits, mech, np.random.default_rng(3))
    real = _accumulator(mech, sub, pat)
    subsets, patterns, per_outcome = outcomes(mech)
    index = {(a, b): i for i, (a, b) in enumerate(zip(subsets, patterns))}
    histogram = np.bincount([index[(a, b)] for a, b in zip(sub, pat)], minlength=len(subsets))
    np.testing.assert_array_equal(histogram @ per_outcome, np.concatenate([c.ravel() for c in real.counts[1:]]))
    many = simulated_estimates(bits, mech, 3, np.random.default_rng(0))
    assert many.counts[3].shape == (3, 4, 8) and (many.counts[1].sum(axis=(1, 2)) == 400 * 3).all()
    for w in range(3):                      # the estimator over a leading window axis is the one of each window
        one = SubsetEstimate(mech, 400, tuple(c[w] for c in many.counts))
        for o in (1, 2, 3):
            np.testing.assert_array_equal(many.frequencies(o)[w], one.frequencies(o))
            np.testing.assert_array_equal(many.drawn(o)[w], one.drawn(o))


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon,width", [(1.0, 4), (6.0, 4), (6.0, 5)])
def test_tables_unbiased_with_the_closed_form_covariance_and_covered(epsilon, width):
    """Every 2-way and 3-way table of 5 bits over replicates_for() / 7 windows. Each table's error
    whitened by the closed-form covariance (given the window's n_K, at the truth; the last cell
    dropped, as cells sum to one) has uncorrelated components of mean 0 and variance 1: one table's
    against the chi-square band that catches a covariance 5% off (tests/stats.py), and every table's
    squared whitened errors pooled per window (tables share reports, so the pooled mean's band comes
    from the spread of those independent window means). 95% intervals from the plugged-in variances
    cover at their level. Noise dominates at epsilon 1; at epsilon 6 with subsets of 4 the sampling
    of reports does, and with subsets of 5 = d (no sampling) the removed spread of the window's own
    reports does."""
    bits = population(1500, d=5, seed=3)
    n = len(bits)
    mech = SubsetRR(5, 3, epsilon, width=width)
    windows = -(-replicates_for() // 7)
    est = simulated_estimates(bits, mech, windows, np.random.default_rng(int(epsilon * 10) + width))
    pooled = np.zeros(windows)
    for o in (2, 3):
        cells = (1 << o) - 1
        freq, drawn = est.frequencies(o), est.drawn(o)
        for row, cols in enumerate(mech.family.members(o)):
            truth = histogram(bits, cols)
            white = np.empty((windows, cells))
            for n_k in np.unique(drawn[:, row]):       # the covariance depends on the window through n_K only
                at = drawn[:, row] == n_k
                cov = table_covariance(truth, n_k, n, mech, o)[:cells, :cells]
                white[at] = np.linalg.solve(np.linalg.cholesky(cov), (freq[at, row, :cells] - truth[:cells]).T).T
            pooled += (white ** 2).sum(axis=1)
            if tuple(cols) == (0, 2, 4):
                single, single_truth, single_row = white, truth, row
    pooled /= sum(len(mech.family.members(o)) * ((1 << o) - 1) for o in (2, 3))
    assert abs(pooled.mean() - 1.0) <= Z * pooled.std(ddof=1) / math.sqrt(windows), pooled.mean()
    assert_mean_close(single, 0.0, 1.0)
    assert_variance_ratio(single.reshape(-1, 1), np.ones(1))
    corr = np.corrcoef(single.T)[np.triu_indices(7, 1)]
    assert np.all(np.abs(corr) < Z / math.sqrt(windows) + 0.01), corr
    covered = []
    for w in range(2000):                              # plugged-in intervals, window by window
        one = SubsetEstimate(mech, n, tuple(c[w] for c in est.counts))
        lo, hi = one.table((0, 2, 4)).intervals(0.95)
        covered.append((lo <= single_truth * n) & (single_truth * n <= hi))
    assert single_row == [tuple(r) for r in mech.family.members(3)].index((0, 2, 4))
    assert_coverage(np.array(covered), 0.95)
