"""Dead letters, owned here: the reasons and their meanings, the DeadLetter row
(``schemas/dead_letter.avsc``), the counter names, the tag they travel under, and
:func:`dead_letter`, the one function that counts a dead letter and tags it.

Every input the job reads ends up counted (counter ``reports.valid``) or dead-lettered (counter
``dead_letter.<reason>``, and a row of kind ``dead_letters``).
"""
from __future__ import annotations

import threading
import types

import apache_beam as beam
from apache_beam.metrics import Metrics

from ldp_marginals import schemas
from ldp_marginals.schemas.outputs import DEAD_LETTERS

NAMESPACE = "ldp_marginals"   # every counter of the job lives in this metrics namespace
VALID = "reports.valid"       # counter: reports added to an accumulator (counted in the estimates)
LOST = "reports.lost"         # counter: reports declared by damaged blocks that could not be read
LOST_UNKNOWN = "damaged.count_unreadable"  # counter: damaged ranges whose record count is unreadable
TAG = DEAD_LETTERS            # the tagged output that carries dead-letter rows, named as their kind

# reason -> meaning (read-only). The schema's doc of the ``reason`` field lists the same codes.
REASONS = types.MappingProxyType({
    "undecodable": "the bytes are not a NoisyReport: a message that does not decode, or a record whose "
                   "strings are not valid UTF-8 (the raw bytes are kept)",
    "damaged_block": "a byte range of an Avro file that could not be read (truncated or corrupted block or "
                     "header): one dead letter per range, with the range and the records its block declared",
    "unknown_collection": "no config names the report's collection",
    "wrong_length": "bits has another length than the collection's layout",
    "padding_bits": "a bit past the layout's last bit is set",
    "bad_timestamp": "event_time is missing, not int millis, or outside [1970, 2100)",
    "bad_field": "a field has the wrong type (collection, bits, dimensions, client) or a client token is "
                 "longer than 128 characters",
    "undeclared_dimension": "the report carries a dimension its collection does not declare (a config without "
                            "dimensions accepts reports without dimensions only)",
    "dimension_too_long": "a dimension value is longer than the declared max_length",
    "late": "the report arrived after every window it belongs to had closed (its end plus the allowed lateness "
            "had passed; streaming). One row per pre-aggregated batch, its `reports` field says how many",
    "bigquery_insert": "BigQuery refused the row (streaming inserts); the row is kept in the dead letter",
})


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


def counter_name(reason: str) -> str:
    """The counter of one reason: ``dead_letter.<reason>``."""
    return f"dead_letter.{check_reason(reason)}"


def check_reason(reason: str) -> str:
    if reason not in REASONS:
        raise ValueError(f"reason must be one of {sorted(REASONS)}, got reason={reason!r}")
    return reason


KEEP_BYTES = 64 * 1024     # the most of an original a dead letter keeps (JSON text or raw bytes)
_KEEP_CHARS, _KEEP_ENTRIES = 256, 50


def _shrunk(value):
    """An oversized record made small, still as JSON: long strings and bytes cut, big maps and lists
    cut to their first entries, each cut saying how much it left out."""
    if isinstance(value, str) and len(value) > _KEEP_CHARS:
        return value[:_KEEP_CHARS] + f"...[{len(value):,} characters]"
    if isinstance(value, (bytes, bytearray)) and len(value) > _KEEP_CHARS:
        return bytes(value[:_KEEP_CHARS])
    if isinstance(value, dict):
        items = list(value.items())
        out = {_shrunk(k) if isinstance(k, str) else k: _shrunk(v) for k, v in items[:_KEEP_ENTRIES]}
        if len(items) > _KEEP_ENTRIES:
            out["..."] = f"{len(items) - _KEEP_ENTRIES:,} more entries"
        return out
    if isinstance(value, (list, tuple)):
        return [_shrunk(v) for v in value[:_KEEP_ENTRIES]] + (
            [f"...{len(value) - _KEEP_ENTRIES:,} more"] if len(value) > _KEEP_ENTRIES else [])
    return value


def row(reason: str, detail: str, source: str, record=None, payload: bytes | None = None, reports: int = 1) -> dict:
    """A DeadLetter row: the original as JSON text (``record``) or raw bytes (``payload``), each kept
    up to ``KEEP_BYTES`` (a larger original is cut, and the detail says so)."""
    record_json = None
    if record is not None:
        record_json = schemas.to_json_line(record) if isinstance(record, dict) else repr(record)
        if len(record_json) > KEEP_BYTES:
            size = len(record_json)
            record_json = schemas.to_json_line(_shrunk(record)) if isinstance(record, dict) else record_json[:256]
            detail = f"{detail} (the record's {size:,} bytes of JSON are kept shortened)"
    if payload is not None and len(payload) > KEEP_BYTES:
        detail = f"{detail} (the first {KEEP_BYTES:,} of {len(payload):,} bytes are kept)"
        payload = payload[:KEEP_BYTES]
    return {"reason": check_reason(reason), "detail": detail, "source": source, "record_json": record_json,
            "payload": None if payload is None else bytes(payload), "reports": int(reports)}


def dead_letter(reason: str, detail: str, source: str, record=None, payload: bytes | None = None):
    """Count one dead letter of ``reason`` and return its row tagged for the ``dead_letters`` output."""
    count(counter_name(reason))
    return beam.pvalue.TaggedOutput(TAG, row(reason, detail, source, record, payload))


def late_batch(detail: str, record: dict, reports: int) -> beam.pvalue.TaggedOutput:
    """The dead letter of ``reports`` late reports pre-aggregated together (streaming): one row whose
    ``reports`` field says how many, and the counter ``dead_letter.late`` counts them all."""
    count(counter_name("late"), reports)
    return beam.pvalue.TaggedOutput(TAG, row("late", detail, "stream", record=record, reports=reports))


def damaged(path: str, damage) -> beam.pvalue.TaggedOutput:
    """The dead letter of one damaged byte range of a file (an ``avro_container.Damage``), counting
    the reports it held when its block's count was readable."""
    lost = damage.records_lost
    if lost is None:
        count(LOST_UNKNOWN)
    else:
        count(LOST, lost)
    return dead_letter("damaged_block", damage.detail(), f"{path}@{damage.start}")


def totals_by_reason(counters: dict) -> dict:
    """``{reason: count}`` (non-zero only) from the job's counter totals by name."""
    return {reason: counters[counter_name(reason)] for reason in REASONS if counters.get(counter_name(reason))}


# Details shared by both readers (per element and block), so their dead letters are identical.

def time_detail(event) -> str:
    return f"event_time {event} is outside [1970, 2100)"


def length_detail(name: str, got: int, n_bits: int, n_bytes: int) -> str:
    return f"{got} bytes, the layout of {name!r} has {n_bits} bits = {n_bytes} bytes"


def padding_detail(n_bits: int) -> str:
    return f"a bit past bit {n_bits - 1} is set"


def collection_detail(name) -> str:
    return f"no config for collection {name!r}"
