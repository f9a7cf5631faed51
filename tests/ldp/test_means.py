"""Means of numeric features: the 1-bit encoding (Ding et al. 2017) and the estimates built on it.

Exact algebra against the TMDH counts and covariances. Exact enumeration: over every noisy outcome
of a window of 5 reports drawn from a population, the mean's variance equals the closed form (which
includes the encoding's Bernoulli noise), and so does the variance of the conditional mean's
linearization. Seeded simulations: unbiased (the conditional mean to its second-order bias), the
variance of 480,000 windows against the closed form in a band that catches the Bernoulli term 5% off,
nominal coverage. A mutation suite breaks the variance formula in each way listed in ``MUTATIONS``
and requires both the exact and the simulated check to fail."""
import math
from itertools import product
from unittest import mock

import numpy as np
import pytest

from ldp_marginals.ldp import means
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.encoding import Feature, Layout
from ldp_marginals.ldp.means import feature_mean
from ldp_marginals.ldp.randomizer import ClientRandomizer, randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh, expected_counts
from tests.simulate import noisy_probabilities, patterns, reports, sampled_histograms, window_fields
from tests.stats import DETECT, Z, assert_coverage, assert_variance_ratio, replicates_for

LOW, HIGH = 10.0, 70.0
# the numeric bit (0) gets little channel noise, so the encoding's Bernoulli noise dominates its
# variance: a closed form without it would be off by a factor of ~3
CHANNELS = ChannelSet((Channel.symmetric(0.05), Channel.symmetric(0.2)))
FAMILY = SetFamily(2, 2)
W = HIGH - LOW
# the population of ``population`` below as true patterns of (bit 0: the encoded bit e, bit 1: B),
# pattern k holding bit i = (k >> i) & 1: B with frequency 0.4, P(e | B) = E[u | B] = 5/8 (Beta(5, 3)),
# P(e | not B) = 2/7 (Beta(2, 5))
POPULATION = np.array([0.6 * 5 / 7, 0.6 * 2 / 7, 0.4 * 3 / 8, 0.4 * 5 / 8])
MEAN_ALL = LOW + W * (0.4 * 5 / 8 + 0.6 * 2 / 7)
MEAN_B = LOW + W * 5 / 8


def population(n, rng):
    """B (bit 1) with frequency 0.4; x in [LOW, HIGH] from Beta(2, 5), shifted up given B."""
    b = rng.random(n) < 0.4
    unit = np.where(b, rng.beta(5, 3, n), rng.beta(2, 5, n))
    return LOW + (HIGH - LOW) * unit, b


def encode(x, b, rng):
    """The client's encoding: the numeric bit is 1 with probability (x - low) / (high - low)."""
    return np.column_stack([rng.random(x.size) < (x - LOW) / (HIGH - LOW), b]).astype(np.uint8)


def test_the_encoding_is_one_bit_with_probability_of_the_scaled_value():
    feature = Feature.numeric("minutes", LOW, HIGH)
    assert feature.n_bits == 1 and feature.labels == ("minutes",) and feature.unit(25.0) == 0.25
    assert feature.encode(25.0, 0.2499) == [1] and feature.encode(25.0, 0.25) == [0]
    assert feature.encode(LOW, 0.0) == [0] and feature.encode(HIGH, 0.9999) == [1]
    layout = Layout((Feature.boolean("b"), feature))
    rng = np.random.default_rng(0)
    bits = layout.encode_many([{"b": True, "minutes": 25.0}] * 40_000, rng)
    assert bits[:, 0].all() and abs(bits[:, 1].mean() - 0.25) <= Z * np.sqrt(0.25 * 0.75 / 40_000)
    for bad in (LOW - 1, HIGH + 0.5, "30", True, float("nan")):
        with pytest.raises(ValueError, match="value of numeric feature 'minutes' must be a number in"):
            layout.encode({"b": True, "minutes": bad}, rng)
    with pytest.raises(ValueError, match="encoded at random: pass rng"):
        layout.encode({"b": True, "minutes": 20.0})
    # the device path draws its encoding from the OS CSPRNG like its noise
    report = ClientRandomizer(layout, ChannelSet((Channel.symmetric(0.1),) * 2)).randomize({"b": False, "minutes": 20})
    assert len(report) == 1
    for kwargs, match in [(dict(low=1, high=1), "needs low < high"), (dict(low=0, high=float("inf")), "high of"),
                          (dict(low="0", high=1), "low of numeric feature 'x' must be a finite number")]:
        with pytest.raises(ValueError, match=match):
            Feature("x", "numeric", (), **kwargs)


