"""Which rows of a whole-report channel kind (``hadamard``, ``subset``) rest on too few reports to publish
(issue 47 item 6). Beam-free; the publication step (:mod:`~ldp_marginals.transforms.publication.rows`)
drops the rows this names and writes a ``withheld`` row for each. docs/design.md, "Rows of whole-report
kinds that rest on few reports", states the rule and why it is enough.

The window's guard counts the window's reports; under these kinds a row is a function of far fewer:

- ``subset`` (:mod:`~ldp_marginals.ldp.subset_rr`): the reports fall into atoms by their subset U (a
  uniform draw, independent of content). A table over B carries every monomial ``x_T``, T within B, on
  the atoms holding B; a marginal over S carries ``x_S`` on the atoms holding S. Monomials are linearly
  independent functions of a report, so combinations isolate reports monomial by monomial: on ``x_T``,
  the rows carrying it (its family) isolate a union of *regions* (the reports whose subset holds exactly
  some of the family's sets). Thin: ``0 < n_K < min_reports`` (a family of one); and, for every T two or
  more published rows carry, a region that may hold 1 to ``min_reports - 1`` reports (exact by
  inclusion-exclusion when the window counts every union, else bounded: conservative) withholds T's own
  marginal first, then the family's table of fewest reports, until none does. Sufficient, not exact.
- ``hadamard`` (:mod:`~ldp_marginals.ldp.hadamard`): the row of set S is a function of N and of the
  coefficient estimates ``theta_a`` (with ``n_a`` and the odd count) of every non-empty ``a`` within S,
  ``theta_a`` resting on the ``n_a`` reports that drew ``a`` (slots draw without replacement: ``n_a``
  distinct reports). Rows difference: ``theta_S`` is ``2^|S| pi_S`` minus the rows of S's subsets, so
  each coefficient is an atom of the publication rule. Thin: some ``a`` within S with ``0 < n_a <
  min_reports``; every row that holds a thin coefficient is withheld, so no combination of published
  rows holds one.

Under ``privacy.unit: device`` ``min_reports`` counts devices, and one device adds up to ``R`` reports to a
row (``R``: :attr:`~ldp_marginals.schemas.collection.CollectionConfig.repeats_per_window`, its ``M``, times
the window's slices and ``K`` with dimensions), so ``n`` reports hold at least ``ceil(n / R)`` devices: every
count above is compared with ``min_reports * R`` instead (``per_device`` = R; sound, not tight: a row of
``n >= min_reports * R`` reports holds at least ``min_reports`` devices).

A set no report informs (``n = 0``) is not thin: its row is NaN with an infinite variance and carries no
report (the rule's atoms hold 0 or at least ``min_reports`` reports).
"""
from __future__ import annotations

from itertools import combinations
from typing import NamedTuple

import numpy as np

from ldp_marginals.ldp._checks import check_int


class Thin(NamedTuple):
    """A set whose rows are withheld: the reports its rows rest on (``reports``) and why (``why``: a
    sentence naming counts only)."""

    reports: int
    why: str


def _subsets(s: tuple):
    return (sub for r in range(1, len(s) + 1) for sub in combinations(s, r))


def _floor(min_reports: int, per_device: int) -> tuple:
    """``(reports a row needs, how a message names it)``: ``min_reports``, times ``per_device`` (the most
    reports of one device in a row) under the device unit (module docstring)."""
    m = check_int("min_reports", min_reports, minimum=1)
    r = check_int("per_device", per_device, minimum=1)
    return (m, f"min_reports={m}") if r == 1 else \
        (m * r, f"min_reports={m} devices x {r} reports a device = {m * r}")


def subset_thin_sets(drawn_of, marginal_sets, table_sets, min_reports: int, *, known_order: int | None = None,
                     width: int | None = None, per_device: int = 1, counted=None) -> dict:
    """``{set: Thin}`` of a subset-RR window (module docstring). ``drawn_of(set)``: ``n_K``, the reports
    whose subset holds the set, for every set of at most ``known_order`` bits (None: every set) and every
    set ``counted(set)`` says the window counts (the extra sets' subsets; None: no others);
    ``width``: the subsets' width (a set of more bits is held by no report; None: unknown);
    ``marginal_sets``, ``table_sets``: the sets (sorted bit tuples) whose marginals and tables the window
    would publish; ``per_device``: the most reports of a device in a row (1 under ``unit: report``)."""
    m, floor = _floor(min_reports, per_device)
    marginals = {tuple(s) for s in marginal_sets}
    tables = {tuple(t) for t in table_sets}
    def known(s) -> bool:
        return known_order is None or len(s) <= known_order or (counted is not None and counted(s))

    if known_order is not None:
        check_int("known_order", known_order, minimum=1)
        wider = [list(s) for s in marginals | tables if not known(s)]
        if wider:
            raise ValueError(f"every published set must be counted (at most known_order={known_order} bits), "
                             f"got sets {sorted(wider)[:3]}")
    if width is not None:
        check_int("width", width, minimum=1)
    counts: dict = {}

    def n(s):   # n_K, or None when the window does not count it
        s = tuple(sorted(set(s)))
        if s not in counts:
            counts[s] = (0 if width is not None and len(s) > width else
                         None if not known(s) else int(drawn_of(s)))
        return counts[s]

    out = {}
    for s in sorted(marginals | tables, key=lambda s: (-len(s), s)):   # the per-row rule: |F_T| = 1
        c = n(s)
        if 0 < c < m:
            out[s] = Thin(c, f"it rests on {c} report(s), those whose subset holds its bits, < {floor}")
    while True:   # the family rule, until every monomial's regions are safe
        found = _unsafe_monomial(n, marginals - set(out), tables - set(out), m)
        if found is None:
            return out
        t, family, region, low, high = found
        if t in marginals and t not in out:   # a marginal takes apart only its own monomial: withhold it first
            drop, total = t, n(t)
        else:                                 # else the thinnest table carrying the monomial
            drop = min((b for b in family if b in tables), key=lambda b: (n(b), -len(b), b))
            total = n(drop)
        of = f"of its {total} " if drop in region else ""
        rows = f"the published rows of {len(family) - 1} other set(s) holding bit(s) {list(t)} with it"
        out[drop] = Thin(total, f"{rows} leave {low} {of}reports apart, < {floor}" if low == high else
                         f"{rows} may leave fewer than {floor} {of}reports apart (between {low} and {high}: "
                         f"the window does not count every union of the sets)")


