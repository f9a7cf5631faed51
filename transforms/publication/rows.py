"""The rows one window and key publishes, built from the window's released accumulator.

Every row of every kind is a function of the accumulator it is given (the released content of one
window and key, :mod:`~ldp_marginals.transforms.publication.release`), so the publication rule is a
rule about which accumulators reach this module, and about the client rows, which only the window's
final pane asks for.

Out-of-range policy, one rule for every estimate kind. ``estimate``, ``ci_low`` and ``ci_high`` are
the unbiased estimate and its normal interval, which always holds it. A small window can give an
estimate outside what is possible (a negative count, a conditional above 1, a mean below the
feature's ``low``): the row keeps it, says so (``out_of_range``), and adds what a reader should
display, the estimate and both bounds projected into the possible range (``display_*``). Projection
keeps order, so the displayed value lies inside its displayed interval. Possible ranges: a count of
reports in ``[0, n_reports]`` (marginals and table cells, displayed as frequencies in [0, 1]; extremes,
as counts in ``[0, n]``), a conditional in [0, 1], a mean in ``[low, high]``.
"""
from __future__ import annotations


import numpy as np
import pyarrow as pa

from ldp_marginals.ldp.aggregate import sampled_clients
from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.consistent import consistent_group_tables, consistent_intervals
from ldp_marginals.ldp.intervals import normal_interval, sidak_level
from ldp_marginals.ldp.means import feature_mean
from ldp_marginals.ldp.memoized import with_repeats
from ldp_marginals.ldp.tables import group_table
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.schemas.arrow import TableRows, arrow_schema
from ldp_marginals.schemas.outputs import (
    CONDITIONALS, CONSISTENT_TABLES, EXTREMES, MARGINALS, MEANS, N_CLIENTS, N_DEVICES, N_REPORTS, SCHEMA_OF, TABLES,
    WITHHELD,
)
from ldp_marginals.transforms.publication.hadamard_rows import (
    analysis_sets,
    atoms_thin_sets,
    group_columns,
    hadamard_estimates,
    kind_estimate,
    merge_thin,
    panes_difference,
    thin_sets,
)
from ldp_marginals.transforms.publication.release import client_rule

MARGINAL_SCHEMA = SCHEMA_OF[MARGINALS]

# why a row of kind ``withheld`` exists (its ``cause``), and what it holds back (its ``statistic``)
PRIVACY, PRECISION = "privacy", "precision"
ALL, CLIENT_EXTREMES, CONDITIONAL, MEAN, EXTREME = "all", "client_extremes", "conditional", "mean", "extreme"
MARGINAL, TABLE = "marginal", "table"   # one row of a whole-report kind that rests on too few reports
CLIENT_SAMPLE = "client_sample"   # a withheld row: the clients a published client row left out (reports_per_client)


def displayed(estimate: float, low: float, high: float, lo: float, hi: float) -> dict:
    """The display fields of an estimate and its interval whose possible range is ``[lo, hi]``."""
    def clip(v):
        return min(max(float(v), lo), hi)
    return {"display_estimate": clip(estimate), "display_low": clip(low), "display_high": clip(high),
            "out_of_range": not lo <= float(estimate) <= hi}


def _frequency_fields(estimate: float, low: float, high: float, n: int) -> dict:
    """Frequency-scale bounds beside the count-scale ones, and the display fields of a count of
    reports (frequency scale, in [0, 1])."""
    f, f_low, f_high = estimate / n, low / n, high / n
    shown = displayed(f, f_low, f_high, 0.0, 1.0)
    return {"frequency": float(f), "frequency_low": float(f_low), "frequency_high": float(f_high),
            "display_frequency": shown["display_estimate"], "display_low": shown["display_low"],
            "display_high": shown["display_high"], "out_of_range": shown["out_of_range"]}


def base_row(collection: str, window: tuple, dims: tuple) -> dict:
    return {"collection": collection, "window_start": window[0], "window_end": window[1], "dimensions": dict(dims)}


