"""An exact rank test of the rows a job publishes with extremes over clients on MEMOIZED channels at
``reports_per_client: 1`` under the device unit (rule memoize-client-extremes, schemas/composition.py;
docs/design.md, "Extremes over clients and memoized channels"), for per-bit rappor and the kinds ``hadamard``
and ``subset``.

A memoized device repeats its permanent response: the attacker's best case is an instantaneous stage that adds
nothing, so every report of a device carries the same bit (per bit: q0; hadamard, one slot: the same coefficient
drawn and the same parity; subset: the same subset and pattern). The variables are then one per DEVICE (its
permanent q0 bit, or its permanent parity), and a device's several reports enter the rows as the same variable
several times: the linear rows count it once per report, the client rows (one report a client, by rank) once.

The rows are those the real publication engine publishes for the window (``batch_window``: the release rule, the
thin-row rule, the client sample and the kinds' reads rule), recomputed at chosen values of the variables. Every
estimate and variance field of every published row is affine in the variables here (one-bit extremes, one report a
client), which the test checks at random points; a kind's marginal variance is not affine in the parities (a
plug-in variance), so the kinds' marginals enter by their estimates only (a gap). The published fields are then a
matrix ``J`` (field x device) and an offset, and the attacker's combinations its row space. A leak: a group of
fewer than ``min_reports`` devices on whose columns alone a nonzero combination is supported (``rank J - rank J[:,
not group] > 0``). Which rows publish must not depend on the variables either (it reads only metadata): asserted at
every point.

The test found a leak on main (2 of 6 random populations at each seed): devices that sent another number of
memoized reports than most are singled out by ``marginal - k x client row``; the rule now groups the devices by
their reports per atom (``release.memoized_groups_fault``). With it, no leak; four mutations are caught: that
grouping off (main), the client sample's left-out check off (per bit), ``min_reports`` counting reports instead of
devices (a device's repeated reports pass the release threshold), and the kinds' reads rule off with the grouping
(hadamard)."""
import itertools

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import WITHHELD
from ldp_marginals.transforms.publication import engine, release

T0 = 1_767_225_600_000   # a day's start (ms)
HOUR = 3_600_000
AFFINE = ("estimate", "variance")   # the fields the others (intervals, errors) are functions of; a kind's
# marginal variance is not affine in the parities (a plug-in): the kind's marginals give their estimates only
# (the client rows both fields)
CHANNELS = {"per_bit": {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True},
            "hadamard": {"kind": "hadamard", "epsilon": 4.0, "slots": 1, "memoize": True, "epsilon_1": 1.0},
            "subset": {"kind": "subset", "epsilon": 4.0, "width": 2, "memoize": True, "epsilon_1": 1.0}}


def config(kind: str, m: int, per_device: int):
    return parse_config({
        "collection": "memo", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(3)],
        "channel": CHANNELS[kind], "max_order": 2, "window": {"type": "fixed", "size_seconds": 86400},
        "min_reports": m, "reports_per_client": 1,
        "extremes": [{"name": "any", "op": "or", "bits": ["q0"], "over": "client"},
                     {"name": "all", "op": "and", "bits": ["q0"], "over": "client"}],
        "privacy": {"unit": "device", "max_reports_per_device": per_device}})


