"""Streaming windows and panes as keyed state, so that every report is counted or dead-lettered.

Beam's windowed GroupByKey drops the elements of an expired window without a trace, and a step
placed before it cannot know whether an element of a key it has never seen is already behind the
watermark. So in streaming the job does not window with Beam: one stateful step per collection,
in the global window (which never expires, so Beam drops nothing), keeps the pre-aggregated
partials of the collection's open window slices and publishes panes itself, with Beam's
semantics:

- an early pane every ``early_firing_seconds`` of processing time while a window has new data;
- the on-time pane when the watermark passes the window's end (always, like Beam's default);
- a late pane at each partial that arrives after that, until the watermark passes the window's
  end plus ``allowed_lateness_seconds``, when the window closes and its state is dropped.

Panes accumulate: each carries the window's full estimate so far. A window's rows at a pane are
those of :func:`~ldp_marginals.transforms.estimate.window_rows` over its slices' merged partials,
dimension values capped per window as in batch.

Lateness is decided here and only here. The step knows the watermark has passed ``T`` when its
event-time timer for ``T`` fires; a partial whose windows all close at or before the latest such
``T`` is late: one dead letter (reason ``late``) for its reports, counted in ``dead_letter.late``.
Any other partial is counted (``reports.valid``) and published, in an on-time pane if its window's
end is still ahead, else at once in a late pane: a window the step never saw whose end the
watermark already passed is published, not lost. Nothing else can drop a report, whatever its key,
dimensions or arrival time.

The state is keyed by collection and sees partials, never single reports: one per bundle,
collection, dimensions and slice (readers and ``ValidateReports`` pre-aggregate). Its size is the
open slices' accumulators per dimensions key (compacted at every pane) plus a few numbers per open
window.
"""
from __future__ import annotations

import time
import typing
from typing import NamedTuple

import apache_beam as beam
from apache_beam.coders import BooleanCoder, PickleCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp

from ldp_marginals.ldp.windows import GLOBAL_WINDOW
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, WITHHELD
from ldp_marginals.transforms.dead_letters import NAMESPACE, TAG, VALID, count, late_batch
from ldp_marginals.transforms.estimate import cap_states, held_row, releasable, window_rows

PANES = "panes"   # the output of pane files: one PaneFile per kind, window and pane
EARLY, ON_TIME, LATE, CLOSED = "early", "on_time", "late", "closed"
_GLOBAL_END_US = GlobalWindow().max_timestamp().micros


class PaneFile(NamedTuple):
    """The rows of one kind, collection, window and pane: what one output file holds."""

    kind: str
    group: str             # the collection
    window: tuple | None   # (start_ms, end_ms), None for the global window
    pane: int              # 0, 1, ... per window
    timing: str            # early, on_time, late, or closed (the withheld rows of a window's close)
    rows: list


class Geometry:
    """A collection's windows in event time: slices, the windows of a slice, the slices of a
    window, and when a window's on-time pane fires and when it closes (microseconds)."""

    def __init__(self, config):
        w = config.window
        self.is_global = w.type == "global"
        self.size = 0 if self.is_global else int(round(w.size_seconds * 1000))
        self.period = self.size if w.type == "fixed" else int(round(w.period_seconds * 1000 or 0))
        self.per_window = 1 if self.is_global else self.size // self.period
        self.lateness_us = int(round(config.allowed_lateness_seconds * 1_000_000))

    def windows_of(self, slice_start: int) -> list:
        if self.is_global:
            return [GLOBAL_WINDOW]
        return [(slice_start - j * self.period, slice_start - j * self.period + self.size)
                for j in reversed(range(self.per_window))]

    def slices_of(self, window: tuple) -> set:
        if self.is_global:
            return None  # every slice
        return {window[0] + j * self.period for j in range(self.per_window)}

    def end_us(self, window: tuple) -> int:
        """The window's last instant (Beam's ``max_timestamp``): the on-time pane fires when the
        watermark reaches it."""
        return _GLOBAL_END_US if self.is_global else window[1] * 1000 - 1

    def close_us(self, window: tuple) -> int:
        """When the window closes: its end plus the allowed lateness (never, for the global window)."""
        return _GLOBAL_END_US if self.is_global else self.end_us(window) + self.lateness_us


