from itertools import product

import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator, count_bits
from ldp_marginals.ldp.intervals import normal_interval
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh, expected_counts
from tests.simulate import noisy_histograms, window_fields
from tests.stats import Z, assert_coverage, assert_mean_close, assert_variance_ratio, replicates_for

UNEQUAL = ChannelSet.from_arrays([0.1, 0.25, 0.05, 0.3, 0.15], [0.9, 0.7, 0.8, 0.95, 0.6])
EQUAL = ChannelSet.uniform(Channel(0.1, 0.8), 5)


def true_bits(n, d, seed):
    """Correlated true bits: a latent factor drives every bit."""
    rng = np.random.default_rng(seed)
    z = rng.random(n)
    thresholds = np.linspace(0.25, 0.7, d)
    return ((z[:, None] + 0.6 * rng.random((n, d))) / 1.6 < thresholds).astype(np.uint8)


def exact_moments(x, channels, sets):
    """Brute force: enumerate every noisy outcome of every distinct true row and sum the exact
    per-report mean and covariance of prod_{i in S} (y_i - p_i)/(q_i - p_i)."""
    d = x.shape[1]
    p, q = channels.p, channels.q
    outcomes = np.array(list(product((0, 1), repeat=d)))
    mean = np.zeros(len(sets))
    cov = np.zeros((len(sets), len(sets)))
    rows, mult = np.unique(x, axis=0, return_counts=True)
    for row, m in zip(rows, mult):
        probs = np.prod(np.where(outcomes == 1, np.where(row == 1, q, p), np.where(row == 1, 1 - q, 1 - p)), axis=1)
        z = (outcomes - p) / (q - p)
        vals = np.stack([np.prod(z[:, list(s)], axis=1) for s in sets], axis=1)
        e = probs @ vals
        mean += m * e
        cov += m * ((vals * probs[:, None]).T @ vals - np.outer(e, e))
    return mean, cov


@pytest.mark.parametrize("channels", [EQUAL, UNEQUAL], ids=["equal", "unequal"])
def test_expected_counts_return_the_truth(channels):
    fam = SetFamily.all_up_to(5, 4)
    truth = count_bits(true_bits(777, 5, 1), fam)
    est = estimate_tmdh(expected_counts(truth, fam, channels), channels, fam)
    assert np.allclose(est.means, truth, rtol=0, atol=1e-9)


@pytest.mark.parametrize("channels", [EQUAL, UNEQUAL], ids=["equal", "unequal"])
def test_variance_and_covariance_equal_brute_force(channels):
    x = true_bits(60, 5, 2)
    fam = SetFamily.all_up_to(5, 5)
    truth = count_bits(x, fam)
    # the variance formula is linear in the truth: at the expected counts it is the exact variance
    est = estimate_tmdh(expected_counts(truth, fam, channels), channels, fam)
    sets = [s for s in fam if 0 < len(s) <= 3]
    mean, cov = exact_moments(x, channels, sets)
    assert np.allclose(mean, [truth[fam.index(s)] for s in sets], atol=1e-9)
    assert np.allclose([est.variance(s) for s in sets], np.diag(cov), rtol=1e-9, atol=1e-9)
    got = est.covariance_matrix(sets)
    assert np.allclose(got, cov, rtol=1e-9, atol=1e-8)


def test_means_equal_sum_of_per_report_products():
    x = true_bits(400, 5, 3)
    y = randomize_bits(x, UNEQUAL, np.random.default_rng(3))
    fam = SetFamily.all_up_to(5, 3)
    est = estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(y), UNEQUAL)
    z = (y - UNEQUAL.p) / (UNEQUAL.q - UNEQUAL.p)
    for s in fam:
        direct = np.prod(z[:, list(s)], axis=1).sum() if s else 400
        assert est.mean(s) == pytest.approx(direct, rel=1e-10, abs=1e-8)


