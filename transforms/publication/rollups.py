"""Rollups and complementary suppression: which of a window's keys and rollup keys may be published
together (issue 37, item 2). The batch publication runs :func:`published_rollups` (with :func:`nested`);
:func:`suppress` is the exact search over small tables, kept as a reference.

A *cell* is a window's capped key with its count ``n`` (reports, or devices under ``privacy.unit:
device``). A rollup over dimensions ``S`` has one row per value of ``S``: the sum of the cells whose
key agrees with it on ``S`` (a cell counts in one row of each rollup). Each published row is, over the
cells, an indicator vector; a reader can form any linear combination of them, so what the published
rows reveal is their span ``V``. The promise: no nonzero vector of ``V`` is supported on cells that
hold fewer than ``min_reports`` together.

Any such vector lies on *light* cells only (``n < min_reports``: a heavy cell alone holds enough);
``dim(V n W_T) = rank(R) - rank(R without T's columns)`` for the rows ``R`` says whether one lies on
a set ``T``. :func:`isolates` merges the cells that lie in the same rows (the span cannot tell them
apart: many small keys only in their rollups are one), then checks every light set of the light cells
the span touches when they are few (:data:`EXACT_CELLS`), else conservatively any vector on light
cells; :func:`suppress` withholds rows until nothing is isolated.
Per-rollup checks are not enough once two rollups cross: cells a, b (region eu), c, d (us) with
versions 1 (a, c) and 2 (b, d), counts 10, 40, 40, 10 and ``min_reports`` 45: every rollup row and
every rollup minus its published cells holds 50, yet ``eu - v2 = a - d`` holds 20 reports.
"""
from __future__ import annotations

import itertools

import numpy as np

from ldp_marginals.schemas.collection import ROLLED_UP


def rollup_key(key: tuple, over: tuple) -> tuple:
    """The rollup row of ``key`` (sorted ``(name, value)`` pairs) over the dimensions ``over``."""
    return tuple((name, value) for name, value in key if name in over)


def rows_of(cells: dict, rollups: list) -> dict:
    """``{row: set of cells}``: each cell's own row and its row of each rollup (dimension tuples)."""
    out = {("key", cell): {cell} for cell in cells}
    for over in rollups:
        for cell in cells:
            out.setdefault(("rollup", tuple(sorted(over)), rollup_key(cell, over)), set()).add(cell)
    return out


EXACT_CELLS = 12   # light cells up to which every small set of them is checked; past it, conservative


def _rank(matrix: np.ndarray, columns: list) -> int:
    return int(np.linalg.matrix_rank(matrix[:, columns])) if columns and len(matrix) else 0


def on_cells(matrix: np.ndarray, cells: list) -> int:
    """``dim(V n W_T)``: the independent vectors of the rows' span (``matrix``) on the columns
    ``cells`` only, ``rank(R) - rank(R without those columns)``."""
    rest = [i for i in range(matrix.shape[1]) if i not in set(cells)]
    return _rank(matrix, list(range(matrix.shape[1]))) - _rank(matrix, rest)


def isolates(rows: list, cells: dict, min_reports: int) -> bool:
    """Whether the span of ``rows`` (sets of cells) holds a nonzero vector on cells of fewer than
    ``min_reports`` reports. Cells in the same rows are one (a vector of the span gives them one
    coefficient), with their reports summed; a vector on few reports lies on light merged cells
    (each below ``min_reports``) that some vector of the span on light cells touches (``touched``);
    every set of them lighter than ``min_reports`` is checked when there are at most
    :data:`EXACT_CELLS`, else any vector on light cells counts as isolating (conservative)."""
    if not rows:
        return False
    merged = {}
    for c in sorted(cells):
        column = tuple(c in row for row in rows)
        merged[column] = merged.get(column, 0) + cells[c]
    columns = list(merged)
    matrix = np.array(columns, dtype=float).T
    light = [i for i, col in enumerate(columns) if merged[col] < min_reports]
    base = on_cells(matrix, light)
    if base == 0:
        return False
    touched = [i for i in light if on_cells(matrix, [j for j in light if j != i]) < base]
    weight = {i: merged[columns[i]] for i in touched}
    if sum(weight.values()) < min_reports or len(touched) > EXACT_CELLS:
        return True
    for size in range(1, len(touched) + 1):
        for t in itertools.combinations(touched, size):
            if sum(weight[i] for i in t) < min_reports and on_cells(matrix, list(t)) > 0:
                return True
    return False


