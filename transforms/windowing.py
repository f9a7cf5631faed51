"""Event-time windowing and triggers from a collection config."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.transforms import trigger, window


def window_fn(cfg_window):
    if cfg_window.type == "fixed":
        return window.FixedWindows(cfg_window.size_seconds)
    if cfg_window.type == "sliding":
        return window.SlidingWindows(cfg_window.size_seconds, cfg_window.period_seconds)
    return window.GlobalWindows()


class SameWindows(window.NonMergingWindowFn):
    """Keeps every element in the window it is already in (to change a trigger, not the windows)."""

    def __init__(self, window_coder):
        self._coder = window_coder

    def assign(self, context):
        return [context.window]

    def get_window_coder(self):
        return self._coder


def window_coder(cfg_window):
    return window_fn(cfg_window).get_window_coder()


def repane_on_every_pane(config) -> beam.WindowInto:
    """Streaming, after a combine: the same windows, a pane whenever an upstream pane arrives,
    accumulating, so a grouping downstream sees every key's latest state at each firing (instead
    of the continuation trigger, which repeats the on-time pane after an early one)."""
    return beam.WindowInto(SameWindows(window_coder(config.window)),
                           trigger=trigger.Repeatedly(trigger.AfterCount(1)),
                           accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
                           allowed_lateness=config.allowed_lateness_seconds)


def window_into(config, streaming: bool) -> beam.WindowInto:
    """Batch: the default trigger (one pane per window when the input is complete).

    Streaming: a pane when the watermark passes the window's end, speculative early panes every
    ``early_firing_seconds`` of processing time if configured, and a late pane per late report
    within ``allowed_lateness_seconds``. Panes accumulate, so every pane carries the window's full
    estimate so far; reports later than the allowed lateness are dropped (and counted, see
    :class:`transforms.late.DropLateReports`).
    """
    fn = window_fn(config.window)
    if not streaming or config.window.type == "global":
        return beam.WindowInto(fn)
    early = None
    if config.early_firing_seconds:
        early = trigger.AfterProcessingTime(config.early_firing_seconds)
    return beam.WindowInto(
        fn,
        trigger=trigger.AfterWatermark(early=early, late=trigger.AfterCount(1)),
        accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
        allowed_lateness=config.allowed_lateness_seconds,
    )