class WindowPanesFn(beam.DoFn):
    """``(collection, (slice start ms, Partial))`` -> rows by kind (tagged), pane files (``panes``)
    and late dead letters. See the module docstring for the semantics."""

    ENTRIES = BagStateSpec("entries", PickleCoder())  # (slice start, dims, released, WindowAccumulator)
    WINDOWS = ReadModifyWriteStateSpec("windows", PickleCoder())  # {window: [panes, on time, dirty, published]}
    THROUGH = ReadModifyWriteStateSpec("through_us", PickleCoder())  # the watermark has passed this
    EARLY_SET = ReadModifyWriteStateSpec("early_set", BooleanCoder())
    EVENT = TimerSpec("event", TimeDomain.WATERMARK)
    EARLY = TimerSpec("early", TimeDomain.REAL_TIME)

    def __init__(self, config, clock=time.time):
        self.config = config
        self.geometry = Geometry(config)
        self.clock = clock   # processing time for early firings (tests pass the runner's test clock's origin)

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)

    def process(self, element, entries=beam.DoFn.StateParam(ENTRIES), windows=beam.DoFn.StateParam(WINDOWS),
                through=beam.DoFn.StateParam(THROUGH), early_set=beam.DoFn.StateParam(EARLY_SET),
                event=beam.DoFn.TimerParam(EVENT), early=beam.DoFn.TimerParam(EARLY)):
        _, (start, partial) = element
        geo = self.geometry
        passed = through.read()
        passed = -(1 << 62) if passed is None else passed
        n = partial.accumulator.n
        open_windows = [w for w in geo.windows_of(start) if geo.close_us(w) > passed]
        if not open_windows:
            yield self._late(start, partial)
            return
        count(VALID, int(n), self._valid)
        entries.add((start, partial.dimensions, False, partial.accumulator))  # pending until released
        state = windows.read() or {}
        late_now = []
        for w in open_windows:
            ws = state.get(w)
            if ws is None:  # [panes published, on-time pane passed, new data, reports published]
                ws = state[w] = [0, geo.end_us(w) <= passed, False, 0]
            ws[2] = True
            if ws[1]:  # its on-time pane has passed: a late pane now
                late_now.append(w)
        if late_now:
            kept = self._compact(entries, state)
            for w in late_now:
                yield from self._pane(w, state[w], kept, LATE)
        windows.write(state)
        self._arm(event, state)
        if self.config.early_firing_seconds and not early_set.read() and any(
                ws[2] and not ws[1] for ws in state.values()):
            early.set(Timestamp.of(self.clock() + self.config.early_firing_seconds))
            early_set.write(True)

    @on_timer(EVENT)
    def on_event(self, fired=beam.DoFn.TimestampParam, entries=beam.DoFn.StateParam(ENTRIES),
                 windows=beam.DoFn.StateParam(WINDOWS), through=beam.DoFn.StateParam(THROUGH),
                 event=beam.DoFn.TimerParam(EVENT)):
        geo = self.geometry
        now = fired.micros
        through.write(max(through.read() or -(1 << 62), now))
        state = windows.read() or {}
        due = [w for w, ws in sorted(state.items()) if not ws[1] and geo.end_us(w) <= now]
        closed = sorted(w for w in state if geo.close_us(w) <= now)
        kept = self._compact(entries, state)
        for w in due:
            state[w][1] = True
            yield from self._pane(w, state[w], kept, ON_TIME)
        for w in closed:  # what is still held when the window closes is reported, never dropped
            yield from self._held(w, state[w], kept)
        for w in closed:
            del state[w]
        windows.write(state)
        if closed:  # the closed windows' slices leave the state
            self._store(entries, kept, state)
        self._arm(event, state)

    @on_timer(EARLY)
    def on_early(self, entries=beam.DoFn.StateParam(ENTRIES), windows=beam.DoFn.StateParam(WINDOWS),
                 early_set=beam.DoFn.StateParam(EARLY_SET)):
        early_set.write(False)
        state = windows.read() or {}
        dirty = [w for w, ws in sorted(state.items()) if ws[2] and not ws[1]]
        if not dirty:
            return
        kept = self._compact(entries, state)
        for w in dirty:
            yield from self._pane(w, state[w], kept, EARLY)
        windows.write(state)

    def _arm(self, event, state):
        """The event timer at the next instant something is due: an on-time pane or a closing."""
        geo = self.geometry
        due = [geo.close_us(w) if ws[1] else geo.end_us(w) for w, ws in state.items()]
        if due:
            event.set(Timestamp(micros=min(due)))

    def _late(self, start, partial):
        geo = self.geometry
        n = partial.accumulator.n
        end = start + (geo.period if not geo.is_global else 0)
        detail = (f"{n} report(s) of collection {partial.collection!r}, dimensions {dict(partial.dimensions)}, with "
                  f"event times in [{start}, {end}) ms arrived after every window they belong to had closed "
                  f"(window end + allowed lateness {self.config.allowed_lateness_seconds:g}s)")
        record = {"collection": partial.collection, "dimensions": dict(partial.dimensions),
                  "slice_start": start, "slice_end": end, "reports": n}
        return late_batch(detail, record, n)

    def _store(self, entries, items, state) -> list:
        """Write ``items`` back as the bag, without the slices of no open window; returns them."""
        kept = items
        if not self.geometry.is_global:
            live = set()
            for w in state:
                live |= self.geometry.slices_of(w)
            kept = [item for item in items if item[0] in live]
        entries.clear()
        for item in kept:
            entries.add(item)
        return kept

    def _compact(self, entries, state) -> list:
        """Merge the bag per (slice, dims) into new accumulators, released and pending apart; release
        a pending increment once it holds at least ``min_reports`` reports (and clients, see
        :func:`~ldp_marginals.transforms.estimate.releasable`); drop slices of no open window; write
        it back. Returns the compacted entries ``(start, dims, released, acc)``."""
        aggregator = self.config.aggregator
        merged = {}
        for start, dims, released, acc in entries.read():
            key = (start, dims, released)
            if key not in merged:
                merged[key] = aggregator.create()
            aggregator.merge([merged[key], acc])  # into a new accumulator: bag reads may share objects
        for (start, dims, released), acc in list(merged.items()):
            if not released and releasable(self.config, acc):  # an atom: released for good
                done = merged.setdefault((start, dims, True), aggregator.create())
                aggregator.merge([done, acc])
                del merged[(start, dims, False)]
        return self._store(entries, [(start, dims, released, acc)
                                     for (start, dims, released), acc in sorted(merged.items())], state)

    def _sums(self, window, entries, released: bool) -> dict:
        """Per dimensions key, the released (or pending) part of the window's slices, merged."""
        aggregator = self.config.aggregator
        slices = self.geometry.slices_of(window)
        per_dims = {}
        for start, dims, is_released, acc in entries:
            if is_released == released and (slices is None or start in slices):
                if dims not in per_dims:
                    per_dims[dims] = aggregator.create()
                aggregator.merge([per_dims[dims], acc])
        return per_dims

    def _pane(self, window, ws, entries, timing):
        """One window's pane from its released increments (every dimensions key, capped), as rows
        by kind and files. Published only when it adds released reports to the window's last pane
        (an on-time pane is published whenever anything is released): a pane never differs from
        the last one by fewer than ``min_reports`` reports of a slice."""
        cfg = self.config
        aggregator = cfg.aggregator
        ws[2] = False
        per_dims = self._sums(window, entries, released=True)
        total = sum(acc.n for acc in per_dims.values())
        if total == 0 or (total == ws[3] and timing != ON_TIME):
            return
        if cfg.dimensions:
            per_dims = cap_states(cfg, per_dims, lambda acc: acc.n,
                                  lambda accs: aggregator.merge([aggregator.create(), *accs]))
        by_kind = {kind: [] for kind in ESTIMATE_KINDS}
        for dims, acc in sorted(per_dims.items()):
            for kind, row in window_rows(cfg, cfg.name, dims, acc, window):
                by_kind[kind].append(row)
        ws[3] = total
        yield from self._emit(window, ws, timing, by_kind)

    def _held(self, window, ws, entries):
        """At a window's close: a ``withheld`` row per dimensions key whose slices still hold reports
        that never reached ``min_reports`` (they stay unpublished, and are accounted for here)."""
        cfg = self.config
        rows = []
        aggregator = cfg.aggregator
        released, pending = (self._sums(window, entries, released=r) for r in (True, False))
        if cfg.dimensions:  # withheld rows list no more values than published ones
            merge = lambda accs: aggregator.merge([aggregator.create(), *accs])  # noqa: E731
            released = cap_states(cfg, released, lambda acc: acc.n, merge)
            pending = cap_states(cfg, pending, lambda acc: acc.n, merge)
        for dims, acc in sorted(pending.items()):
            if not acc.n:
                continue
            if dims not in released and acc.n < cfg.min_reports:  # a small window: as the batch job says it
                rows += [row for _, row in window_rows(cfg, cfg.name, dims, acc, window)]
                continue
            base = {"collection": cfg.name, "window_start": window[0], "window_end": window[1],
                    "dimensions": dict(dims)}
            rows.append(held_row(cfg, base, acc.n))
        if rows:
            yield from self._emit(window, ws, CLOSED, {WITHHELD: rows})

    def _emit(self, window, ws, timing, by_kind):
        cfg = self.config
        index = ws[0]
        ws[0] += 1
        file_window = None if self.geometry.is_global else window
        for kind, rows in by_kind.items():
            for row in rows:
                yield beam.pvalue.TaggedOutput(kind, row)
            if rows:
                yield beam.pvalue.TaggedOutput(PANES, PaneFile(kind, cfg.name, file_window, index, timing, rows))


def _key_with_slice(partial, ts=beam.DoFn.TimestampParam):
    return partial.collection, (int(ts.micros // 1000), partial)


class StreamingPanes(beam.PTransform):
    """Timestamped partials of one collection -> ``{kind: rows}`` plus ``panes`` (pane files) and
    ``dead_letters`` (late batches)."""

    def __init__(self, config, clock=time.time):
        super().__init__()
        self.config = config
        self.clock = clock

    def expand(self, partials):
        outs = (partials
                # a string key: state needs a deterministic key coder on every runner
                | "KeyByCollection" >> beam.Map(_key_with_slice).with_output_types(typing.Tuple[str, typing.Any])
                | "WindowPanes" >> beam.ParDo(WindowPanesFn(self.config, self.clock)).with_outputs(
                    *ESTIMATE_KINDS, PANES, TAG))
        result = {kind: outs[kind] for kind in ESTIMATE_KINDS}
        result[PANES] = outs[PANES]
        result[TAG] = outs[TAG]
        return result
