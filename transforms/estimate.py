"""The windowed estimation composite of one collection: the Beam side of the publication engine.

Publication is keyed by (collection, capped key), so no worker holds a collection's every key.

Batch: partials are combined per slice and key (hot keys spread over intermediate keys). The cap of
each window is a small side computation on the values' weights alone (reports per value,
:mod:`~ldp_marginals.transforms.publication.cap`); each slice is then routed to its capped key, as
released or held (:func:`~ldp_marginals.transforms.publication.engine.batch_route`), and the slices
of each window and capped key are combined into two accumulators (released, held) before the one
step that makes their rows (:func:`~ldp_marginals.transforms.publication.engine.batch_key`).
Rollups (batch): which rollup rows a window publishes is another small side computation, on the
capped keys' withheld counts (:func:`~ldp_marginals.transforms.publication.rollups.published_rollups`;
under a whole-report kind also their thin-row counts, :mod:`~ldp_marginals.transforms.publication.kind_rollups`);
each capped key's two accumulators go to its published rollup rows, combined per rollup row.
Streaming: the engine's three keyed state machines (:mod:`~ldp_marginals.transforms.panes`). Both
publish through the same engine path.
"""
from __future__ import annotations

import time
import typing

import apache_beam as beam
import numpy as np

from ldp_marginals.ldp.aggregate import WindowAccumulator, kept_devices
from ldp_marginals.ldp.windows import GLOBAL_WINDOW
from ldp_marginals.schemas.dead_letters import (
    CLIENT_ROWS_WITHHELD_BY_LEDGER,
    FILES_PLANNED,
    OVER_DEVICE_BOUND,
    REPORTS_PUBLISHED,
    REPORTS_WITHHELD_BY_LEDGER,
)
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, WITHHELD
from ldp_marginals.transforms import coders
from ldp_marginals.transforms.combiners import (
    CollectionCombineFn,
    CombineWithHotKeyFanout,
    ReleasedHeldCombineFn,
    WeightsCombineFn,
)
from ldp_marginals.transforms.dead_letters import count, count_withheld
from ldp_marginals.transforms.device_keys import BoundKeys
from ldp_marginals.transforms.pane_outputs import pane_outputs
from ldp_marginals.transforms.panes import PANES
from ldp_marginals.transforms.publication.cap import decide, value_weights
from ldp_marginals.transforms.publication.hadamard_rows import atom_thin_sets, merge_thin
from ldp_marginals.transforms.publication.engine import (ON_TIME, PaneFile, batch_key, batch_route, rollup_decision, rollup_parts,
                                                         rollup_rows)
from ldp_marginals.transforms.publication.kind_rollups import kind_part
from ldp_marginals.transforms.publication.releases import ledger_part, ledger_slice, release_to_json, verdict
from ldp_marginals.transforms.windowing import slice_window_fn, window_fn

KEY = typing.Tuple[str, coders.Dims]   # (collection, dimensions) or (collection, capped key)
SliceEntry = typing.Tuple[str, typing.Tuple[int, coders.Dims, WindowAccumulator]]
Routed = typing.Tuple[typing.Tuple[KEY, bool], WindowAccumulator]
Flagged = typing.Tuple[KEY, typing.Tuple[bool, WindowAccumulator]]


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


def _weights(kv):
    """A slice entry -> ``(collection, {name: {value: reports}})``: all the cap reads of it."""
    collection, (_, dims, acc) = kv
    return collection, value_weights([(dims, acc.n)])


