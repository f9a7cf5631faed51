"""BigQuery table schemas derived from the Avro output schemas, and rows converted to match.

The mapping is the one BigQuery's own Avro loader uses, so a table made from these schemas also
loads the job's Avro files unchanged:

========================  =====================================================
Avro                      BigQuery
========================  =====================================================
string / bytes            STRING / BYTES
int, long                 INTEGER
double                    FLOAT
long timestamp-millis     TIMESTAMP
["null", T]               T, mode NULLABLE (otherwise REQUIRED)
array<T>                  T, mode REPEATED
map<string, V>            RECORD (key STRING, value V), mode REPEATED
========================  =====================================================
"""
from __future__ import annotations

import base64
import copy
import datetime as dt
import math
from functools import lru_cache

from ldp_marginals.schemas import _to_millis, raw_schema

_PRIMITIVES = {"string": "STRING", "bytes": "BYTES", "int": "INTEGER", "long": "INTEGER",
               "double": "FLOAT", "float": "FLOAT", "boolean": "BOOLEAN"}
_LOGICAL = {"timestamp-millis": "TIMESTAMP"}


def _field(name: str, avro_type, mode: str = "REQUIRED") -> dict:
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        if len(branches) != 1 or len(avro_type) != 2:
            raise ValueError(f"only ['null', T] unions map to BigQuery, got {name}={avro_type!r}")
        return _field(name, branches[0], "NULLABLE")
    if isinstance(avro_type, dict):
        kind = avro_type["type"]
        if avro_type.get("logicalType") in _LOGICAL:
            return {"name": name, "type": _LOGICAL[avro_type["logicalType"]], "mode": mode}
        if kind == "array":
            return {**_field(name, avro_type["items"]), "mode": "REPEATED"}
        if kind == "map":
            return {"name": name, "type": "RECORD", "mode": "REPEATED",
                    "fields": [{"name": "key", "type": "STRING", "mode": "REQUIRED"},
                               _field("value", avro_type["values"])]}
        if kind == "record":
            return {"name": name, "type": "RECORD", "mode": mode,
                    "fields": [_field(f["name"], f["type"]) for f in avro_type["fields"]]}
        return _field(name, kind, mode)
    if avro_type not in _PRIMITIVES:
        raise ValueError(f"no BigQuery type for Avro type {avro_type!r} (field {name!r})")
    return {"name": name, "type": _PRIMITIVES[avro_type], "mode": mode}


def table_schema(name: str) -> dict:
    """``{"fields": [...]}`` for the Avro schema ``schemas/<name>.avsc``, as BigQuery's API takes it."""
    return copy.deepcopy(_schema(name))


@lru_cache(maxsize=None)
def _schema(name: str) -> dict:
    return {"fields": [_field(f["name"], f["type"]) for f in raw_schema(name)["fields"]]}


def _value(field: dict, value):
    if value is None:
        return None
    if field["mode"] == "REPEATED" and field["type"] == "RECORD" and isinstance(value, dict):
        return [{"key": k, "value": v} for k, v in sorted(value.items())]
    if field["mode"] == "REPEATED":
        one = {**field, "mode": "REQUIRED"}
        return [_value(one, v) for v in value]
    kind = field["type"]
    if kind == "TIMESTAMP":  # millis (or a datetime read back from Avro) -> RFC 3339, exact to the millisecond
        value = _to_millis(value)
        t = dt.datetime.fromtimestamp(value // 1000, tz=dt.timezone.utc)
        return f"{t:%Y-%m-%dT%H:%M:%S}.{value % 1000:03d}Z"
    if kind == "BYTES":
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "FLOAT":
        value = float(value)
        if not math.isfinite(value):  # JSON has no NaN/Infinity; BigQuery reads these strings
            return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return value
    if kind == "RECORD":
        return {f["name"]: _value(f, value.get(f["name"])) for f in field["fields"]}
    return value


def to_row(name: str, record: dict) -> dict:
    """A row of the Avro schema ``name`` (as the job emits it, or as read back from its Avro files) ->
    a BigQuery JSON row of :func:`table_schema`."""
    return {f["name"]: _value(f, record.get(f["name"])) for f in _schema(name)["fields"]}
