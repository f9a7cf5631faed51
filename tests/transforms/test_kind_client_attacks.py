"""Attacks on the client rows of a whole-report kind, as a reader of the outputs differences published rows
(docs/design.md, "Extremes over clients of the whole-report kinds"). A Hadamard report is read by a client
row only through its slots that drew a coefficient within the extreme's bits, and those draws are what the
kind's rows publish (the thin-row rule treats them as metadata), so:

1. the marginal row of bit q0 minus the client row of an OR over q0 leaves the reads the client rows leave
   out: one report without a client that drew q0 among nine that did not (the sample rule, which counts
   parties, lets them pass) gives back that report's randomized parity;
2. OR minus AND over q0 (c = 2) cancels every client's linear terms and keeps, per client whose two
   reports both drew q0, the product of their parities: one such client among forty is isolated.

Each is published, and its leak recomputed exactly from the rows, with the kinds' reads rule switched
off (the mutation), and withheld by the rule."""
import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication import release
from ldp_marginals.transforms.publication.rows import window_blocks

DAY = 86_400_000


def config(c, extremes) -> object:
    """``c``: reports_per_client (the sample rule), or None (the groups rule)."""
    return parse_config({"collection": "fleet", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(4)],
                         "channel": {"kind": "hadamard", "epsilon": 2.0}, "max_order": 2,
                         "window": {"type": "fixed", "size_seconds": 86400}, "min_reports": 5,
                         "extremes": extremes, **({} if c is None else {"reports_per_client": c})})


def window(cfg, indices, parities, owners):
    """The accumulator of reports with the given coefficient ``indices`` (one slot each), ``parities`` and
    client ``owners`` (None: no client)."""
    assert cfg.sampling.slots == 1
    agg = cfg.aggregator
    packed = agg.format.pack(np.array(indices)[:, None], np.array(parities)[:, None])
    named = np.array([o is not None for o in owners])
    keys = np.array([client_key(o) if o is not None else 0 for o in owners], dtype=np.uint64)
    ranks = report_ranks(agg.collection_key, keys, np.arange(len(owners), dtype=np.int64))
    return agg.add_packed(agg.create(), packed, keys, named, ranks)


def published(cfg, acc) -> dict:
    out = {}
    for kind, rows in window_blocks(cfg, (), acc, (0, DAY)):
        out.setdefault(kind, []).extend(list(rows))
    return out


def _no_reads_rule(monkeypatch):
    monkeypatch.setattr(release, "kind_client_rule", lambda *a, **k: None)


@pytest.mark.parametrize("c", [1, None])
@pytest.mark.parametrize("mutated", [True, False])
def test_marginal_minus_client_row_gives_back_an_unread_report(monkeypatch, mutated, c):
    """With the sample rule (c = 1) and the groups rule (no sample): both let ten reports without a client
    pass, of which one drew q0."""
    cfg = config(c, [{"name": "any", "op": "or", "bits": ["q0"], "over": "client"}])
    fam, mech = cfg.sampling.family, cfg.sampling
    q0, other = fam.index((0,)), fam.index((1,))
    rng = np.random.default_rng(7)
    lone = 1   # the parity the attack recovers
    indices = [q0] * 30 + [other] * 30 + [q0] + [other] * 9
    parities = list(rng.integers(0, 2, 60)) + [lone] + list(rng.integers(0, 2, 9))
    owners = [f"c{i}" for i in range(60)] + [None] * 10
    acc = window(cfg, indices, parities, owners)
    if mutated:
        _no_reads_rule(monkeypatch)
    rows = published(cfg, acc)
    client = [r for r in rows.get("extremes", []) if r["name"] == "any"]
    if not mutated:
        assert client == []
        (held,) = [r for r in rows["withheld"] if r["statistic"] == "client_extremes"]
        assert "reads of the extremes' draws that the client rows leave out" in held["reason"]
        return
    (row,) = client
    (marg,) = [r for r in rows["marginals"] if list(r["columns"]) == [0]]
    n, c, w = marg["n_reports"], mech.scale, mech.probabilities[q0 - 1]
    drawn = 31   # the reports that drew q0: metadata the rows publish (the marginal's variance is a function of it)
    theta = 1 - 2 * marg["estimate"] / n                      # the marginal is N (1 - theta_q0) / 2
    signs_all = drawn * theta / c                               # the sum of every q0 slot's sign
    signs_kept = (row["n"] / 2 - row["estimate"]) * 2 * w / c   # the client row is sum (1 - g), g = 1/2 + c s / (2 w)
    assert signs_all - signs_kept == pytest.approx(1 - 2 * lone, abs=1e-9)


