import pickle
from itertools import product

import numpy as np
import pytest
from scipy.stats import binom

from ldp_marginals.ldp.channels import ChannelSet
from ldp_marginals.ldp.extremes import (
    ExtremeAccumulator,
    and_variance,
    or_variance,
    union_cardinality,
)
from ldp_marginals.ldp.randomizer import randomize_bits
from tests.simulate import noisy_histograms, window_fields
from tests.stats import Z, assert_mean_close, assert_variance_ratio, replicates_for


def exact_distribution(op, x, p, q):
    """Enumerate all noisy outcomes: values of the estimator and of its variance estimate, with
    their probabilities."""
    outcomes = np.array(list(product((0, 1), repeat=len(x))), dtype=np.uint8)
    probs = np.prod(np.where(outcomes == 1, np.where(x == 1, q, p), np.where(x == 1, 1 - q, 1 - p)), axis=1)
    acc = ExtremeAccumulator(op, (len(outcomes),)).add(outcomes.T, p[:, None], q[:, None])
    return acc.estimate(), acc.variance(), probs


def convolution_or_estimate(noisy_sum, n, p, q):
    """Hehir sec. 2.1: invert the (n+1)x(n+1) matrix P[j, s] = P(noisy sum j | true sum s)."""
    P = np.zeros((n + 1, n + 1))
    for s in range(n + 1):
        P[:, s] = np.convolve(binom.pmf(np.arange(s + 1), s, q), binom.pmf(np.arange(n - s + 1), n - s, p))
    return 1.0 - np.linalg.inv(P)[0, noisy_sum]


@pytest.mark.parametrize("p, q", [(0.2, 0.8), (0.1, 0.6)])
def test_theorem_2_or_equals_convolution_estimator(p, q):
    n = 9
    for j in range(n + 1):
        acc = ExtremeAccumulator("or").add(np.array([1] * j + [0] * (n - j)), p, q)
        assert acc.estimate() == pytest.approx(convolution_or_estimate(j, n, p, q), rel=1e-8, abs=1e-8)


@pytest.mark.statistical
@pytest.mark.parametrize("op, truth_bits", [("or", [0, 0, 0, 0, 0, 0]), ("or", [0, 1, 0, 0, 1, 0]),
                                            ("and", [1, 1, 1, 1, 1, 1]), ("and", [1, 1, 0, 1, 1, 1])])
def test_theorem_1_and_3_by_simulation_with_unequal_channels(op, truth_bits):
    chans = ChannelSet.from_arrays([0.1, 0.2, 0.05, 0.3, 0.15, 0.25], [0.85, 0.9, 0.7, 0.95, 0.8, 0.75])
    x = np.array(truth_bits, dtype=np.uint8)
    truth = float(x.any()) if op == "or" else float(x.all())
    exact = (or_variance if op == "or" else and_variance)(x, chans.p, chans.q)
    # exact algebra first: unbiased (Thm 1), variance of Thm 3, unbiased variance estimate
    values, var_values, probs = exact_distribution(op, x, chans.p, chans.q)
    assert probs @ values == pytest.approx(truth, abs=1e-12)
    assert probs @ (values - truth) ** 2 == pytest.approx(exact, rel=1e-12)
    assert probs @ var_values == pytest.approx(exact, rel=1e-12)
    kurtosis = float(probs @ (values - truth) ** 4 / exact ** 2)  # products are heavy-tailed (up to ~53 here)
    reps = replicates_for(kurtosis=kurtosis)   # up to 1.4M: a band that catches the variance 5% off
    noisy = randomize_bits(np.tile(x, (reps, 1)), chans, np.random.default_rng(sum(truth_bits) + len(op)))
    acc = ExtremeAccumulator(op, (reps,)).add(noisy.T, chans.p[:, None], chans.q[:, None])
    est, var_hat = acc.estimate(), acc.variance()
    assert_mean_close(est, truth, exact)
    assert_variance_ratio(est, exact, kurtosis=kurtosis)
    assert abs(var_hat.mean() - exact) <= Z * var_hat.std() / np.sqrt(reps)  # unbiased variance estimate


