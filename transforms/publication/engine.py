"""The publication engine: one Beam-free home for the release rule, the dimension cap, the pane state
machine and the rows, shared by the batch and the streaming job.

State. Per collection the engine keeps *entries*, ``(slice start, dimensions, atom, accumulator)``:
for each slice and key its released *atoms*, each kept apart under its number (0, 1, ... in the order
they were released: the increments that rows were published from), and what is pending (atom
``PENDING``), and a small
:class:`Status`: which windows are open, how many panes each has published, whether its on-time pane
has passed, and how far the watermark is known to have passed. The Beam adapter stores entries in a
bag (a new partial is appended without reading the bag) and the status in one cell.

Events, each a method that takes the state and returns a :class:`Step` (what to emit, what to store,
the next timer):

- :meth:`PaneEngine.on_partial`: a pre-aggregated partial of one slice and key. If every window of
  its slice has closed it is late (a dead letter); otherwise it is counted and pending, and windows
  whose on-time pane has passed publish a late pane at once.
- :meth:`PaneEngine.on_watermark`: the watermark passed ``now``: windows whose end has passed publish
  their on-time pane, windows whose end plus the allowed lateness has passed publish their final pane
  (the extremes over clients, and a withheld row for what the guard still holds) and close.
- :meth:`PaneEngine.on_early`: an early firing: windows with new data publish an early pane.

A pane is published only when it adds released reports to the window's last pane (the on-time pane
whenever anything is released), so two panes of a window differ by whole atoms. Panes accumulate.

Batch runs the same path (:func:`batch_window`): a window's slices arrive complete, each slice is one
increment, and the window publishes one pane that is both on time and final.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ldp_marginals.schemas.arrow import TableRows
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, WITHHELD
from ldp_marginals.transforms.publication.release import releasable
from ldp_marginals.transforms.publication.rows import base_row, held_row, window_blocks

EARLY, ON_TIME, LATE, CLOSED = "early", "on_time", "late", "closed"
NEVER = -(1 << 62)                      # a watermark before every event
END_OF_TIME_US = 9_223_371_950_454_774_999   # Beam's GlobalWindow().max_timestamp() in microseconds


PENDING = -1   # the atom number of an entry not yet released


class Entry(NamedTuple):
    """One atom (a released increment) of one slice and key, or its pending part."""

    start: int          # slice start, ms
    dims: tuple         # sorted (name, value) pairs
    atom: int           # the atom's number among its slice and key's atoms (0, 1, ...), or PENDING
    acc: object         # ldp_marginals.ldp.aggregate.WindowAccumulator

    @property
    def released(self) -> bool:
        return self.atom != PENDING


class PaneFile(NamedTuple):
    """The rows of one kind, collection, window and pane: what one output file holds."""

    kind: str
    group: str             # the collection
    window: tuple | None   # (start_ms, end_ms), None for the global window
    pane: int              # 0, 1, ... per window
    timing: str            # early, on_time, late, or closed (a window's final pane at its close)
    rows: list


class LateBatch(NamedTuple):
    """Reports that arrived after every window of their slice had closed: one dead letter."""

    collection: str
    dims: tuple
    slice_start: int
    slice_end: int
    reports: int
    lateness_seconds: float


@dataclass
class WindowStatus:
    panes: int = 0            # panes published (the next pane's index)
    on_time: bool = False     # the on-time pane has passed
    dirty: bool = False       # data since the last pane (early firings)
    published: int = 0        # reports in the last published pane


@dataclass
class Status:
    through_us: int = NEVER                       # the watermark has passed this
    windows: dict = field(default_factory=dict)   # (start_ms, end_ms) -> WindowStatus
    early_set: bool = False                       # an early firing is pending


@dataclass
class Step:
    """What one event produced: pane files, late batches, reports counted, entries to append to the
    bag or (``store``) the bag's whole new content, the next event timer, and whether to arm or to
    disarm the early firing."""

    panes: list = field(default_factory=list)
    late: list = field(default_factory=list)
    counted: int = 0
    append: list = field(default_factory=list)
    store: list | None = None
    event_us: int | None = None
    arm_early: bool = False
    disarm_early: bool = False


def capped_keys(config, states: dict) -> dict:
    """``{dims: the key it is published under}`` for the keys of one window: each dimension's values
    past its ``max_values`` (by reports) become ``__other__``."""
    if not config.dimensions:
        return {dims: dims for dims in states}
    return config.cap_dimension_values({dims: acc.n for dims, acc in states.items()})


def cap_states(config, states: dict, merge: Callable) -> dict:
    """``{dims: accumulator}`` of one window -> the same under the capped keys (:func:`capped_keys`);
    accumulators that meet under one key are merged (``merge``, into a new one), so no window lists
    unbounded values and no report is dropped."""
    capped = capped_keys(config, states)
    merged = {}
    for dims, acc in sorted(states.items()):
        merged.setdefault(capped[dims], []).append(acc)
    return {dims: (group[0] if len(group) == 1 else merge(group)) for dims, group in sorted(merged.items())}


def publish(config, window: tuple, released: dict, pending: dict, *, linear: bool, final: bool,
            atoms: dict | None = None) -> dict:
    """``{kind: rows}`` of one pane of ``window`` from the per-key sums of its released and pending
    slices: every key's estimates (capped), and in the ``final`` pane the extremes over clients and a
    withheld row per key for what the guard still holds. The one place rows are made, for batch and
    streaming.

    ``atoms`` (streaming): ``{dims: [accumulator]}``, the window's released atoms of each key, which
    panes under other caps published apart; the client rule reads a capped key's clients atom by
    atom. None (batch): each key's content was never published in parts; it is one atom."""
    aggregator = config.aggregator

    def merge(accs):
        return aggregator.merge([aggregator.create(), *accs])

    out = {kind: [] for kind in ESTIMATE_KINDS}
    tables = {}   # kinds made as tables (the marginals): a table per key, one per kind for the pane
    key_atoms = {}   # capped key -> the atoms of the values it holds
    if atoms is not None:
        for dims, key in capped_keys(config, released).items():
            key_atoms.setdefault(key, []).extend(atoms.get(dims, ()))
    released = cap_states(config, released, merge)
    for dims, acc in released.items():
        if acc.n:
            for kind, rows in window_blocks(config, dims, acc, window, linear=linear, final=final,
                                            atoms=key_atoms.get(dims) if atoms is not None else None):
                if isinstance(rows, TableRows):
                    tables.setdefault(kind, []).append(rows)
                else:
                    out[kind].extend(rows)
    for kind, parts in tables.items():
        out[kind] = TableRows.concat(parts[0].name, parts)
    if final:
        for dims, acc in cap_states(config, pending, merge).items():
            if acc.n:
                done = dims in released and released[dims].n > 0
                out[WITHHELD].append(held_row(config, base_row(config.name, window, dims), acc.n, done))
    return out


