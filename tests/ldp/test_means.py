"""Means of numeric features: the 1-bit encoding (Ding et al. 2017) and the estimates built on it.
Exact algebra against the TMDH counts and covariances, and seeded simulations: unbiased, variance
equal to the closed form (which includes the encoding's Bernoulli noise), nominal coverage."""
import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.encoding import Feature, Layout
from ldp_marginals.ldp.means import feature_mean
from ldp_marginals.ldp.randomizer import ClientRandomizer, randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh
from tests.stats import Z, assert_coverage, assert_variance_ratio

LOW, HIGH = 10.0, 70.0
# the numeric bit (0) gets little channel noise, so the encoding's Bernoulli noise dominates its
# variance: a closed form without it would be off by a factor of ~3
CHANNELS = ChannelSet((Channel.symmetric(0.05), Channel.symmetric(0.2)))
FAMILY = SetFamily(2, 2)


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


@pytest.mark.statistical
def test_unbiased_with_the_closed_form_variance_and_nominal_coverage():
    """Reports are an i.i.d. sample of a population with known means: the closed form is the exact
    variance around them, and the intervals cover them at the level. Around each window's own mean
    of x (a finite population), the same intervals are conservative: they cover at least as often."""
    rng = np.random.default_rng(17)
    n, windows = 5000, 1000
    mean_all = LOW + (HIGH - LOW) * (0.4 * 5 / 8 + 0.6 * 2 / 7)
    mean_b = LOW + (HIGH - LOW) * 5 / 8
    err = {"all": [], "b": []}
    var = {"all": [], "b": []}
    covered = {"all": [], "b": []}
    own = []
    for _ in range(windows):
        x, b = population(n, rng)
        est = estimate_tmdh(CooccurrenceAccumulator(FAMILY).add_bits(
            randomize_bits(encode(x, b, rng), CHANNELS, rng)), CHANNELS)
        for key, given, truth in (("all", (), mean_all), ("b", (1,), mean_b)):
            m = feature_mean(est, 0, LOW, HIGH, given=given)
            err[key].append(m.estimate - truth)
            var[key].append(m.variance)
            covered[key].append(m.ci_low <= truth <= m.ci_high)
        m = feature_mean(est, 0, LOW, HIGH)
        own.append(m.ci_low <= x.mean() <= m.ci_high)
    for key in err:
        e, v = np.array(err[key]), np.array(var[key])
        assert abs(e.mean()) <= Z * np.sqrt(v.mean() / windows), key
        # the estimated variance is itself noisy but far less than the estimates: compare to its mean
        assert_variance_ratio(e, v.mean())
        assert_coverage(covered[key], 0.95)
    assert np.mean(own) >= 0.95 - Z * np.sqrt(0.95 * 0.05 / windows)