def test_means_are_the_rescaled_counts_with_the_bernoulli_term():
    rng = np.random.default_rng(4)
    x, b = population(8000, rng)
    est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(randomize_bits(encode(x, b, rng), CHANNELS, rng)),
                        CHANNELS)
    w, n = HIGH - LOW, est.n
    m = feature_mean(est, 0, LOW, HIGH)
    f = est.mean((0,)) / n
    assert m.estimate == pytest.approx(LOW + w * f, rel=1e-12)
    assert m.variance == pytest.approx(w * w * (est.variance((0,)) + n * f * (1 - f)) / n ** 2, rel=1e-12)
    assert LOW <= m.ci_low < m.estimate < m.ci_high <= HIGH and m.given == n
    c = conditional(est, (0,), (1,))
    g = feature_mean(est, 0, LOW, HIGH, given=(1,))
    assert g.estimate == pytest.approx(LOW + w * c.estimate, rel=1e-12) and g.given == pytest.approx(c.given)
    assert g.variance == pytest.approx(w * w * (c.variance + c.estimate * (1 - c.estimate) / c.given), rel=1e-12)
    # a tiny window whose estimate falls below the range: the estimate stays inside its own interval
    # (the job's rows add the projection into [low, high] for display: tests/transforms/test_engine.py)
    tiny = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(np.array([[0, 1]] * 3, np.uint8)), CHANNELS)
    small = feature_mean(tiny, 0, LOW, HIGH)
    assert small.estimate < LOW and small.ci_low < small.estimate < small.ci_high
    with pytest.raises(ValueError, match="given must not hold the numeric bit"):
        feature_mean(est, 0, LOW, HIGH, given=(0, 1))


def at_the_truth(n):
    """The TMDH estimate at the expected counts of n reports drawn from ``POPULATION``: the closed forms
    evaluated there are the exact variances (they are linear in the truth)."""
    truth = n * np.array([1.0, POPULATION[1] + POPULATION[3], POPULATION[2] + POPULATION[3], POPULATION[3]])
    return estimate_tmdh(expected_counts(truth, FAMILY, CHANNELS), CHANNELS, FAMILY)


def check_exact_variances(n=5):
    """Every noisy outcome of a window of n reports from ``POPULATION`` (4^n windows; each report's
    noisy pattern has the probability summed over its population pattern, encoding and channel):
    the exact variance of the mean's estimate is the closed form at the truth; for the conditional
    mean (a ratio, undefined when t_B = 0) the closed form is the exact variance of its linearization
    ``low + w (r + (t_eB - r t_B) / t_B)`` around the truth (r = P(e | B), t_B = n P(B))."""
    truth = at_the_truth(n)
    t_b, r = truth.mean((1,)), truth.mean((0, 1)) / truth.mean((1,))
    noisy = POPULATION @ noisy_probabilities(patterns(2), CHANNELS.p, CHANNELS.q)
    probs, values, linear = [], [], []
    for outcome in product(range(4), repeat=n):
        est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(patterns(2)[list(outcome)]), CHANNELS)
        probs.append(np.prod(noisy[list(outcome)]))
        values.append(means.feature_mean(est, 0, LOW, HIGH).estimate)
        linear.append(LOW + W * (r + (est.mean((0, 1)) - r * est.mean((1,))) / t_b))
    probs, values, linear = np.array(probs), np.array(values), np.array(linear)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert probs @ values == pytest.approx(MEAN_ALL, rel=1e-12) and probs @ linear == pytest.approx(MEAN_B, rel=1e-12)
    for name, outcomes, closed in (("mean", values, means.feature_mean(truth, 0, LOW, HIGH).variance),
                                   ("conditional mean", linear,
                                    means.feature_mean(truth, 0, LOW, HIGH, given=(1,)).variance)):
        exact = float(probs @ (outcomes - probs @ outcomes) ** 2)
        assert math.isclose(exact, closed, rel_tol=1e-9), f"{name}: exact variance {exact} != closed form {closed}"


def test_variances_equal_the_exact_variance_over_every_noisy_outcome():
    check_exact_variances()


N_SIM = 20_000
WINDOWS = 480_000
# the encoding's Bernoulli term is at least this share of both variances (checked below), so a band
# that catches a variance DETECT * BERNOULLI_SHARE off catches the Bernoulli term DETECT off
BERNOULLI_SHARE = 0.34


def simulated_means(windows, seed):
    """The mean and the conditional mean given B of ``windows`` windows of ``N_SIM`` reports drawn from
    ``POPULATION`` (vectorized: one multinomial draw per window; the estimates from the job's
    functions, checked on real windows)."""
    histograms = sampled_histograms(POPULATION, N_SIM, CHANNELS.p, CHANNELS.q, windows, np.random.default_rng(seed))

    def fields(bits):
        est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(bits), CHANNELS)
        c = conditional(est, (0,), (1,))
        return [means.feature_mean(est, 0, LOW, HIGH).estimate, c.joint, c.given]
    f = window_fields(fields, histograms)
    given = LOW + W * f[:, 1] / f[:, 2]
    for histogram, value in zip(histograms[:4], given):   # the conditional mean is this ratio
        est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(reports(histogram)), CHANNELS)
        assert means.feature_mean(est, 0, LOW, HIGH, given=(1,)).estimate == pytest.approx(value, rel=1e-12)
    return f[:, 0], given


