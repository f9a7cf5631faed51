"""Rollups of the whole-report kinds (``hadamard``, ``subset``): which rows of a published rollup row are
withheld because they would give back rows its keys withhold (issue 48 item 4; docs/design.md, section 7,
"Rollups", "Whole-report kinds").

:func:`~.rollups.rollup_plan` chooses a window's rollup rows from the capped keys' withheld counts, as for
per-bit channels; under these kinds a rollup row publishes, per set of bits, a function of the sum of its
keys' released (``R_k``) and withheld (``H_k``) content, and a key may have withheld a row of its own
released content for resting on few reports (:mod:`~ldp_marginals.ldp.thin_rows`). So a rollup row withholds
the set S (its marginal, table or analysis) when

1. a key it sums that released content withholds S (the rollup minus its published keys would be that
   key's row of S): then every published rollup row's released part of S is a sum of published key rows
   of S, and adds nothing a reader does not hold; or
2. the rule of :mod:`~ldp_marginals.ldp.thin_rows` (the family rule over every configured row) names S on
   the withheld reports of one *own part* inside the row (:func:`~.rollups.nested`): a combination of the
   published rollup rows is constant on each own part, so on one own part it is a combination of the rows
   of the sets published by the rollup rows around it, all of which that part's rule leaves (fewer rows
   isolate no more), so on each monomial (subset) or coefficient (hadamard) it isolates 0 or at least
   ``min_reports`` (x R under the device unit) of the part's reports.

``hadamard`` replaces 1 and 2 by a tighter rule per coefficient (:func:`_per_coefficient`).

The rule reads counts only (:func:`~.hadamard_rows.thin_counts`: which coefficient or subset each report
drew, content-blind), which add across reports, so a part's counts are the sum of its keys'.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ldp_marginals.ldp.thin_rows import Thin, _subsets
from ldp_marginals.schemas.collection import ROLLED_UP
from ldp_marginals.transforms.publication.hadamard_rows import (analysis_sets, atoms_thin_sets, set_index, table_sets,
                                                               thin_counts, thin_of_counts)
from ldp_marginals.transforms.publication.rollups import nested


class KindPart(NamedTuple):
    """What a capped key (or one of its keys) tells its rollups under a whole-report kind: the thin-row
    counts (:func:`~.hadamard_rows.thin_counts`) of its released content and of its withheld content
    (``()``: none), and the sets thin in one of its released atoms (streaming, where panes difference)."""

    released: tuple
    held: tuple
    atom_thin: tuple = ()


def kind_part(config, released, held, atoms=()) -> KindPart:
    """The :class:`KindPart` of a key's ``released`` and ``held`` accumulators (or None) and, where its
    rows are decided per atom, its released ``atoms`` (accumulators)."""
    def counts(acc):
        if acc is None or not acc.n:
            return ()
        return tuple(int(c) for c in thin_counts(config, config.aggregator.settle(acc)))
    return KindPart(counts(released), counts(held), tuple(sorted(atoms_thin_sets(config, atoms)) if atoms else ()))


def merge_kind_parts(parts) -> KindPart:
    """The :class:`KindPart` of several keys' parts (a capped key's, or a part's): counts added, atoms'
    thin sets united."""
    released, held, thin = None, None, set()
    for p in parts:
        if p.released:
            released = np.asarray(p.released, dtype=np.int64) + (0 if released is None else released)
        if p.held:
            held = np.asarray(p.held, dtype=np.int64) + (0 if held is None else held)
        thin |= {tuple(s) for s in p.atom_thin}
    as_tuple = (lambda c: () if c is None else tuple(int(x) for x in c))  # noqa: E731
    return KindPart(as_tuple(released), as_tuple(held), tuple(sorted(thin)))


def rollup_thin(config, members: dict, own_parts: dict, parts: dict) -> dict:
    """``{marked key: {set of bits: Thin}}`` of each published rollup row (``own_parts``, from
    :func:`~.rollups.rollup_plan` with ``members``, its capped keys): the sets it withholds (module
    docstring). ``parts``: ``{capped key: KindPart}``."""
    of_key, of_part = {}, {}   # a key is in a row of each rollup, an own part in every row around it: once each
    index_of = set_index(config)

    def key_thin(key) -> dict:
        if key not in of_key:
            part = parts.get(key)
            named = {}
            if part is not None and part.released:
                named = dict(thin_of_counts(config, part.released, index_of))
                named.update({tuple(s): named.get(tuple(s), Thin(0, "one of its released increments rests on too "
                                                                    "few reports")) for s in part.atom_thin})
            of_key[key] = {s: Thin(t.reports, f"a key it sums withholds it ({t.why}), and the rollup minus its "
                                              "other published keys would give that row back")
                           for s, t in named.items()}
        return of_key[key]

    def part_thin(cells) -> dict:
        if cells not in of_part:
            held = [parts[k].held for k in cells if k in parts and parts[k].held]
            of_part[cells] = {} if not held else {
                s: Thin(t.reports, f"on the withheld reports of {len(cells)} key(s) it sums, {t.why}")
                for s, t in thin_of_counts(config, np.sum(np.asarray(held, dtype=np.int64), axis=0), index_of).items()}
        return of_part[cells]

    if config.channel_kind == "hadamard":
        return _per_coefficient(config, members, own_parts, parts, key_thin, index_of)
    out = {}
    for row, own in own_parts.items():
        thin = {}
        for named in [key_thin(key) for key in sorted(members.get(row, ()))] + [part_thin(c) for c in own]:
            for s, t in named.items():
                if s not in thin or t.reports < thin[s].reports:
                    thin[s] = t
        out[row] = thin
    return out


def _per_coefficient(config, members: dict, own_parts: dict, parts: dict, key_thin, index_of) -> dict:
    """Hadamard sampling: each coefficient is its own statistic (parities of distinct coefficients are
    independent functions of a report), so the rule runs per coefficient ``a``, tighter than rule 1. A key
    *reveals* ``a`` when it publishes a row over a set holding ``a`` (the reader is given the key's ``a`` on
    its released reports); its *hidden* part of ``a`` is its withheld reports' draws of ``a``, and its
    released reports' too where it does not reveal ``a``. The published rollup rows carrying ``a`` must be
    nested over the keys with a hidden part, each own part holding 0 or at least ``min_reports`` (x R)
    draws of ``a`` (:func:`~.rollups.nested` over those counts; a subfamily of a nested family is nested and
    its own parts are unions of own parts); a row with no hidden part is a sum of revealed ones. A key whose
    rows some released increment withholds (streaming, ``atom_thin``) hides ``a`` per increment, which this
    does not model: no rollup row holding it publishes a set over ``a`` (rule 1). A row publishes a set
    only where every coefficient within it is accepted."""
    floor = config.min_reports * (config.repeats_per_window if config.counts_devices else 1)
    sets = sorted({tuple(s) for s in list(config.published_sets) + table_sets(config) + analysis_sets(config)})
    coefficients = sorted({a for s in sets for a in _subsets(s)})
    revealed, blocked = {}, {}
    for key, part in parts.items():
        withheld = set(key_thin(key))
        revealed[key] = {a for s in sets if s not in withheld for a in _subsets(s)} if part.released else set()
        blocked[key] = {a for t in part.atom_thin for a in _subsets(tuple(t))}
    order = sorted(own_parts, key=lambda row: (sum(v == ROLLED_UP for _, v in row), row))   # finer rows first
    accepted = {}
    for a in coefficients:
        i = index_of(a)
        hidden = {}
        for key, part in parts.items():
            n = (part.held[i] if part.held else 0) + (part.released[i] if part.released and a not in revealed[key]
                                                       else 0)
            if n:
                hidden[key] = int(n)
        rows = {row: set(members.get(row, ())) & set(hidden) for row in order
                if not any(a in blocked.get(k, ()) for k in members.get(row, ()))}
        accepted[a] = {row for row, inside in rows.items() if not inside} | nested(
            hidden, {row: inside for row, inside in rows.items() if inside}, floor)
    out = {}
    for row in own_parts:
        out[row] = {}
        for s in sets:
            missing = [a for a in _subsets(s) if row not in accepted[a]]
            if missing:
                a = min(missing, key=len)
                out[row][s] = Thin(0, f"the draws of its coefficient of bit(s) {list(a)} that its keys' published "
                                      f"rows do not give (their withheld reports' and those of keys withholding "
                                      f"it) hold fewer than {floor} reports in a part of it, or cross another rollup's")
    return out
