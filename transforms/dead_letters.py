"""Dead letters in the job (Beam): the DeadLetter row (``schemas/dead_letter.avsc``), the tag it
travels under, :func:`count` (a job counter, mirrored in this process) and :func:`dead_letter`, the
one function that counts a dead letter and tags it.

Every input the job reads ends up counted (counter ``reports.valid``) or dead-lettered (counter
``dead_letter.<reason>``, and a row of kind ``dead_letters``). The reasons, their meanings and the
counter names are owned by :mod:`ldp_marginals.schemas.dead_letters` (no Beam).
"""
from __future__ import annotations

import threading

import apache_beam as beam
from apache_beam.metrics import Metrics

from ldp_marginals import schemas
from ldp_marginals.schemas.dead_letters import (
    DAMAGED_BLOCK,
    LATE,
    LOST,
    LOST_UNKNOWN,
    NAMESPACE,
    REPORTS_WITHHELD,
    WINDOWS_WITHHELD,
    check_reason,
    counter_name,
)
from ldp_marginals.schemas.outputs import DEAD_LETTERS

TAG = DEAD_LETTERS            # the tagged output that carries dead-letter rows, named as their kind


class _Tally:
    """The job's counter increments, mirrored in this process. Beam's counters are the record; the
    mirror lets a local run show progress while it runs (the batch DirectRunner reports counters
    only when the run ends). On a remote runner the launcher's mirror stays empty."""

    def __init__(self):
        self._lock = threading.Lock()
        self._totals = {}

    def add(self, name: str, n: int) -> None:
        with self._lock:
            self._totals[name] = self._totals.get(name, 0) + n

    def totals(self) -> dict:
        with self._lock:
            return dict(self._totals)

    def reset(self) -> None:
        with self._lock:
            self._totals = {}


LOCAL_TALLY = _Tally()


def count(name: str, n: int = 1, counter=None) -> None:
    """Add ``n`` to the job's counter ``name`` (``counter``: the same counter made once, for speed)."""
    (counter or Metrics.counter(NAMESPACE, name)).inc(n)
    LOCAL_TALLY.add(name, n)


def row(reason: str, detail: str, source: str, reports: int = 1, meta: dict | None = None,
        output_row: dict | None = None) -> dict:
    """A DeadLetter row. It carries no report content (no bits, no client token, no undeclared
    dimension): ``meta`` is :func:`~ldp_marginals.transforms.checks.report_meta` of the input (collection, event time, declared
    dimensions, lengths), the source names where the raw input is. ``output_row`` is for
    ``bigquery_insert`` only: the published row BigQuery refused (an estimate, never a report)."""
    meta = meta or {}
    return {"reason": check_reason(reason), "detail": detail, "source": source, "reports": int(reports),
            "collection": meta.get("collection"), "event_time": meta.get("event_time"),
            "dimensions": dict(meta.get("dimensions") or {}), "bits_length": meta.get("bits_length"),
            "client_length": meta.get("client_length"), "record_length": meta.get("record_length"),
            "output_row": None if output_row is None else schemas.to_json_line(output_row)}


def dead_letter(reason: str, detail: str, source: str, meta: dict | None = None, output_row: dict | None = None,
                reports: int = 1):
    """Count one dead letter of ``reason`` and return its row tagged for the ``dead_letters`` output."""
    count(counter_name(reason))
    return beam.pvalue.TaggedOutput(TAG, row(reason, detail, source, reports, meta=meta, output_row=output_row))


def late_batch(batch, watermark_delay_seconds: float = 0.0) -> beam.pvalue.TaggedOutput:
    """The dead letter of a :class:`~ldp_marginals.transforms.publication.engine.LateBatch`: reports
    pre-aggregated together that arrived after every window of their slice had closed (streaming). One
    row whose ``reports`` field says how many; the counter ``dead_letter.late`` counts them all."""
    n = batch.reports
    count(counter_name(LATE), n)
    detail = (f"{n} report(s) of collection {batch.collection!r}, dimensions {dict(batch.dims)}, with event times "
              f"in [{batch.slice_start}, {batch.slice_end}) ms arrived after every "
              f"window they belong to had closed (window end + watermark delay {watermark_delay_seconds:g}s "
              f"+ allowed lateness {batch.lateness_seconds:g}s)")
    meta = {"collection": batch.collection, "event_time": batch.slice_start, "dimensions": dict(batch.dims)}
    return beam.pvalue.TaggedOutput(TAG, row(LATE, detail, "stream", reports=n, meta=meta))


def damaged(path: str, damage) -> beam.pvalue.TaggedOutput:
    """The dead letter of one damaged byte range of a file (an ``avro_container.Damage``), counting
    the reports it held when its block's count was readable; its ``reports`` field says how many
    (0 when the count is unreadable: the detail says so)."""
    lost = damage.records_lost
    if lost is None:
        count(LOST_UNKNOWN)
    else:
        count(LOST, lost)
    return dead_letter(DAMAGED_BLOCK, damage.detail(), f"{path}@{damage.start}", reports=lost or 0)


def count_withheld(rows) -> int:
    """Count the guard's rows among a final pane's ``withheld`` rows (cause ``privacy``, statistic
    ``all``: a window and key with reports held back): ``windows.withheld`` and ``reports.withheld``.
    Returns the reports held back."""
    held = [r["n_reports"] for r in rows if r.get("cause", "privacy") == "privacy" and r.get("statistic", "all") == "all"]
    if held:
        count(WINDOWS_WITHHELD, len(held))
        count(REPORTS_WITHHELD, sum(held))
    return sum(held)
