"""Reports of one device share its memoized responses: the TMDH variances, which assume independent
reports, are too small by the design effect. ``repeat_variance`` adds the covariance term; checked by
exact algebra against enumeration, by the empirical variance of seeded windows, and by the coverage
of the intervals with devices sending up to 24 memoized reports per window."""
import math
from itertools import product

import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.intervals import z_of
from ldp_marginals.ldp.memoized import ClientChannels, design_effect, randomize_repeats, repeat_variance
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tmdh import estimate_tmdh, expected_counts, tmdh_means
from tests.stats import DETECT, Z, assert_coverage, assert_mean_close, assert_variance_ratio, replicates_for

CHANNELS = ClientChannels(ChannelSet.uniform(Channel(0.5, 0.75), 4),
                          (Channel(0.25, 0.75), Channel(0.25, 0.75), Channel(0.1, 0.8), None))
FAMILY = SetFamily.all_up_to(4, 2)


def pair_moment(channels: ClientChannels, bit: int, x: int) -> float:
    """E[z z'] of one bit for two reports of one device, by enumeration of its permanent bit and of
    the two reports (z debiased by the effective channel)."""
    eff, inst, perm = channels.effective[bit], channels.instantaneous[bit], channels.permanent[bit]
    states = [(1.0, x)] if perm is None else [(perm.q if x else perm.p, 1), (1 - (perm.q if x else perm.p), 0)]
    total = 0.0
    for w, b in states:
        for y1, y2 in product((0, 1), repeat=2):
            if perm is None:    # fresh coins: the two reports are independent given x
                t = inst.q if x else inst.p
            else:
                t = inst.q if b else inst.p
            prob = (t if y1 else 1 - t) * (t if y2 else 1 - t)
            total += w * prob * (y1 - eff.p) / eff.gap * (y2 - eff.p) / eff.gap
    return total


def device_covariance(channels, x: np.ndarray, s: tuple) -> float:
    """Cov of the TMDH terms of set s of two reports of one device with true bits x."""
    return math.prod(pair_moment(channels, i, int(x[i])) for i in s) - math.prod(int(x[i]) for i in s)


def true_counts(x_reports: np.ndarray) -> np.ndarray:
    return np.array([np.prod(x_reports[:, list(s)], axis=1).sum() if s else len(x_reports) for s in FAMILY],
                    dtype=float)


def test_repeat_variance_is_exact_for_devices_sending_equal_numbers_of_reports():
    rng = np.random.default_rng(0)
    devices, m = 40, 6
    x = (rng.random((devices, 4)) < [0.3, 0.6, 0.5, 0.8]).astype(int)
    reports = np.repeat(x, m, axis=0)
    est = estimate_tmdh(expected_counts(true_counts(reports), FAMILY, CHANNELS.effective), CHANNELS.effective, FAMILY)
    extra = repeat_variance(est, CHANNELS, m - 1)
    for idx, s in enumerate(FAMILY):
        brute = sum(m * (m - 1) * device_covariance(CHANNELS, x[d], s) for d in range(devices)) if s else 0.0
        assert extra[idx] == pytest.approx(brute, rel=1e-9, abs=1e-9), s
    assert extra[FAMILY.index((3,))] == 0.0      # the bit that does not memoize shares nothing
    assert CHANNELS.correlation(0, 1) == pytest.approx(0.0545, abs=1e-4)   # RAPPOR's rho at x = 1
    assert design_effect(24, CHANNELS.correlation(0, 1)) == pytest.approx(2.25, abs=0.01)


def test_randomize_repeats_refuses_shapes_that_do_not_match():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"true_bits must have shape \(devices, 4\)"):
        randomize_repeats(np.zeros((3, 5)), [1, 1, 1], CHANNELS, rng)
    with pytest.raises(ValueError, match="reports must give a count >= 0 per device"):
        randomize_repeats(np.zeros((3, 4)), [1, -1, 1], CHANNELS, rng)
    noisy, owner = randomize_repeats(np.ones((3, 4)), [2, 0, 1], CHANNELS, rng)
    assert noisy.shape == (3, 4) and owner.tolist() == [0, 0, 2]


def simulate_windows(rng, x, m, n_windows):
    """Co-occurrence counts of ``n_windows`` independent windows of the same devices: device d holds
    true bits x[d] and sends m[d] reports sharing its permanent bits."""
    out = np.empty((n_windows, len(FAMILY)))
    pairs = [s for s in FAMILY if len(s) == 2]
    for w in range(n_windows):
        y = randomize_repeats(x, m, CHANNELS, rng)[0].astype(np.int64)
        out[w, 0] = len(y)
        out[w, 1:5] = y.sum(axis=0)
        gram = y.T @ y
        out[w, 5:] = [gram[i, j] for i, j in pairs]
    return out


