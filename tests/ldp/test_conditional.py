"""P(A | B) = t_U / t_B (U = A u B) with its delta-method variance.

Exact algebra: the variance is the linearization of the ratio against the TMDH covariances. Exact
enumeration: over every noisy outcome of a small window, the exact variance of the linearization
``r + (t_U - r t_B) / t_B`` around the window's truth equals the closed form at the truth (what the
delta method approximates; the ratio's own variance tends to it as the window grows, and has none
for a finite window, where t_B = 0 has positive probability). Seeded simulation at 20,000 reports:
the ratio's variance over 54,000 windows against the closed form in a band that catches it 5% off,
its mean at its second-order bias, nominal coverage. A mutation suite breaks the variance formula
in each way listed in ``MUTATIONS`` and requires both the exact and the simulated check to fail.
The presence test of B: its threshold solves Bernstein's bound (exact algebra), a never-true
condition passes it at most at the stated rate (simulation, worst-case truths), and a condition that
holds passes it."""
import math
from itertools import product
from unittest import mock

import numpy as np
import pytest

from ldp_marginals.ldp import conditional as conditionals
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.conditional import conditional, presence_threshold
from ldp_marginals.ldp.planning import report_variances
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator, count_bits
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh, expected_counts
from tests.simulate import histogram_counts, noisy_histograms, reports, window_fields
from tests.stats import Z, assert_coverage, assert_variance_ratio, replicates_for

CHANNELS = ChannelSet((Channel(0.15, 0.85), Channel(0.2, 0.8), Channel(0.1, 0.9)))
FAMILY = SetFamily(3, 3)


def population(n, rng):
    """Bit 2 (B) with frequency 0.4; bit 0 (A) with P(A | B) = 0.7 and P(A | not B) = 0.2."""
    b = rng.random(n) < 0.4
    a = np.where(b, rng.random(n) < 0.7, rng.random(n) < 0.2)
    c = rng.random(n) < 0.5
    return np.column_stack([a, c, b]).astype(np.uint8)


def test_delta_variance_is_the_linearized_ratio():
    rng = np.random.default_rng(3)
    est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(randomize_bits(population(5000, rng), CHANNELS,
                                                                                rng)), CHANNELS)
    c = conditional(est, [0], [2])
    t_u, t_b = est.mean((0, 2)), est.mean((2,))
    grad = np.array([1 / t_b, -t_u / t_b ** 2])
    cov = est.covariance_matrix([(0, 2), (2,)])
    assert c.estimate == pytest.approx(t_u / t_b) and c.joint == pytest.approx(t_u)
    assert c.variance == pytest.approx(float(grad @ cov @ grad), rel=1e-12)
    assert c.ci_low < c.estimate < c.ci_high and c.threshold < c.given and c.present


def at_the_truth(truth):
    """The TMDH estimate at the expected counts of the true reports: its closed forms are exact."""
    counts = count_bits(truth, FAMILY).astype(float)
    return estimate_tmdh(expected_counts(counts, FAMILY, CHANNELS), CHANNELS, FAMILY)


SMALL = np.array([[1, 1, 1], [0, 1, 1], [1, 0, 0]], dtype=np.uint8)   # B holds in 2 reports, A u B in 1
CASES = [((0,), (2,)), ((0,), (1, 2)), ((0, 1), (2,))]


def check_exact_variances(truth=SMALL):
    """Every noisy outcome of the window ``truth`` (2^9 of them): for each case the exact variance of
    the linearization ``r + (t_U - r t_B) / t_B``, with the job's TMDH counts of each outcome, equals
    the closed form at the truth."""
    n, d = truth.shape
    at = at_the_truth(truth)
    probs, counts = [], []
    for flat in product((0, 1), repeat=n * d):
        noisy = np.array(flat, dtype=np.uint8).reshape(n, d)
        probs.append(np.prod(np.where(noisy == 1, np.where(truth == 1, CHANNELS.q, CHANNELS.p),
                                      np.where(truth == 1, 1 - CHANNELS.q, 1 - CHANNELS.p))))
        counts.append(estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(noisy), CHANNELS).means)
    probs, counts = np.array(probs), np.array(counts)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    for of, given in CASES:
        union = tuple(sorted(set(of) | set(given)))
        t_u, t_b = counts[:, FAMILY.index(union)], counts[:, FAMILY.index(given)]
        r = at.mean(union) / at.mean(given)
        linear = r + (t_u - r * t_b) / at.mean(given)
        assert probs @ linear == pytest.approx(r, rel=1e-12)
        exact = float(probs @ (linear - r) ** 2)
        closed = conditional(at, of, given).variance
        assert math.isclose(exact, closed, rel_tol=1e-9), f"{of} | {given}: exact variance {exact} != closed form {closed}"


def test_the_variance_is_the_exact_variance_of_the_linearization_over_every_noisy_outcome():
    check_exact_variances()


N_SIM = 20_000
WINDOWS = 54_000


def simulated_ratios(windows, seed):
    """The truth of 20,000 reports and its histograms of ``windows`` noisy windows (vectorized), with
    each window's P(A | B) from the job's function (checked on real windows)."""
    rng = np.random.default_rng(seed)
    truth = population(N_SIM, rng)
    histograms = noisy_histograms(truth, CHANNELS.p, CHANNELS.q, windows, rng)

    def fields(bits):
        c = conditional(estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(bits), CHANNELS), [0], [2])
        return [c.joint, c.given]
    f = window_fields(fields, histograms)
    ratios = f[:, 0] / f[:, 1]
    for histogram, value in zip(histograms[:4], ratios):
        est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(reports(histogram)), CHANNELS)
        assert conditional(est, [0], [2]).estimate == pytest.approx(value, rel=1e-12)
    return truth, histograms, ratios