class PublishKeyFn(beam.DoFn):
    """``((collection, capped key), (released, held))`` of one window -> its rows, tagged by kind
    (:func:`~ldp_marginals.transforms.publication.engine.batch_key`), and for each kind with rows one
    :class:`PaneFile` (tag ``panes``): what its file holds, so that the file sink writes it as it is
    instead of shuffling the rows one by one to regroup them. With ``row_outputs`` False the rows go
    out only in their pane files (the kinds' outputs stay empty)."""

    def __init__(self, config, row_outputs: bool = True):
        self.config = config
        self.row_outputs = row_outputs

    def process(self, element, w=beam.DoFn.WindowParam, atom_thin=None):
        return self.publish(element, w, None, atom_thin)

    def publish(self, element, w, ledger, atom_thin=None):
        (collection, key), (released, held) = element
        by_kind = batch_key(self.config, window_bounds_ms(w), key, released, held,
                            (atom_thin or {}).get((collection, key)),
                            **({} if ledger is None else {"ledger": ledger}))
        ledgered, _, client_reason = ledger_part(ledger, window_bounds_ms(w), key)
        if ledgered:
            count(REPORTS_WITHHELD_BY_LEDGER, ledgered)
        if client_reason and released is not None and released.n:
            count(CLIENT_ROWS_WITHHELD_BY_LEDGER)
        # the guard's counters: the key's released slices are published, its held ones held back
        count_withheld(by_kind.get(WITHHELD, ()))
        if released is not None and released.n:
            count(REPORTS_PUBLISHED, released.n)
        yield from self.outputs(collection, key, by_kind, w)

    def outputs(self, collection, key, by_kind, w):
        window = None if isinstance(w, beam.window.GlobalWindow) else window_bounds_ms(w)
        for kind, rows in by_kind.items():
            if len(rows):   # a batch window's one pane: on time and final
                count(FILES_PLANNED)   # the progress line's "of N" while the files are written
                yield from pane_outputs(PaneFile(kind, collection, window, 0, ON_TIME, rows, key, True),
                                        self.row_outputs)


class PublishKeyUnderLedgerFn(PublishKeyFn):
    """:class:`PublishKeyFn` under the release ledger's verdict (a side input over the whole run)."""

    def process(self, element, ledger, w=beam.DoFn.WindowParam, atom_thin=None):
        return self.publish(element, w, ledger, atom_thin)


class PublishRollupFn(PublishKeyFn):
    """``((collection, marked key), accumulator)`` of one window's rollup row -> its rows and pane files
    (:func:`~ldp_marginals.transforms.publication.engine.rollup_rows`); its reports are counted by
    its keys."""

    def process(self, element, decisions, w=beam.DoFn.WindowParam):
        (collection, key), acc = element
        thin = decisions[collection][1].get(key) if collection in decisions else None
        yield from self.outputs(collection, key, rollup_rows(self.config, window_bounds_ms(w), key, acc, thin), w)


def _held_devices(kv) -> tuple:
    """A routed slice ``(((collection, capped key), released), accumulator)`` -> ``(collection, {capped
    key: the devices of its reports if held, else none})``."""
    ((collection, key), released), acc = kv
    return collection, {key: np.zeros(0, dtype=np.uint64) if released else kept_devices([acc])}


def _union_devices(dicts) -> dict:
    """``{capped key: devices of its withheld slices}`` of a window's routed slices together (a capped
    key's slices, as ``__other__``'s, in several dicts: their devices united, each once)."""
    out = {}
    for d in dicts:
        for key, devices in d.items():
            out[key] = np.union1d(out[key], devices) if key in out else devices
    return out


def _union(dicts) -> dict:
    """``{capped key: withheld reports}`` of a window's capped keys (each in one dict) together."""
    out = {}
    for d in dicts:
        out.update(d)
    return out


def _rollup_parts(kv, cfg, decisions):
    (collection, key), pair = kv
    for row, acc in rollup_parts(cfg, decisions[collection][0] if collection in decisions else set(), key, pair):
        yield (collection, row), acc