def marginal_rows(config, est, base, keep: np.ndarray | None = None) -> TableRows:
    """One MarginalEstimate row per published set (``config.published_index``; ``keep``, a mask over
    them: those only), as a table built
    from the estimate's arrays (:class:`~ldp_marginals.schemas.arrow.TableRows`: no dict per row
    unless read row by row); with ``marginal_interval: simultaneous`` the intervals hold for all of
    them together at the level (Sidak, over every published set whether kept or not)."""
    n = est.n
    if len(est.family) != len(config.family):
        raise ValueError(f"est must be of the config's {len(config.family)} counted sets, got {len(est.family)}")
    index = config.published_index
    level = config.level
    if config.marginal_interval == "simultaneous" and index:
        level = sidak_level(level, len(index))
    low, high = est.intervals(level)
    columns, labels = _published_sets(config)
    idx = np.asarray(index, dtype=np.int64)
    if keep is not None:
        idx = idx[keep]
        columns, labels = columns.filter(pa.array(keep)), labels.filter(pa.array(keep))
    means, variances, low, high = (np.asarray(a, dtype=float)[idx] for a in (est.means, est.variances, low, high))
    f, f_low, f_high = means / n, low / n, high / n   # as _frequency_fields, on the columns
    out = ~((f >= 0.0) & (f <= 1.0))
    shown = [np.minimum(np.maximum(a, 0.0), 1.0) for a in (f, f_low, f_high)]
    rows = len(idx)
    schema = arrow_schema(MARGINAL_SCHEMA)
    stamp = schema.field("window_start").type
    dims = base.get("dimensions") or {}
    keys = pa.array(list(dims) * rows, pa.string())
    values = pa.array(list(dims.values()) * rows, pa.string())
    arrays = {
        "collection": pa.repeat(pa.scalar(base["collection"], pa.string()), rows),
        "window_start": pa.repeat(pa.scalar(base["window_start"], pa.int64()), rows).cast(stamp),
        "window_end": pa.repeat(pa.scalar(base["window_end"], pa.int64()), rows).cast(stamp),
        "dimensions": pa.MapArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32) * len(dims)), keys, values),
        "n_reports": pa.repeat(pa.scalar(int(base["n_reports"]), pa.int64()), rows),
        "columns": columns, "labels": labels, "estimate": means, "frequency": f, "variance": variances,
        "ci_low": low, "ci_high": high,
        "interval": pa.repeat(pa.scalar(config.marginal_interval, pa.string()), rows),
        "frequency_low": f_low, "frequency_high": f_high, "display_frequency": shown[0], "display_low": shown[1],
        "display_high": shown[2], "out_of_range": out}
    # the pane's fields (pane_index, ...) are null here: the pane stamps them (transforms/pane_outputs.py)
    return TableRows(MARGINAL_SCHEMA, pa.Table.from_arrays(
        [pa.nulls(rows, field.type) if field.name not in arrays
         else arrays[field.name] if isinstance(arrays[field.name], (pa.Array, pa.ChunkedArray))
         else pa.array(arrays[field.name], field.type) for field in schema], schema=schema))


_SETS: dict = {}


def _published_sets(config) -> tuple:
    """``(sets, their labels)`` of ``config.published_index`` as Arrow list arrays, made once per
    config (they are the same in every window)."""
    cached = _SETS.get(id(config))
    if cached is None or cached[0] is not config:
        schema = arrow_schema(MARGINAL_SCHEMA)
        names = config.layout.labels
        sets = [config.family[i] for i in config.published_index]
        cached = _SETS[id(config)] = (config, pa.array([list(s) for s in sets], schema.field("columns").type),
                                      pa.array([[names[b] for b in s] for s in sets], schema.field("labels").type))
    return cached[1], cached[2]


