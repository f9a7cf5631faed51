"""Counting reports that arrive too late (streaming).

Beam drops elements whose window expired (watermark past window end + allowed lateness) without
a trace. So that nothing is lost silently, this stateful DoFn runs before the windowing, keyed by
collection and dimensions in the global window: an event-time timer at each seen window's
expiry records how far the watermark has passed, and a report whose windows have all expired by
then becomes a dead letter with reason ``late`` (and a counter) instead of a silent drop.
"""
from __future__ import annotations

import typing

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (
    BagStateSpec,
    ReadModifyWriteStateSpec,
    TimerSpec,
    on_timer,
)
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import Timestamp

from ldp_marginals.transforms.dead_letters import NAMESPACE, TAG, VALID, dead_letter
from ldp_marginals.transforms.reports import REPORTS
from ldp_marginals.transforms.windowing import window_fn


class _FlagLateFn(beam.DoFn):
    EXPIRED = ReadModifyWriteStateSpec("expired_through_micros", VarIntCoder())
    PENDING = BagStateSpec("pending_deadlines", VarIntCoder())
    EXPIRY = TimerSpec("expiry", TimeDomain.WATERMARK)

    def __init__(self, configs):
        self.configs = configs

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)

    def process(self, element, ts=beam.DoFn.TimestampParam, expired=beam.DoFn.StateParam(EXPIRED),
                pending=beam.DoFn.StateParam(PENDING), expiry=beam.DoFn.TimerParam(EXPIRY)):
        _, report = element
        cfg = self.configs[report.collection]
        windows = window_fn(cfg.window).assign(WindowFn.AssignContext(ts, element=report))
        lateness_micros = int(round(cfg.allowed_lateness_seconds * 1_000_000))
        # the GroupByKey drops a window once watermark > window.end + allowed lateness
        deadlines = [w.end.micros + lateness_micros for w in windows]
        through = expired.read()
        through = -1 if through is None else through  # -1: no window of this key has expired yet
        if all(d <= through for d in deadlines):
            yield dead_letter("late", f"event time {ts} is past its window's allowed lateness "
                                      f"({cfg.allowed_lateness_seconds}s)", "stream", record=_json_safe(report))
            return
        known = set(pending.read())
        new = [d for d in deadlines if d not in known and d > through]
        for d in new:
            pending.add(d)
        if new:
            expiry.set(Timestamp(micros=min(known | set(new))))
        self._valid.inc()  # on time: on its way to the accumulators, counted once
        yield report

    @on_timer(EXPIRY)
    def on_expiry(self, fire_ts=beam.DoFn.TimestampParam, expired=beam.DoFn.StateParam(EXPIRED),
                  pending=beam.DoFn.StateParam(PENDING), expiry=beam.DoFn.TimerParam(EXPIRY)):
        expired.write(max(expired.read() or -1, fire_ts.micros))
        left = sorted(d for d in pending.read() if d > fire_ts.micros)
        pending.clear()
        for d in left:
            pending.add(d)
        if left:
            expiry.set(Timestamp(micros=left[0]))
        return []


def _json_safe(report) -> dict:
    out = report._asdict()
    out["dimensions"] = dict(report.dimensions)
    out["bits"] = report.bits.hex()
    return out


class DropLateReports(beam.PTransform):
    """Timestamped reports -> on-time reports (``reports``) and late ones as dead letters."""

    def __init__(self, configs):
        super().__init__()
        self.configs = configs

    def expand(self, reports):
        return (reports
                # a string key: state needs a deterministic key coder on every runner
                | "KeyForLateness" >> beam.Map(lambda r: (repr((r.collection, r.dimensions)), r))
                .with_output_types(typing.Tuple[str, typing.Any])
                | "FlagLate" >> beam.ParDo(_FlagLateFn(self.configs)).with_outputs(TAG, main=REPORTS))
