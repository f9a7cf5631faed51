"""An exact rank check of the whole-report kinds' rollups (issue 48 item 4; transforms/publication/
kind_rollups.py, docs/design.md section 7 "Rollups", whole-report kinds): keys over two dimensions (k, j),
rollups over k, over j and the total, fixed windows; each key's reports are released (at least
min_reports) or withheld (fewer), its rows withheld where the thin-row rule names them
(ldp/thin_rows.py), and the rollup rows chosen and thinned by the product's own functions
(:func:`~ldp_marginals.transforms.publication.engine.rollup_decision`).

Every published row is a linear function of per-report statistics grouped by (key, draw): subset RR, a
report of subset t adds to the all-ones count of each published set within t that it sent as 1 and to one
cell of each published table within t; Hadamard sampling, a slot that drew coefficient a adds its parity to
the odd count of every published row over a set holding a (a row of S reveals each coefficient within S,
Moebius: the attacker is given them all). Which draw a report made is metadata (counts are added as rows).
A leak: (key, draw) cells holding 1 to min_reports - 1 reports together on which a combination of the
published rows, key rows and rollup rows, is supported beyond their counts. The check has power: without
the kinds' complementary rule (the rollup's own thin rows only: ``rule=False``) it finds leaks, both the
difference of a rollup and its published keys and the withheld keys' parts."""
import itertools

import numpy as np
import pytest

from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.engine import rollup_decision
from ldp_marginals.transforms.publication.hadamard_rows import analysis_sets, table_sets, thin_of_counts
from ldp_marginals.transforms.publication.kind_rollups import KindPart
from ldp_marginals.transforms.publication.rollups import marked
from tests.ldp.test_thin_rows_span import isolated_groups

M = 5
KEYS = [(("j", j), ("k", k)) for k in "ab" for j in "xy"]
ROLLUPS = [["k"], ["j"], []]


def _config(kind: str, d: int, order: int, width: int | None, tables: list):
    names = [f"b{i}" for i in range(d)]
    channel = {"kind": kind, "epsilon": 2.0} | ({"width": width} if width else {})
    return parse_config({"collection": "c", "features": [{"name": n, "type": "boolean"} for n in names],
                         "channel": channel, "max_order": order, "min_reports": M,
                         "window": {"type": "fixed", "size_seconds": 3600},
                         "groups": [[names[b] for b in t] for t in tables],
                         "dimensions": {"k": {"max_values": 4}, "j": {"max_values": 4}}, "rollups": ROLLUPS})


def _leaks(cfg, draws: list, cells_of, carries, rule: bool = True) -> list:
    """``draws``: the draw types (subset masks or coefficients); ``cells_of[key][draw]``: reports;
    ``carries(s, draw)``: the statistic columns (per pattern) of a draw that the row of set s sums, as a list
    of (pattern index) lists, one per published vector of the row (the attacker's)."""
    family = cfg.aggregator.mechanism.family

    def counts(keys):
        vec = np.zeros(len(family), dtype=np.int64)
        for i in range(1, len(family)):
            s = family[i]
            vec[i] = sum(cells_of[key][t] for key in keys for t in draws
                         if (_holds(t, s) if cfg.channel_kind == "subset" else t == s))
        return vec
    n_of = {key: sum(cells_of[key].values()) for key in KEYS}
    released = {key: n_of[key] >= M for key in KEYS}
    held = {key: 0 if released[key] else n_of[key] for key in KEYS}
    kinds = {key: KindPart(tuple(counts([key])) if released[key] and n_of[key] else (),
                           tuple(counts([key])) if not released[key] and n_of[key] else ()) for key in KEYS}
    published, extra = rollup_decision(cfg, held, kinds if rule else None)
    tables = set(table_sets(cfg)) | set(analysis_sets(cfg))
    sets = sorted(set(cfg.published_sets) | tables)
    patterns = _patterns(cfg)
    # a cell without reports has no column (nothing of it can be isolated, and a vector on it is on nothing)
    cols = [(key, t, p) for key in KEYS for t in draws for p in range(patterns) if cells_of[key][t]]
    rows = []

    def publish(keys, thin):
        for s in sets:
            if s in thin:
                continue
            for vector in carries(s, draws, s in tables):
                rows.append([float(key in keys and p in vector.get(t, ())) for key, t, p in cols])
    for key in KEYS:
        if released[key] and n_of[key]:
            publish({key}, thin_of_counts(cfg, counts([key])))
    for over in ROLLUPS:
        for row in {marked(cfg, key, tuple(over)) for key in KEYS} & published:
            keys = {key for key in KEYS if marked(cfg, key, tuple(over)) == row}
            if sum(n_of[key] for key in keys):
                publish(keys, thin_of_counts(cfg, counts(keys)) | extra.get(row, {}))
    rows += [[float((key, t) == u) for key, t, _ in cols]
             for u in itertools.product(KEYS, draws) if cells_of[u[0]][u[1]]]
    a = np.array(rows).reshape(len(rows), len(cols))
    return [group for group, _ in isolated_groups(a, [(key, t) for key, t, _ in cols],
                                                  {(key, t): cells_of[key][t] for key in KEYS for t in draws}, M,
                                                  max_size=3)]