def check_simulated_variance(windows=WINDOWS, seed=11):
    """The ratio's variance over the windows against the closed form at the truth (a band that
    catches it 5% off); its mean at ``r + (r Var(t_B) - Cov(t_U, t_B)) / t_B^2``, the second-order
    bias of a ratio, within its standard error."""
    truth, _, ratios = simulated_ratios(windows, seed)
    at = at_the_truth(truth)
    c = conditional(at, [0], [2])
    assert_variance_ratio(ratios, c.variance)
    t_b = at.mean((2,))
    bias = (c.estimate * at.variance((2,)) - at.covariance((0, 2), (2,))) / t_b ** 2
    assert abs(ratios.mean() - c.estimate - bias) <= Z * math.sqrt(c.variance / windows), "biased"


@pytest.mark.statistical
def test_simulated_variance_is_the_closed_form_and_intervals_cover():
    assert WINDOWS >= replicates_for()
    check_simulated_variance()
    # coverage of the window's own P(A | B) by the intervals of the job's function (plug-in variances)
    truth, histograms, _ = simulated_ratios(2000, 12)
    p_true = truth[truth[:, 2] == 1, 0].mean()
    covered = []
    for counts in histogram_counts(histograms, FAMILY):
        c = conditional(estimate_tmdh(counts, CHANNELS, FAMILY), [0], [2])
        covered.append(c.ci_low <= p_true <= c.ci_high)
    assert_coverage(covered, 0.95)


@pytest.mark.parametrize("p,q,n", [([0.25], [0.75], 1000), ([0.1, 0.3], [0.9, 0.6], 20_000), ([0.0], [1.0], 50)])
def test_presence_threshold_solves_bernsteins_bound(p, q, n):
    alpha = 0.001
    t = presence_threshold(p, q, n, alpha)
    _, v0 = report_variances(np.array(p), np.array(q))
    bound = np.prod([max(a, 1 - a) / (b - a) for a, b in zip(p, q)])
    assert math.exp(-t * t / (2 * (n * v0 + bound * t / 3))) == pytest.approx(alpha, rel=1e-9)
    with pytest.raises(ValueError, match="alpha must be in"):
        presence_threshold(p, q, n, 0.0)


def _null_counts(rng, p, q, x, n, windows):
    """TMDH counts of B over ``windows`` windows of ``n`` reports that all have the true bits ``x`` on B
    (not all ones: t_B = 0)."""
    y = rng.random((windows, n, len(p))) < np.where(x, q, p)
    z = (y - np.asarray(p)) / (np.asarray(q) - np.asarray(p))
    return z.prod(axis=2).sum(axis=1)


@pytest.mark.statistical
@pytest.mark.parametrize("p,q,x", [
    ([0.25], [0.75], [0]),                      # one bit never true
    ([0.2, 0.3], [0.8, 0.7], [1, 0]),           # a pair whose first bit always holds, the second never
    ([0.4, 0.1], [0.6, 0.95], [0, 1]),          # asymmetric channels
])
def test_a_never_true_condition_is_published_at_most_at_the_stated_rate(p, q, x):
    rng = np.random.default_rng(sum(map(int, np.array(p) * 100)))
    alpha, n, windows = 0.05, 400, 6000
    t = presence_threshold(p, q, n, alpha)
    counts = _null_counts(rng, p, q, np.array(x, dtype=bool), n, windows)
    rate = float(np.mean(counts > t))
    assert rate <= alpha + Z * math.sqrt(alpha * (1 - alpha) / windows), rate


def test_a_condition_that_holds_passes_the_test():
    """B holds in 3% of 20,000 reports: its expected TMDH count, 600, is many standard deviations above
    the threshold at the default rate, and the job's function declares it present in every window."""
    rng = np.random.default_rng(8)
    family = SetFamily(3, 3)
    present = 0
    for _ in range(50):
        truth = population(20_000, rng)
        truth[:, 2] = rng.random(20_000) < 0.03
        est = estimate_tmdh(CooccurrenceAccumulator(family).add_bits(randomize_bits(truth, CHANNELS, rng)), CHANNELS)
        present += conditional(est, [0], [2]).present
    assert present == 50


# -- mutations: each breaks the variance formula one way; both checks must catch every one ----------

_delta = conditionals._delta_variance
MUTATIONS = {
    "the variance 5% low": lambda r, t_b, v_u, v_b, cov: 0.95 * _delta(r, t_b, v_u, v_b, cov),
    "the variance 5% high": lambda r, t_b, v_u, v_b, cov: 1.05 * _delta(r, t_b, v_u, v_b, cov),
    "the covariance term dropped": lambda r, t_b, v_u, v_b, cov: _delta(r, t_b, v_u, v_b, 0.0),
    "the r^2 Var(t_B) term dropped": lambda r, t_b, v_u, v_b, cov: _delta(r, t_b, v_u, 0.0, cov),
}


@pytest.mark.statistical
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mutation_of_the_variance_is_caught(name):
    with mock.patch.object(conditionals, "_delta_variance", MUTATIONS[name]):
        with pytest.raises(AssertionError, match="exact variance .* != closed form"):
            check_exact_variances()
        with pytest.raises(AssertionError, match="variance ratio outside"):
            check_simulated_variance()
