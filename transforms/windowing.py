"""Event-time windows from a collection config (batch: Beam's windows; streaming windows and panes
are the state machine of :mod:`ldp_marginals.transforms.panes`)."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.transforms import window


def window_fn(cfg_window):
    if cfg_window.type == "fixed":
        return window.FixedWindows(cfg_window.size_seconds)
    if cfg_window.type == "sliding":
        return window.SlidingWindows(cfg_window.size_seconds, cfg_window.period_seconds)
    return window.GlobalWindows()


def window_into(config, streaming: bool = False) -> beam.WindowInto:
    """Batch: the collection's windows with the default trigger (one pane per window when the input
    is complete). Streaming does not window with Beam (see :mod:`~ldp_marginals.transforms.panes`)."""
    if streaming:
        raise ValueError("window_into is for batch; streaming panes are transforms.panes, got streaming=True")
    return beam.WindowInto(window_fn(config.window))
