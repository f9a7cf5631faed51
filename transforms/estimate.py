"""The windowed estimation composite: window, key, combine, extract rows (with the min_reports guard)."""
from __future__ import annotations

import math

import apache_beam as beam
import numpy as np

from ldp_marginals.ldp.intervals import normal_interval
from ldp_marginals.ldp.tables import group_table
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.ldp.windows import GLOBAL_WINDOW
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, EXTREMES, MARGINALS, TABLES, WITHHELD
from ldp_marginals.transforms.combiners import ClientExtremesCombineFn, CollectionCombineFn
from ldp_marginals.transforms.reports import REPORTS
from ldp_marginals.transforms.source import PARTIALS
from ldp_marginals.transforms.windowing import repane_on_every_pane, window_into


def window_bounds_ms(w) -> tuple:
    """(start, end) in millis of a window; the global window maps to [0, 2100-01-01)."""
    if isinstance(w, beam.window.GlobalWindow):
        return GLOBAL_WINDOW
    return int(w.start.micros // 1000), int(w.end.micros // 1000)


def marginal_rows(config, est, base) -> list:
    """One MarginalEstimate row per counted set of order >= 1."""
    low, high = est.intervals(config.level)
    n = est.n
    labels = config.layout.labels
    rows = []
    for i, s in enumerate(est.family):
        if not s:
            continue
        rows.append(dict(base, columns=list(s), labels=[labels[b] for b in s], estimate=float(est.means[i]),
                         frequency=float(est.means[i] / n), variance=float(est.variances[i]),
                         ci_low=float(low[i]), ci_high=float(high[i])))
    return rows


def table_rows(config, est, base) -> list:
    """TableCell rows of every configured feature group."""
    rows = []
    for group in config.groups:
        table = group_table(est, config.layout, group)
        low, high = table.intervals(config.level)
        for cell, cols, e, v, lo, hi in zip(table.cells, table.columns, table.estimate, table.variances, low, high):
            rows.append(dict(base, group=list(group), cell=list(cell), columns=list(cols), estimate=float(e),
                             frequency=float(e / est.n), variance=float(v), ci_low=float(lo), ci_high=float(hi)))
    return rows


def extreme_row(base, ext, n, estimate, variance, level) -> dict:
    low, high = normal_interval(estimate, variance, level)
    return dict(base, name=ext.name, op=ext.op, n=int(n), estimate=float(estimate), variance=float(variance),
                ci_low=float(low), ci_high=float(high))


class ExtractEstimatesFn(beam.DoFn):
    """``((collection, dims), WindowAccumulator)`` -> rows of every kind, tagged by kind; windows
    with fewer than ``min_reports`` reports produce only a ``withheld`` row."""

    def __init__(self, config):
        self.config = config

    def process(self, element, w=beam.DoFn.WindowParam):
        (collection, dims), acc = element
        start, end = window_bounds_ms(w)
        n = acc.cooc.n
        base = {"collection": collection, "window_start": start, "window_end": end, "dimensions": dict(dims)}
        if n < self.config.min_reports or n == 0:
            yield beam.pvalue.TaggedOutput(WITHHELD, dict(
                base, n_reports=n, min_reports=self.config.min_reports,
                reason=f"{n} reports < min_reports={self.config.min_reports}"))
            return
        est = estimate_tmdh(acc.cooc, self.config.channels, exclusive_groups=self.config.layout.exclusive_groups)
        counted = dict(base, n_reports=n)
        for row in marginal_rows(self.config, est, counted):
            yield beam.pvalue.TaggedOutput(MARGINALS, row)
        for row in table_rows(self.config, est, counted):
            yield beam.pvalue.TaggedOutput(TABLES, row)
        for ext, (total, var) in zip(self.config.report_extremes, acc.extreme_sums):
            yield beam.pvalue.TaggedOutput(EXTREMES, extreme_row(base, ext, n, total, var, self.config.level))


class SumClientExtremesFn(beam.DoFn):
    """``((collection, dims), [per-client [(estimate, variance)...]])`` -> extreme rows summed over
    clients; withheld when fewer clients than ``min_reports``."""

    def __init__(self, config):
        self.config = config

    def process(self, element, w=beam.DoFn.WindowParam):
        (collection, dims), per_client = element
        per_client = list(per_client)
        start, end = window_bounds_ms(w)
        base = {"collection": collection, "window_start": start, "window_end": end, "dimensions": dict(dims)}
        n = len(per_client)
        if n < self.config.min_reports:
            yield beam.pvalue.TaggedOutput(WITHHELD, dict(
                base, n_reports=n, min_reports=self.config.min_reports,
                reason=f"{n} clients < min_reports={self.config.min_reports} (client extremes)"))
            return
        values = np.array(per_client, dtype=float).reshape(n, -1, 2)
        # math.fsum: exactly rounded, so the result does not depend on the order clients arrive in
        sums = [[math.fsum(values[:, e, j]) for j in range(2)] for e in range(values.shape[1])]
        for ext, (total, var) in zip(self.config.client_extremes, sums):
            yield beam.pvalue.TaggedOutput(EXTREMES, extreme_row(base, ext, n, total, var, self.config.level))


class CapDimensionValuesFn(beam.DoFn):
    """``(collection, [(dims, state)...])`` of one window -> ``((collection, capped dims), state)``:
    values of a dimension past its ``max_values`` (by weight) become ``__other__`` and their states
    are merged (``merge``, into a new state), so no window lists unbounded values and no report is
    dropped. In streaming the grouping accumulates the keys' panes, so a key can come several
    times; its states only grow, so the heaviest is its latest and only it is used."""

    def __init__(self, config, weight, merge):
        self.config = config
        self.weight = weight
        self.merge = merge

    def process(self, element):
        collection, keyed = element
        latest = {}  # in streaming the grouping accumulates a key's panes: its heaviest is its latest
        for dims, state in keyed:
            if dims not in latest or self.weight(state) > self.weight(latest[dims]):
                latest[dims] = state
        capped = self.config.cap_dimension_values({dims: self.weight(state) for dims, state in latest.items()})
        merged = {}
        for dims, state in sorted(latest.items()):
            merged.setdefault(capped[dims], []).append(state)
        for dims, states in sorted(merged.items()):
            yield (collection, dims), (states[0] if len(states) == 1 else self.merge(states))


class CapDimensionValues(beam.PTransform):
    """Per window: ``((collection, dims), state)`` -> the same with over-limit values as ``__other__``.
    The grouping by collection sees every key of the window: once in batch; in streaming at every
    upstream pane (:func:`~ldp_marginals.transforms.windowing.repane_on_every_pane`), so each pane
    carries every key's latest state."""

    def __init__(self, config, weight, merge, streaming: bool = False):
        super().__init__()
        self.config = config
        self.streaming = streaming
        self.fn = CapDimensionValuesFn(config, weight, merge)

    def expand(self, keyed):
        by_collection = keyed | "KeyByCollection" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], kv[1])))
        if self.streaming:
            by_collection = by_collection | "EveryPane" >> repane_on_every_pane(self.config)
        return (by_collection
                | "GroupWindow" >> beam.GroupByKey()
                | "Cap" >> beam.ParDo(self.fn))