def test_merge_of_two_states_equals_one_pass_and_pickles():
    rng = np.random.default_rng(3)
    y = (rng.random(1000) < 0.3).astype(np.uint8)
    p = rng.uniform(0.05, 0.3, 1000)
    q = rng.uniform(0.6, 0.95, 1000)
    for op in ("or", "and"):
        whole = ExtremeAccumulator(op).add(y, p, q)
        left = ExtremeAccumulator(op).add(y[:400], p[:400], q[:400])
        right = ExtremeAccumulator(op)
        for i in range(400, 1000):
            right.add_one(y[i], p[i], q[i])
        left.merge(pickle.loads(pickle.dumps(right)))
        assert left.n == whole.n == 1000
        assert left.estimate() == pytest.approx(whole.estimate(), rel=1e-10, abs=1e-12)
        assert left.variance() == pytest.approx(whole.variance(), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("op", ["or", "and"])
def test_a_million_bits_neither_overflow_nor_underflow(op):
    p, q = 0.05, 0.95
    big, small = np.log(q / (q - p)), np.log(p / (q - p))  # |factor| of the common and the rare bit
    rare = int(round(1_000_000 * big / (big - small)))  # total log close to 0
    common_bit, rare_bit = (0, 1) if op == "or" else (1, 0)
    y = np.array([common_bit] * (1_000_000 - rare) + [rare_bit] * rare, dtype=np.uint8)
    expected_log = (len(y) - rare) * big + rare * small
    assert abs(expected_log) < 50
    factors = (q - y) / (q - p) if op == "or" else (y - p) / (q - p)
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.prod(factors)  # a running float product overflows on the way
    assert not np.isfinite(naive)
    acc = ExtremeAccumulator(op)
    for chunk in np.array_split(y, 7):
        acc.add(chunk, p, q)
    sign = -1.0 if rare % 2 else 1.0
    assert acc.log_f == pytest.approx(expected_log, abs=1e-6)
    assert acc.product() == pytest.approx(sign * np.exp(expected_log), rel=1e-6)
    assert np.isfinite(acc.estimate())
    assert int(acc.n) == 1_000_000


def test_zero_factors_are_exact():
    # q = 1: a noisy 1 can only come from ... either value, but w = 0 exactly, so OR = 1 exactly
    acc = ExtremeAccumulator("or").add(np.array([0, 1, 0]), 0.2, 1.0)
    assert acc.estimate() == 1.0 and int(acc.zeros_f) == 1
    acc.add(np.zeros(10, dtype=np.uint8), 0.2, 0.8)
    assert acc.estimate() == 1.0  # a zero factor stays zero after more bits
    # p = 0: a noisy 0 proves a true 0, so AND = 0 exactly, variance 0
    acc = ExtremeAccumulator("and").add(np.array([1, 0, 1]), 0.0, 0.7)
    assert acc.estimate() == 0.0 and acc.variance() == 0.0
    empty = ExtremeAccumulator("or")
    assert empty.estimate() == 0.0 and empty.variance() == 0.0


@pytest.mark.statistical
def test_union_cardinality_of_noisy_sketches():
    rng = np.random.default_rng(8)
    m, n = 400, 5
    sets = rng.random((n, m)) < 0.08
    true_union = int(sets.any(axis=0).sum())
    exact = sum(or_variance(sets[:, i], 0.1, 0.9) for i in range(m))
    # the positions are independent: the sum's kurtosis from each position's exact distribution
    excess = 0.0
    for column in sets.T:
        values, _, probs = exact_distribution("or", column.astype(np.uint8), np.full(n, 0.1), np.full(n, 0.9))
        centred = values - float(column.any())
        excess += probs @ centred ** 4 - 3 * (probs @ centred ** 2) ** 2
    kurtosis = 3 + excess / exact ** 2
    reps = replicates_for(kurtosis=kurtosis)
    # each position's n noisy bits as one report of n bits (vectorized over the replicates)
    histograms = noisy_histograms(sets.T.astype(np.uint8), np.full(n, 0.1), np.full(n, 0.9), reps, rng)
    f = window_fields(lambda positions: union_cardinality(positions.T, 0.1, 0.9), histograms)
    estimates, variances = f[:, 0], f[:, 1]
    assert_mean_close(estimates, true_union, exact)
    assert_variance_ratio(estimates, exact, kurtosis=kurtosis)
    assert abs(variances.mean() - exact) <= Z * variances.std() / np.sqrt(reps)


def test_validation():
    with pytest.raises(ValueError, match=r"op must be 'or' or 'and', got op='xor'"):
        ExtremeAccumulator("xor")
    with pytest.raises(ValueError, match=r"channels must satisfy 0 <= p < q <= 1"):
        ExtremeAccumulator("or").add(np.array([1]), 0.6, 0.4)
    with pytest.raises(ValueError, match=r"bits must have shape \(m, \*\(3,\)\), got shape=\(2, 2\)"):
        ExtremeAccumulator("or", (3,)).add(np.zeros((2, 2)), 0.1, 0.9)
    with pytest.raises(ValueError, match="cannot merge"):
        ExtremeAccumulator("or").merge(ExtremeAccumulator("and"))