def group_tables(config, est) -> list:
    """``(group, interval, table, low, high)`` of every configured feature group: its unbiased table
    and the cells' intervals (a group with ``interval: simultaneous`` gets intervals that hold for all
    its cells together at the level, Sidak)."""
    out = []
    intervals = config.group_intervals or ("per_cell",) * len(config.groups)
    for group, interval in zip(config.groups, intervals):
        table = group_table(est, config.layout, group)
        level = sidak_level(config.level, len(table.cells)) if interval == "simultaneous" else config.level
        out.append((group, interval, table, *table.intervals(level)))
    return out


def table_rows(config, est, base, groups: list | None = None) -> list:
    """TableCell rows of every configured feature group (``groups``: :func:`group_tables`)."""
    rows = []
    for group, interval, table, low, high in group_tables(config, est) if groups is None else groups:
        for cell, cols, e, v, lo, hi in zip(table.cells, table.columns, table.estimate, table.variances, low, high):
            rows.append(dict(base, group=list(group), cell=list(cell), columns=list(cols), estimate=float(e),
                             variance=float(v), ci_low=float(lo), ci_high=float(hi), interval=interval,
                             **_frequency_fields(e, lo, hi, est.n)))
    return rows


def consistent_table_rows(config, est, base, groups: list | None = None) -> list:
    """ConsistentTableCell rows of every configured feature group, one per cell of its unbiased table
    (``groups``: :func:`group_tables`): :func:`~ldp_marginals.ldp.consistent.consistent_group_tables`
    of the window's unbiased tables, and the unbiased intervals clipped to [0, 1] and stretched to hold
    them (:func:`~ldp_marginals.ldp.consistent.consistent_intervals`)."""
    groups = group_tables(config, est) if groups is None else groups
    if not groups:
        return []
    n = float(est.n)
    fixed = consistent_group_tables(est, config.layout, [g for g, *_ in groups],
                                    [table.estimate / n for _, _, table, _, _ in groups])
    rows = []
    for (group, interval, table, low, high), freq in zip(groups, fixed.tables):
        lo, hi = consistent_intervals(np.asarray(low) / n, np.asarray(high) / n, freq)
        for cell, cols, f, a, b in zip(table.cells, table.columns, freq, lo, hi):
            rows.append(dict(base, group=list(group), cell=list(cell), columns=list(cols), method=fixed.method,
                             iterations=int(fixed.iterations), frequency=float(f), frequency_low=float(a),
                             frequency_high=float(b), interval=interval))
    return rows


def n_counts(config, ext) -> str:
    """What an extremes row's ``n`` counts: reports (``over: report``), or over clients the distinct client
    tokens, which under ``privacy.unit: device`` are the devices'."""
    if ext.over == "report":
        return N_REPORTS
    return N_DEVICES if config.device is not None else N_CLIENTS


def extreme_row(base, ext, n, estimate, variance, level, counts: str) -> dict:
    """An ExtremeEstimate row: the number of the ``n`` reports (or clients, or devices: ``counts``,
    :func:`n_counts`) whose OR/AND is 1."""
    low, high = normal_interval(estimate, variance, level)
    return dict(base, name=ext.name, op=ext.op, n=int(n), estimate=float(estimate), variance=float(variance),
                ci_low=float(low), ci_high=float(high), **displayed(estimate, low, high, 0.0, float(n)),
                n_counts=counts)


def withheld_row(config, base, n_reports: int, reason: str, cause: str = PRIVACY, statistic: str = ALL) -> dict:
    """A WithheldWindow row of the window and key in ``base``: ``cause`` privacy (the guard: what
    ``statistic`` holds back, ``all`` estimates of ``n_reports`` held-back reports, or the client
    extremes of a window) or precision (a conditional or conditional mean whose condition is not
    shown to hold; ``n_reports`` is then the window's)."""
    return dict(base, n_reports=int(n_reports), min_reports=config.min_reports, reason=reason, cause=cause,
                statistic=statistic)


