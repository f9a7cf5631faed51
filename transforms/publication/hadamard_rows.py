"""The estimates behind the rows a window and key of a channel kind's collection (``channel: {kind:
hadamard}``, Hadamard sampling, or ``{kind: subset}``, subset randomized response) publishes: ``marginals`` (every set of 1..max_order bits and of the kind's extra sets: the count of reports whose bits are all 1 on it) and
``tables`` (every configured group of boolean features), from the released accumulator as every
kind's rows are (:mod:`~ldp_marginals.transforms.publication.rows`), with the same schemas, intervals
and out-of-range policy. The estimates and their closed-form variances are
:func:`~ldp_marginals.ldp.hadamard_reports.window_marginals` and
:meth:`~ldp_marginals.ldp.hadamard.HadamardEstimate.table`, or
:func:`~ldp_marginals.ldp.subset_reports.window_marginals` and
:meth:`~ldp_marginals.ldp.subset_rr.SubsetEstimate.table` (the same shapes; cell z of a table has bit j
the value of its j-th column in both). A row that rests on fewer than ``min_reports`` of the window's
reports is withheld (:func:`thin_sets`, :mod:`~ldp_marginals.ldp.thin_rows`), and so is a row that
rests on too few reports of one *atom* it sums (:func:`atom_thin_sets`): a released increment of one
slice and key (streaming), or a released slice of a window (batch). Overlapping windows and a window's
panes difference into atoms, never into less (docs/design.md, "Rows of whole-report kinds that rest on
few reports", per atom).
Conditionals, means and extremes over reports are read from :func:`kind_estimate`
(:mod:`~ldp_marginals.ldp.kind_analyses`) and withheld with the table they rest on (:func:`analysis_sets`).
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.intervals import sidak_level
from ldp_marginals.ldp.kind_analyses import KindMarginals
from ldp_marginals.ldp.kind_memoize import cell_variance_with_repeats, kind_repeats, with_kind_repeats
from ldp_marginals.ldp.tables import GroupTable, group_cells
from ldp_marginals.ldp.thin_rows import Thin, hadamard_thin_sets, subset_thin_sets


def hadamard_group_tables(config, marginals) -> list:
    """``(group, interval, table, low, high)`` of every configured group (a group wider than max_order is one
    of the kind's extra sets): its table from the table of all its features' bits (:func:`group_bits`),
    cells in the order of :func:`~ldp_marginals.ldp.tables.group_cells`. A cell sets its ``ones`` bits to 1
    and its ``zeros`` bits to 0 and leaves the other values' bits of its categoricals free: its count is
    the sum of those cells of the bits' table (``C t``, covariance ``C Sigma C^T``; in truth the free bits
    are 0, one-hot, and the sum is unbiased as each cell is). A group of booleans: ``C`` picks one cell each."""
    out = []
    est = marginals.estimate
    intervals = config.group_intervals or ("per_cell",) * len(config.groups)
    for group, interval in zip(config.groups, intervals):
        cells = group_cells(config.layout, group)
        cols = group_bits(config.layout, group)
        table = est.table(cols)
        # cell z of est.table has bit j = value of cols[j]
        pick = np.zeros((len(cells), 1 << len(cols)))
        for i, (_, ones, zeros) in enumerate(cells):
            for z in range(1 << len(cols)):
                if all(z >> j & 1 for j, c in enumerate(cols) if c in ones) and \
                        not any(z >> j & 1 for j, c in enumerate(cols) if c in zeros):
                    pick[i, z] = 1.0
        # a table no report informs (a coefficient no slot drew, a set no subset held) has an infinite
        # covariance: so have its cells' sums (pick's zeros would make 0 * inf a NaN)
        cov = pick @ table.covariance @ pick.T if np.isfinite(table.covariance).all() else \
            np.full((len(cells), len(cells)), np.inf)
        group_table = GroupTable(tuple(group), tuple(v for v, _, _ in cells), (cols,) * len(cells), table.n,
                                 pick @ table.estimate, cov)
        level = sidak_level(config.level, len(cells)) if interval == "simultaneous" else config.level
        out.append((group, interval, group_table, *group_table.intervals(level)))
    return out


def group_bits(layout, group) -> tuple:
    """The bits (sorted) of a group's table with a whole-report kind: every bit of its features (a
    categorical's one-hot bits all), the set the kind counts for it (:func:`~ldp_marginals.schemas.
    channel_kinds.kind_sets`)."""
    return tuple(sorted(b for name in group for b in layout.bits_of(name)))


def hadamard_estimates(config, acc) -> tuple:
    """``(marginals, groups)`` of one window and key: what :func:`~ldp_marginals.transforms.publication.rows.
    marginal_rows` and ``table_rows`` publish."""
    marginals = config.aggregator.marginals(acc)
    if config.kind_memo is not None:   # a device's reports share its permanent response: every variance
        marginals = with_kind_repeats(marginals, config.kind_memo, config.shared_reports)   # carries the term
    return marginals, hadamard_group_tables(config, marginals)


def analysis_sets(config) -> list:
    """The set of bits each conditional, mean and extreme over reports rests on (sorted tuples, in the
    order of ``config.conditionals``, ``config.means``, ``config.report_extremes``): the union of its bits,
    whose table gives it (:mod:`~ldp_marginals.ldp.kind_analyses`); an unconditional mean rests on its
    bit's marginal."""
    return [tuple(sorted(set(of) | set(given))) for of, given in config.conditionals] + \
        [tuple(sorted({bit} | set(given))) for bit, given in config.means] + \
        [tuple(sorted(e.bits)) for e in config.report_extremes]


def kind_estimate(config, marginals):
    """The window's estimate as the conditionals and means read it
    (:class:`~ldp_marginals.ldp.kind_analyses.KindMarginals`)."""
    from ldp_marginals.ldp.channel_kind import channel_kind
    est = KindMarginals(marginals, cell_variance_with_repeats(channel_kind(config.channel_kind).cell_variance_per_report,
                                                              config.kind_memo, config.shared_reports))
    if config.kind_memo is not None and config.shared_reports:   # a memoized value names its encoded bits:
        est.repeats = kind_repeats(config.layout.n_bits, config.shared_reports)   # the means' encoding term
    return est


def group_columns(groups) -> list:
    """The bits (a sorted tuple) of each of :func:`hadamard_group_tables`' groups."""
    return [tuple(table.columns[0]) for _, _, table, _, _ in groups]


def thin_sets(config, marginals, groups) -> dict:
    """``{set of bits: Thin}`` of the window's rows that rest on too few reports
    (:mod:`~ldp_marginals.ldp.thin_rows`): its published marginal sets, its groups' tables and the
    tables its conditionals and means rest on (:func:`analysis_sets`)."""
    est = marginals.estimate
    family = est.mechanism.family
    marginal_sets = config.published_sets
    per_device = config.repeats_per_window if config.counts_devices else 1   # min_reports counts devices
    if config.channel_kind == "hadamard":
        return hadamard_thin_sets(est.drawn, family.index, marginal_sets + group_columns(groups) + analysis_sets(config),
                                  config.min_reports, per_device)

    def drawn_of(s):
        return est.drawn(len(s))[family.index(s) - family.offset(len(s))]
    mech = est.mechanism   # counts n_K up to max_order and of its extra sets; no subset holds more than its width
    return subset_thin_sets(drawn_of, marginal_sets, group_columns(groups) + analysis_sets(config), config.min_reports,
                            known_order=mech.max_order, width=mech.width, per_device=per_device,
                            counted=family.__contains__)


def table_sets(config) -> list:
    """The bits (a sorted tuple) of each configured group's table, as :func:`group_columns` gives them,
    without estimating anything."""
    return [group_bits(config.layout, group) for group in config.groups]


def atom_thin_sets(config, acc) -> dict:
    """``{set of bits: Thin}`` of the rows (every published marginal set, every group's table and the
    tables its conditionals, means and extremes rest on, :func:`analysis_sets`) that rest on too few of
    ONE atom's reports (``acc``: a released increment of a slice and key, or a
    released slice): the rule of :mod:`~ldp_marginals.ldp.thin_rows` on the atom's counts alone, the
    family rule over every configured row (so an atom's verdict is the same in every window and pane
    that sums it). Reads the counts only (no estimate): :func:`thin_of_counts` of :func:`thin_counts`."""
    return thin_of_counts(config, thin_counts(config, acc))


def thin_counts(config, acc) -> np.ndarray:
    """The counts the thin-row rule reads of ``acc`` (int64, indexed by the family's set index, 0 at the
    empty set): hadamard, ``n_a`` per coefficient; subset, ``n_K`` per counted set (1..max_order bits and the
    extra sets' subsets). They add
    across reports, so the counts of a sum of accumulators are the sum of their counts (what the rollups'
    complementary rule sums over a part's withheld keys without merging their accumulators)."""
    aggregator = config.aggregator
    if config.channel_kind == "hadamard":
        return np.asarray(aggregator.coefficient_counts(acc).drawn, dtype=np.int64)
    counts = aggregator.table_counts(acc).counts
    return np.concatenate([[0]] + [counts[o].sum(axis=-1).ravel() for o in range(1, aggregator.mechanism.top_order + 1)]
                          ).astype(np.int64)


def thin_of_counts(config, counts, index_of=None) -> dict:
    """``{set of bits: Thin}``: the rule of :mod:`~ldp_marginals.ldp.thin_rows` (the family rule over
    every configured row) on ``counts`` (:func:`thin_counts`, of one accumulator or a sum of them);
    ``index_of``: the family's index of a set (None: the family's own lookup; a caller deciding many
    counts passes a dict's ``__getitem__``, :func:`set_index`)."""
    aggregator = config.aggregator
    family = aggregator.mechanism.family
    index_of = family.index if index_of is None else index_of
    counts = np.asarray(counts, dtype=np.int64)
    per_device = config.repeats_per_window if config.counts_devices else 1   # min_reports counts devices
    sets = list(config.published_sets) + table_sets(config) + analysis_sets(config)
    if config.channel_kind == "hadamard":
        return hadamard_thin_sets(counts, index_of, sets, config.min_reports, per_device)
    mech = aggregator.mechanism
    return subset_thin_sets(lambda s: counts[index_of(tuple(sorted(s)))], config.published_sets,
                            table_sets(config) + analysis_sets(config), config.min_reports,
                            known_order=mech.max_order, width=mech.width, per_device=per_device,
                            counted=family.__contains__)


def set_index(config):
    """The family's index of a set (a sorted tuple of bits) as a dict lookup, for :func:`thin_of_counts`."""
    family = config.aggregator.mechanism.family
    return {family[i]: i for i in range(1, len(family))}.__getitem__


def merge_thin(thin: dict, more: dict, of_atom: bool = True) -> dict:
    """``thin`` with the sets of ``more`` added (a set's thinnest reason kept); ``of_atom``: ``more``
    is one atom's (its reasons say so)."""
    out = dict(thin)
    for s, t in more.items():
        if of_atom:
            t = Thin(t.reports, f"{t.why}, in one released increment of the window (a slice's or a pane's "
                                f"reports, which overlapping windows or panes difference into)")
        if s not in out or t.reports < out[s].reports:
            out[s] = t
    return out


def panes_difference(config) -> bool:
    """Whether published rows of one key can difference into parts of a window's content: overlapping
    windows (into slices), early panes or late panes (into increments). Otherwise a window and capped key
    publishes its content once (its later panes only repeat it) and the rule per window is the rule per
    atom: the rule per atom is skipped, so streaming equals batch (and costs nothing more)."""
    return bool(config.window.overlapping or config.early_firing_seconds is not None
                or config.allowed_lateness_seconds > 0)


def atoms_thin_sets(config, atoms) -> dict:
    """The union of :func:`atom_thin_sets` over ``atoms`` (accumulators, disjoint sets of reports)."""
    out = {}
    for acc in atoms:
        if acc is not None and acc.n:
            out = merge_thin(out, atom_thin_sets(config, acc))
    return out
