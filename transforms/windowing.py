"""Beam's event-time windows for a collection's :class:`~ldp_marginals.ldp.windows.Window` (batch;
streaming windows and panes are the publication engine's state machine, :mod:`~ldp_marginals.transforms.panes`)."""
from __future__ import annotations

from apache_beam.transforms import window


def window_fn(cfg_window):
    """The collection's windows."""
    if cfg_window.type == "fixed":
        return window.FixedWindows(cfg_window.size_seconds)
    if cfg_window.type == "sliding":
        return window.SlidingWindows(cfg_window.size_seconds, cfg_window.period_seconds)
    return window.GlobalWindows()


def slice_window_fn(cfg_window):
    """The collection's slices as Beam windows: each report in exactly one (a fixed window itself, a
    sliding window's period, the global window)."""
    if cfg_window.is_global:
        return window.GlobalWindows()
    return window.FixedWindows(cfg_window.period_ms / 1000.0)
