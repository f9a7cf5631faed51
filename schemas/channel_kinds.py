"""Channel kinds other than per-bit randomized response, in a collection config::

    channel: {kind: hadamard, epsilon: 2.0}          # optional: slots (default: the best for epsilon),
                                                     # weights: sqrt (default) or uniform (InpHT)
    channel: {kind: subset, epsilon: 4.0}            # optional: width (default: best_width(d, k, epsilon))

Hadamard sampling (:mod:`ldp_marginals.ldp.hadamard`, on the wire :mod:`ldp_marginals.ldp.hadamard_reports`)
and subset randomized response (:mod:`ldp_marginals.ldp.subset_rr`, on the wire
:mod:`ldp_marginals.ldp.subset_reports`) make the whole report ``epsilon``-LDP, not each bit: the kinds
for a ``local`` promise over many bits. What this release supports with them (the refusals of
other features with a kind are rules of schemas/composition.py, naming the field; this module
validates the channel's own fields):

- boolean, categorical and numeric features (a numeric is its 1-bit encoding; a categorical its one-hot
  bits: the kind randomizes the whole report, so they are bits of the true report and every table over
  them is unbiased as for booleans, their exclusivity unused; no table holds two values of one categorical,
  and a group's table is the table of all its features' bits, each cell summing the cells its values fix);
- marginals of every set of 1..max_order bits and tables of feature groups; conditionals, means and
  extremes over reports, from the table of their bits (:mod:`ldp_marginals.ldp.kind_analyses`); a table
  wider than max_order (an entry of ``sets``, a group, the bits of a conditional, a mean or an extreme)
  is one of the kind's *extra sets* (:func:`kind_sets`): hadamard samples its subsets' coefficients too
  (:mod:`ldp_marginals.ldp.hadamard`, the clients told the pool), subset counts its cells from the reports
  whose subset holds it (:mod:`ldp_marginals.ldp.subset_rr`; the default width is at least the widest,
  an explicit narrower width is refused: rule kind-subset-width);
- no extremes over clients (a limit); privacy model ``local`` only (its ``epsilon`` at
  least the channel's); unit ``report`` or ``device`` (``max_reports_per_device``, ``max_keys_per_device``:
  the device table keeps each device's kept reports in the kind's wire format and counts them with the
  kind's accumulator, :mod:`ldp_marginals.ldp.whole_report`; ``min_reports`` then counts devices), with
  ``epsilon_per_day`` / ``epsilon_per_month`` enforced from the device bounds (``n`` reports of a device spend
  ``n epsilon``, memoized at most ``min(n epsilon_1, epsilon)``: :class:`~ldp_marginals.ldp.kind_memoize.
  WholeReportSpend`);
- memoization (docs/client.md section 13)::

    channel: {kind: hadamard, epsilon: 4.0, memoize: true, epsilon_1: 1.0}

  ``epsilon`` is the permanent response's (``epsilon_infinity``: all reports of one value together),
  ``epsilon_1`` one report's; the job inverts the kind at ``epsilon_1`` (``MemoizedKind.effective``) and adds
  the repeats term of a device's reports sharing their permanent response to every variance
  (:func:`~ldp_marginals.ldp.kind_memoize.with_kind_repeats`); ``privacy.epsilon`` bounds ``epsilon_1``;
- hadamard: at most 2^18 coefficients in the pool; subset: at most 2^19 counts per window and
  key (``sum_{o<=k} C(d, o) 2^o``, the same 4 MiB as hadamard's two counts per coefficient: 62 bits at
  max_order 3 are 310,248) and at most 2^12 tables per report (``sum_{o<=k} C(s, o)``: the counts one
  report adds to, its cost in the job; the best widths of the benchmark hold at most 175).
"""
from __future__ import annotations