class RollupRows(beam.PTransform):
    """A window's capped keys, ``((collection, capped key), (released, held))`` -> the rows of its
    published rollup rows, by kind and ``panes``. Which rows are published is decided per window from
    the capped keys' withheld counts alone (a side input); each rollup row is the combine of its keys'
    accumulators, spread like the keys' own."""

    def __init__(self, config, row_outputs: bool = True, routed=None):
        super().__init__()
        self.config = config
        self.row_outputs = row_outputs
        self.routed = routed   # privacy.unit device: the routed slices, whose withheld devices the rule counts

    def expand(self, keys):
        cfg = self.config
        # col : (collection, {marked key}) per window: the rollup rows complementary suppression allows
        if cfg.counts_devices:   # the devices of each key's withheld slices, each device once
            held = (self.routed
                    | "HeldDevices" >> beam.Map(_held_devices)
                    | "SumHeld" >> beam.CombinePerKey(_union_devices))
        else:
            held = (keys
                    | "Held" >> beam.Map(lambda kv: (kv[0][0], {kv[0][1]: kv[1][1].n if kv[1][1] is not None else 0}))
                    | "SumHeld" >> beam.CombinePerKey(_union))
        if cfg.sampling is not None:   # a whole-report kind: each capped key's thin-row counts, released and held
            kinds = beam.pvalue.AsDict(
                keys
                | "KindParts" >> beam.Map(lambda kv: (kv[0][0], {kv[0][1]: kind_part(cfg, *kv[1])}))
                | "SumKindParts" >> beam.CombinePerKey(_union))
            published = held | "Suppress" >> beam.Map(
                lambda kv, parts: (kv[0], rollup_decision(cfg, kv[1], parts.get(kv[0], {}))), kinds)
        else:
            published = held | "Suppress" >> beam.Map(lambda kv: (kv[0], rollup_decision(cfg, kv[1], None)))
        decisions = beam.pvalue.AsDict(published)   # (collection, (published marked keys, {marked key: thin sets}))
        # col : ((collection, marked key), accumulator) per window: a rollup row's content
        rows = (keys
                | "ToRollups" >> beam.FlatMap(_rollup_parts, cfg, decisions).with_output_types(
                    coders.KeyedAccumulator)
                | "CombineRollups" >> CombineWithHotKeyFanout(CollectionCombineFn(cfg, open_partials=False),
                                                              HOT_KEY_FANOUT, KEY))
        return rows | "Publish" >> beam.ParDo(PublishRollupFn(cfg, self.row_outputs), decisions).with_outputs(
            *ESTIMATE_KINDS, PANES)


HOT_KEY_FANOUT = 16  # shards per (collection, dimensions, slice) and per capped key in the batch combines


class EstimateCollection(beam.PTransform):
    """Timestamped :class:`~ldp_marginals.transforms.source.Partial` s of one collection -> per
    window and capped key (collection, public dimensions): rows of every kind. Returns a dict of
    PCollections by kind and ``panes``, the pane files (streaming also ``dead_letters``, late batches)."""

    def __init__(self, config, streaming: bool = False, clock=time.time, row_outputs: bool = True,
                 watermark_delay_seconds: float = 0.0, ledger: list | None = None, foreign: frozenset = frozenset()):
        super().__init__()
        self.ledger = ledger   # batch: the release ledger's earlier releases of the collection, or None (no ledger)
        self.foreign = foreign   # batch: witness digests of other collections' releases in the ledger
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
                  | "KeyBySlice" >> beam.Map(lambda p: ((p.collection, p.dimensions), p.accumulator)).with_output_types(
                      coders.KeyedAccumulator)
                  | "CombineSlices" >> (
                      # under a device bound a slice and key's open partials meet in one round (see
                      # CollectionCombineFn); otherwise spread over shards first
                      beam.CombinePerKey(CollectionCombineFn(cfg, settle=not cfg.bounds_keys)).with_output_types(
                          coders.KeyedAccumulator)
                      if cfg.device is not None else CombineWithHotKeyFanout(CollectionCombineFn(cfg), HOT_KEY_FANOUT, KEY)))
        if cfg.bounds_keys:   # each device in at most max_keys_per_device of a slice's keys, then settled
            slices = slices | "BoundKeys" >> BoundKeys(cfg)
        # col : (collection, (slice start, dims, accumulator)), timestamped at the slice's start
        entries = slices | "KeyByCollection" >> beam.Map(_slice_entry).with_output_types(SliceEntry)
        per_slice = entries
        if cfg.window.overlapping:  # a slice goes to each of its windows
            entries = entries | "Windows" >> beam.WindowInto(window_fn(cfg.window))
        # col : (collection, {name: kept values}) per window: the cap, from the values' weights alone
        caps = (entries
                | "Weights" >> beam.Map(_weights)
                | "SumWeights" >> beam.CombinePerKey(WeightsCombineFn())
                | "Cap" >> beam.Map(lambda kv: (kv[0], decide(cfg, {}, kv[1]))))
        ledger, releases = None, None
        if self.ledger is not None:
            # col : one Verdict (global window): what the release ledger withholds of the run, and its release
            ledger = (per_slice
                      | "LedgerSlices" >> beam.Map(_ledger_slice, cfg, self.foreign)
                      | "LedgerAllSlices" >> beam.WindowInto(beam.window.GlobalWindows())
                      | "LedgerCollect" >> beam.combiners.ToList()
                      | "LedgerVerdict" >> beam.Map(
                          _verdict, cfg, list(self.ledger), beam.pvalue.AsSingleton(caps
                                                  | "LedgerCaps" >> beam.ParDo(_window_cap)
                                                  | "LedgerAllCaps" >> beam.WindowInto(beam.window.GlobalWindows())
                                                  | "LedgerCapList" >> beam.combiners.ToList())))
            releases = ledger | "Release" >> beam.Map(lambda v: (cfg.name, release_to_json(v.release)))
            ledger = beam.pvalue.AsSingleton(ledger)
        # col : (((collection, capped key), released), accumulator) per slice and key
        routed = entries | "Route" >> beam.Map(_route, cfg, beam.pvalue.AsDict(caps),
                                               *([] if ledger is None else [ledger])).with_output_types(Routed)
        # col : ((collection, capped key), (released, held)) per window: two accumulators
        keys = (routed
                | "CombineKeys" >> CombineWithHotKeyFanout(CollectionCombineFn(cfg, open_partials=False), HOT_KEY_FANOUT,
                                                           typing.Tuple[KEY, bool])
                | "Unflag" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], kv[1]))).with_output_types(Flagged)
                | "ReleasedHeld" >> beam.CombinePerKey(ReleasedHeldCombineFn(cfg)))
        # a whole-report kind: per window and capped key, the rows resting on too few reports of one released
        # slice (each slice read before it is summed: sliding windows difference into slices)
        thin = {} if cfg.sampling is None or not cfg.window.overlapping else {"atom_thin": beam.pvalue.AsDict(
            routed | "AtomThin" >> beam.FlatMap(_atom_thin, cfg) | "UnionThin" >> beam.CombinePerKey(_union_thin))}
        publish = (beam.ParDo(PublishKeyFn(cfg, self.row_outputs), **thin) if ledger is None
                   else beam.ParDo(PublishKeyUnderLedgerFn(cfg, self.row_outputs), ledger, **thin))
        outs = keys | "Publish" >> publish.with_outputs(*ESTIMATE_KINDS, PANES)
        out = {k: outs[k] for k in ESTIMATE_KINDS + (PANES,)}
        if cfg.rollups:   # a collection without rollups publishes through the steps above only
            rolled = keys | "Rollups" >> RollupRows(cfg, self.row_outputs, routed)
            out = {k: (out[k], rolled[k]) | f"With{k.title()}Rollups" >> beam.Flatten()
                   for k in ESTIMATE_KINDS + (PANES,)}
        if releases is not None:
            out[RELEASES] = releases
        return out