def suppress(cells: dict, rollups: list, min_reports: int) -> set:
    """The rows (of :func:`rows_of`) published: at first every row of at least ``min_reports``; then,
    while their span isolates fewer than ``min_reports`` reports (:func:`isolates`), the first
    published row (cells before rollup rows, smallest first, ties by row) whose withholding ends it,
    else the first, is withheld. Ends: each step withholds a row, and no row isolates nothing."""
    rows = rows_of(cells, rollups)
    size = {row: sum(cells[c] for c in members) for row, members in rows.items()}
    published = {row for row in rows if size[row] >= min_reports}
    while isolates([rows[r] for r in published], cells, min_reports):
        order = sorted(published, key=lambda r: (r[0] != "key", size[r], repr(r)))
        ends = [r for r in order if not isolates([rows[o] for o in published if o != r], cells, min_reports)]
        published.discard((ends or order)[0])
    return published


# -- the publication's rollups ---------------------------------------------------------------------------
# A window's capped key publishes its released content R_k (whole atoms of min_reports reports or more)
# and withholds the rest, H_k. A rollup row publishes the sum of R_k + H_k over its keys. A reader holds
# every R_k apart (its key's rows), so what a set of rollup rows adds is the span of their H parts over
# the cells H_k, whose own rows are never published. A rollup row that holds no withheld report is a sum
# of published keys, and is published. The others are chosen by :func:`nested`, not :func:`suppress`:
# suppress decides exactly only over a dozen light cells, and a window of 1,000 keys with rollups: all
# (800 withheld) ran more than 9 minutes without finishing (benchmarks/rollups.py).

def marked(config, key: tuple, over: tuple) -> tuple:
    """The key of ``key``'s row of the rollup over ``over`` as outputs write it: ``key``'s values of
    ``over`` (:func:`rollup_key`) and every other declared dimension valued
    :data:`~ldp_marginals.schemas.collection.ROLLED_UP` (so no key of a report, which cannot hold that
    value, is a rollup's)."""
    kept = dict(rollup_key(key, over))
    return tuple(sorted([(d.name, kept[d.name]) for d in config.dimensions if d.name in kept]
                        + [(d.name, ROLLED_UP) for d in config.dimensions if d.name not in over]))


def is_rollup(key) -> bool:
    """Whether a key (sorted ``(name, value)`` pairs, or a ``{name: value}`` dict) is a rollup row's."""
    values = key.values() if isinstance(key, dict) else (value for _, value in key)
    return any(value == ROLLED_UP for value in values)


def nested(cells: dict, rows: dict, min_reports: int) -> set:
    """The rows of ``rows`` (``{row: set of cells}``, in order of preference) published, each in turn
    when the published rows stay *nested* (as sets of cells, any two are disjoint or one holds the other)
    and every published row's cells outside the published rows within it hold ``min_reports`` reports
    or none (its *own part*; ``cells``: ``{cell: reports}``). Under ``privacy.unit: device`` ``cells``
    is ``{cell: frozenset of devices}`` and a part holds the devices of the union of its cells: a device
    in several of its cells (up to ``max_keys_per_device`` keys of a slice) counts once.

    Why that is enough: nested rows cut their cells into the rows' own parts, and a combination of the
    rows is constant on each own part (the sum of the coefficients of the part's row and the rows around
    it), so a nonzero combination is nonzero on a whole own part: ``min_reports`` reports. Rows that
    cross (a region's and a version's, both with withheld keys) are not published together: the first in
    the order is."""
    order = sorted(cells)
    bit = {c: 1 << i for i, c in enumerate(order)}

    by_device = any(isinstance(v, (set, frozenset)) for v in cells.values())

    def mass(mask: int) -> int:
        total, devices = 0, set()
        while mask:
            low = mask & -mask
            if by_device:
                devices |= cells[order[low.bit_length() - 1]]
            else:
                total += cells[order[low.bit_length() - 1]]
            mask ^= low
        return len(devices) if by_device else total

    own = {}   # published mask -> its own part (mask)
    chosen = set()
    for row, members in rows.items():
        mask = 0
        for c in members:
            mask |= bit[c]
        if mask in own:   # the same combination of cells as a published row: nothing new
            chosen.add(row)
            continue
        if mass(mask) < min_reports or any(p & mask and p & ~mask and mask & ~p for p in own):
            continue
        within = 0
        for p in own:
            if not p & ~mask:
                within |= p
        part = mask & ~within
        around = [p for p in own if not mask & ~p]
        parent = min(around, key=int.bit_count) if around else None   # the rows around it are a chain
        rest = own[parent] & ~mask if parent is not None else 0
        if 0 < mass(part) < min_reports or 0 < mass(rest) < min_reports:
            continue
        own[mask] = part
        if parent is not None:
            own[parent] = rest
        chosen.add(row)
    return chosen