def held_row(config, base, held: int, anything_released: bool) -> dict:
    """The privacy row of reports the guard held back: increments (slices, panes) of one window and
    key that never reached ``min_reports`` reports (or clients)."""
    if not anything_released and held < config.min_reports:
        reason = f"{held} reports < min_reports={config.min_reports}"
    else:
        reason = (f"{held} reports held back: increments (slices or panes) of fewer than min_reports="
                  f"{config.min_reports} {'devices' if config.counts_devices else 'reports (or clients)'}")
    return withheld_row(config, base, held, reason)


def window_rows(config, dims: tuple, acc, window: tuple, *, linear: bool = True, final: bool = True,
                atoms: list | None = None, atom_thin: dict | None = None):
    """``(kind, row)`` of the estimates of one window and key (:func:`window_blocks`, row by row)."""
    for kind, rows in window_blocks(config, dims, acc, window, linear=linear, final=final, atoms=atoms,
                                    atom_thin=atom_thin):
        for row in rows:
            yield kind, row


def window_blocks(config, dims: tuple, acc, window: tuple, *, linear: bool = True, final: bool = True,
                  atoms: list | None = None, client_reason: str | None = None, atom_thin: dict | None = None):
    """``(kind, rows)`` of the estimates of one window and key from ``acc``, its released content
    (at least one report): marginals, tables and their consistent tables, extremes over reports, conditionals and means
    (``linear``), and in the window's ``final`` pane the extremes over clients, or their withheld row
    (:func:`~ldp_marginals.transforms.publication.release.client_rule` over ``atoms``, the parts of
    ``acc`` that rows were published from apart; None: ``acc`` is one part). A pane that is
    ``final`` but not ``linear`` (a window's close, nothing new released) repeats the extremes over
    reports and the conditionals' and means' withheld rows of cause precision, so the window's latest
    extremes pane holds every extreme and its latest withheld pane every withheld row.

    A whole-report kind's rows are withheld where they rest on too few of the window's reports, or of
    one atom's (``atoms``; batch: ``atom_thin``, the union over its released slices, computed as they
    were summed): :func:`~ldp_marginals.transforms.publication.hadamard_rows.atom_thin_sets`."""
    if acc.n == 0:
        raise ValueError("acc must hold released reports, got n=0")
    base = base_row(config.name, window, dims)
    counted = dict(base, n_reports=acc.n)
    if config.sampling is not None:   # a channel kind (hadamard, subset): marginals and tables, in linear panes
        if linear or final:          # and the withheld rows of those that rest on too few reports
            marginals, groups = hadamard_estimates(config, acc)
            thin = thin_sets(config, marginals, groups)
            if atoms is not None and len(atoms) > 1 and panes_difference(config):   # the rule per atom
                thin = merge_thin(thin, atoms_thin_sets(config, atoms), of_atom=False)
            if atom_thin:
                thin = merge_thin(thin, atom_thin, of_atom=False)
        if linear:
            keep = np.array([s not in thin for s in config.published_sets], dtype=bool)
            kept = [g for g, cols in zip(groups, group_columns(groups)) if cols not in thin]
            yield MARGINALS, marginal_rows(config, marginals, counted, keep if thin else None)
            yield TABLES, table_rows(config, marginals, counted, kept)
            yield CONSISTENT_TABLES, consistent_table_rows(config, marginals, counted, kept)
        if (linear or final) and thin:
            yield WITHHELD, thin_rows(config, counted, thin, group_columns(groups))
        if linear or final:   # conditionals and means from the tables they rest on, or withheld with them
            yield from kind_analysis_rows(config, kind_estimate(config, marginals), counted, thin, linear)
        if final and config.client_extremes:   # a running product of one term per report (its client's)
            yield from client_blocks(config, base, acc, atoms, client_reason)
        return
    if linear or final:
        est = estimate_tmdh(acc.cooc, config.channels, exclusive_groups=config.layout.exclusive_groups)
        # memoized reports of one device share permanent responses: the variances and covariances of every
        # count carry their term (ldp/memoized.py with_repeats), the extremes' variance sums theirs (aggregator)
        est = with_repeats(est, config.client_channels, config.shared_reports)
    if linear:
        yield MARGINALS, marginal_rows(config, est, counted)
        groups = group_tables(config, est)
        yield TABLES, table_rows(config, est, counted, groups)
        yield CONSISTENT_TABLES, consistent_table_rows(config, est, counted, groups)
    if linear or (final and config.client_extremes):
        yield EXTREMES, [extreme_row(base, ext, acc.n, total, var, config.level, n_counts(config, ext))
                         for ext, (total, var) in zip(config.report_extremes, acc.extreme_sums)]
    if linear or final:
        for kind, row in (*conditional_rows(config, est, counted), *mean_rows(config, est, counted)):
            if linear or kind == WITHHELD:
                yield kind, [row]
    if final and config.client_extremes:
        yield from client_blocks(config, base, acc, atoms, client_reason)


