"""The estimates behind the rows a window and key of a channel kind's collection (``channel: {kind:
hadamard}``, Hadamard sampling, or ``{kind: subset}``, subset randomized response) publishes: ``marginals`` (every set of 1..max_order bits: the count of reports whose bits are all 1 on it) and
``tables`` (every configured group of boolean features), from the released accumulator as every
kind's rows are (:mod:`~ldp_marginals.transforms.publication.rows`), with the same schemas, intervals
and out-of-range policy. The estimates and their closed-form variances are
:func:`~ldp_marginals.ldp.hadamard_reports.window_marginals` and
:meth:`~ldp_marginals.ldp.hadamard.HadamardEstimate.table`, or
:func:`~ldp_marginals.ldp.subset_reports.window_marginals` and
:meth:`~ldp_marginals.ldp.subset_rr.SubsetEstimate.table` (the same shapes; cell z of a table has bit j
the value of its j-th column in both). A row that rests on fewer than ``min_reports`` of the window's
reports is withheld (:func:`thin_sets`, :mod:`~ldp_marginals.ldp.thin_rows`). Conditionals, means and
extremes over reports are read from :func:`kind_estimate` (:mod:`~ldp_marginals.ldp.kind_analyses`) and
withheld with the table they rest on (:func:`analysis_sets`).
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.intervals import sidak_level
from ldp_marginals.ldp.kind_analyses import KindMarginals
from ldp_marginals.ldp.tables import GroupTable, group_cells
from ldp_marginals.ldp.thin_rows import hadamard_thin_sets, subset_thin_sets


def hadamard_group_tables(config, marginals) -> list:
    """``(group, interval, table, low, high)`` of every configured group (boolean features, at most
    max_order of them): its table from the coefficients, cells in the order of
    :func:`~ldp_marginals.ldp.tables.group_cells`."""
    out = []
    est = marginals.estimate
    intervals = config.group_intervals or ("per_cell",) * len(config.groups)
    for group, interval in zip(config.groups, intervals):
        cells = group_cells(config.layout, group)
        cols = tuple(sorted(b for _, ones, zeros in cells[:1] for b in ones + zeros))
        table = est.table(cols)
        # cell z of est.table has bit j = value of cols[j]; a group cell sets its `ones` bits to 1
        order = [sum(1 << j for j, c in enumerate(cols) if c in ones) for _, ones, _ in cells]
        group_table = GroupTable(tuple(group), tuple(v for v, _, _ in cells), (cols,) * len(cells), table.n,
                                 table.estimate[order], table.covariance[np.ix_(order, order)])
        level = sidak_level(config.level, len(cells)) if interval == "simultaneous" else config.level
        out.append((group, interval, group_table, *group_table.intervals(level)))
    return out


def hadamard_estimates(config, acc) -> tuple:
    """``(marginals, groups)`` of one window and key: what :func:`~ldp_marginals.transforms.publication.rows.
    marginal_rows` and ``table_rows`` publish."""
    marginals = config.aggregator.marginals(acc)
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
    return KindMarginals(marginals, channel_kind(config.channel_kind).cell_variance_per_report)


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
    per_device = config.repeats_per_window if config.device is not None else 1   # min_reports counts devices
    if config.channel_kind == "hadamard":
        return hadamard_thin_sets(est.drawn, family.index, marginal_sets + group_columns(groups) + analysis_sets(config),
                                  config.min_reports, per_device)

    def drawn_of(s):
        return est.drawn(len(s))[family.index(s) - family.offset(len(s))]
    mech = est.mechanism   # counts n_K up to max_order; no subset holds more than its width of bits
    return subset_thin_sets(drawn_of, marginal_sets, group_columns(groups) + analysis_sets(config), config.min_reports,
                            known_order=mech.max_order, width=mech.width, per_device=per_device)