@pytest.fixture(scope="module")
def windows():
    rng = np.random.default_rng(38)
    devices, top = 300, 24
    x = (rng.random((devices, 4)) < [0.3, 0.6, 0.5, 0.8]).astype(int)
    m = rng.integers(1, top + 1, devices)                  # up to 24 memoized reports per device and window
    return x, m, top, simulate_windows(rng, x, m, 3000)


def simulated_means(rng, x, m, n_windows, chunk=4000):
    """TMDH means of ``n_windows`` windows of the same devices (device d: true bits x[d], m[d]
    reports sharing its permanent bits), simulated here independently of ``randomize_repeats``,
    vectorized over windows; the means through ``tmdh_means``, which is linear in the counts."""
    owner = np.repeat(np.arange(len(m)), m)
    inst, perm = CHANNELS.instantaneous, CHANNELS.permanent
    low = np.array([c.p if c is not None else 0.0 for c in perm])
    high = np.array([c.q if c is not None else 1.0 for c in perm])
    linear = np.array([tmdh_means(e, FAMILY, CHANNELS.effective) for e in np.eye(len(FAMILY))])
    pairs = [s for s in FAMILY if len(s) == 2]
    out = []
    for start in range(0, n_windows, chunk):
        w = min(chunk, n_windows - start)
        held = rng.random((w, len(m), 4), dtype=np.float32) < np.where(x == 1, high, low)
        theta = np.where(held[:, owner, :], inst.q, inst.p).astype(np.float32)
        y = (rng.random(theta.shape, dtype=np.float32) < theta).astype(np.float32)
        gram = np.einsum("wri,wrj->wij", y, y)
        counts = np.column_stack([np.full(w, len(owner)), y.sum(axis=1)] + [gram[:, i, j] for i, j in pairs])
        out.append(counts @ linear)
    return np.vstack(out)


@pytest.mark.statistical
def test_the_corrected_variance_is_the_variance_of_the_estimates():
    """30 devices sending 1 to 24 reports, ~60,000 windows (enough for the band to catch a variance
    5% off): the empirical variance of every count is the TMDH variance plus the repeats' term."""
    rng = np.random.default_rng(5)
    x = (rng.random((30, 4)) < [0.3, 0.6, 0.5, 0.8]).astype(int)
    m = rng.integers(1, 25, 30)
    truth = estimate_tmdh(expected_counts(true_counts(np.repeat(x, m, axis=0)), FAMILY, CHANNELS.effective),
                          CHANNELS.effective, FAMILY)
    exact = truth.variances + np.array([sum(m[d] * (m[d] - 1) * device_covariance(CHANNELS, x[d], s)
                                            for d in range(len(m))) if s else 0.0 for s in FAMILY])
    means = simulated_means(rng, x, m, replicates_for(DETECT, elements=len(FAMILY) - 1))
    assert_variance_ratio(means[:, 1:], exact[1:])
    assert_mean_close(means[:, 1:], truth.means[1:], exact[1:])
    with pytest.raises(AssertionError):   # the TMDH variance alone is too small
        assert_variance_ratio(means[:, 1:], truth.variances[1:])


@pytest.mark.statistical
def test_intervals_with_memoized_repeats_cover_at_the_nominal_rate_once_corrected(windows):
    x, m, top, counts = windows
    z = z_of(0.95)
    s_realized = float((m * (m - 1)).sum() / m.sum())      # mean over reports of the device's other reports
    truth = true_counts(np.repeat(x, m, axis=0))
    covered = {"tmdh": [], "realized": [], "bound": []}
    for c in counts:
        est = estimate_tmdh(c.astype(np.int64), CHANNELS.effective, FAMILY)
        extra = repeat_variance(est, CHANNELS, 1.0)
        for name, var in (("tmdh", est.variances), ("realized", est.variances + s_realized * extra),
                          ("bound", est.variances + (top - 1) * extra)):
            covered[name].append(np.abs(est.means - truth) <= z * np.sqrt(np.maximum(var, 0)))
    rates = {k: np.array(v)[:, 1:] for k, v in covered.items()}
    for j in range(rates["tmdh"].shape[1]):
        assert_coverage(rates["realized"][:, j], 0.95)
        assert rates["bound"][:, j].mean() >= 0.95 - Z * math.sqrt(0.95 * 0.05 / len(counts))
    # uncorrected, the frequencies of memoized bits are covered far too rarely (86-89% here); a pair's
    # TMDH variance is so large that the repeats' share of it is small (93-95%)
    for j in (0, 1, 2):
        assert rates["tmdh"][:, j].mean() < 0.95 - Z * math.sqrt(0.95 * 0.05 / len(counts))