def _holds(draw, s) -> bool:
    return set(s) <= set(draw)


def _patterns(cfg) -> int:
    return 1 << cfg.aggregator.mechanism.width if cfg.channel_kind == "subset" else 2


def _subset_carries(s, draws, table: bool):
    """A marginal of s: the patterns of each subset t holding s with s's bits 1 (one vector); a table of s
    (configured) adds one vector per cell."""
    vectors = []
    ones = {t: [p for p in range(1 << len(t)) if all(p >> t.index(b) & 1 for b in s)] for t in draws if _holds(t, s)}
    vectors.append(ones)
    for cell in range(1 << len(s)) if table else ():
        vectors.append({t: [p for p in range(1 << len(t)) if all((p >> t.index(b) & 1) == (cell >> i & 1)
                                                                 for i, b in enumerate(s))]
                        for t in draws if _holds(t, s)})
    return vectors


def _hadamard_carries(s, draws, table: bool):
    """Each coefficient a within s: its odd count (parity 1)."""
    return [{a: [1]} for a in draws if _holds(s, a)]


def _subset_case(rng):
    d = int(rng.integers(3, 5))
    w = int(rng.integers(2, d + 1))
    order = int(rng.integers(1, min(w, 2) + 1))
    pairs = list(itertools.combinations(range(d), 2)) if order >= 2 else []
    tables = [pairs[i] for i in rng.permutation(len(pairs))[:int(rng.integers(0, 2))]]
    cfg = _config("subset", d, order, w, tables)
    draws = list(itertools.combinations(range(d), w))
    cells = {key: {t: int(rng.choice([0, 1, 2, 3, 6])) for t in draws} for key in KEYS}
    return cfg, draws, cells, _subset_carries


def _hadamard_case(rng):
    d = int(rng.integers(2, 4))
    order = int(rng.integers(1, min(d, 2) + 1))
    cfg = _config("hadamard", d, order, None, [])
    draws = [s for o in range(1, order + 1) for s in itertools.combinations(range(d), o)]
    cells = {key: {a: int(rng.choice([0, 1, 2, 3, 6])) for a in draws} for key in KEYS}
    return cfg, draws, cells, _hadamard_carries


@pytest.mark.parametrize("case", [_subset_case, _hadamard_case], ids=["subset", "hadamard"])
def test_random_populations_isolate_nothing_through_rollups(case):
    """Random small populations of four keys (draw cells of 0-6 reports, min_reports 5): with the kinds'
    complementary rule no leak; without it (the rollup's own thin rows only) leaks in many (power)."""
    rng = np.random.default_rng(48)
    found, mutant = [], 0
    for _ in range(30):
        cfg, draws, cells, carries = case(rng)
        leaks = _leaks(cfg, draws, cells, carries)
        if leaks:
            found.append((cells, leaks[0]))
        mutant += bool(_leaks(cfg, draws, cells, carries, rule=False))
    assert not found, f"LEAK in {len(found)} of 30 populations, e.g. {found[:1]}"
    assert mutant >= 5, mutant