def sums(config, window: tuple, entries, clients: bool = True) -> tuple:
    """``(released, pending, atoms)``: per dimensions key, the window's released atoms and its pending
    parts merged (new accumulators), and the released atoms themselves (``[accumulator]``). With
    ``clients`` False the merged accumulators have no client table (a pane that publishes no client
    row: merging a window's atoms' client tables at every pane would cost a sort of them all)."""
    aggregator = config.aggregator
    slices = config.window.slices_of(window)
    released, pending, atoms = {}, {}, {}
    for e in entries:
        if slices is None or e.start in slices:
            part = released if e.released else pending
            if e.dims not in part:
                part[e.dims] = [aggregator.create()]
            part[e.dims].append(e.acc)
            if e.released:
                atoms.setdefault(e.dims, []).append(e.acc)
    merged = ({dims: aggregator.merge(accs, clients) for dims, accs in part.items()} for part in (released, pending))
    return (*merged, atoms)


def compact(config, entries) -> list:
    """Merge entries per (slice, dims, atom) into new accumulators, and release a pending part that
    holds enough (:func:`~ldp_marginals.transforms.publication.release.releasable`): it becomes the
    slice and key's next atom, for good. Atoms are never merged with each other."""
    aggregator = config.aggregator
    parts = {}
    for e in entries:
        parts.setdefault((e.start, e.dims, e.atom), []).append(e.acc)
    # parts are merged into a new accumulator (bag reads may share objects); a lone part, never
    # modified after, is kept as it is
    merged = {key: accs[0] if len(accs) == 1 else aggregator.merge(
              [aggregator.create_open() if key[2] == PENDING else aggregator.create(), *accs])
              for key, accs in parts.items()}   # pending parts stay open under a device bound
    following = {}   # (start, dims) -> the next atom number
    for start, dims, atom in merged:
        following[(start, dims)] = max(following.get((start, dims), 0), atom + 1)
    for (start, dims, atom), acc in list(merged.items()):
        if atom == PENDING:   # under a device bound: what the slice's released atoms leave each device
            acc = merged[(start, dims, atom)] = aggregator.within_slice(acc, [
                a for (s, d, n), a in merged.items() if (s, d) == (start, dims) and n != PENDING])
        if atom == PENDING and releasable(config, acc):
            number = following[(start, dims)]
            following[(start, dims)] = number + 1
            merged[(start, dims, number)] = aggregator.settle(merged.pop((start, dims, PENDING)))
    return [Entry(start, dims, atom, acc) for (start, dims, atom), acc in sorted(merged.items(),
                                                                                key=lambda kv: kv[0])]


