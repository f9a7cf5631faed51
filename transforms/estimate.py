"""The windowed estimation composite: window, key, combine, extract rows (with the min_reports guard)."""
from __future__ import annotations

import time

import apache_beam as beam

from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.intervals import normal_interval, sidak_level
from ldp_marginals.ldp.means import feature_mean
from ldp_marginals.ldp.tables import group_table
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.ldp.windows import GLOBAL_WINDOW
from ldp_marginals.schemas.outputs import CONDITIONALS, ESTIMATE_KINDS, EXTREMES, MARGINALS, MEANS, TABLES, WITHHELD
from ldp_marginals.transforms.combiners import CollectionCombineFn
from ldp_marginals.transforms.source import Partial
from ldp_marginals.transforms.windowing import window_into


def window_bounds_ms(w) -> tuple:
    """(start, end) in millis of a window; the global window maps to [0, 2100-01-01)."""
    if isinstance(w, beam.window.GlobalWindow):
        return GLOBAL_WINDOW
    return int(w.start.micros // 1000), int(w.end.micros // 1000)


def marginal_rows(config, est, base) -> list:
    """One MarginalEstimate row per published set (``config.published_index``); with
    ``marginal_interval: simultaneous`` the intervals hold for all of them together at the level
    (Sidak)."""
    n = est.n
    labels = config.layout.labels
    if len(est.family) != len(config.family):
        raise ValueError(f"est must be of the config's {len(config.family)} counted sets, got {len(est.family)}")
    index = config.published_index
    level = config.level
    if config.marginal_interval == "simultaneous" and index:
        level = sidak_level(level, len(index))
    low, high = est.intervals(level)
    rows = []
    for i in index:
        s = est.family[i]
        rows.append(dict(base, columns=list(s), labels=[labels[b] for b in s], estimate=float(est.means[i]),
                         frequency=float(est.means[i] / n), variance=float(est.variances[i]),
                         ci_low=float(low[i]), ci_high=float(high[i]), interval=config.marginal_interval))
    return rows


def table_rows(config, est, base) -> list:
    """TableCell rows of every configured feature group; a group with ``interval: simultaneous``
    gets intervals that hold for all its cells together at the level (Sidak)."""
    rows = []
    intervals = config.group_intervals or ("per_cell",) * len(config.groups)
    for group, interval in zip(config.groups, intervals):
        table = group_table(est, config.layout, group)
        level = sidak_level(config.level, len(table.cells)) if interval == "simultaneous" else config.level
        low, high = table.intervals(level)
        for cell, cols, e, v, lo, hi in zip(table.cells, table.columns, table.estimate, table.variances, low, high):
            rows.append(dict(base, group=list(group), cell=list(cell), columns=list(cols), estimate=float(e),
                             frequency=float(e / est.n), variance=float(v), ci_low=float(lo), ci_high=float(hi),
                             interval=interval))
    return rows


def extreme_row(base, ext, n, estimate, variance, level) -> dict:
    low, high = normal_interval(estimate, variance, level)
    return dict(base, name=ext.name, op=ext.op, n=int(n), estimate=float(estimate), variance=float(variance),
                ci_low=float(low), ci_high=float(high))


def withheld_row(config, base, n_reports: int, reason: str) -> dict:
    """A WithheldWindow row of the window and key in ``base``."""
    return dict(base, n_reports=int(n_reports), min_reports=config.min_reports, reason=reason)


def window_rows(config, collection: str, dims: tuple, acc, window: tuple):
    """``(kind, row)`` of every estimate of one window and key: marginals, tables, extremes,
    conditionals and means, or ``withheld`` rows for what has fewer than ``min_reports`` reports
    (clients, for client extremes) and for ratios whose denominator may be 0."""
    start, end = window
    n = acc.n
    base = {"collection": collection, "window_start": start, "window_end": end, "dimensions": dict(dims)}
    if acc.held:  # slices whose reports never reached min_reports: accounted for, never published
        yield WITHHELD, held_row(config, base, acc.held)
        if n == 0:
            return
    clients = acc.n_clients
    clients_withheld = config.client_extremes and (clients < config.min_reports or clients == 0)
    if n < config.min_reports or n == 0:
        yield WITHHELD, withheld_row(config, base, n, f"{n} reports < min_reports={config.min_reports}")
        if clients_withheld:  # fewer clients than reports: the client extremes are withheld too
            yield WITHHELD, _clients_withheld(config, base, clients)
        return
    est = estimate_tmdh(acc.cooc, config.channels, exclusive_groups=config.layout.exclusive_groups)
    counted = dict(base, n_reports=n)
    for row in marginal_rows(config, est, counted):
        yield MARGINALS, row
    for row in table_rows(config, est, counted):
        yield TABLES, row
    for ext, (total, var) in zip(config.report_extremes, acc.extreme_sums):
        yield EXTREMES, extreme_row(base, ext, n, total, var, config.level)
    yield from conditional_rows(config, est, counted)
    yield from mean_rows(config, est, counted)
    if clients_withheld:
        yield WITHHELD, _clients_withheld(config, base, clients)
    elif config.client_extremes:
        for ext, (total, var) in zip(config.client_extremes, config.aggregator.client_sums(acc)):
            yield EXTREMES, extreme_row(base, ext, clients, total, var, config.level)


def conditional_rows(config, est, base):
    """``(kind, row)`` per configured conditional: a ``conditionals`` row, or a ``withheld`` row when
    the interval of ``t_given`` includes 0 (the ratio and its interval are unreliable there)."""
    labels = config.layout.labels
    for of, given in config.conditionals:
        c = conditional(est, of, given, config.level)
        names = {"of": [labels[b] for b in of], "given": [labels[b] for b in given]}
        if not c.given_low > 0:
            yield WITHHELD, _not_published(config, base, f"P({','.join(names['of'])} | {','.join(names['given'])})",
                                           c.given)
            continue
        yield CONDITIONALS, dict(base, **names, estimate=c.estimate, variance=c.variance, ci_low=c.ci_low,
                                 ci_high=c.ci_high, given_count=c.given)


def _not_published(config, base, what: str, given: float) -> dict:
    return withheld_row(config, base, base["n_reports"], f"{what} not published: the {config.level:g} interval "
                        f"of t_given includes 0 (t_given={given:.1f})")


def mean_rows(config, est, base):
    """``(kind, row)`` per published mean of a numeric feature: a ``means`` row, or (a conditional
    mean) a ``withheld`` row when the interval of ``t_given`` includes 0."""
    layout = config.layout
    for bit, given in config.means:
        feature = layout.feature(layout.labels[bit])
        m = feature_mean(est, bit, feature.low, feature.high, given, config.level)
        names = [layout.labels[b] for b in given]
        if given and not m.given_low > 0:
            yield WITHHELD, _not_published(config, base, f"mean({feature.name} | {','.join(names)})", m.given)
            continue
        yield MEANS, dict(base, feature=feature.name, given=names, low=feature.low, high=feature.high,
                          estimate=m.estimate, variance=m.variance, ci_low=m.ci_low, ci_high=m.ci_high,
                          given_count=m.given)


def held_row(config, base, held) -> dict:
    """The withheld row of reports held back by the guard: increments (slices, panes) that never
    reached ``min_reports``."""
    return withheld_row(config, base, held, f"{held} reports held back: increments (slices or panes) of fewer "
                        f"than min_reports={config.min_reports} reports")


def releasable(config, acc) -> bool:
    """Whether an increment may be published: at least ``min_reports`` reports and, when the
    collection has client extremes and the increment names clients, at least ``min_reports``
    clients (a difference of client-extreme sums depends only on the clients of the increment)."""
    if acc.n < max(1, config.min_reports):
        return False
    return not config.client_extremes or acc.n_clients == 0 or acc.n_clients >= config.min_reports


def release_slice(config, acc):
    """A slice's accumulator as published (:func:`releasable`) or held back whole (a new
    accumulator that only counts its reports in ``held``)."""
    if releasable(config, acc):
        return acc
    out = config.aggregator.create()
    out.held = acc.n + acc.held
    return out


def _clients_withheld(config, base, clients) -> dict:
    return withheld_row(config, base, clients, f"{clients} clients < min_reports={config.min_reports} "
                        "(client extremes)")


class ExtractEstimatesFn(beam.DoFn):
    """``((collection, dims), WindowAccumulator)`` -> rows of every kind, tagged by kind
    (:func:`window_rows`)."""

    def __init__(self, config):
        self.config = config

    def process(self, element, w=beam.DoFn.WindowParam):
        (collection, dims), acc = element
        for kind, row in window_rows(self.config, collection, dims, acc, window_bounds_ms(w)):
            yield beam.pvalue.TaggedOutput(kind, row)


def cap_states(config, states: dict, weight, merge) -> dict:
    """``{dims: state}`` of one window -> the same with each dimension's values past its
    ``max_values`` (by weight) as ``__other__``; states that meet under one key are merged
    (``merge``, into a new state), so no window lists unbounded values and no report is dropped."""
    capped = config.cap_dimension_values({dims: weight(state) for dims, state in states.items()})
    merged = {}
    for dims, state in sorted(states.items()):
        merged.setdefault(capped[dims], []).append(state)
    return {dims: (group[0] if len(group) == 1 else merge(group)) for dims, group in sorted(merged.items())}


class CapDimensionValuesFn(beam.DoFn):
    """``(collection, [(dims, state)...])`` of one window -> ``((collection, capped dims), state)``
    (:func:`cap_states`)."""

    def __init__(self, config, weight, merge):
        self.config = config
        self.weight = weight
        self.merge = merge

    def process(self, element):
        collection, keyed = element
        for dims, state in cap_states(self.config, dict(keyed), self.weight, self.merge).items():
            yield (collection, dims), state


class CapDimensionValues(beam.PTransform):
    """Per window (batch): ``((collection, dims), state)`` -> the same with over-limit values as
    ``__other__``; the grouping by collection sees every key of the window once."""

    def __init__(self, config, weight, merge):
        super().__init__()
        self.config = config
        self.fn = CapDimensionValuesFn(config, weight, merge)

    def expand(self, keyed):
        return (keyed
                | "KeyByCollection" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], kv[1])))
                | "GroupWindow" >> beam.GroupByKey()
                | "Cap" >> beam.ParDo(self.fn))