def own_parts(rows: dict, chosen) -> dict:
    """``{chosen row: [own part]}``: for each row of ``chosen`` (a nested family, :func:`nested`, of the
    rows ``{row: set of cells}``), the own parts (frozensets of cells) of it and of every chosen row within
    it, each a row's cells outside the chosen rows inside it, empty ones left out: the cells any combination
    of the chosen rows is constant on (the whole-report kinds' rule per part, :mod:`.kind_rollups`)."""
    sets = {row: frozenset(rows[row]) for row in chosen}
    distinct = set(sets.values())
    own = {m: m - frozenset().union(*(o for o in distinct if o < m)) for m in distinct}
    return {row: [own[o] for o in distinct if o <= sets[row] and own[o]] for row in chosen}


def published_rollups(config, held: dict) -> set:
    """The marked keys (:func:`marked`) of the rollup rows a window publishes, from ``held``: ``{capped
    key: withheld reports}`` over every capped key the window holds (0 for a key all of whose reports
    are released): every rollup row without withheld reports, and of the others those :func:`nested`
    chooses over the withheld parts, finer rollups first (more dimensions kept), then in the order the
    config lists them, then the rows holding more withheld reports first. Under ``privacy.unit:
    device`` ``held`` is ``{capped key: the devices of its withheld reports}`` (any collection of device
    keys, :func:`~ldp_marginals.ldp.aggregate.kept_devices`; empty for a key whose reports are all
    released), and parts weigh their distinct devices (docs/design.md, section 7, "Rollups")."""
    return rollup_plan(config, held)[0]


def rollup_plan(config, held: dict) -> tuple:
    """``(published, members, parts)``: :func:`published_rollups`' marked keys; ``{marked key: its capped
    keys}`` of every rollup row; ``{marked key: [own part]}`` of the published rows, each own part (of
    the row or of a published row within it) a frozenset of withheld capped keys (:func:`own_parts`; none
    for a row without withheld reports)."""
    if not config.rollups:
        return set(), {}, {}
    if config.counts_devices:
        cells = {key: frozenset(int(d) for d in devs) for key, devs in held.items() if len(devs)}
    else:
        cells = {key: n for key, n in held.items() if n > 0}
    members, keys = {}, {}   # (rollup, marked key) -> its withheld cells; marked key -> its capped keys
    for i, over in enumerate(config.rollups):
        for key in held:
            members.setdefault((i, marked(config, key, over)), set())
            keys.setdefault(marked(config, key, over), set()).add(key)
        for key in cells:
            members[(i, marked(config, key, over))].add(key)
    out = {row for (_, row), inside in members.items() if not inside}
    weight = {rk: (len(frozenset().union(*(cells[c] for c in inside))) if config.counts_devices
                   else sum(cells[c] for c in inside)) for rk, inside in members.items()}
    candidates = sorted((rk for rk, inside in members.items() if inside),
                        key=lambda rk: (-len(config.rollups[rk[0]]), rk[0], -weight[rk], rk[1]))
    chosen = nested(cells, {rk: members[rk] for rk in candidates}, config.min_reports)
    parts = own_parts(members, chosen)
    own = {row: [] for row in out}
    for rk in chosen:
        own[rk[1]] = parts[rk]
    return out | {row for _, row in chosen}, keys, own
