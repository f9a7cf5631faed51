"""Arrow (and so Parquet) schemas derived from the Avro output schemas, rows converted both ways.

The mapping, the one Arrow's own Avro readers use:

========================  =====================================================
Avro                      Arrow
========================  =====================================================
string                    string
int / long                int32 / int64
double / boolean          float64 / bool
long timestamp-millis     timestamp[ms, tz=UTC]
["null", T]               T, nullable (otherwise not null)
array<T>                  list<T>
map<string, V>            map<string, V>
========================  =====================================================

Rows inside the project are the Avro rows (timestamps as int milliseconds, maps as dicts):
:func:`to_table` takes them, :func:`to_rows` gives them back unchanged.
"""
from __future__ import annotations

from functools import lru_cache

import pyarrow as pa

from ldp_marginals.schemas import raw_schema

_PRIMITIVES = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "double": pa.float64(),
               "float": pa.float32(), "boolean": pa.bool_(), "bytes": pa.binary()}


def _type(avro_type) -> tuple:
    """``(arrow type, nullable)`` of an Avro type."""
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        if len(branches) != 1 or len(avro_type) != 2:
            raise ValueError(f"only ['null', T] unions map to Arrow, got avro_type={avro_type!r}")
        return _type(branches[0])[0], True
    if isinstance(avro_type, dict):
        kind = avro_type["type"]
        if avro_type.get("logicalType") == "timestamp-millis":
            return pa.timestamp("ms", tz="UTC"), False
        if kind == "array":
            return pa.list_(_type(avro_type["items"])[0]), False
        if kind == "map":
            return pa.map_(pa.string(), _type(avro_type["values"])[0]), False
        return _type(kind)
    if avro_type in _PRIMITIVES:
        return _PRIMITIVES[avro_type], False
    raise ValueError(f"no Arrow type for avro_type={avro_type!r}")


@lru_cache(maxsize=None)
def arrow_schema(name: str) -> pa.Schema:
    """The Arrow schema of the Avro schema ``schemas/<name>.avsc``, its docs as field metadata."""
    fields = []
    for f in raw_schema(name)["fields"]:
        kind, nullable = _type(f["type"])
        meta = {"doc": f["doc"]} if f.get("doc") else None
        fields.append(pa.field(f["name"], kind, nullable=nullable, metadata=meta))
    return pa.schema(fields, metadata={"avro_schema": name})


@lru_cache(maxsize=None)
def _defaults(name: str) -> tuple:
    return tuple((f["name"], f["default"]) for f in raw_schema(name)["fields"] if "default" in f)


def to_table(name: str, rows: list) -> pa.Table:
    """Avro rows of schema ``name`` -> an Arrow table of :func:`arrow_schema` (a field a row lacks
    takes its Avro default, as Avro's writer does)."""
    defaults = _defaults(name)
    if defaults:
        need = frozenset(k for k, _ in defaults)
        rows = [r if need <= r.keys() else {**dict(defaults), **r} for r in rows]
    return pa.Table.from_pylist(rows, schema=arrow_schema(name))


def to_rows(table: pa.Table) -> list:
    """An Arrow table of output rows -> the Avro rows (timestamps as int milliseconds, maps as dicts)."""
    columns = {}
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_timestamp(field.type):
            columns[field.name] = column.cast(pa.int64()).to_pylist()
        elif pa.types.is_map(field.type):
            columns[field.name] = [dict(v) if v is not None else None for v in column.to_pylist()]
        else:
            columns[field.name] = column.to_pylist()
    names = list(columns)
    return [dict(zip(names, values)) for values in zip(*columns.values())] if names else []
