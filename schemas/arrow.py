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
:func:`to_table` takes them, :func:`to_rows` gives them back unchanged. Rows made in bulk (the
marginals of a window: 8,256 at 128 bits) stay a table, :class:`TableRows`, read as those same
dicts only by whoever iterates them; a writer takes the table whole.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import pyarrow as pa

from ldp_marginals.schemas import raw_schema, schema_version

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
    return pa.schema(fields, metadata={"avro_schema": name, "avro_schema_version": str(schema_version(name))})


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


class TableRows(Sequence):
    """Output rows of schema ``name`` held as an Arrow table of :func:`arrow_schema` ``(name)``: a
    sequence of the Avro rows (dicts, made from the table when first read, equal to a list of the
    same dicts), and ``table``, what writers take without a dict per row. Pickles as the table."""

    def __init__(self, name: str, table: pa.Table):
        if table.schema != arrow_schema(name):
            raise ValueError(f"table must have arrow_schema({name!r}), got table.schema={table.schema!r}")
        self.name, self.table, self._rows = name, table, None

    @classmethod
    def concat(cls, name: str, parts: list) -> "TableRows":
        """One :class:`TableRows` of the rows of ``parts`` (each a :class:`TableRows` of ``name``)."""
        return cls(name, pa.concat_tables([p.table for p in parts]) if parts else arrow_schema(name).empty_table())

    def rows(self) -> list:
        if self._rows is None:
            self._rows = to_rows(self.table)
        return self._rows

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, index):
        return self.rows()[index]

    def __iter__(self):
        return iter(self.rows())

    def __eq__(self, other):
        if isinstance(other, (TableRows, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None

    def __add__(self, other):
        return list(self) + list(other)

    def __radd__(self, other):
        return list(other) + list(self)

    def __repr__(self) -> str:
        return f"TableRows({self.name!r}, {len(self)} rows)"

    def __reduce__(self):
        return TableRows, (self.name, self.table)


def table_of(name: str, rows) -> pa.Table:
    """Rows of schema ``name`` (a :class:`TableRows` or Avro row dicts) -> their Arrow table."""
    if isinstance(rows, TableRows):
        if rows.name != name:
            raise ValueError(f"rows must be of schema {name!r}, got rows of {rows.name!r}")
        return rows.table
    return to_table(name, list(rows))


def with_values(name: str, rows, values: dict):
    """Rows of schema ``name`` (a :class:`TableRows` or Avro row dicts) with each field of ``values`` set to
    that value in every row: a :class:`TableRows` stays one (its columns replaced), dicts come back as new
    dicts. How a pane's rows are stamped with the pane (:func:`ldp_marginals.schemas.outputs.pane_fields`)."""
    if not isinstance(rows, TableRows):
        return [{**r, **values} for r in rows]
    table = with_columns(rows.table, values)
    return TableRows(name, table)


def with_columns(table: pa.Table, values: dict) -> pa.Table:
    """``table`` with each column named in ``values`` replaced by that value repeated (of the column's type)."""
    for field_name, value in values.items():
        i = table.schema.get_field_index(field_name)
        if i < 0:
            raise ValueError(f"values must name columns of the table, got {field_name!r}")
        field = table.schema.field(i)
        table = table.set_column(i, field, pa.repeat(pa.scalar(value, field.type), table.num_rows))
    return table