def client_blocks(config, base, acc, atoms=None, client_reason: str | None = None):
    """``(kind, rows)`` of the extremes over clients of a window's final pane (every channel kind: a
    client's state is a running product of per-bit factors, or of one term per report of a whole-report
    kind), or their withheld row (:func:`~ldp_marginals.transforms.publication.release.client_rule`)."""
    reason = client_reason or client_rule(config, [acc] if atoms is None else atoms)
    if reason is not None:
        yield WITHHELD, [withheld_row(config, base, acc.n, reason, PRIVACY, CLIENT_EXTREMES)]
        return
    n_clients, sample = acc.n_clients, None
    if config.client_sample is not None:   # the clients the sample keeps, each on its c reports
        sample = sampled_clients([acc] if atoms is None else atoms, config.client_sample, config.min_reports)
        n_clients = sample.keys.size
    sums = config.aggregator.client_sums(acc, atoms, config.min_reports, sample)
    yield EXTREMES, [extreme_row(base, ext, n_clients, total, var, config.level, n_counts(config, ext))
                     for ext, (total, var) in zip(config.client_extremes, sums)]
    if sample is not None and sample.clients_left_out:   # counted: who the client rows leave out, and why
        yield WITHHELD, [withheld_row(
            config, base, acc.n,
            f"{sample.clients_left_out} clients left out of the client rows (reports_per_client="
            f"{config.client_sample}): {sample.short} sent fewer reports (or two of their reports share the "
            f"c-th rank), {sample.split} sent theirs in released increments as fewer than "
            f"min_reports={config.min_reports} others did; their reports count in the other rows",
            PRIVACY, CLIENT_SAMPLE)]


def thin_rows(config, base, thin: dict, table_columns: list) -> list:
    """The ``withheld`` rows (cause privacy, statistic ``marginal`` or ``table``; ``n_reports`` the
    window's) of a whole-report kind's marginals and tables that rest on too few reports (``thin``:
    :func:`~ldp_marginals.transforms.publication.hadamard_rows.thin_sets`)."""
    labels = config.layout.labels
    published = set(config.published_sets)
    rows = []
    for s, statistic in [(s, MARGINAL) for s in sorted(published & set(thin))] + \
                        [(c, TABLE) for c in table_columns if c in thin]:
        rows.append(withheld_row(config, base, base["n_reports"], f"{statistic} of {','.join(labels[b] for b in s)} "
                                 f"withheld: {thin[s].why}", PRIVACY, statistic))
    return rows