def test_low_order_closed_forms_of_carette_eq_41_to_44():
    p, q = 0.1, 0.8
    chans = ChannelSet.uniform(Channel(p, q), 4)
    y = (np.random.default_rng(4).random((3000, 4)) < [0.3, 0.5, 0.4, 0.6]).astype(np.uint8)
    fam = SetFamily.all_up_to(4, 3)
    est = estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(y), chans)
    c = lambda *s: float(est.counts[fam.index(s)])
    n = 3000.0
    i, j, k = 0, 1, 2
    eq41 = (q * p * n + (1 - p - q) * c(i)) / (q - p) ** 2
    eq42 = (((1 - 2 * p) ** 2 - (q - p) ** 2) * c(i, j) + p * (p * (1 - 2 * p) + (p - q) ** 2) * (c(i) + c(j))
            - p ** 2 * q * (q - 2 * p) * n) / (q - p) ** 4
    eq43 = ((1 - q - p) * (c(i, j) - p * c(i)) + q * p * (c(j) - p * n)) / (q - p) ** 3
    eq44 = ((1 - p - q) * (c(i, j, k) - p * (c(i, j) + c(j, k)) + p ** 2 * c(j))
            + p * q * (c(i, k) - p * (c(i) + c(k)) + p ** 2 * n)) / (q - p) ** 4
    assert est.variance((i,)) == pytest.approx(eq41, rel=1e-12)
    assert est.variance((i, j)) == pytest.approx(eq42, rel=1e-12)
    assert est.covariance((i, j), (i,)) == pytest.approx(eq43, rel=1e-12)
    assert est.covariance((i, j), (j, k)) == pytest.approx(eq44, rel=1e-12)


def test_covariance_needs_the_union_and_disjoint_sets_are_uncorrelated():
    fam = SetFamily.all_up_to(5, 2)
    est = estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(true_bits(100, 5, 5)), EQUAL)
    assert est.covariance((0, 1), (2, 3)) == 0.0
    with pytest.raises(ValueError, match=r"covariance of \[0, 1\] and \[1, 2\] needs the count of set \[0, 1, 2\], "
                                         r"which was not counted \(max_order=2\)"):
        est.covariance((0, 1), (1, 2))
    # one-hot structure: a union holding two bits of one categorical feature is exactly 0
    onehot = estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(true_bits(100, 5, 5)), EQUAL,
                           exclusive_groups=[(1, 2)])
    assert onehot.covariance((0, 1), (0, 2)) == pytest.approx(0.0, abs=1e-9)
    low, high = est.intervals(0.9)
    assert np.all(low <= est.means) and np.all(est.means <= high)
    with pytest.raises(ValueError, match=r"level must be in \(0, 1\), got level=1.5"):
        est.intervals(1.5)


def test_empty_window_is_defined():
    fam = SetFamily.all_up_to(5, 2)
    est = estimate_tmdh(CooccurrenceAccumulator(fam), EQUAL)
    assert est.n == 0 and np.all(est.means == 0) and np.all(est.variances == 0)
    assert np.all(np.isnan(est.frequencies))


@pytest.mark.statistical
@pytest.mark.parametrize("channels", [EQUAL, UNEQUAL], ids=["equal", "unequal"])
def test_simulated_bias_variance_covariance_and_coverage(channels):
    n, d = 1500, 5
    x = true_bits(n, d, 6)
    fam = SetFamily.all_up_to(d, 3)
    truth = count_bits(x, fam).astype(float)
    exact = estimate_tmdh(expected_counts(truth, fam, channels), channels, fam)  # closed forms at the truth
    sl = slice(1, len(fam))
    reps = replicates_for(elements=len(fam) - 1)   # every set's band catches its variance 5% off
    rng = np.random.default_rng(1234 if channels is EQUAL else 4321)
    histograms = noisy_histograms(x, channels.p, channels.q, reps, rng)

    def fields(bits):
        est = estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(bits), channels)
        return np.concatenate([est.means, est.variances])
    f = window_fields(fields, histograms)
    means, var_hat = f[:, :len(fam)], f[:, len(fam):]
    low, high = normal_interval(means, var_hat, 0.95)   # what TMDHEstimate.intervals returns
    covered = (low <= truth) & (truth <= high)
    assert_mean_close(means[:, sl], truth[sl], exact.variances[sl])
    assert_variance_ratio(means[:, sl], exact.variances[sl])
    # the plug-in variance is unbiased; its own sd is estimated from the replicates
    assert np.all(np.abs(var_hat[:, sl].mean(0) - exact.variances[sl]) <= Z * var_hat[:, sl].std(0) / np.sqrt(reps))
    # covariance of overlapping sets: sample covariance within Z of its normal-theory sd
    for a, b in [((0, 1), (1, 2)), ((0,), (0, 1, 2)), ((1, 3), (3,)), ((2, 4), (0, 2))]:
        ia, ib = fam.index(a), fam.index(b)
        sxy = np.cov(means[:, ia], means[:, ib])[0, 1]
        cxy = exact.covariance(a, b)
        sd = np.sqrt((exact.variances[ia] * exact.variances[ib] + cxy ** 2) / reps)
        assert abs(sxy - cxy) <= Z * sd, (a, b, sxy, cxy)
    for col in range(1, len(fam)):
        assert_coverage(covered[:, col], 0.95)
