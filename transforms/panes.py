"""Streaming windows and panes as keyed state: the Beam adapter of the publication engine's pane state
machine (:class:`~ldp_marginals.transforms.publication.engine.PaneEngine`).

Why a state machine of our own: Beam's windowed GroupByKey drops the elements of an expired window
without a trace, and a step placed before it cannot know whether an element of a key it has never
seen is already behind the watermark. So in streaming the job does not window with Beam: one stateful
step per collection, in the global window (which never expires, so Beam drops nothing), hands each
partial, each watermark timer and each early firing to the engine, which says what to publish, what
is late and when to wake up next.

The adapter only moves state in and out and sets timers. State, per collection key:

- ``entries``: a bag of the engine's entries (released and pending parts of open slices), each in the
  versioned format of :mod:`~ldp_marginals.transforms.publication.state` (stored as bytes, so the
  state of a running job survives a code upgrade; version-1 pickles are still read);
- ``windows``: the open windows' statuses (versioned the same way);
- ``through_us``: how far the watermark is known to have passed (the latest event timer that fired);
- ``early_set``: whether an early firing is pending.

Besides ``reports.valid`` and the late dead letters it counts, per window at its close, the guard's
work: ``reports.published``, ``reports.withheld`` and ``windows.withheld``
(:mod:`~ldp_marginals.transforms.dead_letters`).

The step knows the watermark has passed ``T`` when its own event-time timer for ``T`` fires (set on
the next whole millisecond: Java runners keep timers in milliseconds). It sees
partials (one per bundle, collection, dimensions and slice), never reports.

The watermark delay. A source's watermark follows the newest record times it has read, and the
wall clock once it has caught up (Kafka IO's ``CreateTime`` policy, which Beam's Python
``ReadFromKafka`` sets with no delay; Pub/Sub's publish or attribute times). A collector that holds
reports for up to a batching delay, from devices whose clocks run behind, sends reports that are
already that far behind the watermark. The adapter therefore tells the engine the watermark is
``watermark_delay_seconds`` earlier than it is: it sets each timer the engine asks for that much
later and hands the engine the fired time less the delay. A window's on-time pane and its close
come that much later; early firings (processing time) are not moved. This is ``withCreateTime(maxDelay)``
of Kafka IO's Java API, applied where the job's only watermark-driven step reads it, for every source.
"""
from __future__ import annotations

import time
import typing

import apache_beam as beam
from apache_beam.coders import BooleanCoder, BytesCoder, PickleCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Timestamp

from ldp_marginals.schemas.dead_letters import NAMESPACE, REPORTS_PUBLISHED, VALID
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, WITHHELD
from ldp_marginals.transforms.dead_letters import TAG, count, count_withheld, late_batch
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, NEVER, PaneEngine, PaneFile, Status
from ldp_marginals.transforms.publication.state import (
    entry_from_bytes,
    entry_to_bytes,
    windows_from_bytes,
    windows_to_bytes,
)

PANES = "panes"   # the output of pane files: one PaneFile per kind, window and pane
__all__ = ["PANES", "PaneFile", "StreamingPanes", "WindowPanesFn"]


