"""Streaming windows and panes as keyed state: the Beam adapters of the publication engine's three
streaming engines, keyed apart so that no worker holds a collection's every key
(:mod:`ldp_marginals.transforms.publication.messages` draws how they talk):

- ``Clock`` (:class:`ClockFn`, keyed by collection, in the global window, which never expires, so Beam
  drops nothing): every partial's weight; lateness, the dimension cap and the panes' timing
  (:class:`~ldp_marginals.transforms.publication.clock.Clock`);
- ``Atoms`` (:class:`AtomsFn`, keyed by (collection, dimensions)): a key's accumulators, released into
  atoms at the clock's commands (:class:`~ldp_marginals.transforms.publication.atoms.Atoms`);
- under ``privacy.unit: device`` with dimensions, ``SliceKeys`` (keyed by (collection, slice)), between
  the partials and clock and the atoms: each device's keys of a slice, bounded when the slice is sealed
  (:mod:`ldp_marginals.transforms.publication.slices`, :mod:`ldp_marginals.transforms.slice_keys`);
- ``Panes`` (:class:`PanesFn`, keyed by (collection, capped key)): the panes of the keys a window
  publishes under one capped key, their rows and pane files
  (:class:`~ldp_marginals.transforms.publication.panes.Panes`);
- with rollups, ``Rollups`` (:class:`~ldp_marginals.transforms.rollup_panes.RollupsFn`, keyed by
  (collection, window)): the window's rollup rows, once, at its close
  (:class:`~ldp_marginals.transforms.publication.rollup_panes.Rollups`).

Each adapter only moves state in and out and sets timers. Every state cell and every message holds
versioned records (:mod:`ldp_marginals.transforms.publication.state`), so the state of a running job
survives a code upgrade that keeps this layout. The clock knows the watermark has passed ``T`` when
its own event-time timer for ``T`` fires (set on the next whole millisecond: Java runners keep timers
in milliseconds). The clock, the atoms and the panes see partials (one per bundle, collection,
dimensions and slice), never reports.

Besides ``reports.valid`` (the clock) and the late dead letters, the panes count per window and capped
key at its close the guard's work: ``reports.published``, ``reports.withheld`` and ``windows.withheld``
(:mod:`~ldp_marginals.transforms.dead_letters`).

The watermark delay. A source's watermark follows the newest record times it has read, and the
wall clock once it has caught up (Kafka IO's ``CreateTime`` policy, which Beam's Python
``ReadFromKafka`` sets with no delay; Pub/Sub's publish or attribute times). A collector that holds
reports for up to a batching delay, from devices whose clocks run behind, sends reports that are
already that far behind the watermark. The clock's adapter therefore tells the clock the watermark is
``watermark_delay_seconds`` earlier than it is: it sets each timer the clock asks for that much
later and hands the clock the fired time less the delay. A window's on-time pane and its close
come that much later; early firings (processing time) are not moved. This is ``withCreateTime(maxDelay)``
of Kafka IO's Java API, applied where the job's only watermark-driven step reads it, for every source.
"""
from __future__ import annotations

import itertools
import json
import time
import uuid

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Timestamp

from ldp_marginals.schemas.dead_letters import NAMESPACE, OVER_DEVICE_BOUND, OVER_KEY_BOUND, REPORTS_PUBLISHED, VALID
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, WITHHELD
from ldp_marginals.transforms import coders
from ldp_marginals.transforms.dead_letters import TAG, count, count_withheld, late_batch
from ldp_marginals.transforms.publication import state
from ldp_marginals.transforms.publication.atoms import Atoms, KeyStatus
from ldp_marginals.transforms.publication.key_atoms import KeyBoundAtoms
from ldp_marginals.transforms.publication.clock import Clock, ClockStatus
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, PaneFile
from ldp_marginals.transforms.publication.messages import Arrival, Weight
from ldp_marginals.transforms.publication.panes import Panes, PanesStatus
from ldp_marginals.transforms.publication.rollup_panes import message_to_bytes as rollup_to_bytes
from ldp_marginals.transforms.publication.slices import DeviceKeys
from ldp_marginals.transforms.pane_outputs import PANES, pane_outputs
from ldp_marginals.transforms.rollup_panes import RollupsFn
from ldp_marginals.transforms.slice_keys import SliceKeysFn, slice_name

