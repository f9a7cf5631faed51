"""Event-time windows: the one place where window arithmetic lives (Beam-free).

A collection's :class:`Window` is fixed, sliding or global, with Beam's semantics (``FixedWindows``,
``SlidingWindows`` with offset 0, ``GlobalWindows``). Everything that reasons about windows asks it:
the readers that pre-aggregate per *slice*, the publication engine that releases slices and publishes
panes, the Beam adapters and the simulator's true counts.

A slice is the period-long piece of event time whose reports all lie in exactly the same windows: a
fixed window itself, a sliding window's period, the whole of time for the global window. A partial
aggregate timestamped with its slice's start lands in exactly its reports' windows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp_marginals.ldp._checks import check_positive

# The product's event-time range, defined here once: reports outside [1970, 2100) are absurd for
# telemetry and dead-lettered; the global window is reported as this range in output rows.
MIN_EVENT_MS = 0
MAX_EVENT_MS = 4_102_444_800_000  # 2100-01-01T00:00:00Z
GLOBAL_WINDOW = (MIN_EVENT_MS, MAX_EVENT_MS)

WINDOW_TYPES = ("fixed", "sliding", "global")
MIN_WINDOW_SECONDS = 1.0
DAY_MS = 86_400_000


def _at_least_a_second(name: str, value) -> None:
    check_positive(name, value)
    if value < MIN_WINDOW_SECONDS:
        raise ValueError(f"{name} must be >= {MIN_WINDOW_SECONDS:g} second, got {name}={value!r}")


@dataclass(frozen=True)
class Window:
    """A collection's event-time windows: ``type`` fixed, sliding or global, with ``size_seconds`` and
    (sliding) ``period_seconds``, a whole fraction of the size."""

    type: str
    size_seconds: float = 0.0
    period_seconds: float = 0.0

    def __post_init__(self):
        if self.type not in WINDOW_TYPES:
            raise ValueError(f"window.type must be one of {list(WINDOW_TYPES)}, got type={self.type!r}")
        if self.type in ("fixed", "sliding"):
            _at_least_a_second("window.size_seconds", self.size_seconds)
        if self.type == "sliding":
            _at_least_a_second("window.period_seconds", self.period_seconds)
            if not 0 < self.period_seconds <= self.size_seconds:
                raise ValueError(f"window.period_seconds must be in (0, size_seconds], "
                                 f"got period_seconds={self.period_seconds!r}")
            # a period-long slice must lie in exactly the same windows for all its reports: readers
            # pre-aggregate per slice, and the guard reasons about slices
            ratio = self.size_seconds / self.period_seconds
            if abs(ratio - round(ratio)) > 1e-9:
                raise ValueError(f"window.size_seconds must be a whole multiple of period_seconds "
                                 f"({self.period_seconds!r}), got size_seconds={self.size_seconds!r}")

    # -- sizes --------------------------------------------------------------------------------
    @property
    def is_global(self) -> bool:
        return self.type == "global"

    @property
    def overlapping(self) -> bool:
        """Whether a report lies in more than one window (sliding windows of more than one period)."""
        return self.type == "sliding" and self.slices_per_window > 1

    @property
    def size_ms(self) -> int:
        """A window's length (0 for the global window, which has no length)."""
        return 0 if self.is_global else int(round(self.size_seconds * 1000))

    @property
    def period_ms(self) -> int:
        """A slice's length: the window itself when fixed, the period when sliding, 0 when global."""
        if self.type == "sliding":
            return int(round(self.period_seconds * 1000))
        return self.size_ms

    @property
    def slices_per_window(self) -> int:
        return 1 if self.type != "sliding" else self.size_ms // self.period_ms

    def slices_in_days(self, days: int) -> int:
        """The most slices that ``days`` consecutive UTC days can meet (a report's slice is where its
        device token, and so the device bound, is scoped). Slices start at multiples of the period since
        the epoch and days at multiples of 86,400 s, so a span's start lies at an offset into a slice that is
        a multiple of ``g = gcd(day, period)``, at most ``period - g``: the span meets at most
        ``ceil((span + period - g) / period)`` slices, reached by some day. A period that divides the day
        gives exactly ``days * 86400 / period``; the global window has one slice for all time."""
        if self.is_global:
            return 1
        span, period = days * DAY_MS, self.period_ms
        return -(-(span + period - math.gcd(DAY_MS, period)) // period)

    # -- slices and windows -------------------------------------------------------------------
    def slice_starts(self, event_ms) -> np.ndarray:
        """The start (ms) of each event's slice (0 for the global window's single slice)."""
        t = np.asarray(event_ms, dtype=np.int64)
        if self.is_global:
            return np.zeros_like(t)
        return t - (t % self.period_ms)

    def slice_of(self, event_ms: int) -> int:
        return int(self.slice_starts(np.array([event_ms]))[0])

    def slice_end(self, start: int) -> int:
        return start + self.period_ms if not self.is_global else MAX_EVENT_MS

    def windows_of_slice(self, start: int) -> list:
        """``[(start_ms, end_ms), ...]`` of the windows a slice lies in, oldest first
        (:data:`GLOBAL_WINDOW` for the global window)."""
        if self.is_global:
            return [GLOBAL_WINDOW]
        period, size = self.period_ms, self.size_ms
        return [(start - j * period, start - j * period + size) for j in reversed(range(self.slices_per_window))]

    def slices_of(self, window: tuple) -> frozenset | None:
        """The slice starts of a window (None for the global window: every slice)."""
        if self.is_global:
            return None
        return frozenset(window[0] + j * self.period_ms for j in range(self.slices_per_window))

    def assign(self, event_ms) -> list:
        """``[((start_ms, end_ms), indices), ...]`` sorted by window: the events of each window, the
        windows Beam assigns."""
        t = np.asarray(event_ms, dtype=np.int64)
        if self.is_global:
            return [(GLOBAL_WINDOW, np.arange(t.size))] if t.size else []
        starts = self.slice_starts(t)
        out = {}
        for s in np.unique(starts):
            members = np.flatnonzero(starts == s)
            for w in self.windows_of_slice(int(s)):
                out.setdefault(w, []).append(members)
        return [(w, np.sort(np.concatenate(parts))) for w, parts in sorted(out.items())]

    def describe(self) -> dict:
        return {"type": self.type, "size_seconds": self.size_seconds, "period_seconds": self.period_seconds}