def kind_analysis_rows(config, est, base, thin: dict, linear: bool):
    """``(kind, rows)`` of a whole-report kind's conditionals and means (``est``:
    :func:`~ldp_marginals.transforms.publication.hadamard_rows.kind_estimate`): each as per bit
    (:func:`conditional_rows`, :func:`mean_rows`), but withheld (cause privacy) when the table it rests on
    (:func:`~ldp_marginals.transforms.publication.hadamard_rows.analysis_sets`) is in ``thin``; only
    withheld rows when not ``linear``."""
    labels = config.layout.labels
    sets = analysis_sets(config)
    n_cond, n_mean = len(config.conditionals), len(config.means)
    withheld = []
    for i, s in enumerate(sets):
        if s in thin:
            if i < n_cond:
                of, given = config.conditionals[i]
                what, statistic = f"P({','.join(labels[b] for b in of)} | {','.join(labels[b] for b in given)})", \
                    CONDITIONAL
            elif i < n_cond + n_mean:
                what, statistic = f"mean of {labels[config.means[i - n_cond][0]]}", MEAN
            else:
                what, statistic = f"extreme {config.report_extremes[i - n_cond - n_mean].name}", EXTREME
            withheld.append(withheld_row(config, base, base["n_reports"], f"{what} withheld: the table of "
                                         f"{','.join(labels[b] for b in s)} it rests on: {thin[s].why}", PRIVACY,
                                         statistic))
    keep = [s not in thin for s in sets]
    conditionals = [c for c, k in zip(config.conditionals, keep) if k]
    means = [m for m, k in zip(config.means, keep[n_cond:]) if k]
    extremes = [e for e, k in zip(config.report_extremes, keep[n_cond + n_mean:]) if k]
    if extremes:
        yield EXTREMES, [extreme_row(base, e, est.n, *est.extreme(e.op, e.bits), config.level, n_counts(config, e)) for e in extremes]
    for kind, row in (*conditional_rows(config, est, base, conditionals), *mean_rows(config, est, base, means)):
        if linear or kind == WITHHELD:
            yield kind, [row]
    if withheld:
        yield WITHHELD, withheld


def _not_shown(config, base, what: str, given: float, threshold: float, statistic: str) -> dict:
    return withheld_row(config, base, base["n_reports"],
                        f"{what} not published: its condition is not shown to hold (estimated count "
                        f"{given:.1f} <= {threshold:.1f}, the presence threshold at false-positive rate "
                        f"{config.conditional_alpha:g})", PRECISION, statistic)


def conditional_rows(config, est, base, conditionals=None):
    """``(kind, row)`` per configured conditional (or of ``conditionals``, some of them): a ``conditionals``
    row, or a ``withheld`` row of cause precision when the presence test does not show that the condition
    holds."""
    labels = config.layout.labels
    for of, given in (config.conditionals if conditionals is None else conditionals):
        c = conditional(est, of, given, config.level, config.conditional_alpha)
        names = {"of": [labels[b] for b in of], "given": [labels[b] for b in given]}
        if not c.present:
            yield WITHHELD, _not_shown(config, base, f"P({','.join(names['of'])} | {','.join(names['given'])})",
                                       c.given, c.threshold, CONDITIONAL)
            continue
        yield CONDITIONALS, dict(base, **names, estimate=c.estimate, variance=c.variance, ci_low=c.ci_low,
                                 ci_high=c.ci_high, given_count=c.given,
                                 **displayed(c.estimate, c.ci_low, c.ci_high, 0.0, 1.0))


def mean_rows(config, est, base, means=None):
    """``(kind, row)`` per published mean of a numeric feature (or of ``means``, some of them): a ``means``
    row, or (a conditional mean) a ``withheld`` row of cause precision when its condition is not shown to
    hold."""
    layout = config.layout
    for bit, given in (config.means if means is None else means):
        feature = layout.feature(layout.labels[bit])
        m = feature_mean(est, bit, feature.low, feature.high, given, config.level, config.conditional_alpha)
        names = [layout.labels[b] for b in given]
        if given and not m.present:
            yield WITHHELD, _not_shown(config, base, f"mean({feature.name} | {','.join(names)})", m.given,
                                       m.threshold, MEAN)
            continue
        yield MEANS, dict(base, feature=feature.name, given=names, low=feature.low, high=feature.high,
                          estimate=m.estimate, variance=m.variance, ci_low=m.ci_low, ci_high=m.ci_high,
                          given_count=m.given, **displayed(m.estimate, m.ci_low, m.ci_high, feature.low, feature.high))