import math

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.encoding import Layout
from ldp_marginals.ldp.hadamard import WEIGHTS, HadamardSampling
from ldp_marginals.ldp.hadamard_reports import KIND as HADAMARD
from ldp_marginals.ldp.kind_memoize import MemoizedKind
from ldp_marginals.ldp.sets import extra_sets, family_from_spec
from ldp_marginals.ldp.subset_reports import KIND as SUBSET
from ldp_marginals.ldp.subset_reports import sets_per_report, table_cells
from ldp_marginals.ldp.subset_rr import SubsetRR

KINDS = (HADAMARD, SUBSET)
# memoize, epsilon_1: a memoized collection (docs/client.md section 13, parse_memo)
_KEYS = {HADAMARD: ("kind", "epsilon", "slots", "weights", "memoize", "epsilon_1"),
         SUBSET: ("kind", "epsilon", "width", "memoize", "epsilon_1")}
# 4 MiB of counts per window and key (62 bits at max_order 3 are 39,773); the extra sets' subsets a client
# enumerates (sum of 2^|set|): the clients' own caps (docs/client.md section 11), so the server writes no
# client config a client refuses
from ldp_marginals.ldp.hadamard_client import MAX_COEFFICIENTS, MAX_POOL_WORK  # noqa: E402
MAX_CELLS = 1 << 19          # subset: the same 4 MiB of counts; 62 bits at max_order 3 are 310,248
MAX_SETS_PER_REPORT = 1 << 12   # subset: the counts one report adds to (module docstring)


def is_kind(chan) -> bool:
    """Whether a config's ``channel`` names a kind (a mapping with ``kind``)."""
    return isinstance(chan, dict) and "kind" in chan


def kind_of(mechanism) -> str:
    """The kind's name of a collection's mechanism (``CollectionConfig.sampling``)."""
    return SUBSET if isinstance(mechanism, SubsetRR) else HADAMARD


def kind_sets(layout: Layout, max_order: int, sets=(), groups=(), conditionals=(), means=(), extremes=()) -> tuple:
    """The extra sets a whole-report kind's collection counts (issue 48 item 1): of its ``sets``, its
    groups' tables (all of a group's bits: a categorical's one-hot bits all,
    :func:`~ldp_marginals.transforms.publication.hadamard_rows.group_bits`), the union of each conditional's
    and conditional mean's bits and each extreme's (over reports or clients), those wider than ``max_order``
    (:func:`~ldp_marginals.ldp.sets.extra_sets`: sorted, distinct). The one owner of that list: the parser,
    ``plan`` and the composition table read it."""
    need = [tuple(s) for s in sets]
    for group in groups:   # the table of all the group's bits (a categorical's one-hot bits all: a cell sums
        need.append(tuple(sorted(b for name in group for b in layout.bits_of(name))))   # cells, hadamard_rows)
    need += [tuple(set(of) | set(given)) for of, given in conditionals]
    need += [tuple({bit} | set(given)) for bit, given in means]
    need += [tuple(e.bits) for e in extremes]   # over reports their table, over clients each report's term
    return extra_sets(layout.n_bits, max_order, need)


def kind_sets_of(cfg) -> tuple:
    """:func:`kind_sets` of a parsed collection config."""
    return kind_sets(cfg.layout, cfg.max_order, cfg.sets, cfg.groups, cfg.conditionals, cfg.means, cfg.extremes)


