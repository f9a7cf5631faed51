"""Attacks as tests, with thresholds derived from epsilon: an averaging attacker over T reports of one
device, a detector of a change of value, and the linkage of a device's windows through its
memoized bits (the figures docs/client.md states)."""
import hashlib
import math
from itertools import product

import numpy as np
import pytest

from ldp_marginals.ldp.attacks import attacker_accuracy, change_epsilon, count_law, linkage_rate
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.client import ClientSpec, DeviceClient
from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.ldp.encoding import Feature, Layout
from ldp_marginals.ldp.longitudinal import epsilon_infinity, epsilon_one, epsilon_reports
from ldp_marginals.ldp.memoized import ClientChannels
from tests.stats import Z

BIT = Layout((Feature.boolean("a"),))
MEMO = ClientChannels.rappor(0.5, 0.5, 0.75, 1)     # the default memoized channel of docs/client.md
PLAIN = ClientChannels.plain(MEMO.effective)         # the same effective channel, drawn afresh
T_VALUES = (1, 10, 100, 1000)


def bound(eps: float) -> float:
    """The best accuracy an eps-DP release allows an attacker guessing a bit of prior 1/2."""
    return 1.0 if math.isinf(eps) else 1.0 / (1.0 + math.exp(-eps))


def simulate_counts(channels, x, n_devices, n_reports, rng):
    """Ones among each device's n reports: memoized bits draw the permanent bit once per device."""
    inst, perm = channels.instantaneous[0], channels.permanent[0]
    if perm is None:
        eff = channels.effective[0]
        return rng.binomial(n_reports, np.where(x == 1, eff.q, eff.p))
    b = rng.random(n_devices) < np.where(x == 1, perm.q, perm.p)
    return rng.binomial(n_reports, np.where(b, inst.q, inst.p))


@pytest.mark.statistical
@pytest.mark.parametrize("channels", [MEMO, PLAIN], ids=["memoized", "plain"])
def test_averaging_attacker_stays_below_the_epsilon_bound_for_every_T(channels):
    rng = np.random.default_rng(38)
    n = 20_000
    eps_inf = epsilon_infinity(BIT, channels)
    for t in T_VALUES:
        eps_t = epsilon_reports(BIT, channels, t)
        exact = attacker_accuracy(channels, 0, t, "average")
        bayes = attacker_accuracy(channels, 0, t, "bayes")
        assert exact <= bayes + 1e-12 and bayes <= bound(eps_t) + 1e-12 and eps_t <= eps_inf + 1e-9
        x = rng.integers(0, 2, n)
        k = simulate_counts(channels, x, n, t, rng)
        mid = (channels.instantaneous[0].p + channels.instantaneous[0].q) / 2 * t
        guess = np.where(np.isclose(k, mid), rng.integers(0, 2, n), k > mid)
        accuracy = float(np.mean(guess == x))
        se = math.sqrt(exact * (1 - exact) / n) + 1e-12
        assert abs(accuracy - exact) <= Z * se, (t, accuracy, exact)
        assert accuracy <= bound(eps_inf) + Z * se, (t, accuracy)
    if channels is MEMO:
        assert bound(eps_inf) == pytest.approx(0.75)


@pytest.mark.statistical
def test_the_averaging_attacker_on_the_clients_own_reports():
    """The same attacker on reports made by the reference client (one secret per device, T = 10)."""
    spec = ClientSpec.from_json({"collection": "c", "features": [{"name": "a", "type": "boolean"}],
                                 "window": {"type": "global"},
                                 "channels": [{"p": 0.5, "q": 0.75, "permanent": {"p": 0.25, "q": 0.75}}]})
    drbg, n, t = HmacDrbg(hashlib.sha256(b"averaging").digest()), 1500, 10
    x = np.arange(n) % 2
    k = np.zeros(n, dtype=int)
    for i in range(n):
        client = DeviceClient(spec, hashlib.sha256(b"d" + i.to_bytes(4, "big")).digest(), drbg)
        k[i] = sum(client.report({"a": bool(x[i])}, 1000 * j)["bits"][0] & 1 for j in range(t))
    guess = np.where(k == 6.25, 0, k > 6.25)
    exact = attacker_accuracy(MEMO, 0, t, "average")
    assert abs(np.mean(guess == x) - exact) <= Z * math.sqrt(exact * (1 - exact) / n)


def test_bayes_attacker_accuracy_is_the_exact_optimum():
    """Brute force over every sequence of T reports (T <= 8) against the count-based computation."""
    for channels in (MEMO, PLAIN):
        for t in (1, 3, 8):
            seqs = np.array(list(product((0, 1), repeat=t)))
            k = seqs.sum(axis=1)
            laws = [count_law(channels, 0, x, t) / np.array([math.comb(t, j) for j in range(t + 1)]) for x in (0, 1)]
            brute = 0.5 * np.maximum(laws[0][k], laws[1][k]).sum()
            assert attacker_accuracy(channels, 0, t) == pytest.approx(brute, rel=1e-12)


def brute_change_epsilon(channels, before, after):
    """Largest |ln P(changed) - ln P(unchanged)| over every output sequence, by enumeration of the
    permanent bits (a changed value draws a new one)."""
    inst, perm = channels.instantaneous[0], channels.permanent[0]
    worst = 0.0
    for x in (0, 1):
        for seq in product((0, 1), repeat=before + after):
            y1, y2 = seq[:before], seq[before:]

            def law(ys, t):
                return np.prod([t if y else 1 - t for y in ys])

            def marginal(ys, value):
                if perm is None:
                    return law(ys, inst.q if value else inst.p)
                w = perm.q if value else perm.p
                return w * law(ys, inst.q) + (1 - w) * law(ys, inst.p)
            if perm is None:
                same = law(y1 + y2, inst.q if x else inst.p)
            else:
                w = perm.q if x else perm.p
                same = w * law(y1 + y2, inst.q) + (1 - w) * law(y1 + y2, inst.p)
            changed = marginal(y1, x) * marginal(y2, 1 - x)
            worst = max(worst, abs(math.log(changed) - math.log(same)))
    return worst