def publish(cfg, kind: str, reports: list, draws: list, x) -> dict:
    """``{(kind, row #, field): value}`` of the window's published rows (withheld rows by reason), the
    devices' variables ``x`` (0/1 or any real: the rows' affine extension); ``reports[d]``: device d's
    reports, ``draws[d]``: its memoized coefficient (hadamard), every report of a device the same."""
    owner = np.repeat(np.arange(len(reports)), reports)
    agg = cfg.aggregator
    if kind == "per_bit":
        packed = np.zeros((owner.size, cfg.layout.n_bytes), dtype=np.uint8)
        bits = np.asarray(x, dtype=np.float64)[owner]
        if not np.isin(bits, (0.0, 1.0)).all():
            raise ValueError(f"per-bit variables must be 0/1, got x={x}")
        packed[:, 0] = bits.astype(np.uint8)   # q0 is bit 0: the permanent response repeated
    elif kind == "hadamard":
        fam = agg.mechanism.family
        index = np.array([fam.index(draws[d]) for d in owner], dtype=np.int64)[:, None]
        parity = np.asarray(x)[owner][:, None]
        packed = agg.format.pack(index, parity.astype(np.int64))
    else:   # subset: the memoized subset and the q0 bit of its pattern (when the subset holds q0)
        subsets = np.array([sum(1 << b for b in draws[d]) for d in owner], dtype=np.int64)
        patterns = np.asarray(x, dtype=np.int64)[owner] * (subsets & 1)
        packed = agg.format.pack(subsets, patterns)
    keys = np.array([client_key(f"dev-{d}") for d in owner], dtype=np.uint64)
    times = T0 + np.arange(owner.size, dtype=np.int64) * (HOUR // 4)   # distinct stamps: ranks never tie
    acc = agg.settle(agg.add_devices(agg.create_open(), packed, keys, times))
    start = cfg.window.slice_of(T0)
    (window,) = cfg.window.windows_of_slice(start)
    out = {}
    for key, kinds in engine.batch_window(cfg, window, [(start, (), acc)]).items():
        for k, rows in kinds.items():
            for i, row in enumerate(rows):
                if k == WITHHELD:
                    out[(k, i, row["statistic"], row["reason"])] = 0.0
                    continue
                for f in AFFINE:
                    if f in row and row[f] is not None and (kind == "per_bit" or f == "estimate" or k != "marginals"):
                        value = float(row[f])
                        out[(k, i, f)] = value if np.isfinite(value) else repr(value)   # nan/inf: no reads
    return out


def fields_matrix(kind: str, m: int, reports: list, draws: list | None = None, seed: int = 0) -> tuple:
    """``(J, published)``: the published fields' coefficients per device variable (field x device), and the
    set of published row kinds (withheld excluded). Per-bit variables are 0/1, so affinity is checked at
    random 0/1 points; the kind's parities are too (its packer takes 0/1)."""
    cfg = config(kind, m, max(reports))
    draws = draws or [(0,)] * len(reports)
    n = len(reports)
    base = publish(cfg, kind, reports, draws, np.zeros(n, dtype=np.int64))
    names = sorted(base)
    cols = []
    for d in range(n):
        e = np.zeros(n, dtype=np.int64)
        e[d] = 1
        got = publish(cfg, kind, reports, draws, e)
        assert sorted(got) == names, "which rows publish (or why they are withheld) read a device's bits"
        assert all(isinstance(got[k], str) == isinstance(base[k], str) for k in names)
        cols.append([0.0 if isinstance(base[k], str) else got[k] - base[k] for k in names])
    jac = np.array(cols, dtype=np.float64).T.reshape(len(names), n)
    rng = np.random.default_rng(seed)
    for _ in range(3):   # the fields are affine in the devices' variables (else J is not the attacker's span)
        x = rng.integers(0, 2, n)
        got = publish(cfg, kind, reports, draws, x)
        assert sorted(got) == names, "which rows publish read the devices' bits"
        assert all(isinstance(got[k], str) == isinstance(base[k], str) for k in names)
        num = [j for j, k in enumerate(names) if not isinstance(base[k], str)]
        want = np.array([base[names[j]] for j in num]) + jac[num] @ x
        np.testing.assert_allclose([got[names[j]] for j in num], want, rtol=1e-9, atol=1e-9)
    return jac, {k[0] for k in names if k[0] != WITHHELD}


def isolated(jac: np.ndarray, m: int) -> list:
    """Groups of fewer than ``m`` devices on whose variables alone some combination of the published fields
    is supported (and is not 0)."""
    if jac.size == 0:
        return []
    norms = np.linalg.norm(jac, axis=1)
    a = jac[norms > 1e-12] / norms[norms > 1e-12, None]   # scale-free: estimates and variances mixed
    if a.size == 0:
        return []
    full = np.linalg.matrix_rank(a)
    n = a.shape[1]
    out = []
    for size in range(1, min(m - 1, n) + 1):
        for group in itertools.combinations(range(n), size):
            rest = [j for j in range(n) if j not in group]
            if full - (np.linalg.matrix_rank(a[:, rest]) if rest else 0) > 0:
                out.append(group)
    return out


# -- per-bit rappor (memoize: true) ---------------------------------------------------------------------

def _no_left_out_check(monkeypatch):
    """The mutation: the client sample's check of the reports it leaves out, off."""
    original = release.sample_rule

    def mutated(config, atoms):
        reason = original(config, atoms)
        return None if reason and "leave out" in reason else reason
    monkeypatch.setattr(release, "sample_rule", mutated)


@pytest.mark.parametrize("mutated", [False, True])
def test_per_bit_devices_past_their_sampled_report_are_not_singled_out(monkeypatch, mutated):
    """Two devices send 3 memoized reports, ten send 1 (min_reports 4): the marginal of q0 counts the two
    three times, the client rows (one report a device) once, so marginal - (q - p) x client row = 2 (x_0 + x_1):
    the two devices' permanent bits. The sample rule withholds the client rows (2 devices with reports left
    out); with its left-out check off (the mutation), the rows publish and isolate exactly {0, 1}."""
    if mutated:
        _no_left_out_check(monkeypatch)
    jac, published = fields_matrix("per_bit", 4, [3, 3] + [1] * 10)
    assert "marginals" in published
    if not mutated:
        assert "extremes" not in published
        assert isolated(jac, 4) == []
        return
    assert "extremes" in published
    assert (0, 1) in isolated(jac, 4)


def test_per_bit_client_rows_publish_and_isolate_nobody():
    """Every device sends 2 memoized reports (min_reports 4, eight devices): the client rows publish beside
    the marginals, and no combination isolates fewer than 4 devices, although the marginal counts each
    permanent bit twice and the client rows once."""
    jac, published = fields_matrix("per_bit", 4, [2] * 8)
    assert {"marginals", "extremes"} <= published
    assert isolated(jac, 4) == []


@pytest.mark.parametrize("mutated", [False, True])
def test_repeated_reports_do_not_pass_the_release_threshold(monkeypatch, mutated):
    """Three devices send 4 memoized reports each (12 reports, min_reports 5): under the device unit the window
    is not released. With min_reports counting reports (the mutation) the marginal 4 (x_0 + x_1 + x_2) would
    publish the three devices' permanent bits."""
    if mutated:
        monkeypatch.setattr(engine, "releasable", lambda config, acc: acc.n >= config.min_reports)
    jac, published = fields_matrix("per_bit", 5, [4, 4, 4])
    if not mutated:
        assert published == set() and isolated(jac, 5) == []
        return
    assert "marginals" in published
    assert (0, 1, 2) in isolated(jac, 5)


def _no_memoized_groups(monkeypatch):
    """The mutation: the rule's groups of devices by their numbers of memoized reports, off (main before it)."""
    monkeypatch.setattr(release, "memoized_groups_fault", lambda *a, **k: None, raising=False)   # absent on main


@pytest.mark.parametrize("mutated", [False, True])
def test_devices_that_sent_another_number_of_reports_are_not_singled_out(monkeypatch, mutated):
    """Found by the random populations below on main (seed 0): seven devices send 2 memoized reports, two send
    3 and one sends 1 (min_reports 4). The sample keeps every device and leaves out reports of 9 devices
    (>= 4), so the sample rule let the client rows publish; but marginal - 2 (q - p) x client row =
    x_2 + x_7 - x_9: the devices that did not send 2 reports, 3 of them. The rule now groups devices by their
    reports (per atom) and withholds the client rows; without it (the mutation, main) the leak."""
    if mutated:
        _no_memoized_groups(monkeypatch)
    jac, published = fields_matrix("per_bit", 4, [2, 2, 3, 2, 2, 2, 2, 3, 2, 1])
    assert "marginals" in published
    if not mutated:
        assert "extremes" not in published and isolated(jac, 4) == []
        return
    assert "extremes" in published
    assert (2, 7, 9) in isolated(jac, 4)


@pytest.mark.parametrize("seed", range(4))
def test_per_bit_random_populations_isolate_nobody(monkeypatch, seed):
    """Random small populations (5-12 devices of 1-3 memoized reports, most of one number, min_reports 2-4): no
    leak with the rule, client rows published in some; with the memoized groups off (main) leaks are found (the
    power: 2 of 6 populations leak at each of the seeds 0-3 on main)."""
    rng = np.random.default_rng(seed)
    found, clients, mutant = [], 0, 0
    for _ in range(6):
        n, m = int(rng.integers(5, 13)), int(rng.integers(2, 5))
        reports = [int(rng.integers(1, 4))] * n   # a common number of reports, and 0-3 devices of another
        for d in rng.permutation(n)[:int(rng.integers(0, 4))]:
            reports[d] = int(rng.integers(1, 4))
        jac, published = fields_matrix("per_bit", m, reports, seed=seed)
        clients += "extremes" in published
        if isolated(jac, m):
            found.append((reports, m, isolated(jac, m)))
        with monkeypatch.context() as mp:
            _no_memoized_groups(mp)
            mutant += bool(isolated(fields_matrix("per_bit", m, reports, seed=seed)[0], m))
    assert not found, f"LEAK: {found}"
    assert clients >= 1 and mutant >= 1, (clients, mutant)


# -- hadamard (memoize: true, one slot) ------------------------------------------------------------------

def _no_reads_rule(monkeypatch):
    monkeypatch.setattr(release, "kind_client_rule", lambda *a, **k: None)


@pytest.mark.parametrize("mutated", [False, True])
def test_hadamard_few_devices_read_by_the_extremes_are_not_singled_out(monkeypatch, mutated):
    """Two devices' memoized coefficient is q0 (the only one the extremes read), twelve devices' is q1 or
    (q1, q2); two reports each, min_reports 3. The client rows are a constant plus the two devices' parities:
    the reads rule withholds them (a group of 2 clients read alike); with it off (the mutation) they publish
    and isolate exactly {0, 1} (the marginal of q0, resting on 2 devices, is withheld by the thin-row rule).
    The memoized groups (the devices' reads per atom) withhold them too: the mutation switches off both."""
    if mutated:
        _no_reads_rule(monkeypatch)
        _no_memoized_groups(monkeypatch)
    draws = [(0,), (0,)] + [(1,), (1, 2)] * 6
    jac, published = fields_matrix("hadamard", 3, [2] * 14, draws)
    if not mutated:
        assert "extremes" not in published and isolated(jac, 3) == []
        return
    assert "extremes" in published
    assert (0, 1) in isolated(jac, 3)


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_kind_client_rows_publish_and_isolate_nobody(kind):
    """Hadamard: eight devices memoize q0, six q1, six (q0, q1); two reports each, min_reports 3: the client rows
    publish (two groups read alike, of 8 and 6 devices: the coefficient (q0, q1) is not read by an extreme over q0)
    (subset: (q0, q1), (q1, q2), (q0, q2): 14 devices read alike, 6 not)
    and no combination of published fields isolates fewer than 3 devices."""
    draws = [(0,)] * 8 + [(1,)] * 6 + [(0, 1)] * 6 if kind == "hadamard" else [(0, 1)] * 8 + [(1, 2)] * 6 + [(0, 2)] * 6
    jac, published = fields_matrix(kind, 3, [2] * 20, draws)
    assert {"marginals", "extremes"} <= published
    assert isolated(jac, 3) == []


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
@pytest.mark.parametrize("mutated", [False, True])
def test_a_kind_device_that_sent_one_more_report_is_not_singled_out(monkeypatch, mutated, kind):
    """Eight devices memoize q0 (hadamard: the coefficient q0; subset: the subset (q0, q1)) and send 2 reports,
    one memoizes it and sends 3, eight memoize q1 (subset: (q1, q2)); min_reports 3, at most 3 reports a
    device. The reads rule passes (9 clients read alike; the reads past the sample, 10, reach 3 x 3), but the
    marginal of q0 counts device 8's value three times and the others' twice: marginal - 2 x (client row)
    isolates device 8. Withheld by the memoized groups; on main (the mutation) published."""
    if mutated:
        _no_memoized_groups(monkeypatch)
    draws = [(0,) if kind == "hadamard" else (0, 1)] * 9 + [(1,) if kind == "hadamard" else (1, 2)] * 8
    jac, published = fields_matrix(kind, 3, [2] * 8 + [3] + [2] * 8, draws)
    assert "marginals" in published
    if not mutated:
        assert "extremes" not in published and isolated(jac, 3) == []
        return
    assert "extremes" in published
    assert (8,) in isolated(jac, 3)
