"""P(A | B): the delta-method variance is the linearization of the ratio (exact algebra against the
TMDH covariances), and at realistic window sizes the estimate is unbiased to within its standard
error and its intervals cover at the nominal level (seeded simulation). The presence test of B: its
threshold solves Bernstein's bound (exact algebra), a never-true condition passes it at most at the
stated rate (simulation, worst-case truths), and a condition that holds passes it."""
import math

import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.conditional import conditional, presence_threshold
from ldp_marginals.ldp.planning import report_variances
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh
from tests.stats import Z, assert_coverage

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


@pytest.mark.statistical
def test_unbiased_with_nominal_coverage_at_realistic_sizes():
    rng = np.random.default_rng(11)
    n, windows = 20_000, 400
    estimates, variances, covered = [], [], []
    for _ in range(windows):
        truth = population(n, rng)
        p_true = truth[truth[:, 2] == 1, 0].mean()   # the window's own P(A | B), what the interval targets
        noisy = randomize_bits(truth, CHANNELS, rng)
        c = conditional(estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(noisy), CHANNELS), [0], [2])
        estimates.append(c.estimate - p_true)
        variances.append(c.variance)
        covered.append(c.ci_low <= p_true <= c.ci_high)
    errors = np.array(estimates)
    assert abs(errors.mean()) <= Z * np.sqrt(np.mean(variances) / windows)
    assert errors.var(ddof=1) == pytest.approx(np.mean(variances), rel=Z * np.sqrt(2 / windows))
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