ARRIVALS = "arrivals"
TO_KEYS, TO_CAPPED, TO_SLICES, TO_ROLLUPS = "to_keys", "to_capped", "to_slices", "to_rollups"
__all__ = ["PANES", "PaneFile", "StreamingPanes"]


def key_name(collection: str, dims: tuple) -> str:
    """The state key of a (collection, dimensions) or (collection, capped key): a string, so that every
    runner has a deterministic key coder."""
    return json.dumps([collection, [list(kv) for kv in dims]], separators=(",", ":"))


def window_key_name(collection: str, window: tuple) -> str:
    """The state key of a (collection, window) (a window's rollups): a string, as :func:`key_name`."""
    return json.dumps([collection, [int(window[0]), int(window[1])]], separators=(",", ":"))


def key_of(name: str) -> tuple:
    """``(collection, dims)`` of a :func:`key_name`."""
    collection, dims = json.loads(name)
    return collection, tuple(tuple(kv) for kv in dims)


class SplitPartialFn(beam.DoFn):
    """A partial -> its weight, to its collection's clock (main output, ``(collection, bytes)``), and
    its accumulator, to its key's atoms (``arrivals``, ``(key, bytes)``), both under one new id; under a
    bound on keys (``bounds_keys``) also its device keys, to its slice (``to_slices``)."""

    def __init__(self, bounds_keys: bool = False):
        self.bounds_keys = bounds_keys

    def setup(self):
        self._prefix = uuid.uuid4().hex[:12]   # an identifier, not a random draw: unique per worker
        self._count = itertools.count()

    def process(self, element, ts=beam.DoFn.TimestampParam):
        partial = element
        pid = f"{self._prefix}-{next(self._count)}"
        start = int(ts.micros // 1000)
        acc = partial.accumulator
        yield partial.collection, state.message_to_bytes(Weight(pid, partial.dimensions, start, acc.received))
        yield beam.pvalue.TaggedOutput(ARRIVALS, (key_name(partial.collection, partial.dimensions),
                                                  state.message_to_bytes(Arrival(pid, start, acc))))
        if self.bounds_keys:
            yield beam.pvalue.TaggedOutput(TO_SLICES, (slice_name(partial.collection, start), state.message_to_bytes(
                DeviceKeys(pid, partial.dimensions, start, acc.devices.devices))))


def delay_us(watermark_delay_seconds: float) -> int:
    if not watermark_delay_seconds >= 0:
        raise ValueError(f"watermark_delay_seconds must be >= 0, got watermark_delay_seconds={watermark_delay_seconds!r}")
    return int(round(watermark_delay_seconds * 1_000_000))


def timer_us(event_us: int, delay: int) -> int:
    """When to set the timer for the clock's ``event_us``: ``delay`` later, at most the end of time
    (the global window's close, which only a drained or finished stream reaches)."""
    return min(event_us + delay, END_OF_TIME_US)


def engine_us(fired_us: int, delay: int) -> int:
    """What the clock is told of a timer fired at ``fired_us``: the watermark less ``delay``; at the
    end of time, the end of time (every input has been read, no delay is owed)."""
    return fired_us if fired_us >= END_OF_TIME_US - delay else fired_us - delay


def _whole_ms(micros: int) -> int:
    """``micros`` rounded up to a whole millisecond. Java runners (Flink, Dataflow) keep timers in
    milliseconds and truncate: a timer at a window's last microsecond would fire a millisecond early,
    find nothing due, set itself again and loop. Report times are whole milliseconds, so the
    watermark reaching the next whole millisecond says the same as passing the last microsecond."""
    return -(-micros // 1000) * 1000


class ClockFn(beam.DoFn):
    """``(collection, weight)`` -> commands to keys (``to_keys``), expectations to capped keys
    (``to_capped``), both ``(key, bytes)``, and late dead letters."""

    STATUS = ReadModifyWriteStateSpec("clock", BytesCoder())
    WEIGHTS = BagStateSpec("weights", BytesCoder())
    BOOK = ReadModifyWriteStateSpec("book", BytesCoder())
    EVENT = TimerSpec("event", TimeDomain.WATERMARK)
    EARLY = TimerSpec("early", TimeDomain.REAL_TIME)

    def __init__(self, config, clock=time.time, watermark_delay_seconds: float = 0.0):
        self.config = config
        self.clock = clock   # processing time for early firings (tests pass the runner's test clock's origin)
        self.delay_us = delay_us(watermark_delay_seconds)

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)
        self._engine = Clock(self.config)

    def process(self, element, status=beam.DoFn.StateParam(STATUS), weights=beam.DoFn.StateParam(WEIGHTS),
                book=beam.DoFn.StateParam(BOOK), event=beam.DoFn.TimerParam(EVENT),
                early=beam.DoFn.TimerParam(EARLY)):
        now = self._status(status)
        step = self._engine.on_weight(now, state.message_from_bytes(element[1]), self._book(book),
                                      self._weights(weights))
        if step.counted:
            count(VALID, int(step.counted), self._valid)
        yield from self._apply(step, now, status, weights, book, event, early)

    @on_timer(EVENT)
    def on_event(self, fired=beam.DoFn.TimestampParam, status=beam.DoFn.StateParam(STATUS),
                 weights=beam.DoFn.StateParam(WEIGHTS), book=beam.DoFn.StateParam(BOOK),
                 event=beam.DoFn.TimerParam(EVENT), early=beam.DoFn.TimerParam(EARLY)):
        now = self._status(status)
        step = self._engine.on_watermark(now, engine_us(fired.micros, self.delay_us), self._book(book),
                                         self._weights(weights))
        yield from self._apply(step, now, status, weights, book, event, early)

    @on_timer(EARLY)
    def on_early(self, status=beam.DoFn.StateParam(STATUS), weights=beam.DoFn.StateParam(WEIGHTS),
                 book=beam.DoFn.StateParam(BOOK), event=beam.DoFn.TimerParam(EVENT),
                 early=beam.DoFn.TimerParam(EARLY)):
        now = self._status(status)
        step = self._engine.on_early(now, self._book(book), self._weights(weights))
        yield from self._apply(step, now, status, weights, book, event, early)

    @staticmethod
    def _status(cell) -> ClockStatus:
        stored = cell.read()
        return state.clock_from_bytes(stored) if stored else ClockStatus()

    @staticmethod
    def _book(cell):
        def read():
            stored = cell.read()
            return state.book_from_bytes(stored) if stored else None
        return read

    @staticmethod
    def _weights(bag):
        return lambda: [state.message_from_bytes(data) for data in bag.read()]

    def _apply(self, step, now, status, weights, book, event, early):
        name = self.config.name
        if step.clear:
            weights.clear()
        for w in step.append:
            weights.add(state.message_to_bytes(w))
        if step.book is not None:
            book.write(state.book_to_bytes(step.book))
        status.write(state.clock_to_bytes(now))
        if step.event_us is not None:
            event.set(Timestamp(micros=_whole_ms(timer_us(step.event_us, self.delay_us))))
        if step.arm_early:
            early.set(Timestamp.of(self.clock() + self.config.early_firing_seconds))
        if step.disarm_early:
            early.clear()
        for batch in step.late:
            yield late_batch(batch, self.delay_us / 1_000_000)
        for dims, message in step.to_keys:
            yield beam.pvalue.TaggedOutput(TO_KEYS, (key_name(name, dims), state.message_to_bytes(message)))
        for key, message in step.to_capped:
            yield beam.pvalue.TaggedOutput(TO_CAPPED, (key_name(name, key), state.message_to_bytes(message)))
        for window, message in step.to_rollups:
            yield beam.pvalue.TaggedOutput(TO_ROLLUPS, (window_key_name(name, window), rollup_to_bytes(message)))
        for start, message in step.to_slices:
            yield beam.pvalue.TaggedOutput(TO_SLICES, (slice_name(name, start), state.message_to_bytes(message)))


class AtomsFn(beam.DoFn):
    """``(key, arrival | command | drop)`` -> contributions ``(capped key, bytes)`` to the panes."""

    STATUS = ReadModifyWriteStateSpec("key", BytesCoder())
    ARRIVED = BagStateSpec("arrived", BytesCoder())
    INBOX = BagStateSpec("inbox", BytesCoder())
    ENTRIES = BagStateSpec("entries", BytesCoder())

    def __init__(self, config):
        self.config = config

    def process(self, element, status=beam.DoFn.StateParam(STATUS), arrived=beam.DoFn.StateParam(ARRIVED),
                inbox=beam.DoFn.StateParam(INBOX), entries=beam.DoFn.StateParam(ENTRIES)):
        name, data = element
        agg = self.config.aggregator
        dims = key_of(name)[1]
        stored = status.read()
        now = state.key_from_bytes(stored) if stored else KeyStatus()
        message = state.message_from_bytes(data, agg)
        engine = (KeyBoundAtoms if self.config.bounds_keys else Atoms)(self.config, dims)

        def read():
            return ([state.message_from_bytes(d, agg) for d in arrived.read()],
                    [state.message_from_bytes(d, agg) for d in inbox.read()],
                    [state.entry_from_bytes(d, agg) for d in entries.read()])
        step = (engine.on_arrival if isinstance(message, Arrival) else engine.on_message)(now, message, read)
        if step.append_arrival is not None:
            arrived.add(data)
        if step.append_message is not None:
            inbox.add(data)
        for bag, new, write in ((arrived, step.arrived, state.message_to_bytes),
                                (inbox, step.inbox, state.message_to_bytes),
                                (entries, step.entries, state.entry_to_bytes)):
            if new is not None:
                bag.clear()
                for item in new:
                    bag.add(write(item, agg))
        status.write(state.key_to_bytes(now))
        if step.over_bound:   # privacy.unit: device: counts only, at a slice's let-go
            count(OVER_DEVICE_BOUND, step.over_bound)
        if step.over_key_bound:   # privacy.unit: device with dimensions: at a slice's seal
            count(OVER_KEY_BOUND, step.over_key_bound)
        for route, contribution in step.contributions:
            yield key_name(self.config.name, route), state.message_to_bytes(contribution, agg)
        for window, part in step.rollup_parts:
            yield beam.pvalue.TaggedOutput(TO_ROLLUPS, (window_key_name(self.config.name, window),
                                                        rollup_to_bytes(part, agg)))


class PanesFn(beam.DoFn):
    """``(capped key, expectation | contribution)`` -> rows by kind (tagged) and pane files (``panes``)."""

    STATUS = ReadModifyWriteStateSpec("panes", BytesCoder())
    INBOX = BagStateSpec("inbox", BytesCoder())
    ATOMS = BagStateSpec("atoms", BytesCoder())

    def __init__(self, config, row_outputs: bool = True):
        self.config = config
        self.row_outputs = row_outputs   # False: rows only in their pane files (the kinds' outputs stay empty)

    def process(self, element, status=beam.DoFn.StateParam(STATUS), inbox=beam.DoFn.StateParam(INBOX),
                atoms=beam.DoFn.StateParam(ATOMS)):
        name, data = element
        agg = self.config.aggregator
        key = key_of(name)[1]
        stored = status.read()
        now = state.panes_from_bytes(stored) if stored else PanesStatus()

        def read():
            return ([state.message_from_bytes(d, agg) for d in inbox.read()],
                    [state.entry_from_bytes(d, agg) for d in atoms.read()])
        step = Panes(self.config, key).on_message(now, state.message_from_bytes(data, agg), read)
        if step.append_message is not None:
            inbox.add(data)
        for bag, new, write in ((inbox, step.inbox, state.message_to_bytes), (atoms, step.atoms, state.entry_to_bytes)):
            if new is not None:
                bag.clear()
                for item in new:
                    bag.add(write(item, agg))
        for entry in step.append_atoms:
            atoms.add(state.entry_to_bytes(entry, agg))
        status.write(state.panes_to_bytes(now))
        if step.closed:
            count(REPORTS_PUBLISHED, step.closed)
        for pane in step.panes:
            if pane.kind == WITHHELD:
                count_withheld(pane.rows)
            yield from pane_outputs(pane, self.row_outputs)


class StreamingPanes(beam.PTransform):
    """Timestamped partials of one collection -> ``{kind: rows}`` plus ``panes`` (pane files) and
    ``dead_letters`` (late batches)."""

    def __init__(self, config, clock=time.time, row_outputs: bool = True, watermark_delay_seconds: float = 0.0):
        super().__init__()
        self.config = config
        self.clock = clock
        self.row_outputs = row_outputs
        self.watermark_delay_seconds = watermark_delay_seconds

    def expand(self, partials):
        cfg = self.config
        # col : (collection, weight) and (key, arrival), versioned records under string keys
        bounded = cfg.bounds_keys   # steps added only then: the stage labels of other collections are unchanged
        extra = (TO_SLICES,) if bounded else ()
        rolled = (TO_ROLLUPS,) if cfg.rollups else ()
        split = partials | "SplitPartials" >> beam.ParDo(SplitPartialFn(bounded)).with_output_types(
            coders.KeyedBytes).with_outputs(ARRIVALS, *extra, main="weights")
        clock = split["weights"] | "Clock" >> beam.ParDo(
            ClockFn(cfg, self.clock, self.watermark_delay_seconds)).with_outputs(TO_KEYS, TO_CAPPED, *extra, TAG,
                                                                                 *rolled)
        for tagged in (split[ARRIVALS], clock[TO_KEYS], clock[TO_CAPPED]) + tuple(
                pc[TO_SLICES] for pc in (split, clock) if bounded):
            tagged.element_type = coders.KeyedBytes   # tagged outputs carry no type hint
        to_keys = (split[ARRIVALS], clock[TO_KEYS])
        if bounded:   # col : (slice key, device keys | accept | drop) -> (key, kept)
            to_keys += ((split[TO_SLICES], clock[TO_SLICES]) | "ToSlices" >> beam.Flatten().with_output_types(
                coders.KeyedBytes) | "SliceKeys" >> beam.ParDo(SliceKeysFn(cfg, key_name)).with_output_types(
                coders.KeyedBytes),)
        # col : (key, arrival | command | drop | kept)
        keyed = to_keys | "ToKeys" >> beam.Flatten().with_output_types(coders.KeyedBytes)
        atoms = beam.ParDo(AtomsFn(cfg)).with_output_types(coders.KeyedBytes)
        if cfg.rollups:   # a second output: without rollups the stateful step keeps its name (savepoints, --update)
            atoms = keyed | "Atoms" >> atoms.with_outputs(TO_ROLLUPS)
            contributions = atoms[None]
        else:
            contributions = keyed | "Atoms" >> atoms
        # col : (capped key, expectation | contribution)
        capped = ((clock[TO_CAPPED], contributions) | "ToCappedKeys" >> beam.Flatten().with_output_types(
            coders.KeyedBytes))
        outs = capped | "Panes" >> beam.ParDo(PanesFn(cfg, self.row_outputs)).with_outputs(*ESTIMATE_KINDS, PANES)
        result = {kind: outs[kind] for kind in ESTIMATE_KINDS + (PANES,)}
        if cfg.rollups:
            for tagged in (clock[TO_ROLLUPS], atoms[TO_ROLLUPS]):
                tagged.element_type = coders.KeyedBytes
            # col : ((collection, window), expectation | part), at each window's close
            rows = ((clock[TO_ROLLUPS], atoms[TO_ROLLUPS]) | "ToRollups" >> beam.Flatten().with_output_types(
                coders.KeyedBytes) | "Rollups" >> beam.ParDo(RollupsFn(cfg, self.row_outputs)).with_outputs(
                *ESTIMATE_KINDS, PANES))
            result = {k: (result[k], rows[k]) | f"With{k.title()}Rollups" >> beam.Flatten() for k in result}
        result[TAG] = clock[TAG]
        return result
