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
    SubsetRR,
    best_width,
    estimate_subset,
    holding_share,
    randomize_subset,
    table_covariance,
    table_variance_per_report,
)
from tests.ldp.test_hadamard import histogram, merged_shards, population
from tests.stats import Z, assert_coverage, assert_mean_close, assert_variance_ratio


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
def test_client_draws_uniform_subsets_and_keeps_the_pattern_at_its_rate():
    mech = SubsetRR(5, 2, 1.5, width=3)
    bits = np.zeros((30_000, 5), dtype=np.uint8)             # the true pattern is always 0
    sub, pat = randomize_subset(bits, mech, np.random.default_rng(7))
    drawn = np.bincount(np.unique(sub, return_inverse=True)[1])
    assert drawn.size == math.comb(5, 3)
    share = 1 / drawn.size
    assert np.all(np.abs(drawn - len(sub) * share) <= Z * math.sqrt(len(sub) * share * (1 - share)))
    kept = np.mean(pat == 0)
    assert abs(kept - mech.p) <= Z * math.sqrt(mech.p * (1 - mech.p) / len(sub))


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon,width", [(1.0, 4), (6.0, 4), (6.0, 5)])
def test_tables_unbiased_with_the_closed_form_covariance_and_covered(epsilon, width):
    """Every 2-way and 3-way table of 5 bits, 600 replicates. Each table's error whitened by the
    closed-form covariance (given the replicate's n_K, at the truth; the last cell dropped, as cells
    sum to one) has uncorrelated components of mean 0 and variance 1. Tables share reports, so the
    squared whitened errors are pooled per replicate (their mean is 1 exactly when the covariance is
    right) and the band comes from the spread of those independent replicate means; one table's
    components are tested alone against the chi-square band. 95% intervals from the plugged-in
    variances cover at their level. Noise dominates at epsilon 1; at epsilon 6 with subsets of 4 the
    sampling of reports does, and with subsets of 5 = d (no sampling) the removed spread of the
    window's own reports does."""
    bits = population(1500, d=5, seed=3)
    mech = SubsetRR(5, 3, epsilon, width=width)
    sets = {o: [tuple(s) for s in mech.family.members(o)] for o in (2, 3)}
    truth = {o: np.array([histogram(bits, s) for s in sets[o]]) for o in (2, 3)}
    rng = np.random.default_rng(int(epsilon * 10) + width)
    pooled, single, covered = [], [], []
    for _ in range(600):
        est = estimate_subset(SubsetAccumulator(mech).add(*randomize_subset(bits, mech, rng)))
        squares = []
        for o in (2, 3):
            cells = (1 << o) - 1
            for row, cols in enumerate(sets[o]):
                cov = est.covariance(cols, truth[o][row])[:cells, :cells]
                error = est.frequencies(o)[row][:cells] - truth[o][row][:cells]
                white = np.linalg.solve(np.linalg.cholesky(cov), error)
                squares.extend(white ** 2)
                if cols == (0, 2, 4):
                    single.append(white)
                    lo, hi = est.table(cols).intervals(0.95)
                    true_counts = truth[o][row] * len(bits)
                    covered.append((lo <= true_counts) & (true_counts <= hi))
        pooled.append(np.mean(squares))
    pooled, single = np.array(pooled), np.array(single)
    assert abs(pooled.mean() - 1.0) <= Z * pooled.std(ddof=1) / math.sqrt(len(pooled)), pooled.mean()
    assert_mean_close(single, 0.0, 1.0)
    assert_variance_ratio(single.reshape(-1, 1), np.ones(1))
    corr = np.corrcoef(single.T)[np.triu_indices(7, 1)]
    assert np.all(np.abs(corr) < Z / math.sqrt(single.shape[0]) + 0.01), corr
    assert_coverage(np.array(covered), 0.95)
