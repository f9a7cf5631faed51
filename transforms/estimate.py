"""The windowed estimation composite of one collection: the Beam side of the publication engine.

Batch: partials are combined per slice and key (hot keys spread over intermediate keys), then each
window's slices, every key of the collection together, go to the engine's
:func:`~ldp_marginals.transforms.publication.engine.batch_window`, which releases slices, caps
dimension values and builds every row. Streaming: the engine's pane state machine
(:mod:`~ldp_marginals.transforms.panes`). Both publish through the same engine path.
"""
from __future__ import annotations

import time

import apache_beam as beam

from ldp_marginals.ldp.windows import GLOBAL_WINDOW
from ldp_marginals.schemas.dead_letters import FILES_PLANNED, OVER_DEVICE_BOUND, REPORTS_PUBLISHED
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, WITHHELD
from ldp_marginals.transforms.combiners import CollectionCombineFn
from ldp_marginals.transforms.dead_letters import count, count_withheld
from ldp_marginals.transforms.panes import PANES
from ldp_marginals.transforms.publication.engine import PaneFile, batch_window
from ldp_marginals.transforms.windowing import slice_window_fn, window_fn


def window_bounds_ms(w) -> tuple:
    """(start, end) in millis of a window; the global window maps to [0, 2100-01-01)."""
    if isinstance(w, beam.window.GlobalWindow):
        return GLOBAL_WINDOW
    return int(w.start.micros // 1000), int(w.end.micros // 1000)


def _slice_entry(kv, w=beam.DoFn.WindowParam):
    """``((collection, dims), accumulator)`` of one slice -> ``(collection, (slice start, dims,
    accumulator))`` timestamped at the slice's start, so a sliding window assigns it exactly."""
    (collection, dims), acc = kv
    if acc.over_bound:   # reports past a device's bound (privacy.unit: device): counts only
        count(OVER_DEVICE_BOUND, acc.over_bound)
    start = window_bounds_ms(w)[0] if not isinstance(w, beam.window.GlobalWindow) else 0
    return beam.window.TimestampedValue((collection, (start, dims, acc)), start / 1000.0)


class PublishWindowFn(beam.DoFn):
    """``(collection, [(slice start, dims, accumulator), ...])`` of one window -> its rows, tagged by
    kind (:func:`~ldp_marginals.transforms.publication.engine.batch_window`), and for each kind with
    rows one :class:`PaneFile` (tag ``panes``): what its file holds, so that the file sink writes it
    as it is instead of shuffling the rows one by one to regroup them. With ``row_outputs`` False the
    rows go out only in their pane files (the kinds' outputs stay empty)."""

    def __init__(self, config, row_outputs: bool = True):
        self.config = config
        self.row_outputs = row_outputs

    def process(self, element, w=beam.DoFn.WindowParam):
        collection, slices = element
        slices = list(slices)
        window = None if isinstance(w, beam.window.GlobalWindow) else window_bounds_ms(w)
        by_kind = batch_window(self.config, window_bounds_ms(w), slices)
        # the guard's counters: the window's reports are published or held back whole
        published = sum(acc.n for _, _, acc in slices) - count_withheld(by_kind.get(WITHHELD, ()))
        if published:
            count(REPORTS_PUBLISHED, published)
        for kind, rows in by_kind.items():
            if self.row_outputs:
                for row in rows:
                    yield beam.pvalue.TaggedOutput(kind, row)
            if rows:
                count(FILES_PLANNED)   # the progress line's "of N" while the files are written
                yield beam.pvalue.TaggedOutput(PANES, PaneFile(kind, collection, window, 0, "on_time", rows))


HOT_KEY_FANOUT = 16  # intermediate keys per (collection, dimensions, slice) in the batch combine


class EstimateCollection(beam.PTransform):
    """Timestamped :class:`~ldp_marginals.transforms.source.Partial` s of one collection -> per
    window and key (collection, public dimensions): rows of every kind. Returns a dict of PCollections
    by kind and ``panes``, the pane files (streaming also ``dead_letters``, late batches)."""

    def __init__(self, config, streaming: bool = False, clock=time.time, row_outputs: bool = True,
                 watermark_delay_seconds: float = 0.0):
        super().__init__()
        self.config = config
        self.streaming = streaming
        self.clock = clock
        self.row_outputs = row_outputs
        self.watermark_delay_seconds = watermark_delay_seconds   # streaming (transforms.panes)

    def expand(self, partials):
        cfg = self.config
        if self.streaming:
            from ldp_marginals.transforms.panes import StreamingPanes
            return partials | "Panes" >> StreamingPanes(cfg, self.clock, self.row_outputs,
                                                              self.watermark_delay_seconds)
        # col : ((collection, dims), accumulator) per slice
        slices = (partials
                  | "Slices" >> beam.WindowInto(slice_window_fn(cfg.window))
                  | "KeyBySlice" >> beam.Map(lambda p: ((p.collection, p.dimensions), p.accumulator))
                  | "CombineSlices" >> beam.CombinePerKey(CollectionCombineFn(cfg)).with_hot_key_fanout(
                      HOT_KEY_FANOUT))
        # col : (collection, (slice start, dims, accumulator)), timestamped at the slice's start
        keyed = slices | "KeyByCollection" >> beam.Map(_slice_entry)
        if cfg.window.overlapping:  # a slice goes to each of its windows
            keyed = keyed | "Windows" >> beam.WindowInto(window_fn(cfg.window))
        outs = (keyed
                | "GroupWindow" >> beam.GroupByKey()
                | "Publish" >> beam.ParDo(PublishWindowFn(cfg, self.row_outputs)).with_outputs(*ESTIMATE_KINDS, PANES))
        return {k: outs[k] for k in ESTIMATE_KINDS + (PANES,)}
