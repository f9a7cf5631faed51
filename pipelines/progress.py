"""Progress of a running job on stderr: reports counted and dead-lettered so far, every few
seconds. The numbers are the job's counters: read from the running job's metrics when the runner
reports them live (Dataflow, Flink, the streaming DirectRunner), else from the in-process mirror
of the same increments (:data:`~ldp_marginals.transforms.dead_letters.LOCAL_TALLY`; the batch
DirectRunner runs in this process and reports its counters only at the end). No extra pass over
the data."""
from __future__ import annotations

import sys
import threading
import time

from ldp_marginals.schemas.dead_letters import (
    FILES_PLANNED,
    FILES_WRITTEN,
    LOST,
    NAMESPACE,
    ROWS_WRITTEN,
    VALID,
    reports_dead_lettered,
    totals_by_reason,
)
from ldp_marginals.transforms.dead_letters import LOCAL_TALLY


SINCE_RESUME = "since the resume"


def resumed_line(resumed_from: str) -> str:
    """What a resumed job's progress says first: its counters start again at 0 (a new job's metrics)."""
    return (f"resumed from {resumed_from}: the counts below start again at 0, {SINCE_RESUME} (they are this "
            "job's metrics; what the job counted before the stop is in its outputs already)")


def progress_line(totals: dict, elapsed: float, resumed: bool = False) -> str:
    """One progress line; ``resumed``: the job resumed from a savepoint, so its counts are those since then."""
    dead = totals_by_reason(totals)
    reports = reports_dead_lettered(dead)
    since = f" {SINCE_RESUME}" if resumed else ""
    line = (f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}] counted {totals.get(VALID, 0):,} reports{since}; "
            f"dead-lettered {reports:,}")
    if dead:
        line += " (" + ", ".join(f"{reason} {n:,}" for reason, n in sorted(dead.items())) + ")"
    if totals.get(LOST):
        line += f"; {totals[LOST]:,} reports in damaged ranges"
    if totals.get(FILES_PLANNED) or totals.get(FILES_WRITTEN):   # the counting is done: the files are written
        planned = totals.get(FILES_PLANNED, 0)
        line += (f"; writing outputs: {totals.get(FILES_WRITTEN, 0):,}" + (f" of {planned:,}" if planned else "")
                 + f" file sets ({totals.get(ROWS_WRITTEN, 0):,} rows)")
    return line


def job_counters(result) -> list:
    """The job's counters of this project's namespace as the runner reports them now.

    Beam's portable ``PipelineResult`` (Flink, Spark, Prism through the job service) keeps the first
    answer of ``metrics()`` for good: a progress poll before anything was counted would then be the
    finished job's summary ("counted 0 reports"). Its cache is dropped before each query, so every
    call asks the job service afresh; other runners' results build their answer per call."""
    from apache_beam.metrics.metric import MetricsFilter
    if hasattr(result, "_metrics") and hasattr(result, "_job_service"):   # the portable runner's result
        result._metrics = None
    return result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]


def live_totals(result) -> dict:
    """Counter totals of a running job's metrics (empty when the runner gives none yet)."""
    try:
        counters = job_counters(result)
    except Exception:  # noqa: BLE001 - a runner without live metrics
        return {}
    totals = {}
    for c in counters:
        value = c.attempted if c.attempted is not None else c.committed
        totals[c.key.metric.name] = totals.get(c.key.metric.name, 0) + (value or 0)
    return totals


class Progress:
    """``with Progress(seconds) as progress: ...; progress.result = result`` prints a line every
    ``seconds`` on ``stream`` until the block ends (``seconds`` 0: never). ``resumed_from`` (a resumed
    streaming job's savepoint, or ``--update``): the counters restart at 0, and the lines say so."""

    def __init__(self, seconds: float, stream=None, resumed_from: str | None = None):
        if seconds < 0:
            raise ValueError(f"progress seconds must be >= 0, got seconds={seconds!r}")
        self.seconds = seconds
        self.stream = stream or sys.stderr
        self.result = None
        self._stop = threading.Event()
        self._thread = None
        self._printed = False
        self._start = time.monotonic()
        self.resumed_from = resumed_from

    def totals(self) -> dict:
        live = live_totals(self.result) if self.result is not None else {}
        return live or LOCAL_TALLY.totals()

    def line(self) -> str:
        return progress_line(self.totals(), time.monotonic() - self._start, self.resumed_from is not None)

    def _loop(self):
        while not self._stop.wait(self.seconds):
            print(self.line(), file=self.stream, flush=True)
            self._printed = True

    def __enter__(self):
        LOCAL_TALLY.reset()
        self._start = time.monotonic()
        if self.seconds:
            if self.resumed_from is not None:
                print(resumed_line(self.resumed_from), file=self.stream, flush=True)
            self._thread = threading.Thread(target=self._loop, name="ldp-marginals-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if exc_type is None and self._printed:   # a run long enough to show progress: its last figures
                print(self.line(), file=self.stream, flush=True)
        return False