def check_simulated_variances(windows=WINDOWS, seed=17):
    """The variance of the simulated estimates against the closed form at the truth, in a band that
    catches a variance ``DETECT * BERNOULLI_SHARE`` off; then the means: the mean unbiased, the
    conditional mean within its standard error of its second-order bias ``w (r Var(t_B) -
    Cov(t_eB, t_B)) / t_B^2`` (the sampling of the reports adds to both terms alike and cancels)."""
    all_reports, given_b = simulated_means(windows, seed)
    truth = at_the_truth(N_SIM)
    m = means.feature_mean(truth, 0, LOW, HIGH)
    g = means.feature_mean(truth, 0, LOW, HIGH, given=(1,))
    assert_variance_ratio(np.column_stack([all_reports, given_b]), [m.variance, g.variance],
                          detect=DETECT * BERNOULLI_SHARE)
    t_b, r = truth.mean((1,)), truth.mean((0, 1)) / truth.mean((1,))
    bias = W * (r * truth.variance((1,)) - truth.covariance((0, 1), (1,))) / t_b ** 2
    assert abs(all_reports.mean() - MEAN_ALL) <= Z * math.sqrt(m.variance / windows), "mean biased"
    assert abs(given_b.mean() - MEAN_B - bias) <= Z * math.sqrt(g.variance / windows), "conditional mean biased"


@pytest.mark.statistical
def test_simulated_variances_are_the_closed_form_to_a_fraction_of_the_bernoulli_term():
    truth = at_the_truth(N_SIM)
    m = feature_mean(truth, 0, LOW, HIGH)
    g = feature_mean(truth, 0, LOW, HIGH, given=(1,))
    shares = (1 - W * W * truth.variance((0,)) / N_SIM ** 2 / m.variance,
              1 - W * W * conditional(truth, (0,), (1,)).variance / g.variance)
    assert min(shares) >= BERNOULLI_SHARE and WINDOWS >= replicates_for(DETECT * BERNOULLI_SHARE, elements=2)
    check_simulated_variances()


@pytest.mark.statistical
def test_nominal_coverage_and_conservative_for_the_windows_own_mean():
    """Reports are an i.i.d. sample of a population with known means (values, encoding and noise
    drawn report by report, as devices do): the intervals cover the population's means at the level.
    Around each window's own mean of x (a finite population), the same intervals are conservative:
    they cover at least as often."""
    rng = np.random.default_rng(17)
    n, windows = 5000, 1000
    err = {"all": [], "b": []}
    var = {"all": [], "b": []}
    covered = {"all": [], "b": []}
    own = []
    for _ in range(windows):
        x, b = population(n, rng)
        est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(
            randomize_bits(encode(x, b, rng), CHANNELS, rng)), CHANNELS)
        for key, given, truth in (("all", (), MEAN_ALL), ("b", (1,), MEAN_B)):
            m = feature_mean(est, 0, LOW, HIGH, given=given)
            err[key].append(m.estimate - truth)
            var[key].append(m.variance)
            covered[key].append(m.ci_low <= truth <= m.ci_high)
        m = feature_mean(est, 0, LOW, HIGH)
        own.append(m.ci_low <= x.mean() <= m.ci_high)
    for key in err:
        e, v = np.array(err[key]), np.array(var[key])
        assert abs(e.mean()) <= Z * np.sqrt(v.mean() / windows), key
        assert_coverage(covered[key], 0.95)
    assert np.mean(own) >= 0.95 - Z * np.sqrt(0.95 * 0.05 / windows)


# -- mutations: each breaks the variance formula one way; both checks must catch every one ----------

_bernoulli = means._bernoulli_variance
_feature_mean = means.feature_mean


def _variance_times(factor):
    def mutated(*args, **kwargs):
        m = _feature_mean(*args, **kwargs)
        return m._replace(variance=m.variance * factor)
    return mutated


MUTATIONS = {
    "the Bernoulli term 5% low": mock.patch.object(means, "_bernoulli_variance", lambda m: 0.95 * _bernoulli(m)),
    "the Bernoulli term 5% high": mock.patch.object(means, "_bernoulli_variance", lambda m: 1.05 * _bernoulli(m)),
    "the variance 5% low": mock.patch.object(means, "feature_mean", _variance_times(0.95)),
    "the variance 5% high": mock.patch.object(means, "feature_mean", _variance_times(1.05)),
}


@pytest.mark.statistical
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mutation_of_the_variance_is_caught(name):
    with MUTATIONS[name]:
        with pytest.raises(AssertionError, match="exact variance .* != closed form"):
            check_exact_variances()
        with pytest.raises(AssertionError, match="variance ratio outside"):
            check_simulated_variances()
