"""Extremes over clients on memoized channels (docs/design.md, "Extremes over clients and memoized channels";
rule memoize-client-extremes). Devices send 24 hourly memoized reports a day, of one value or of two (the
value changes at noon); the permanent response of a value is drawn once per device (per bit and value of
a rappor bit, per whole value of a kind: the clients' law, simulated here), each report re-randomizes it.

- With two reports a client the product of the per-report terms is biased: its exact mean,
  ``E_b[beta(b)^k]`` per bit and value shared by ``k`` reports, is far from the truth and the simulated
  windows agree with it, and the configuration is refused (accepted on main: the team's config used c = 12).
- With one report a client (``reports_per_client: 1``) the client rows are unbiased and cover, for per-bit
  rappor, ``hadamard`` and ``subset``, through the job's aggregator (parsed config, ``add_devices``,
  ``settle``, ``client_sums``): the kinds' configs were refused on main (kind-memoize-client-extremes)."""
import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.ldp.kind_memoize import randomize_memoized_hadamard, randomize_memoized_subset
from ldp_marginals.schemas.config import parse_config
from tests.stats import Z, assert_mean_close

T0, HOUR = 1_767_225_600_000, 3_600_000
NB = 3
RAPPOR = {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True}
CHANNELS = {"per_bit": RAPPOR,
            "hadamard": {"kind": "hadamard", "epsilon": 4.0, "memoize": True, "epsilon_1": 1.0},
            "subset": {"kind": "subset", "epsilon": 4.0, "width": 2, "memoize": True, "epsilon_1": 1.0}}
EXTREMES = (("or", (0, 1)), ("and", (1, 2)))


def spec(kind, c):
    out = {"collection": "memo", "features": [{"name": f"b{i}", "type": "boolean"} for i in range(NB)],
           "channel": CHANNELS[kind], "max_order": 2, "window": {"type": "fixed", "size_seconds": 86400},
           "min_reports": 20, "privacy": {"unit": "device", "max_reports_per_device": 24},
           "extremes": [{"name": "any", "op": "or", "bits": ["b0", "b1"], "over": "client"},
                        {"name": "all", "op": "and", "bits": ["b1", "b2"], "over": "client"}]}
    if c is not None:
        out["reports_per_client"] = c
    return out


def population(rng, devices, changing):
    """Per report its device, hour and true bits: 24 hourly reports a device, one value all day or a second
    value from noon (each device its own rate)."""
    rate = rng.uniform(0.1, 0.6, devices)[:, None]
    a = (rng.random((devices, NB)) < rate).astype(np.uint8)
    b = (rng.random((devices, NB)) < rate).astype(np.uint8) if changing else a
    owner, hour = np.repeat(np.arange(devices), 24), np.tile(np.arange(24), devices)
    return owner, hour, np.where((hour < 12)[:, None], a[owner], b[owner])


def per_bit_noisy(rng, cfg, owner, x):
    """RAPPOR with memoize, the client's law: a permanent bit per device, bit and value (ldp/client.py: its coin
    is keyed by the feature's value), then each report's instantaneous bit."""
    perm = cfg.client_channels.permanent[0]
    inst = cfg.client_channels.instantaneous
    held = (rng.random((owner.max() + 1, NB, 2)) < np.array([perm.p, perm.q])).astype(np.uint8)
    b = held[owner[:, None], np.arange(NB)[None, :], x]
    return (rng.random(x.shape) < np.where(b == 1, inst.q, inst.p)).astype(np.uint8)


def kind_noisy(rng, cfg, kind, owner, x):
    """A memoized kind: one permanent response per device and distinct value (ldp/kind_memoize.py's
    simulation over (device, value) units), each report re-randomizing it."""
    code = owner * (1 << NB) + (x << np.arange(NB)).sum(axis=1)
    units, unit_of = np.unique(code, return_inverse=True)
    unit_of = unit_of.reshape(-1)
    values = ((units[:, None] % (1 << NB)) >> np.arange(NB)) & 1
    order = np.argsort(unit_of, kind="stable")   # the simulation returns reports grouped by unit, in order
    simulate = randomize_memoized_hadamard if kind == "hadamard" else randomize_memoized_subset
    a, b, _ = simulate(values.astype(np.uint8), np.bincount(unit_of, minlength=units.size), cfg.kind_memo, rng)
    packed = np.empty((owner.size, cfg.wire.n_bytes), dtype=np.uint8)
    packed[order] = cfg.wire.pack(a, b)
    return packed


def noisy_packed(rng, cfg, kind, owner, x):
    if kind == "per_bit":
        from ldp_marginals.ldp.encoding import pack_bits
        return pack_bits(per_bit_noisy(rng, cfg, owner, x))
    return kind_noisy(rng, cfg, kind, owner, x)


def truth(cfg, owner, hour, x, c):
    """Per extreme, the number of devices whose OR (AND) over the true bits of their c reports of smallest
    rank (the client sample: a keyed hash of device and event time) is 1."""
    keys = np.array([client_key(f"d{i}") for i in range(owner.max() + 1)], dtype=np.uint64)[owner]
    ranks = report_ranks(cfg.aggregator.collection_key, keys, T0 + hour * HOUR)
    order = np.lexsort((ranks, owner))
    out = np.zeros(2)
    for d in range(owner.max() + 1):
        pick = order[d * 24:d * 24 + c]
        out += [x[pick][:, [0, 1]].any(), x[pick][:, [1, 2]].all()]
    return out