def parse_kind(chan: dict, layout: Layout, max_order: int, sets=()):
    """The mechanism of ``channel: {kind: ...}`` for ``layout``'s bits, tables up to ``max_order`` and the
    extra sets ``sets`` (:func:`kind_sets`): a :class:`~ldp_marginals.ldp.hadamard.HadamardSampling` or a
    :class:`~ldp_marginals.ldp.subset_rr.SubsetRR` (an explicit subset ``width`` narrower than an extra set
    keeps the sets it holds: the composition table refuses the config, rule kind-subset-width)."""
    kind = chan["kind"]
    if kind not in KINDS:
        raise ValueError(f"channel.kind must be one of {list(KINDS)}, got kind={chan['kind']!r}")
    unknown = sorted(str(k) for k in set(chan) - set(_KEYS[kind]))
    if unknown:
        raise ValueError(f"channel has unknown keys {unknown}; known keys for kind {kind!r} are "
                         f"{sorted(_KEYS[kind])}")
    if "epsilon" not in chan:
        raise ValueError(f"channel of kind {kind!r} must have 'epsilon' (the whole report's), got keys={sorted(chan)}")
    if layout.n_bits > 62:
        raise ValueError(f"channel kind {kind!r} holds at most 62 bits, got {layout.n_bits}")
    sets = extra_sets(layout.n_bits, max_order, sets)
    if kind == SUBSET:
        return _subset(chan, layout.n_bits, max_order, sets)
    coefficients = sum(math.comb(layout.n_bits, j) for j in range(1, max_order + 1))
    if sum(1 << len(s) for s in sets) > MAX_POOL_WORK:
        raise ValueError(f"channel kind {kind!r}: the extra sets wider than max_order={max_order} hold "
                         f"{sum(1 << len(s) for s in sets):,} subsets (sum of 2^|set|), over the {MAX_POOL_WORK:,} a "
                         "client enumerates: count fewer or narrower wide sets, or raise max_order")
    if sets:
        coefficients = len(family_from_spec(layout.n_bits, max_order, sets)) - 1
    if coefficients > MAX_COEFFICIENTS:
        raise ValueError(f"channel kind {kind!r} samples among the {coefficients:,} coefficients of order 1..max_order "
                         f"of {layout.n_bits} bits" + (f" and of the subsets of {len(sets)} extra set(s)" if sets else "")
                         + f", over the {MAX_COEFFICIENTS:,} it holds (a window keeps two counts per coefficient and "
                         f"every client enumerates them): lower max_order or count fewer wide sets, got "
                         f"max_order={max_order}")
    epsilon = check_positive("channel.epsilon", chan["epsilon"])
    slots = chan.get("slots")
    if slots is not None:
        check_int("channel.slots", slots, minimum=1)
    weights = chan.get("weights", "sqrt")
    if weights not in WEIGHTS:
        raise ValueError(f"channel.weights must be one of {list(WEIGHTS)}, got weights={weights!r}")
    return HadamardSampling(layout.n_bits, max_order, epsilon, slots, weights, sets)


def _subset(chan: dict, n_bits: int, max_order: int, sets: tuple) -> SubsetRR:
    epsilon = check_positive("channel.epsilon", chan["epsilon"])
    width = chan.get("width")
    if width is not None:
        check_int("channel.width", width, minimum=1)
        if not max_order <= width <= n_bits:
            raise ValueError(f"channel.width must be in [max_order={max_order}, {n_bits} bits], got width={width}")
        sets = tuple(s for s in sets if len(s) <= width)   # the wider: rule kind-subset-width
    mech = SubsetRR(n_bits, max_order, epsilon, width, sets)
    cells = table_cells(mech)
    if cells > MAX_CELLS:
        raise ValueError(f"channel kind {SUBSET!r} counts the {cells:,} cells of the tables of order 1..max_order of "
                         f"{n_bits} bits" + (" and of the extra sets" if sets else "") + ", over the {MAX_CELLS:,} a window holds: lower max_order, got "
                         f"max_order={max_order}")
    per_report = sets_per_report(mech)
    if per_report > MAX_SETS_PER_REPORT:
        raise ValueError(f"channel kind {SUBSET!r}: a subset of width={mech.width} holds {per_report:,} tables of order "
                         f"1..max_order, each a count the job adds per report, over the {MAX_SETS_PER_REPORT:,} it "
                         f"allows: lower channel.width")
    return mech