def test_a_rollup_minus_its_published_key_gives_back_nothing_of_a_thin_pair():
    """Subset RR of width 2 over 3 bits: key (a, x) holds 20 reports, ONE of them of subset (b0, b1), so its
    pair row is withheld; (a, y) holds 20, 6 of that subset. Without the rule the rollup over k publishes the
    pair on 7 reports and minus (a, y)'s row is the one report; with it the rollup withholds the pair."""
    cfg = _config("subset", 3, 2, 2, [])
    draws = list(itertools.combinations(range(3), 2))
    none = {t: 0 for t in draws}
    cells = {KEYS[0]: {(0, 1): 1, (0, 2): 10, (1, 2): 9}, KEYS[1]: {(0, 1): 6, (0, 2): 7, (1, 2): 7},
             KEYS[2]: dict(none), KEYS[3]: dict(none)}
    assert not _leaks(cfg, draws, cells, _subset_carries)
    assert ((KEYS[0], (0, 1)),) in _leaks(cfg, draws, cells, _subset_carries, rule=False)


def test_the_withheld_keys_of_a_total_give_back_nothing_of_their_thin_pair(monkeypatch):
    """(a, x) released (20 reports, 10 of subset (b0, b1)); (a, y) and (b, x) withheld (3 each, ONE of that
    subset in all): only the total is published, its withheld part 6 reports; its pair rests on 11 and
    its own rule publishes it, yet the total minus (a, x)'s row is the one withheld report's pair. The rule
    per own part withholds it; the mutation without it (no own parts) leaks."""
    cfg = _config("subset", 3, 2, 2, [])
    draws = list(itertools.combinations(range(3), 2))
    cells = {KEYS[0]: {(0, 1): 10, (0, 2): 5, (1, 2): 5}, KEYS[1]: {(0, 1): 1, (0, 2): 1, (1, 2): 1},
             KEYS[2]: {(0, 1): 0, (0, 2): 2, (1, 2): 1}, KEYS[3]: {t: 0 for t in draws}}
    assert not _leaks(cfg, draws, cells, _subset_carries)
    from ldp_marginals.transforms.publication import engine, kind_rollups
    monkeypatch.setattr(engine, "rollup_thin", lambda config, members, own, parts: kind_rollups.rollup_thin(
        config, members, {row: [] for row in own}, parts))
    assert ((KEYS[1], (0, 1)),) in _leaks(cfg, draws, cells, _subset_carries)


def test_hadamard_rollup_publishes_a_coefficient_its_keys_withhold_when_together_they_hold_enough():
    """The rule per coefficient (tighter than rule 1): (a, x) and (a, y) each withhold the pair, its
    coefficient drawn by 2 and 3 of their reports; a's rollup (and the total, the same keys) publishes the
    pair on those 5 together, the rollups over j (one key's 2 or 3) do not, and nothing leaks."""
    cfg = _config("hadamard", 2, 2, None, [])
    draws = [(0,), (1,), (0, 1)]
    none = {a: 0 for a in draws}
    cells = {KEYS[0]: {(0,): 6, (1,): 6, (0, 1): 2}, KEYS[1]: {(0,): 6, (1,): 6, (0, 1): 3},
             KEYS[2]: dict(none), KEYS[3]: dict(none)}
    assert not _leaks(cfg, draws, cells, _hadamard_carries)
    family = cfg.aggregator.mechanism.family
    counts = {k: tuple(int(cells[k].get(family[i], 0)) for i in range(len(family))) for k in KEYS}
    _, thin = rollup_decision(cfg, {k: 0 for k in KEYS}, {k: KindPart(counts[k], ()) if sum(counts[k]) else
                                                          KindPart((), ()) for k in KEYS})
    by_k, by_j = marked(cfg, KEYS[0], ("k",)), marked(cfg, KEYS[0], ("j",))
    assert (0, 1) not in thin[by_k] and (0, 1) in thin[by_j], thin
