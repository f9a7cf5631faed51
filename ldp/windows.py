"""Event-time window assignment in numpy, the same windows Beam assigns (for true counts of
simulations and for readers that pre-aggregate)."""
from __future__ import annotations

import numpy as np

# The product's event-time range, defined here once: reports outside [1970, 2100) are absurd for
# telemetry and dead-lettered; the global window is reported as this range in output rows.
MIN_EVENT_MS = 0
MAX_EVENT_MS = 4_102_444_800_000  # 2100-01-01T00:00:00Z
GLOBAL_WINDOW = (MIN_EVENT_MS, MAX_EVENT_MS)


def assign_windows(window, event_ms: np.ndarray):
    """``[((start_ms, end_ms), indices), ...]`` sorted by window, for a config window with
    ``type`` fixed / sliding / global, ``size_seconds`` and ``period_seconds`` (Beam's
    ``FixedWindows`` and ``SlidingWindows`` with offset 0)."""
    t = np.asarray(event_ms, dtype=np.int64)
    if window.type == "global":
        return [(GLOBAL_WINDOW, np.arange(t.size))] if t.size else []
    size = int(round(window.size_seconds * 1000))
    period = size if window.type == "fixed" else int(round(window.period_seconds * 1000))
    out = {}
    last_start = t - (t % period)
    for back in range(0, (size + period - 1) // period):
        start = last_start - back * period
        inside = t < start + size
        for s in np.unique(start[inside]):
            out.setdefault(int(s), []).append(np.flatnonzero(inside & (start == s)))
    return [((s, s + size), np.sort(np.concatenate(parts))) for s, parts in sorted(out.items())]


def slice_starts(window, event_ms: np.ndarray) -> np.ndarray:
    """Start (ms) of each event's slice: the period-aligned interval whose events all belong to the
    same windows (a fixed window itself; a sliding window's period; one slice for the global window).
    Pre-aggregating per slice and timestamping the aggregate with the slice start lets Beam assign
    it to exactly the windows of its events."""
    t = np.asarray(event_ms, dtype=np.int64)
    if window.type == "global":
        return np.zeros_like(t)
    period = int(round((window.size_seconds if window.type == "fixed" else window.period_seconds) * 1000))
    return t - (t % period)
