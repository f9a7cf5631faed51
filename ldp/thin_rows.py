"""Which rows of a whole-report channel kind (``hadamard``, ``subset``) rest on too few reports to publish
(issue 47 item 6). Beam-free; the publication step (:mod:`~ldp_marginals.transforms.publication.rows`)
drops the rows this names and writes a ``withheld`` row for each. docs/design.md, "Rows of whole-report
kinds that rest on few reports", states the rule and why it is enough.

The window's guard counts the window's reports; under these kinds a row is a function of far fewer:

- ``subset`` (:mod:`~ldp_marginals.ldp.subset_rr`): the estimate of set K (its marginal, or the table of
  its bits) is a function of ``n_K`` and the cell counts of the reports whose random subset holds K, and
  of N. Thin: ``0 < n_K < min_reports``. A row of a set L below K is a sum over every report holding L; the
  thin reports can be taken out of it only by subtracting the other reports' share of L, which published
  *tables* of sets ``T`` above L give (marginalized to L) and marginal rows do not (they publish the
  all-ones cell of T alone, whose reports are all in L's row too). So L is also withheld when the reports
  holding L but no published table above L (the residual) may number between 1 and ``min_reports - 1``:
  exactly ``n_L - n_T`` under one such table, at least ``n_L - sum n_T`` under several.
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


def subset_thin_sets(drawn_of, marginal_sets, table_sets, min_reports: int, per_device: int = 1) -> dict:
    """``{set: Thin}`` of a subset-RR window (module docstring). ``drawn_of(set)``: ``n_K``, the reports
    whose subset holds the set; ``marginal_sets``, ``table_sets``: the sets (sorted bit tuples) whose
    marginals and tables the window would publish; ``per_device``: the most reports of a device in a row
    (1 under ``unit: report``)."""
    m, floor = _floor(min_reports, per_device)
    tables = {tuple(t) for t in table_sets}
    out, published_tables = {}, []
    for s in sorted({tuple(s) for s in marginal_sets} | tables, key=lambda s: (-len(s), s)):   # tables above first
        n = int(drawn_of(s))
        if 0 < n < m:
            out[s] = Thin(n, f"it rests on {n} report(s), those whose subset holds its bits, < {floor}")
            continue
        above = [t for t in published_tables if set(s) < set(t)]
        if n > 0 and above:
            rest = n - sum(int(drawn_of(t)) for t in above)
            if len(above) == 1 and 0 < rest < m:
                out[s] = Thin(n, f"the published tables of 1 set(s) above its bits leave {rest} of its {n} reports "
                                 f"apart, < {floor}")
                continue
            if len(above) > 1 and rest < m:
                out[s] = Thin(n, f"the published tables of {len(above)} sets above its bits may leave fewer than "
                                 f"{floor} of its {n} reports apart (at least {max(rest, 0)})")
                continue
        if s in tables:
            published_tables.append(s)
    return out


def hadamard_thin_sets(drawn, index_of, sets, min_reports: int, per_device: int = 1) -> dict:
    """``{set: Thin}`` of a Hadamard-sampling window (module docstring). ``drawn``: ``n_a`` by family
    index; ``index_of(a)``: the family index of coefficient ``a``; ``sets``: the sets whose rows (marginal
    or table) the window would publish; ``per_device`` as :func:`subset_thin_sets`'."""
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