def client_rows(cfg, kind, rng, owner, hour, x, reps):
    """``reps`` windows through the job's aggregator: per window and extreme (estimate, variance)."""
    agg = cfg.aggregator
    keys = np.array([client_key(f"d{i}") for i in range(owner.max() + 1)], dtype=np.uint64)[owner]
    est, var = np.empty((reps, 2)), np.empty((reps, 2))
    for r in range(reps):
        acc = agg.settle(agg.add_devices(agg.create_open(), noisy_packed(rng, cfg, kind, owner, x), keys,
                                         T0 + hour * HOUR))
        sums = agg.client_sums(acc)
        est[r], var[r] = [s for s, _ in sums], [v for _, v in sums]
    return est, var


def exact_mean_per_bit(cfg, owner, hour, x, c):
    """The exact mean of the per-bit client rows over c reports a device: per device the product, over bits
    and values, of ``E_b[beta(b)^k]`` (``k`` of its sampled reports hold that value of the bit, ``beta(b) = (b -
    p_P)/(q_P - p_P)`` the debiased bit's mean given its permanent bit), with ``1 - beta`` for the OR."""
    perm = cfg.client_channels.permanent[0]
    keys = np.array([client_key(f"d{i}") for i in range(owner.max() + 1)], dtype=np.uint64)[owner]
    order = np.lexsort((report_ranks(cfg.aggregator.collection_key, keys, T0 + hour * HOUR), owner))
    beta = np.array([-perm.p, 1.0 - perm.p]) / perm.gap   # beta(0), beta(1)
    law = {0: np.array([1 - perm.p, perm.p]), 1: np.array([1 - perm.q, perm.q])}   # P(b | x)
    out = np.zeros(2)
    for d in range(owner.max() + 1):
        pick = x[order[d * 24:d * 24 + c]]
        for e, (op, bits) in enumerate(EXTREMES):
            prod = 1.0
            for i in bits:
                for v in (0, 1):
                    k = int((pick[:, i] == v).sum())
                    prod *= law[v] @ ((1.0 - beta) if op == "or" else beta) ** k
            out[e] += 1.0 - prod if op == "or" else prod
    return out


@pytest.mark.statistical
def test_per_bit_memoized_client_rows_over_two_reports_are_biased_and_refused():
    """Fixed values, c = 2: the exact mean of the rows is far from the truth (more than Z SE of 300 windows),
    the simulated windows agree with the exact mean, and the configuration is refused. On main it was
    accepted (the refusal is what failed)."""
    with pytest.raises(ValueError, match="rule memoize-client-extremes"):
        parse_config(spec("per_bit", 2))
    cfg = parse_config(spec("per_bit", 1))   # the same channels; the rows at c = 2 are built beside it
    from ldp_marginals.ldp.aggregate import ReportAggregator
    rng = np.random.default_rng(481)
    owner, hour, x = population(rng, 300, changing=False)
    want = truth(cfg, owner, hour, x, 2)
    exact = exact_mean_per_bit(cfg, owner, hour, x, 2)
    agg = ReportAggregator(cfg.family, cfg.channels, (), EXTREMES, None, cfg.aggregator.collection_key, 2)
    keys = np.array([client_key(f"d{i}") for i in range(300)], dtype=np.uint64)[owner]
    ranks = report_ranks(agg.collection_key, keys, T0 + hour * HOUR)
    est = np.array([[s for s, _ in agg.client_sums(agg.add_packed(agg.create(), noisy_packed(rng, cfg, "per_bit",
                                                                                                 owner, x), keys, None,
                                                                  ranks))] for _ in range(300)])
    spread = est.var(axis=0, ddof=1)
    assert_mean_close(est, exact, spread)   # the simulation follows the exact mean of shared permanents
    assert np.all(np.abs(exact - want) > Z * np.sqrt(spread / 300)), (exact, want)   # which is biased


@pytest.mark.statistical
@pytest.mark.parametrize("kind", sorted(CHANNELS))
@pytest.mark.parametrize("changing", [False, True])
def test_memoized_client_rows_over_one_report_a_client_are_unbiased_and_cover(kind, changing):
    """c = 1, 300 windows of 300 devices of 24 memoized reports through the job's aggregator: each row's
    mean within Z SE of the truth (SE from the mean of the variance estimates, unbiased for the variance),
    the variance estimates' mean within Z SE of the rows' spread, and 95% intervals covering within Z
    binomial SE of 300. On main the kinds' configs were refused; with the sample at 2 instead of 1 the per-bit
    rows fail the first check (the test above)."""
    cfg = parse_config(spec(kind, 1))
    rng = np.random.default_rng({"per_bit": 11, "hadamard": 12, "subset": 13}[kind] + 10 * changing)
    reps = 300
    owner, hour, x = population(rng, 300, changing)
    want = truth(cfg, owner, hour, x, 1)
    est, var = client_rows(cfg, kind, rng, owner, hour, x, reps)
    assert_mean_close(est, want, var.mean(axis=0))
    assert np.all(np.abs(var.mean(axis=0) - est.var(axis=0, ddof=1)) <= Z * var.std(axis=0) / np.sqrt(reps)
                  + Z * est.var(axis=0, ddof=1) * np.sqrt(2.0 / reps)), (var.mean(axis=0), est.var(axis=0))
    cover = (np.abs(est - want) <= 1.959964 * np.sqrt(np.maximum(var, 0.0))).mean(axis=0)
    assert np.all(np.abs(cover - 0.95) <= Z * np.sqrt(0.95 * 0.05 / reps)), cover
