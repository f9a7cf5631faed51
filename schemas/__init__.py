"""The project's contracts: Avro schemas (``*.avsc`` beside this file) with fastavro helpers to
load, validate, read and write them, and the collection config (:mod:`schemas.collection`, parsed by
:mod:`schemas.config`).

Timestamps (``timestamp-millis``) are ints of milliseconds since the epoch inside the project;
fastavro writes ints as they are and reads them back as aware UTC datetimes, which
:func:`read_avro` turns back into millis so that rows round-trip unchanged.
"""
from __future__ import annotations

import base64
import copy
import datetime as _dt
import io
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import fastavro
from fastavro.validation import validate as _validate

SCHEMA_DIR = Path(__file__).resolve().parent
NAMES = ("noisy_report", "marginal_estimate", "extreme_estimate", "table_cell", "consistent_table_cell",
         "conditional_estimate", "mean_estimate", "withheld_window", "dead_letter")


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """The parsed Avro schema ``schemas/<name>.avsc``."""
    if name not in NAMES:
        raise ValueError(f"name must be one of {list(NAMES)}, got name={name!r}")
    with open(SCHEMA_DIR / f"{name}.avsc") as fh:
        return fastavro.parse_schema(json.load(fh))


def schema_version(name: str) -> int:
    """The version of the Avro schema ``schemas/<name>.avsc`` (its ``version`` attribute; 1 where it has
    none). Version 2 of the estimate kinds added each row's pane (``pane_index``, ``pane_timing``,
    ``final``), ``rollup`` and, for extremes, ``n_counts``; files of version 1 read those as null."""
    return int(_raw_schema(name).get("version", 1))


def raw_schema(name: str) -> dict:
    """The schema as written in the ``.avsc`` file (for deriving other schemas, e.g. BigQuery)."""
    return copy.deepcopy(_raw_schema(name))


@lru_cache(maxsize=None)
def _raw_schema(name: str) -> dict:
    load_schema(name)  # validates the name
    with open(SCHEMA_DIR / f"{name}.avsc") as fh:
        return json.load(fh)


def validate(name: str, record: dict) -> bool:
    """True when ``record`` matches the schema; raises fastavro's ValidationError otherwise."""
    return _validate(record, load_schema(name), raise_errors=True)


def _to_millis(value):
    if isinstance(value, _dt.datetime):
        return int(round(value.timestamp() * 1000))
    return value


@lru_cache(maxsize=None)
def _timestamp_fields(name: str) -> tuple:
    return tuple(f["name"] for f in _raw_schema(name)["fields"]
                 if isinstance(f["type"], dict) and f["type"].get("logicalType") == "timestamp-millis")


def normalize(name: str, record: dict) -> dict:
    """Timestamps as int millis (fastavro reads them as datetimes)."""
    out = dict(record)
    for field in _timestamp_fields(name):
        if field in out:
            out[field] = _to_millis(out[field])
    return out


def write_avro(path, name: str, records: Iterable[dict], codec: str = "deflate") -> int:
    """Write records of schema ``name`` to an Avro container file; returns how many."""
    rows = list(records)
    with open(path, "wb") as fh:
        fastavro.writer(fh, load_schema(name), rows, codec=codec)
    return len(rows)


def read_avro(path, name: str) -> list:
    """All records of an Avro file of schema ``name``, timestamps as int millis."""
    with open(path, "rb") as fh:
        return [normalize(name, r) for r in fastavro.reader(fh)]


def encode_message(name: str, record: dict) -> bytes:
    """One record as a schemaless Avro message (Pub/Sub and Kafka payloads)."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, load_schema(name), record)
    return buf.getvalue()


@lru_cache(maxsize=None)
def _plain_schema(name: str) -> dict:
    """The schema with its logical types dropped: timestamps read as the int millis they are, so an
    absurd one (2**62) is the validator's to judge, not a conversion error."""
    def plain(t):
        if isinstance(t, dict):
            return {k: plain(v) for k, v in t.items() if k != "logicalType"}
        if isinstance(t, list):
            return [plain(v) for v in t]
        return t
    return fastavro.parse_schema(plain(_raw_schema(name)), _force=True)


def decode_message(name: str, payload: bytes) -> dict:
    """Inverse of :func:`encode_message` (timestamps as int millis, whatever their value); raises on
    truncated or trailing bytes and on strings that are not UTF-8."""
    buf = io.BytesIO(payload)
    record = fastavro.schemaless_reader(buf, _plain_schema(name), None)
    if buf.tell() != len(payload):
        raise ValueError(f"payload has {len(payload) - buf.tell()} trailing bytes after one {name} record")
    return normalize(name, record)


def _strict(value):
    """Non-finite floats (not JSON) as null, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def to_json_line(record: dict) -> str:
    """A strict JSON line for a row: bytes (dead-letter payloads) as base64, datetimes as int millis,
    NaN and infinities as null (the Avro twin keeps them)."""

    def default(o):
        if isinstance(o, (bytes, bytearray)):
            return base64.b64encode(bytes(o)).decode("ascii")
        if isinstance(o, _dt.datetime):
            return _to_millis(o)
        raise TypeError(f"not JSON serializable: {type(o).__name__}")

    return json.dumps(_strict(record), sort_keys=True, default=default, allow_nan=False)


def noisy_report_mismatch(schema) -> str | None:
    """Why an Avro writer schema (parsed JSON) is not one of NoisyReport's (a phrase that follows a file's
    path), or None when it is: a record with every field of the contract that has no default
    (``collection``, ``event_time``, ``bits``). Older and newer writers differ in the other fields and
    the readers judge each record's values, so only a schema that cannot hold a report is refused."""
    required = [f["name"] for f in _raw_schema("noisy_report")["fields"] if "default" not in f]
    if not isinstance(schema, dict) or schema.get("type") != "record":
        kind = schema.get("type") if isinstance(schema, dict) else schema
        return f"has the Avro schema {json.dumps(kind)[:80]}, not a NoisyReport record"
    name = ".".join(p for p in (schema.get("namespace"), schema.get("name")) if p)
    fields = [f.get("name") for f in schema.get("fields") or [] if isinstance(f, dict)]
    missing = [f for f in required if f not in fields]
    if not missing:
        return None
    shown = ", ".join(map(str, fields[:8])) + (f", ... ({len(fields)} fields)" if len(fields) > 8 else "")
    return (f"has the Avro schema {name or 'of a record'} ({shown}), not a NoisyReport's: it has no "
            f"{', '.join(missing)}")