def parse_memo(chan: dict, mechanism) -> MemoizedKind | None:
    """The two stages of ``channel: {kind: ..., epsilon: <epsilon_inf>, memoize: true, epsilon_1: <one report's>}``
    (docs/client.md section 13), ``mechanism`` the kind at ``epsilon`` (:func:`parse_kind`, the permanent
    stage); None without ``memoize``. The job inverts ``MemoizedKind.effective``, the kind at ``epsilon_1``."""
    memoize = chan.get("memoize", False)
    if not isinstance(memoize, bool):
        raise ValueError(f"channel.memoize must be true or false, got memoize={memoize!r}")
    if not memoize:
        if "epsilon_1" in chan:
            raise ValueError(f"channel.epsilon_1 is one memoized report's epsilon: give it with memoize: true, got "
                             f"epsilon_1={chan['epsilon_1']!r} and memoize={memoize!r}")
        return None
    if "epsilon_1" not in chan:
        raise ValueError(f"channel of kind {chan['kind']!r} with memoize: true must have 'epsilon_1' (one report's "
                         f"epsilon, below channel.epsilon={chan['epsilon']!r}, which all reports of one value "
                         f"spend together), got keys={sorted(chan)}")
    e1 = check_positive("channel.epsilon_1", chan["epsilon_1"])
    if not e1 < mechanism.epsilon:
        raise ValueError(f"channel.epsilon_1 must be below channel.epsilon={mechanism.epsilon!r} (the permanent "
                         f"response's epsilon_infinity), got epsilon_1={chan['epsilon_1']!r}")
    return MemoizedKind.of(mechanism, e1)


def describe_kind(cfg) -> dict:
    """:meth:`~ldp_marginals.schemas.collection.CollectionConfig.describe` of a collection of a kind:
    the same fields (no per-bit p and q: empty lists), and ``channel`` with the mechanism."""
    m = cfg.sampling   # the mechanism the job inverts (a memoized collection's effective one, at epsilon_1)
    kind = kind_of(m)
    if kind == SUBSET:
        channel = {"kind": kind, "epsilon": m.epsilon, "width": m.width, "keep": m.p, "cells": table_cells(m),
                   "report_bits": cfg.wire.n_bits}
    else:
        channel = {"kind": kind, "epsilon": m.epsilon, "slots": m.slots, "weights": m.weights,
                   "coefficients": m.n_coefficients, "report_bits": cfg.wire.n_bits}
    if m.sets:   # the extra sets the kind counts (kind_sets), as bit labels
        channel["extra_sets"] = [[cfg.layout.labels[b] for b in s] for s in m.sets]
    memo = cfg.kind_memo
    channel["memoize"] = memo is not None
    if memo is not None:   # the two stages a device runs (docs/client.md section 13: permanent_keep, keep)
        keep = (lambda x: x.p) if kind == SUBSET else (lambda x: x.keep)
        channel.update(epsilon_infinity=memo.epsilon_infinity, epsilon_1=memo.epsilon_1,
                       permanent_keep=keep(memo.permanent), instantaneous_keep=keep(memo.instantaneous))
    return {"collection": cfg.name, "labels": list(cfg.layout.labels), "p": [], "q": [],
            "mechanisms": [kind] * cfg.layout.n_bits,
            "channel": channel,
            "local_epsilon": float(m.epsilon),
            "window": cfg.window.describe(), "min_reports": cfg.min_reports, "max_order": cfg.max_order,
            "level": cfg.level, "groups": [list(g) for g in cfg.groups],
            "group_intervals": list(cfg.group_intervals or ("per_cell",) * len(cfg.groups)),
            "marginal_interval": cfg.marginal_interval, "numeric": {},
            "dimensions": {d.name: {"max_values": d.max_values, "max_length": d.max_length} for d in cfg.dimensions},
            "extremes": [], "conditionals": 0,
            "privacy": cfg.privacy.describe() if cfg.privacy is not None else None,
            **cfg.describe_unit(),
            "memoized_bits": list(cfg.layout.labels) if memo is not None else [],
            # one report is epsilon_1-LDP; a device's reports of one value spend at most epsilon_infinity when it
            # memoizes (else they compose): a day's and a month's as enforced and declared
            "epsilons": cfg.describe_epsilons()}