def test_change_detection_without_memoization_is_bounded_by_epsilon_1_per_report_after():
    eps1 = epsilon_one(BIT, PLAIN)
    for before, after in ((1, 1), (3, 1), (2, 3)):
        assert change_epsilon(PLAIN, 0, before, after) == pytest.approx(after * eps1, rel=1e-9)
        assert change_epsilon(PLAIN, 0, before, after) == pytest.approx(brute_change_epsilon(PLAIN, before, after))


def test_change_detection_with_memoization_exceeds_epsilon_1_once_reports_are_linked():
    """A memoized bit keyed by its value draws a new permanent bit when the value changes: two
    linked reports already tell more than epsilon_1 (docs/client.md states these figures)."""
    eps1 = epsilon_one(BIT, MEMO)
    for before, after in ((1, 1), (2, 2), (4, 1)):
        assert change_epsilon(MEMO, 0, before, after) == pytest.approx(brute_change_epsilon(MEMO, before, after))
    assert eps1 == pytest.approx(0.3365, abs=1e-4)
    assert change_epsilon(MEMO, 0, 1, 1) == pytest.approx(0.3959, abs=1e-4)
    assert change_epsilon(MEMO, 0, 1000, 1) == pytest.approx(0.5596, abs=1e-3)
    assert change_epsilon(MEMO, 0, 100, 100) > 10


@pytest.mark.statistical
def test_a_change_detector_is_no_better_than_its_epsilon_allows():
    """A detector of a change from 1 to 0 at the event the likelihood ratio favours most, seeded: its
    true-positive rate is at most e^eps times its false-positive rate, with eps = epsilon_1 without
    memoization (one report after the change; the bound is reached) and the larger change epsilon
    with memoization (the device's permanent bit known from 1,000 reports before)."""
    rng = np.random.default_rng(7)
    n = 200_000
    for channels, before in ((PLAIN, 1), (MEMO, 1000)):
        eps = change_epsilon(channels, 0, before, 1)
        inst, perm = channels.instantaneous[0], channels.permanent[0]
        changed = rng.random(n) < 0.5
        if perm is None:
            after = rng.random(n) < np.where(changed, channels.effective[0].p, channels.effective[0].q)
            flag = ~after                   # the report after says 0
        else:   # unchanged: the same permanent bit as before; changed: a new one for value 0
            b_before = rng.random(n) < perm.q
            first = rng.binomial(before, np.where(b_before, inst.q, inst.p))
            b_after = np.where(changed, rng.random(n) < perm.p, b_before)
            after = rng.random(n) < np.where(b_after, inst.q, inst.p)
            flag = ~after & (first > (inst.p + inst.q) / 2 * before)   # ... and the permanent bit before was 1
        tpr, fpr = flag[changed].mean(), flag[~changed].mean()
        se = math.sqrt(tpr * (1 - tpr) / changed.sum()) + math.exp(eps) * math.sqrt(fpr * (1 - fpr) / (~changed).sum())
        assert tpr <= math.exp(eps) * fpr + Z * se, (tpr, fpr, eps)
        assert tpr > math.exp(epsilon_one(BIT, channels) * 0.5) * fpr   # the detector does detect
        if perm is not None:   # and, memoized, beats what epsilon_1 alone would allow
            assert tpr > math.exp(epsilon_one(BIT, channels)) * fpr + Z * se


# docs/client.md's linkage table (2,000 devices, seed 1): (bits, reports per window, P(true bit = 1)) -> share linked
DOCUMENTED_LINKAGE = {(32, 1, 0.0): 0.0015, (64, 1, 0.0): 0.0025, (128, 1, 0.0): 0.0035,
                      (64, 10, 0.0): 0.3795, (128, 10, 0.5): 0.971}


@pytest.mark.statistical
@pytest.mark.parametrize("key", list(DOCUMENTED_LINKAGE), ids=[f"{b}bits-{r}reports-p{pi}" for b, r, pi in DOCUMENTED_LINKAGE])
def test_linkage_across_windows_is_the_documented_figure(key):
    bits, reports, pi = key
    rate = linkage_rate(ClientChannels.rappor(0.5, 0.5, 0.75, bits), 2000, (reports, reports), pi,
                        np.random.default_rng(1))
    expected = DOCUMENTED_LINKAGE[key]
    assert abs(rate - expected) <= Z * math.sqrt(max(expected * (1 - expected), 1 / 2000) / 2000)


@pytest.mark.statistical
def test_without_memoization_identical_devices_are_linked_at_chance_only():
    """Devices with the same values and fresh coins carry nothing of their own: any attacker links
    1/N of them (a binomial band around chance), however many bits and reports."""
    n = 1000
    rate = linkage_rate(PLAIN.__class__.plain(ChannelSet.uniform(MEMO.effective[0], 128)), n, (10, 10), 0.0,
                        np.random.default_rng(3))
    chance = 1 / n
    assert rate <= chance + Z * math.sqrt(chance * (1 - chance) / n)
    memo = linkage_rate(ClientChannels.rappor(0.5, 0.5, 0.75, 128), n, (10, 10), 0.0, np.random.default_rng(3))
    assert memo > 0.5   # the same devices memoizing are linked most of the time
