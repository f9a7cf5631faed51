"""Hadamard sampling (ldp/hadamard.py): exact algebra, the privacy of a report, and seeded
simulations of bias, variance and covariance against the closed forms, and interval coverage."""
import math
import pickle
from itertools import product

import numpy as np
import pytest

from ldp_marginals.ldp.hadamard import (
    HadamardAccumulator,
    HadamardSampling,
    best_slots,
    estimate_hadamard,
    hadamard_signs,
    randomize_hadamard,
    rr_scale,
    true_coefficients,
)
from ldp_marginals.ldp.intervals import normal_interval
from tests.stats import assert_coverage, assert_mean_close, assert_variance_ratio, replicates_for


def population(n=1500, d=5, seed=0):
    """Correlated bits (a latent coin drives every bit), so theta^2 is far from 0."""
    rng = np.random.default_rng(seed)
    z = rng.random(n) < 0.4
    base = np.where(z[:, None], 0.85, 0.15)
    return (rng.random((n, d)) < base).astype(np.uint8)


def histogram(bits, cols):
    code = (bits[:, list(cols)].astype(np.int64) << np.arange(len(cols))).sum(axis=1)
    return np.bincount(code, minlength=1 << len(cols)) / len(bits)


def expected_accumulator(mech, theta, drawn):
    """Counts whose odd share is exactly its expectation: E[o_a] = n_a (keep (1-th)/2 + (1-keep)(1+th)/2)."""
    acc = HadamardAccumulator(mech)
    acc.n_reports = int(drawn[1:].sum() // mech.slots)
    acc.drawn = np.asarray(drawn, dtype=np.int64)
    odd = drawn * (mech.keep * (1 - theta) / 2 + (1 - mech.keep) * (1 + theta) / 2)
    return acc, odd


def test_estimates_from_expected_counts_are_the_truth():
    bits = population()
    mech = HadamardSampling(5, 3, 1.0)
    theta = true_coefficients(bits, mech.family)
    drawn = np.full(len(mech.family), 1000, dtype=np.int64)
    drawn[0] = 0
    acc, odd = expected_accumulator(mech, theta, drawn)
    # odd is fractional here: the estimator is linear in it, so feed it as floats
    acc.odd = odd
    est = estimate_hadamard(acc)
    np.testing.assert_allclose(est.theta, theta, atol=1e-12)
    for order in (1, 2, 3):
        tables = est.frequencies(order)
        for row, cols in enumerate(mech.family.members(order)):
            np.testing.assert_allclose(tables[row], histogram(bits, cols), atol=1e-12)
            np.testing.assert_allclose(est.table(cols).frequencies, tables[row], atol=1e-12)


def test_hadamard_signs_invert_and_match_a_brute_force():
    for k in (1, 2, 3, 4):
        h = hadamard_signs(k)
        np.testing.assert_array_equal(h @ h, (1 << k) * np.eye(1 << k))
        for z, b in product(range(1 << k), repeat=2):
            assert h[z, b] == (-1) ** bin(z & b).count("1")


def test_sqrt_weights_and_slots():
    mech = HadamardSampling(7, 3, 1.0)
    w = mech.probabilities
    # C(6,2) = 15 tables hold a bit, C(5,1) = 5 a pair, 1 a triple: weights ~ sqrt of those
    np.testing.assert_allclose(w[0] / w[7], math.sqrt(15 / 5))
    np.testing.assert_allclose(w[7] / w[28], math.sqrt(5))
    assert w.sum() == pytest.approx(1.0) and w.size == mech.n_coefficients == 63
    assert HadamardSampling(7, 3, 1.0, weights="uniform").probabilities.max() == pytest.approx(1 / 63)
    # the noise per slot c(eps/m)^2 / m, minimized (values worked by hand: m=2 at 4 gives 0.862 < 1.076)
    assert [best_slots(e) for e in (0.5, 1, 2, 4, 8)] == [1, 1, 1, 2, 4]
    assert rr_scale(4.0) ** 2 > rr_scale(2.0) ** 2 / 2


def test_a_report_is_epsilon_ldp_exactly():
    """Worst likelihood ratio of a whole report over every pair of inputs is e^epsilon."""
    mech = HadamardSampling(3, 2, 1.3, slots=2)
    inputs = np.array(list(product((0, 1), repeat=3)))
    keep, w = mech.keep, mech.probabilities
    worst = 0.0
    for a, b in product(range(1, mech.n_coefficients + 1), repeat=2):
        for pa, pb in product((0, 1), repeat=2):
            def likelihood(x):
                out = w[a - 1] * w[b - 1]
                for idx, par in ((a, pa), (b, pb)):
                    true = bin(int(mech.masks[idx - 1]) & int((x << np.arange(3)).sum())).count("1") & 1
                    out *= keep if par == true else 1 - keep
                return out
            lik = [likelihood(x) for x in inputs]
            worst = max(worst, max(lik) / min(lik))
    assert worst == pytest.approx(math.exp(1.3), rel=1e-12)


def test_client_is_seeded_validated_and_secure_by_default():
    bits = population(200)
    mech = HadamardSampling(5, 3, 2.0, slots=2)
    one = randomize_hadamard(bits, mech, np.random.default_rng(3))
    two = randomize_hadamard(bits, mech, np.random.default_rng(3))
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    idx, par = randomize_hadamard(bits[0], mech)            # the OS CSPRNG
    assert idx.shape == par.shape == (2,) and 1 <= idx.min() and idx.max() <= mech.n_coefficients
    with pytest.raises(ValueError, match="bits must be 0/1 with 5 columns"):
        randomize_hadamard(bits[:, :4], mech)
    with pytest.raises(ValueError, match="weights must be one of"):
        HadamardSampling(5, 3, 1.0, weights="flat")
    with pytest.raises(ValueError, match="max_order must be <= n_bits=2"):
        HadamardSampling(2, 3, 1.0)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        HadamardSampling(5, 3, 0.0)
    with pytest.raises(ValueError, match=r"indices must be in \[1, 25\]"):
        HadamardAccumulator(mech).add(np.zeros((1, 2), int), np.zeros((1, 2), int))


def merged_shards(new, *arrays):
    """``(whole, back, parts)``: one accumulator (``new()``) over the 900 reports of ``arrays``, the
    merge of three shards of them through a pickle round trip, and the shards."""
    whole = new().add(*arrays)
    parts = [new().add(*(a[s] for a in arrays)) for s in (slice(0, 100), slice(100, 600), slice(600, None))]
    merged = parts[0]
    for p in parts[1:]:
        merged.merge(p)
    return whole, pickle.loads(pickle.dumps(merged)), parts


def test_accumulator_merges_shards_and_pickles():
    bits = population(900)
    mech = HadamardSampling(5, 3, 4.0)
    reports = randomize_hadamard(bits, mech, np.random.default_rng(1))
    whole, back, parts = merged_shards(lambda: HadamardAccumulator(mech), *reports)
    assert back.n_reports == whole.n_reports == 900
    np.testing.assert_array_equal(back.drawn, whole.drawn)
    np.testing.assert_array_equal(back.odd, whole.odd)
    assert parts[1].n_reports == 500                          # merge changed only the first
    with pytest.raises(ValueError, match="different mechanisms"):
        back.merge(HadamardAccumulator(HadamardSampling(5, 3, 1.0)))


@pytest.mark.statistical
def test_client_draws_coefficients_by_weight_and_keeps_parity_at_its_rate():
    mech = HadamardSampling(4, 2, 1.0, slots=3)
    bits = np.zeros((40_000, 4), dtype=np.uint8)             # every parity is even
    idx, par = randomize_hadamard(bits, mech, np.random.default_rng(7))
    drawn = np.bincount(idx.ravel(), minlength=mech.n_coefficients + 1)[1:]
    total = idx.size
    expected = total * mech.probabilities
    z = (drawn - expected) / np.sqrt(expected * (1 - mech.probabilities))
    assert np.all(np.abs(z) < 4.9), z
    flips = par.mean()
    assert abs(flips - (1 - mech.keep)) < 4.9 * math.sqrt(mech.keep * (1 - mech.keep) / total)


def _replicates(bits, mech, reps, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        acc = HadamardAccumulator(mech).add(*randomize_hadamard(bits, mech, rng))
        out.append(estimate_hadamard(acc))
    return out


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon,slots", [(1.0, 1), (6.0, 3)])
def test_coefficients_unbiased_with_the_closed_form_variance(epsilon, slots):
    """Standardized by the conditional variance at the true theta (given each replicate's counts),
    errors have mean 0 and variance 1, pooled over the coefficients (nearly independent: their
    covariance is O(1/N)). 2,150 replicates x 25 coefficients: a band that catches the variance 5%
    off (tests/stats.py); the variance without the sampling term (or with 1 in place of 1 - theta^2)
    fails it."""
    bits = population()
    mech = HadamardSampling(5, 3, epsilon, slots=slots)
    theta = true_coefficients(bits, mech.family)
    zs = []
    for est in _replicates(bits, mech, -(-replicates_for() // (len(theta) - 1)), seed=11 + slots):
        var = est.coefficient_variances(theta)[1:]
        zs.append((est.theta[1:] - theta[1:]) / np.sqrt(var))
    zs = np.array(zs)
    assert_mean_close(zs, 0.0, 1.0)
    assert_variance_ratio(zs.reshape(-1, 1), np.ones(1))


@pytest.mark.statistical
def test_table_cells_covariances_and_coverage():
    """Cells of a 3-way table: covariance matrix of the standardized (whitened) errors is the
    identity, so the covariances between coefficients (and the Hadamard transform) are right; 95%
    intervals from the plugged-in variances cover at their level. 7,700 replicates x 7 whitened
    cells: a band that catches the variance 5% off (tests/stats.py)."""
    bits = population(1200, d=3, seed=4)   # d = k: each coefficient is 1/7 of the slots, so the
    mech = HadamardSampling(3, 3, 8.0, slots=4)  # O(1/N) covariances between them weigh in a cell
    theta = true_coefficients(bits, mech.family)
    truth = lambda s: theta[mech.family.index(s)]  # noqa: E731
    cols = (0, 1, 2)
    true_cells = histogram(bits, cols) * len(bits)
    # the table's covariance at the truth given a replicate's counts, cheaply: the coefficients'
    # covariances off the diagonal do not depend on the counts, their variances are
    # coefficient_variances(theta); through the table's Hadamard transform (checked against table())
    subsets = [tuple(c for j, c in enumerate(cols) if b >> j & 1) for b in range(8)]
    index = [mech.family.index(sub) if sub else 0 for sub in subsets]
    h, n = hadamard_signs(3), len(bits)
    white, covered = [], []
    for r, est in enumerate(_replicates(bits, mech, -(-replicates_for() // 7), seed=5)):
        coefficients = est.coefficient_covariance(subsets, truth) if r == 0 else coefficients
        np.fill_diagonal(coefficients, est.coefficient_variances(theta)[index])
        cov = n * n * h @ coefficients @ h.T / 64
        estimate = n * est.frequencies(3)[0]
        if r < 4:
            exact = est.table(cols, truth=truth)
            np.testing.assert_allclose(cov, exact.covariance, rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(estimate, exact.estimate, rtol=1e-12)
        # whiten in the 7-dimensional space of cells (they sum to N: drop the last)
        white.append(np.linalg.solve(np.linalg.cholesky(cov[:7, :7]), estimate[:7] - true_cells[:7]))
        if r < 800:
            lo, hi = est.table(cols).intervals(0.95)
            covered.append((lo <= true_cells) & (true_cells <= hi))
    white = np.array(white)
    assert_mean_close(white, 0.0, 1.0)
    assert_variance_ratio(white.reshape(-1, 1), np.ones(1))
    # off-diagonal: the whitened components are uncorrelated
    corr = np.corrcoef(white.T)[np.triu_indices(7, 1)]
    assert np.all(np.abs(corr) < 4.9 / math.sqrt(white.shape[0]) + 0.01), corr
    assert_coverage(np.array(covered), 0.95)


def test_intervals_of_coefficients():
    bits = population(500)
    mech = HadamardSampling(5, 2, 2.0)
    est = estimate_hadamard(HadamardAccumulator(mech).add(*randomize_hadamard(bits, mech, np.random.default_rng(0))))
    lo, hi = est.intervals(0.9)
    assert lo[0] == hi[0] == 1.0
    var = est.coefficient_covariance([mech.family[3]])[0, 0]
    assert var == est.coefficient_variances()[3]
    np.testing.assert_allclose((lo[3], hi[3]), normal_interval(est.theta[3], var, 0.9))


@pytest.mark.statistical
def test_coefficients_from_one_window_are_correlated_as_the_closed_form_says():
    """Slots share one window of reports, so coefficient estimates are correlated by
    -(theta_{a^b} - theta_a theta_b) / (M - 1): about -0.3 here (two bits that nearly always agree,
    d = k = 2, so each coefficient holds a third of the slots; one slot at epsilon 8: little noise). 2,000 replicates put the sample
    correlation within ~0.11 (4.9 / sqrt(R)); the covariance set to 0 fails."""
    rng = np.random.default_rng(4)
    coin = rng.random(1200) < 0.5
    bits = (coin[:, None] ^ (rng.random((1200, 2)) < 0.05)).astype(np.uint8)
    mech = HadamardSampling(2, 2, 8.0, slots=1)
    theta = true_coefficients(bits, mech.family)
    truth = lambda s: theta[mech.family.index(s)]  # noqa: E731
    sets = list(mech.family)[1:]
    errors, predicted = [], []
    for est in _replicates(bits, mech, 2000, seed=9):
        cov = est.coefficient_covariance(sets, truth)
        sd = np.sqrt(np.diagonal(cov))
        errors.append((est.theta[1:] - theta[1:]) / sd)
        predicted.append(cov / np.outer(sd, sd))
    sample = np.corrcoef(np.array(errors).T)
    expected = np.mean(predicted, axis=0)
    off = np.triu_indices(len(sets), 1)
    assert np.abs(expected[off]).max() > 0.2                 # the test has something to find
    assert np.all(np.abs(sample[off] - expected[off]) < 4.9 / math.sqrt(2000)), (sample[off], expected[off])
