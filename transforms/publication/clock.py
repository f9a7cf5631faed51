"""The streaming clock of one collection: lateness, the dimension cap and the panes' timing, from the
partials' weights alone (how many reports of which key and slice), never their accumulators.

Why per collection: Beam's windowed GroupByKey drops the elements of an expired window without a
trace, and a step keyed finer cannot tell whether an element of a key it has never seen is already
behind the watermark. The clock sees every partial's weight, in the global window, and knows the
watermark has passed ``T`` when its own event timer for ``T`` fires. So it alone decides:

- whether a partial is late (every window of its slice has closed: a dead letter, and a
  :class:`~.messages.Drop` to its key) or counted;
- where each key of a window is published: its capped key (:mod:`.cap`), decided at the window's
  events from the values' weights, sticky;
- under a bound on a slice's keys (``privacy.unit: device`` with dimensions): a slice is *sealed* at
  its first window's close, and a partial of a sealed slice is late; the slice step is told which
  partials were counted (:class:`~.slices.Accept`), how many at the seal, and which were late
  (:mod:`.slices`);
- when a window publishes: an *event* (early firings, the on-time pane when the watermark passes the
  window's end, a late pane at once for a partial that arrives after that, the final pane at the end
  plus the allowed lateness, when the window closes), numbered per collection. An event commands the
  window's keys (:class:`~.messages.Command`: accept these partials, release, contribute) and tells
  each capped key which keys to expect (:class:`~.messages.Expect`).

State: a small :class:`ClockStatus` read at every partial (the watermark passed, the open windows,
whether an early firing is pending), a bag of the weights counted since the last event (appended),
and the :class:`Book` (per window the values' weights, the cap's decisions, each key's route and the
keys with partials in it since its last event; per key the partials since its last command; per key
and capped key its last event, kept for the job's life: a few bytes per key ever seen, so that
a key's messages stay ordered across its windows), read and rewritten at events only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ldp_marginals.transforms.publication import rollup_panes
from ldp_marginals.transforms.publication.cap import add_weights, capped, decide, value_weights
from ldp_marginals.transforms.publication.engine import CLOSED, EARLY, END_OF_TIME_US, LATE, NEVER, ON_TIME, LateBatch
from ldp_marginals.transforms.publication.messages import Command, Drop, Expect
from ldp_marginals.transforms.publication.slices import Accept, sealed_by


@dataclass
class ClockStatus:
    through_us: int = NEVER                        # the watermark has passed this
    windows: dict = field(default_factory=dict)    # (start_ms, end_ms) -> [on-time pane passed, new data]
    early_set: bool = False                        # an early firing is pending


@dataclass
class WindowBook:
    """One open window: its values' weights, the cap's decisions so far, each key's route (None
    until decided), and the keys with partials in the window since its last event."""

    weights: dict = field(default_factory=dict)    # {name: {value: reports}}
    decided: dict = field(default_factory=dict)    # {name: {value: kept}}
    routes: dict = field(default_factory=dict)     # {dims: capped key or None}
    fresh: set = field(default_factory=set)        # {dims} with new partials in this window


@dataclass
class Book:
    event: int = 0                                 # the last event's number
    windows: dict = field(default_factory=dict)    # (start_ms, end_ms) -> WindowBook
    ids: dict = field(default_factory=dict)        # dims -> partials counted since its last command
    prev: dict = field(default_factory=dict)       # dims -> its last command's event
    prev_capped: dict = field(default_factory=dict)   # capped key -> its last expectation's event


@dataclass
class KeyBook(Book):
    """The book of a collection under a bound on keys: also, per slice not sealed, its partials counted."""

    slices: dict = field(default_factory=dict)     # slice start -> partials counted


@dataclass
class ClockStep:
    """What one event of the clock produced: reports counted, late batches (dead letters), messages to
    keys (``(dims, Drop | Command)``) and to capped keys (``(capped key, Expect)``), weights to append
    to the bag or (``clear``) the bag emptied, the book to store (None: unchanged), the next event
    timer, and whether to arm or to disarm the early firing."""

    counted: int = 0
    late: list = field(default_factory=list)
    to_keys: list = field(default_factory=list)
    to_capped: list = field(default_factory=list)
    to_slices: list = field(default_factory=list)   # under a bound on keys: (slice start, Accept | Drop)
    to_rollups: list = field(default_factory=list)   # (window, RollupExpect): collections with rollups
    append: list = field(default_factory=list)
    clear: bool = False
    book: Book | None = None
    event_us: int | None = None
    arm_early: bool = False
    disarm_early: bool = False


class Clock:
    """The clock of one collection (module docstring). Each method takes the state (``status`` is
    changed in place; the book and the bag are read through callables, only when needed) and returns
    a :class:`ClockStep`."""

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

    def next_event_us(self, status: ClockStatus) -> int | None:
        """The next instant something is due: an on-time pane or a close."""
        due = [self.close_us(w) if on_time else self.end_us(w) for w, (on_time, _) in status.windows.items()]
        return min(due) if due else None

    # -- events -----------------------------------------------------------------------------------
    def on_weight(self, status: ClockStatus, weight, read_book: Callable, read_bag: Callable) -> ClockStep:
        """A partial's weight: late (a dead letter and a drop), or counted; a window whose on-time pane
        has passed publishes a late pane at once."""
        step = ClockStep()
        open_windows = [w for w in self.window.windows_of_slice(weight.start) if self.close_us(w) > status.through_us]
        if self.config.bounds_keys and len(open_windows) < len(self.window.windows_of_slice(weight.start)):
            open_windows = []   # its slice was sealed at its first window's close (.slices)
        if not open_windows:
            step.late.append(LateBatch(self.config.name, weight.dims, weight.start, self.window.slice_end(weight.start),
                                       weight.n, self.config.allowed_lateness_seconds))
            step.to_keys.append((weight.dims, Drop(weight.id)))
            if self.config.bounds_keys:
                step.to_slices.append((weight.start, Drop(weight.id)))
            step.event_us = self.next_event_us(status)
            return step
        step.counted = weight.n
        late_now = []
        for w in open_windows:
            if w not in status.windows:
                status.windows[w] = [self.end_us(w) <= status.through_us, False]
            status.windows[w][1] = True
            if status.windows[w][0]:
                late_now.append(w)
        if late_now:   # a late pane at once: the bag is folded into the book
            book = self._folded(status, read_book(), list(read_bag()) + [weight], step)
            step.clear, step.book = True, book
            for w in late_now:
                status.windows[w][1] = False
                self._event(step, book, status, w, LATE)
        else:
            step.append.append(weight)
        step.event_us = self.next_event_us(status)
        if self.config.early_firing_seconds and not status.early_set and self._early_due(status):
            status.early_set = step.arm_early = True
        return step

    @staticmethod
    def _early_due(status: ClockStatus) -> bool:
        """Whether a window has new data and has not had its on-time pane (what early firings serve)."""
        return any(dirty and not on_time for on_time, dirty in status.windows.values())

    def on_watermark(self, status: ClockStatus, now_us: int, read_book: Callable, read_bag: Callable) -> ClockStep:
        """The watermark has passed ``now_us`` (an event timer fired): on-time panes, then closes."""
        step = ClockStep()
        status.through_us = max(status.through_us, now_us)
        due = [w for w, (on_time, _) in sorted(status.windows.items()) if not on_time and self.end_us(w) <= now_us]
        closing = sorted(w for w in status.windows if self.close_us(w) <= now_us)
        if due or closing:
            book = self._folded(status, read_book(), read_bag(), step)
            step.clear, step.book = True, book
            for w in due:
                status.windows[w] = [True, False]
                self._event(step, book, status, w, ON_TIME, final=w in closing)
            for w in closing:
                if w not in due:
                    self._event(step, book, status, w, CLOSED, final=True)
                del status.windows[w]
        step.event_us = self.next_event_us(status)
        if status.early_set and not self._early_due(status):
            # every window with new data has had its on-time pane: no early firing is owed, and a
            # pending processing-time timer would keep a drained job from finishing (Flink waits for it)
            status.early_set = False
            step.disarm_early = True
        return step

    def on_early(self, status: ClockStatus, read_book: Callable, read_bag: Callable) -> ClockStep:
        """An early firing: windows with new data since their last pane, before their on-time pane."""
        step = ClockStep()
        status.early_set = False
        dirty = [w for w, (on_time, new) in sorted(status.windows.items()) if new and not on_time]
        if dirty:
            book = self._folded(status, read_book(), read_bag(), step)
            step.clear, step.book = True, book
            for w in dirty:
                status.windows[w][1] = False
                self._event(step, book, status, w, EARLY)
        step.event_us = self.next_event_us(status)
        return step

    # -- the book ---------------------------------------------------------------------------------
    def _folded(self, status: ClockStatus, book: Book | None, weights, step: ClockStep) -> Book:
        """``book`` with the bag's weights added: each to the open windows of its slice, its id to its
        key's partials to accept (and under a bound on keys, to its slice's)."""
        book = book or (KeyBook() if self.config.bounds_keys else Book())
        if self.config.bounds_keys:
            accepted = {}
            for w in weights:
                accepted.setdefault(w.start, []).append(w.id)
                book.slices[w.start] = book.slices.get(w.start, 0) + 1
            step.to_slices += [(start, Accept(start, tuple(ids))) for start, ids in sorted(accepted.items())]
        for w in weights:
            for window in self.window.windows_of_slice(w.start):
                if window in status.windows:
                    wb = book.windows.setdefault(window, WindowBook())
                    add_weights(wb.weights, value_weights([(w.dims, w.n)]))
                    wb.routes.setdefault(w.dims, None)
                    wb.fresh.add(w.dims)
            book.ids.setdefault(w.dims, []).append(w.id)
        return book

    def _event(self, step: ClockStep, book: Book, status: ClockStatus, window: tuple, timing: str,
               final: bool = False) -> None:
        """Event ``timing`` of ``window``: decide the cap for the values seen since its last event, then
        command its keys (all of them on time and at the close; otherwise those with new partials in the
        window since its last event) and tell each of their capped keys whom to expect.

        A key's partials accepted since its last command (``book.ids``) go with its first command, for
        whichever window; its commands for the other windows its partials fall in carry none, yet
        release and contribute what the partials hold to those windows' panes too."""
        if final and self.config.bounds_keys:   # the slices this close seals: their keys' choice is made
            for start in sorted(sealed_by(self.window, window)):
                total = book.slices.pop(start, 0)
                if total:
                    step.to_slices.append((start, Accept(start, (), True, total)))
        wb = book.windows.get(window)
        if wb is None:   # a window that only ever held late partials of closed slices: nothing to publish
            return
        wb.decided = decide(self.config, wb.decided, wb.weights)
        for dims, route in wb.routes.items():
            if route is None:
                wb.routes[dims] = capped(dims, wb.decided)
        book.event += 1
        event = book.event
        everyone = final or timing == ON_TIME
        members = sorted(d for d in wb.routes if everyone or d in wb.fresh)
        wb.fresh = set()
        by_route = {}
        for dims in members:
            route = wb.routes[dims]
            step.to_keys.append((dims, Command(event, book.prev.get(dims, 0), window, timing, final, route,
                                               tuple(book.ids.pop(dims, ())))))
            book.prev[dims] = event
            by_route.setdefault(route, []).append(dims)
        for route, keys in sorted(by_route.items()):
            step.to_capped.append((route, Expect(event, book.prev_capped.get(route, 0), window, timing, final,
                                                 tuple(keys))))
            book.prev_capped[route] = event
        if self.config.rollups and rollup_panes.rolls_up(timing, final):
            step.to_rollups.append((window, rollup_panes.RollupExpect(event, window, timing, final, len(members))))
        if final:
            del book.windows[window]