def _merge_client_states(states):
    return [value for state in states for value in state]


class EstimateCollection(beam.PTransform):
    """Timestamped :class:`~ldp_marginals.transforms.reports.Report` s of one collection -> per window and key
    (collection, public dimensions): marginal rows, table rows, extreme rows, withheld windows.
    Owns its windowing and triggers. Returns a dict of PCollections by kind."""

    def __init__(self, config, streaming: bool = False):
        super().__init__()
        self.config = config
        self.streaming = streaming

    def expand(self, inputs):
        """``inputs``: ``{"reports": ..., "partials": ...}``, the collection's timestamped reports and
        the timestamped :class:`~ldp_marginals.transforms.source.Partial` accumulators of its readers."""
        cfg = self.config
        windowed = inputs[REPORTS] | "Window" >> window_into(cfg, self.streaming)
        # col : ((collection, dimensions), packed bits)
        keyed = windowed | "KeyByDimensions" >> beam.Map(lambda r: ((r.collection, r.dimensions), r.bits))
        # col : ((collection, dimensions), WindowAccumulator)
        partials = (inputs[PARTIALS]
                    | "WindowPartials" >> window_into(cfg, self.streaming)
                    | "KeyPartials" >> beam.Map(lambda p: ((p.collection, p.dimensions), p.accumulator)))
        keyed = (keyed, partials) | "WithPartials" >> beam.Flatten()
        combined = keyed | "Combine" >> beam.CombinePerKey(CollectionCombineFn(cfg))
        cap = bool(cfg.dimensions)
        if cap:  # merged into a new accumulator: in streaming the grouped ones are kept for later panes
            combined = combined | "CapDimensionValues" >> CapDimensionValues(
                cfg, lambda acc: acc.cooc.n, lambda accs: cfg.aggregator.merge([cfg.aggregator.create(), *accs]),
                self.streaming)
        outs = combined | "Extract" >> beam.ParDo(ExtractEstimatesFn(cfg)).with_outputs(
            MARGINALS, TABLES, EXTREMES, WITHHELD)
        result = {k: outs[k] for k in ESTIMATE_KINDS}
        if cfg.client_extremes:
            per_client = (windowed
                          | "ClientReports" >> beam.Filter(lambda r: r.client is not None)
                          | "KeyByClient" >> beam.Map(lambda r: ((r.collection, r.dimensions, r.client), r.bits))
                          | "CombinePerClient" >> beam.CombinePerKey(ClientExtremesCombineFn(cfg))
                          | "DropClient" >> beam.Map(lambda kv: ((kv[0][0], kv[0][1]), kv[1]))
                          | "GroupClients" >> beam.GroupByKey()
                          | "ClientLists" >> beam.MapTuple(lambda key, per: (key, list(per))))
            if cap:  # weighted by clients, as client extremes are counted
                per_client = per_client | "CapClientDimensionValues" >> CapDimensionValues(
                    cfg, len, _merge_client_states, self.streaming)
            client_outs = per_client | "SumClients" >> beam.ParDo(SumClientExtremesFn(cfg)).with_outputs(
                EXTREMES, WITHHELD)
            result[EXTREMES] = ((result[EXTREMES], client_outs[EXTREMES])
                                | "FlattenExtremes" >> beam.Flatten())
            result[WITHHELD] = ((result[WITHHELD], client_outs[WITHHELD])
                                | "FlattenWithheld" >> beam.Flatten())
        return result