def batch_window(config, window: tuple, slices) -> dict:
    """Batch: ``{kind: rows}`` of one window from its slices' complete accumulators ``[(slice start,
    dims, accumulator)]``. Each slice is one increment, released or held whole; the window publishes
    one pane, on time and final. A slice is released or not by its own content alone, so it is
    published in all its windows or in none."""
    entries = compact(config, [Entry(start, dims, PENDING, acc) for start, dims, acc in slices])
    released, pending, _ = sums(config, window, entries)
    return publish(config, window, released, pending, linear=True, final=True)


class PaneEngine:
    """The streaming pane state machine of one collection (see the module docstring)."""

    def __init__(self, config):
        self.config = config
        self.window = config.window
        self.lateness_us = int(round(config.allowed_lateness_seconds * 1_000_000))

    # -- times ------------------------------------------------------------------------------------
    def end_us(self, window: tuple) -> int:
        """The window's last instant (Beam's ``max_timestamp``): its on-time pane fires when the
        watermark reaches it."""
        return END_OF_TIME_US if self.window.is_global else window[1] * 1000 - 1

    def close_us(self, window: tuple) -> int:
        """When the window closes: its end plus the allowed lateness (never, for the global window)."""
        return END_OF_TIME_US if self.window.is_global else self.end_us(window) + self.lateness_us

    def next_event_us(self, status: Status) -> int | None:
        """The next instant something is due: an on-time pane or a close."""
        due = [self.close_us(w) if ws.on_time else self.end_us(w) for w, ws in status.windows.items()]
        return min(due) if due else None

    # -- events -----------------------------------------------------------------------------------
    def on_partial(self, status: Status, start: int, partial, read_entries: Callable) -> Step:
        """A partial (collection, dimensions, accumulator) of the slice starting at ``start``."""
        step = Step()
        acc = partial.accumulator
        open_windows = [w for w in self.window.windows_of_slice(start) if self.close_us(w) > status.through_us]
        if not open_windows:
            step.late.append(LateBatch(partial.collection, partial.dimensions, start, self.window.slice_end(start),
                                       acc.n, self.config.allowed_lateness_seconds))
            step.event_us = self.next_event_us(status)
            return step
        step.counted = acc.received
        entry = Entry(start, partial.dimensions, PENDING, acc)
        late_now = []
        for w in open_windows:
            ws = status.windows.get(w)
            if ws is None:
                ws = status.windows[w] = WindowStatus(on_time=self.end_us(w) <= status.through_us)
            ws.dirty = True
            if ws.on_time:
                late_now.append(w)
        if late_now:   # a late pane at once: the bag is compacted and rewritten
            entries = self._compacted(status, list(read_entries()) + [entry])
            step.store = entries
            for w in late_now:
                step.panes += self._pane(w, status.windows[w], entries, LATE)
        else:
            step.append.append(entry)
        step.event_us = self.next_event_us(status)
        if self.config.early_firing_seconds and not status.early_set and self._early_due(status):
            status.early_set = step.arm_early = True
        return step

    @staticmethod
    def _early_due(status: Status) -> bool:
        """Whether a window has new data and has not had its on-time pane (what early firings serve)."""
        return any(ws.dirty and not ws.on_time for ws in status.windows.values())

    def on_watermark(self, status: Status, now_us: int, read_entries: Callable) -> Step:
        """The watermark has passed ``now_us`` (an event timer fired)."""
        step = Step()
        status.through_us = max(status.through_us, now_us)
        due = [w for w, ws in sorted(status.windows.items()) if not ws.on_time and self.end_us(w) <= now_us]
        closing = sorted(w for w in status.windows if self.close_us(w) <= now_us)
        if due or closing:
            entries = self._compacted(status, read_entries())
            for w in due:
                ws = status.windows[w]
                ws.on_time = True
                step.panes += self._pane(w, ws, entries, ON_TIME, final=w in closing)
            for w in closing:
                if w not in due:
                    step.panes += self._close(w, status.windows[w], entries)
                del status.windows[w]
            step.store = self._live(status, entries) if closing else entries
        step.event_us = self.next_event_us(status)
        if status.early_set and not self._early_due(status):
            # every window with new data has had its on-time pane: no early firing is owed, and a
            # pending processing-time timer would keep a drained job from finishing (Flink waits for it)
            status.early_set = False
            step.disarm_early = True
        return step

    def on_early(self, status: Status, read_entries: Callable) -> Step:
        """An early firing: windows with new data since their last pane, before their on-time pane."""
        step = Step()
        status.early_set = False
        dirty = [w for w, ws in sorted(status.windows.items()) if ws.dirty and not ws.on_time]
        if dirty:
            entries = self._compacted(status, read_entries())
            step.store = entries
            for w in dirty:
                step.panes += self._pane(w, status.windows[w], entries, EARLY)
        step.event_us = self.next_event_us(status)
        return step

    # -- panes ------------------------------------------------------------------------------------
    def _compacted(self, status: Status, entries) -> list:
        return self._live(status, compact(self.config, entries))

    def _live(self, status: Status, entries) -> list:
        """The entries of slices that still lie in an open window."""
        if self.window.is_global:
            return list(entries)
        live = set()
        for w in status.windows:
            live |= self.window.slices_of(w)
        return [e for e in entries if e.start in live]

    def _pane(self, window: tuple, ws: WindowStatus, entries, timing: str, final: bool = False) -> list:
        """A pane of ``window`` from its released increments, published when it adds released reports
        to the window's last pane (an on-time pane whenever anything is released; a final pane also
        carries the client extremes and what the guard holds)."""
        ws.dirty = False
        released, pending, atoms = sums(self.config, window, entries, clients=final)
        total = sum(acc.n for acc in released.values())
        grew = total > ws.published
        if not final and (total == 0 or not (grew or timing == ON_TIME)):
            return []
        rows = publish(self.config, window, released, pending, linear=total > 0 and (grew or timing == ON_TIME),
                       final=final, atoms=atoms)
        ws.published = total
        return self._emit(window, ws, timing, rows)

    def _close(self, window: tuple, ws: WindowStatus, entries) -> list:
        """The final pane of a window at its close, after its on-time pane: the extremes over clients,
        what the guard still holds, and any released reports the last pane lacks."""
        released, pending, atoms = sums(self.config, window, entries)
        total = sum(acc.n for acc in released.values())
        rows = publish(self.config, window, released, pending, linear=total > ws.published, final=True, atoms=atoms)
        ws.published = total
        return self._emit(window, ws, CLOSED, rows)

    def _emit(self, window: tuple, ws: WindowStatus, timing: str, rows: dict) -> list:
        files = [PaneFile(kind, self.config.name, None if self.window.is_global else window, ws.panes, timing,
                          kind_rows) for kind, kind_rows in rows.items() if kind_rows]
        if files:
            ws.panes += 1
        return files

