"""P(A | B): the delta-method variance is the linearization of the ratio (exact algebra against the
TMDH covariances), and at realistic window sizes the estimate is unbiased to within its standard
error and its intervals cover at the nominal level (seeded simulation)."""
import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.conditional import conditional
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
    assert c.ci_low < c.estimate < c.ci_high and c.given_low < c.given


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