@pytest.mark.parametrize("mutated", [True, False])
def test_or_minus_and_isolates_a_client_read_alike_by_none(monkeypatch, mutated):
    cfg = config(2, [{"name": "any", "op": "or", "bits": ["q0"], "over": "client"},
                     {"name": "all", "op": "and", "bits": ["q0"], "over": "client"}])
    fam, mech = cfg.sampling.family, cfg.sampling
    q0, other = fam.index((0,)), fam.index((1,))
    rng = np.random.default_rng(8)
    s1, s2 = 1, 0   # client 0's two parities
    indices, parities, owners = [q0, q0], [s1, s2], ["c0", "c0"]
    for i in range(1, 40):
        indices += [q0 if i <= 20 else other, other]
        parities += list(rng.integers(0, 2, 2))
        owners += [f"c{i}"] * 2
    acc = window(cfg, indices, parities, owners)
    if mutated:
        _no_reads_rule(monkeypatch)
    out = published(cfg, acc)
    rows = {r["name"]: r for r in out.get("extremes", [])}
    if not mutated:
        assert rows == {}
        (held,) = [r for r in out["withheld"] if r["statistic"] == "client_extremes"]
        assert "1 group(s) of clients whose reports' draws read the extremes alike" in held["reason"]
        return
    c, w = mech.scale, mech.probabilities[q0 - 1]
    # per client OR - AND = 1 - g0 g0' - g1 g1' = 1/2 - t t' / 2, t = c s / w on a q0 slot (0 elsewhere)
    product = (rows["any"]["n"] / 2 - (rows["any"]["estimate"] - rows["all"]["estimate"])) * 2 * (w / c) ** 2
    assert product == pytest.approx((1 - 2 * s1) * (1 - 2 * s2), abs=1e-9)


@pytest.mark.parametrize("c", [1, None])
def test_reads_are_grouped_atom_by_atom(monkeypatch, c):
    """Two released increments (a streaming window's on-time and late atoms): 30 clients drew q0 in the
    first, 4 in the second (among 30 clients there). A client's reads in the second atom are differenced
    from the first by the panes, so its profile carries the atom: the 4 are a group of their own, below
    min_reports, and the client rows are withheld; with the atom not folded in (the mutation) they would
    be grouped with the 30 and published."""
    cfg = config(c, [{"name": "any", "op": "or", "bits": ["q0"], "over": "client"}])
    fam = cfg.sampling.family
    q0, other = fam.index((0,)), fam.index((1,))
    rng = np.random.default_rng(9)
    first = window(cfg, [q0] * 30 + [other] * 30, rng.integers(0, 2, 60), [f"a{i}" for i in range(60)])
    second = window(cfg, [q0] * 4 + [other] * 26, rng.integers(0, 2, 30), [f"b{i}" for i in range(30)])
    agg = cfg.aggregator
    acc = agg.merge([agg.create(), first, second])

    def client_rows():
        return [r for kind, rows in window_blocks(cfg, (), acc, (0, DAY), atoms=[first, second])
                if kind == "extremes" for r in rows]
    assert client_rows() == []
    if c is None:   # the groups rule's rows already carry each client's reports per atom
        return
    from ldp_marginals.ldp import kind_client_extremes
    monkeypatch.setattr(kind_client_extremes, "atom_profiles", lambda h, atom: h)
    assert [r["name"] for r in client_rows()] == ["any"]