HOT_KEY_FANOUT = 16  # intermediate keys per (collection, dimensions) in the batch combine


class EstimateCollection(beam.PTransform):
    """Timestamped :class:`~ldp_marginals.transforms.source.Partial` s of one collection -> per
    window and key (collection, public dimensions): marginal rows, table rows, extreme rows,
    withheld rows. Returns a dict of PCollections by kind.

    Batch: Beam's windows, a combine per key spread over ``HOT_KEY_FANOUT`` intermediate keys,
    dimension values capped per window. Streaming: the panes state machine of
    :mod:`~ldp_marginals.transforms.panes` (which also returns the pane files, ``panes``)."""

    def __init__(self, config, streaming: bool = False, clock=time.time):
        super().__init__()
        self.config = config
        self.streaming = streaming
        self.clock = clock

    def expand(self, partials):
        cfg = self.config
        if self.streaming:
            from ldp_marginals.transforms.panes import StreamingPanes
            return partials | "Panes" >> StreamingPanes(cfg, self.clock)
        if cfg.window.type == "sliding" and cfg.min_reports > 0:
            # the guard across overlapping windows: a slice is published in all its windows or
            # (fewer than min_reports reports) in none, so no two windows differ by a small slice
            partials = (partials
                        | "SliceWindows" >> beam.WindowInto(beam.window.FixedWindows(cfg.window.period_seconds))
                        | "KeyBySlice" >> beam.Map(lambda p: ((p.collection, p.dimensions), p.accumulator))
                        | "CombineSlices" >> beam.CombinePerKey(CollectionCombineFn(cfg)).with_hot_key_fanout(
                            HOT_KEY_FANOUT)
                        | "ReleaseSlices" >> beam.MapTuple(
                            lambda key, acc: Partial(key[0], key[1], release_slice(cfg, acc))))
        combined = (partials
                    | "Window" >> window_into(cfg, False)
                    | "KeyByDimensions" >> beam.Map(lambda p: ((p.collection, p.dimensions), p.accumulator))
                    | "Combine" >> beam.CombinePerKey(CollectionCombineFn(cfg)).with_hot_key_fanout(HOT_KEY_FANOUT))
        if cfg.dimensions:  # merged into a new accumulator
            combined = combined | "CapDimensionValues" >> CapDimensionValues(
                cfg, lambda acc: acc.n, lambda accs: cfg.aggregator.merge([cfg.aggregator.create(), *accs]))
        outs = combined | "Extract" >> beam.ParDo(ExtractEstimatesFn(cfg)).with_outputs(*ESTIMATE_KINDS)
        return {k: outs[k] for k in ESTIMATE_KINDS}