def _unsafe_monomial(n, marginals: set, tables: set, m: int):
    """The first monomial ``x_T`` (T a published marginal's set, or a set within a published table) that
    two or more published rows carry and whose regions may hold 1..m-1 reports: ``(T, family, region,
    low, high)``, or None. The family ``F_T``: the sets B (T's own marginal, every table above T) whose
    rows carry ``x_T`` over the reports whose subset holds B. A combination of them isolates, on ``x_T``,
    a union of *regions*: the reports whose subset holds exactly the members ``region`` of the family;
    ``[low, high]`` bounds a region's count from the window's counts (exact when they are all counted)."""
    monomials = set(marginals) | {t for b in tables for t in _subsets(b)}
    for t in sorted(monomials, key=lambda s: (-len(s), s)):
        family = sorted({b for b in tables if set(t) <= set(b)} | ({t} if t in marginals else set()))
        if len(family) < 2:
            continue
        for region, low, high in _regions(n, family):
            if high > 0 and low < m:
                return t, family, region, low, high
    return None


def _regions(n, family: list):
    """``(members, low, high)`` of every non-empty region of ``family`` that may hold reports: the
    reports whose subset holds every member of ``members`` and no other member (inclusion-exclusion
    over the unions' counts when the window counts them all; else ``n(union) - sum n(union + B)``, B
    outside, bounded by the smallest count of a counted set within a union)."""
    k = len(family)
    union, low, high = {}, {}, {}

    def bounds(mask):   # lower and upper bound of n(union of the members in mask)
        if mask not in union:
            bits = set().union(*(family[i] for i in range(k) if mask >> i & 1))
            c = n(bits)
            if c is None:
                sub = [bounds(mask & ~(1 << i))[1] for i in range(k) if mask >> i & 1 and mask & ~(1 << i)]
                union[mask] = (0, min(sub))
            else:
                union[mask] = (c, c)
        return union[mask]
    full = (1 << k) - 1
    for mask in range(1, full + 1):
        lo, hi = bounds(mask)
        if hi == 0:
            continue
        members = [family[i] for i in range(k) if mask >> i & 1]
        bits = set().union(*members)
        if any(set(family[i]) <= bits for i in range(k) if not mask >> i & 1):
            continue   # a subset holding these members holds another member too: the region is empty
        outside = [i for i in range(k) if not mask >> i & 1]
        supers = [mask | sum(1 << i for i in extra) for r in range(1, len(outside) + 1)
                  for extra in combinations(outside, r)]
        if all(bounds(s)[0] == bounds(s)[1] for s in supers) and lo == hi:
            exact = lo + sum((-1) ** bin(s & ~mask).count("1") * bounds(s)[0] for s in supers)
            yield members, exact, exact
        else:
            yield members, max(0, lo - sum(bounds(mask | (1 << i))[1] for i in outside)), hi


def hadamard_thin_sets(drawn, index_of, sets, min_reports: int, per_device: int = 1) -> dict:
    """``{set: Thin}`` of a Hadamard-sampling window (module docstring). ``drawn``: ``n_a`` by family
    index; ``index_of(a)``: the family index of coefficient ``a``; ``sets``: the sets whose rows (marginal
    or table) the window would publish."""
    m, floor = _floor(min_reports, per_device)
    drawn = np.asarray(drawn)
    out = {}
    for s in {tuple(s) for s in sets}:
        thin = [(int(drawn[index_of(a)]), a) for a in _subsets(s) if 0 < drawn[index_of(a)] < m]
        if thin:
            n, a = min(thin)
            out[s] = Thin(n, f"{len(thin)} of its coefficients rest on fewer than {floor} reports (the "
                             f"thinnest, of {len(a)} bit(s), on {n}: the reports that drew it)")
    return out