RELEASES = "releases"   # EstimateCollection's output with a release ledger: (collection, its release as JSON)


def _route(kv, cfg, caps, ledger=None):
    collection, (start, dims, acc) = kv
    key, released = batch_route(cfg, caps[collection], dims, acc)
    released = released and (ledger is None or (start, dims) not in ledger.withheld)
    return ((collection, key), released), acc


def _atom_thin(kv, cfg):
    """A routed slice -> ``((collection, capped key), {set: Thin})``: a whole-report kind's rows that rest
    on too few of this released slice's reports (:func:`~ldp_marginals.transforms.publication.hadamard_rows.
    atom_thin_sets`), if any."""
    (key, released), acc = kv
    if released and acc.n:
        thin = atom_thin_sets(cfg, acc)
        if thin:
            yield key, merge_thin({}, thin)


def _union_thin(thins) -> dict:
    out = {}
    for t in thins:
        out = merge_thin(out, t, of_atom=False)
    return out


def _ledger_slice(kv, cfg, foreign=frozenset()):
    """A slice entry -> all the ledger reads of it (:func:`~ldp_marginals.transforms.publication.releases.ledger_slice`)."""
    _, (start, dims, acc) = kv
    return ledger_slice(cfg, start, dims, acc, foreign)


def _verdict(slices, cfg, earlier, caps):
    """The run's :class:`~ldp_marginals.transforms.publication.releases.Verdict` from every slice and
    every window's cap."""
    return verdict(cfg, earlier, sorted(slices, key=repr), dict(caps))


def _window_cap(kv, w=beam.DoFn.WindowParam):
    """``(collection, decided)`` of one window -> ``(window bounds, decided)``."""
    yield window_bounds_ms(w), kv[1]