class WindowPanesFn(beam.DoFn):
    """``(collection, (slice start ms, Partial))`` -> rows by kind (tagged), pane files (``panes``)
    and late dead letters, as the engine decides."""

    ENTRIES = BagStateSpec("entries", BytesCoder())
    WINDOWS = ReadModifyWriteStateSpec("windows", BytesCoder())
    THROUGH = ReadModifyWriteStateSpec("through_us", PickleCoder())   # a plain int
    EARLY_SET = ReadModifyWriteStateSpec("early_set", BooleanCoder())
    EVENT = TimerSpec("event", TimeDomain.WATERMARK)
    EARLY = TimerSpec("early", TimeDomain.REAL_TIME)

    def __init__(self, config, clock=time.time, row_outputs: bool = True, watermark_delay_seconds: float = 0.0):
        self.config = config
        self.clock = clock   # processing time for early firings (tests pass the runner's test clock's origin)
        self.row_outputs = row_outputs   # False: rows only in their pane files (the kinds' outputs stay empty)
        self.delay_us = delay_us(watermark_delay_seconds)

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)
        self._engine = PaneEngine(self.config)

    def process(self, element, entries=beam.DoFn.StateParam(ENTRIES), windows=beam.DoFn.StateParam(WINDOWS),
                through=beam.DoFn.StateParam(THROUGH), early_set=beam.DoFn.StateParam(EARLY_SET),
                event=beam.DoFn.TimerParam(EVENT), early=beam.DoFn.TimerParam(EARLY)):
        _, (start, partial) = element
        status = self._status(windows, through, early_set)
        step = self._engine.on_partial(status, start, partial, lambda: self._entries(entries))
        if step.counted:
            count(VALID, int(step.counted), self._valid)
        yield from self._apply(step, status, entries, windows, through, early_set, event, early)

    @on_timer(EVENT)
    def on_event(self, fired=beam.DoFn.TimestampParam, entries=beam.DoFn.StateParam(ENTRIES),
                 windows=beam.DoFn.StateParam(WINDOWS), through=beam.DoFn.StateParam(THROUGH),
                 early_set=beam.DoFn.StateParam(EARLY_SET), event=beam.DoFn.TimerParam(EVENT),
                 early=beam.DoFn.TimerParam(EARLY)):
        status = self._status(windows, through, early_set)
        open_before = dict(status.windows)
        step = self._engine.on_watermark(status, engine_us(fired.micros, self.delay_us), lambda: self._entries(entries))
        # the windows that closed: what their last pane published (the engine updates each window's
        # status in place, then drops it)
        published = sum(ws.published for w, ws in open_before.items() if w not in status.windows)
        if published:
            count(REPORTS_PUBLISHED, published)
        yield from self._apply(step, status, entries, windows, through, early_set, event, early)

    @on_timer(EARLY)
    def on_early(self, entries=beam.DoFn.StateParam(ENTRIES), windows=beam.DoFn.StateParam(WINDOWS),
                 through=beam.DoFn.StateParam(THROUGH), early_set=beam.DoFn.StateParam(EARLY_SET),
                 event=beam.DoFn.TimerParam(EVENT), early=beam.DoFn.TimerParam(EARLY)):
        status = self._status(windows, through, early_set)
        step = self._engine.on_early(status, lambda: self._entries(entries))
        yield from self._apply(step, status, entries, windows, through, early_set, event, early)

    # -- state in and out ----------------------------------------------------------------------------
    @staticmethod
    def _status(windows, through, early_set) -> Status:
        stored = windows.read()
        passed = through.read()
        return Status(NEVER if passed is None else passed, windows_from_bytes(stored) if stored else {},
                      bool(early_set.read()))

    def _entries(self, entries) -> list:
        aggregator = self.config.aggregator
        return [entry_from_bytes(data, aggregator) for data in entries.read()]

    def _apply(self, step, status, entries, windows, through, early_set, event, early):
        aggregator = self.config.aggregator
        if step.store is not None:
            entries.clear()
            for entry in step.store:
                entries.add(entry_to_bytes(entry, aggregator))
        for entry in step.append:
            entries.add(entry_to_bytes(entry, aggregator))
        windows.write(windows_to_bytes(status.windows))
        if status.through_us != NEVER:
            through.write(status.through_us)
        early_set.write(status.early_set)
        if step.event_us is not None:
            event.set(Timestamp(micros=_whole_ms(timer_us(step.event_us, self.delay_us))))
        if step.arm_early:
            early.set(Timestamp.of(self.clock() + self.config.early_firing_seconds))
        if step.disarm_early:
            early.clear()
        for batch in step.late:
            yield late_batch(batch, self.delay_us / 1_000_000)
        for pane in step.panes:
            if pane.kind == WITHHELD:
                count_withheld(pane.rows)
            if self.row_outputs:
                for row in pane.rows:
                    yield beam.pvalue.TaggedOutput(pane.kind, row)
            yield beam.pvalue.TaggedOutput(PANES, pane)


def delay_us(watermark_delay_seconds: float) -> int:
    if not watermark_delay_seconds >= 0:
        raise ValueError(f"watermark_delay_seconds must be >= 0, got watermark_delay_seconds={watermark_delay_seconds!r}")
    return int(round(watermark_delay_seconds * 1_000_000))


def timer_us(event_us: int, delay: int) -> int:
    """When to set the timer for the engine's ``event_us``: ``delay`` later, at most the end of time
    (the global window's close, which only a drained or finished stream reaches)."""
    return min(event_us + delay, END_OF_TIME_US)


def engine_us(fired_us: int, delay: int) -> int:
    """What the engine is told of a timer fired at ``fired_us``: the watermark less ``delay``; at the
    end of time, the end of time (every input has been read, no delay is owed)."""
    return fired_us if fired_us >= END_OF_TIME_US - delay else fired_us - delay


def _whole_ms(micros: int) -> int:
    """``micros`` rounded up to a whole millisecond. Java runners (Flink, Dataflow) keep timers in
    milliseconds and truncate: a timer at a window's last microsecond would fire a millisecond early,
    find nothing due, set itself again and loop. Report times are whole milliseconds, so the
    watermark reaching the next whole millisecond says the same as passing the last microsecond."""
    return -(-micros // 1000) * 1000


def _key_with_slice(partial, ts=beam.DoFn.TimestampParam):
    return partial.collection, (int(ts.micros // 1000), partial)


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
        outs = (partials
                # a string key: state needs a deterministic key coder on every runner
                | "KeyByCollection" >> beam.Map(_key_with_slice).with_output_types(typing.Tuple[str, typing.Any])
                | "WindowPanes" >> beam.ParDo(WindowPanesFn(self.config, self.clock, self.row_outputs,
                                                       self.watermark_delay_seconds)).with_outputs(
                    *ESTIMATE_KINDS, PANES, TAG))
        result = {kind: outs[kind] for kind in ESTIMATE_KINDS}
        result[PANES] = outs[PANES]
        result[TAG] = outs[TAG]
        return result
