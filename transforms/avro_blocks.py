"""Reading NoisyReport Avro container files block by block (the I/O of the batch readers): intact
blocks of the contract's writer schema are joined and decoded by the compiled kernels
(:mod:`ldp_marginals.transforms.avro_kernels`; numba is required here and by
:mod:`ldp_marginals.transforms.blocks`, the math core ``ldp`` only uses it when installed) into a
:class:`ReportBlock`; damaged byte ranges come out as ``Damage``.

fastavro decodes ~170-400k records/s here, one Python dict per record; polars' Avro reader does
not read our schema (it fails on the ``map`` field). Our writer schema is fixed by the contract,
so each block's bytes are walked by a numba-compiled decoder that records, per report, the
offsets of its fields (no Python object per report). Blocks whose writer schema differs from the
contract, or whose bytes do not parse, fall back to fastavro record by record, so every file
stays readable and nothing is lost silently. Single-report messages are decoded by the same
kernels in :mod:`ldp_marginals.transforms.avro_messages`.
"""
from __future__ import annotations

import bisect
import io
import json
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import fastavro
import numpy as np

from ldp_marginals import schemas
from ldp_marginals.ldp._kernels import span_hashes
from ldp_marginals.transforms.avro_container import Damage, iter_container
from ldp_marginals.transforms.avro_kernels import (
    BITS_LEN,
    BITS_OFF,
    CLIENT_LEN,
    CLIENT_OFF,
    COLLECTION_LEN,
    COLLECTION_OFF,
    DIMS_COUNT,
    DIMS_END,
    DIMS_OFF,
    EVENT_MS,
    N_FIELDS,
    RECORD_END,
    RECORD_START,
    decode_block,
    distinct_ids_by_bytes,
    equal_to_representatives,
    gather_bytes,
    utf8_ok,
)


def _schema_signature(schema) -> tuple:
    return tuple((f["name"], json.dumps(f["type"], sort_keys=True)) for f in schema["fields"])


_CONTRACT = _schema_signature(schemas.raw_schema("noisy_report"))


_MAP_OF_STRINGS = {"type": "map", "values": "string"}


class RecordFault(NamedTuple):
    """A record whose fields do not decode (invalid UTF-8): dead-lettered alone, with its raw bytes."""

    detail: str
    payload: bytes


@dataclass
class ReportBlock:
    """Reports of one or more intact Avro blocks: as arrays (``fields`` over ``buf``, the contract's
    writer schema) or as ``records`` (another writer schema; an entry is a record dict or a
    :class:`RecordFault`). ``starts`` maps rows to their blocks: ``(first row, byte offset of the
    block in the file)`` per block, in order."""

    fields: np.ndarray | None   # (n, N_FIELDS) int64 in the named layout (columns contiguous)
    buf: np.ndarray | None      # the blocks' decompressed bytes
    records: list | None        # other writer schemas: record dicts or RecordFaults
    starts: list
    end: int                    # byte offset in the file after the last block

    def __len__(self):
        return len(self.records) if self.records is not None else self.fields.shape[0]

    @cached_property
    def _first_rows(self) -> list:
        return [row for row, _ in self.starts]

    def source(self, path: str, i: int) -> str:
        """``<path>@<byte offset of the record's block>#<index of the record in its block>``."""
        first, offset = self.starts[bisect.bisect_right(self._first_rows, i) - 1]
        return f"{path}@{offset}#{i - first}"

    def text(self, off: int, length: int) -> str:
        return self.buf[off:off + length].tobytes().decode("utf-8")

    def packed(self, rows: np.ndarray, n_bytes: int) -> np.ndarray:
        """The ``bits`` of ``rows`` (all exactly ``n_bytes`` long) as a contiguous (n, n_bytes) array."""
        return gather_bytes(self.buf, self.fields[rows, BITS_OFF], n_bytes)

    def payload(self, i: int) -> bytes:
        """Record i's bytes as written (Avro binary)."""
        if self.records is not None:
            return self.records[i].payload if isinstance(self.records[i], RecordFault) else b""
        f = self.fields[i]
        return self.buf[f[RECORD_START]:f[RECORD_END]].tobytes()

    def fault(self, i: int) -> str | None:
        """Why record i does not decode (the first field with invalid UTF-8), or None."""
        if self.records is not None:
            return self.records[i].detail if isinstance(self.records[i], RecordFault) else None
        f = self.fields[i]
        if not self._utf8(f[COLLECTION_OFF], f[COLLECTION_LEN]):
            return "collection is not valid UTF-8"
        try:
            self.dimensions(i)
        except (UnicodeDecodeError, ValueError):
            return "dimensions is not valid UTF-8"
        if f[CLIENT_LEN] >= 0 and not self._utf8(f[CLIENT_OFF], f[CLIENT_LEN]):
            return "client is not valid UTF-8"
        return None

    def _utf8(self, off: int, length: int) -> bool:
        return bool(utf8_ok(self.buf, np.array([off]), np.array([length]))[0])

    def record(self, i: int) -> dict:
        """Record i as a dict (timestamps as int millis); UnicodeDecodeError for invalid UTF-8."""
        if self.records is not None:
            rec = self.records[i]
            if isinstance(rec, RecordFault):
                raise UnicodeDecodeError("utf-8", rec.payload, 0, len(rec.payload), rec.detail)
            return rec
        f = self.fields[i]
        return {"collection": self.text(f[COLLECTION_OFF], f[COLLECTION_LEN]), "event_time": int(f[EVENT_MS]),
                "bits": self.buf[f[BITS_OFF]:f[BITS_OFF] + f[BITS_LEN]].tobytes(), "dimensions": self.dimensions(i),
                "client": None if f[CLIENT_OFF] < 0 else self.text(f[CLIENT_OFF], f[CLIENT_LEN])}

    def dimensions(self, i: int) -> dict:
        f = self.fields[i]
        if f[DIMS_COUNT] == 0:
            return {}
        return fastavro.schemaless_reader(io.BytesIO(self.buf[f[DIMS_OFF]:f[DIMS_END]].tobytes()),
                                          _MAP_OF_STRINGS, None)

    def client_utf8_ok(self) -> np.ndarray:
        """Per row, whether the client token (if any) is valid UTF-8 (vectorized)."""
        return utf8_ok(self.buf, self.fields[:, CLIENT_OFF], self.fields[:, CLIENT_LEN])



def _decode(data: bytes, n: int):
    """``(fields, buf, n_ok)``: the records of ``data`` decoded up to the first that does not parse;
    ``n_ok = -1`` when all ``n`` parse but do not fill the bytes (the count or a length is wrong, so
    none of the records can be trusted)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    fields = np.empty((N_FIELDS, n), dtype=np.int64).T  # columns contiguous: cheap per-field slices
    end, n_ok = decode_block(buf, n, fields)
    if end < 0:
        return fields, buf, n_ok
    return fields, buf, (n if end == buf.shape[0] else -1)


def _raw_schema(schema):
    """``schema`` with strings read as bytes and logical types dropped, so that no field's value can
    fail the whole block (UTF-8 and timestamps are then checked per record)."""
    if isinstance(schema, str):
        return "bytes" if schema == "string" else schema
    if isinstance(schema, list):
        return [_raw_schema(s) for s in schema]
    if isinstance(schema, dict):
        out = {k: v for k, v in schema.items() if k != "logicalType"}
        if out.get("type") == "string":
            out["type"] = "bytes"
        for key in ("fields",):
            if key in out:
                out[key] = [dict(f, type=_raw_schema(f["type"])) for f in out[key]]
        for key in ("items", "values"):
            if key in out:
                out[key] = _raw_schema(out[key])
        if isinstance(out.get("type"), (dict, list)):
            out["type"] = _raw_schema(out["type"])
        return out
    return schema


def _text(schema, value):
    """Undo :func:`_raw_schema` on one value: bytes that were strings back to text (UnicodeDecodeError
    when they are not UTF-8)."""
    if isinstance(schema, str):
        return value.decode("utf-8") if schema == "string" and isinstance(value, bytes) else value
    if isinstance(schema, list):  # a union: the value's own type decides
        if isinstance(value, bytes) and "string" in schema and "bytes" not in schema:
            return value.decode("utf-8")
        for branch in schema:
            if isinstance(branch, dict) and branch.get("type") in ("record", "map", "array") and value is not None:
                return _text(branch, value)
        return value
    kind = schema.get("type")
    if kind == "record":
        return {f["name"]: _text(f["type"], value.get(f["name"])) for f in schema["fields"]} if isinstance(
            value, dict) else value
    if kind == "map":
        return {k.decode("utf-8") if isinstance(k, bytes) else k: _text(schema["values"], v) for k, v in value.items()}
    if kind == "array":
        return [_text(schema["items"], v) for v in value]
    return _text(kind, value) if isinstance(kind, (str, list, dict)) else value


def _records_of(block, schema: dict, raw: dict):
    """Records of an intact block of another writer schema: dicts or RecordFaults, and the index of
    the first record that does not parse (``block.count`` when all do, -1 when all do but bytes are
    left over)."""
    out = []
    buf = io.BytesIO(block.data)
    for k in range(block.count):
        at = buf.tell()
        try:
            value = fastavro.schemaless_reader(buf, raw, None)
        except Exception:  # noqa: BLE001 - the rest of this block is unreadable
            return out, k
        try:
            out.append(_text(schema, value))
        except UnicodeDecodeError as err:
            out.append(RecordFault(f"a string field is not valid UTF-8 ({err.reason})", block.data[at:buf.tell()]))
    return out, (block.count if buf.tell() == len(block.data) else -1)


def _partly_lost(block, n_ok: int) -> Damage:
    return Damage(block.start, block.end, block.count,
                  f"record {n_ok} of the block's {block.count} does not decode, so records {n_ok} to "
                  f"{block.count - 1} are lost", lost=block.count - n_ok)


def iter_report_batches(fileobj, min_records: int = 1 << 16, start: int = 0, end: int | None = None):
    """What a NoisyReport container file (or its split ``[start, end)``:
    :func:`~ldp_marginals.transforms.avro_container.iter_container`) holds, in file order: :class:`ReportBlock` s and the
    :class:`~ldp_marginals.transforms.avro_container.Damage` of every byte range that could not be
    read. Consecutive intact blocks of the contract's writer schema are joined and decoded by one
    compiled call per batch of at least ``min_records`` reports; blocks of another writer schema are
    decoded record by record. A record that does not parse loses the rest of its block (one
    Damage); a record whose strings are not UTF-8 is a fault of that record alone."""
    headers = []
    pending = []

    def batch():
        n = sum(b.count for b in pending)
        starts, first = [], 0
        for b in pending:
            starts.append((first, b.start))
            first += b.count
        fields, buf, n_ok = _decode(b"".join(b.data for b in pending), n)
        if n_ok == n:
            yield ReportBlock(fields, buf, None, starts, pending[-1].end)
            return
        for b in pending:  # some record does not parse: decode block by block
            fields, buf, n_ok = _decode(b.data, b.count)
            if n_ok < 0:
                yield Damage(b.start, b.end, b.count, f"the block's {b.count} records end before its bytes do")
                continue
            if n_ok:
                yield ReportBlock(fields[:n_ok], buf, None, [(0, b.start)], b.end)
            if n_ok < b.count:
                yield _partly_lost(b, n_ok)

    count = 0
    for item in iter_container(fileobj, headers, start, end):
        if isinstance(item, Damage):
            if pending:
                yield from batch()
                pending, count = [], 0
            yield item
            continue
        if item.count == 0:
            continue
        header = headers[0]
        if _schema_signature(header.schema) != _CONTRACT:
            raw = fastavro.parse_schema(_raw_schema(header.schema), _write_hint=False, _force=True)
            records, n_ok = _records_of(item, header.schema, raw)
            if n_ok < 0:
                yield Damage(item.start, item.end, item.count,
                             f"the block's {item.count} records end before its bytes do")
                continue
            if records:
                yield ReportBlock(None, None, records, [(0, item.start)], item.end)
            if n_ok < item.count:
                yield _partly_lost(item, n_ok)
            continue
        pending.append(item)
        count += item.count
        if count >= min_records:
            yield from batch()
            pending, count = [], 0
    if pending:
        yield from batch()



def distinct_ids(block: ReportBlock, offset_col: int, end_col: int | None = None, length_col: int | None = None):
    """``(ids, first_records)`` of equal byte strings in a fast block: the field starting at column
    ``offset_col`` and ending at ``end_col`` or ``length_col`` long (collections, dimension maps).

    Grouped by a 64-bit hash and a sort (O(n log n) in the reports, whatever the number of distinct
    strings); the grouping is then checked byte for byte, and a hash collision (never seen by
    chance; possible by design) falls back to comparing every string with every distinct one."""
    f = block.fields
    offs = np.ascontiguousarray(f[:, offset_col])
    length = np.ascontiguousarray(f[:, end_col] - f[:, offset_col] if end_col is not None else f[:, length_col])
    hashes = span_hashes(block.buf, offs, length)
    if len(hashes) and (hashes == hashes[0]).all():
        # one distinct hash (a batch of one collection, or of one dimension map: the collector's
        # requests, most blocks): what np.unique gives, without its sorts
        ids, firsts = np.zeros(len(hashes), dtype=np.int64), np.zeros(1, dtype=np.int64)
    else:
        _, firsts, ids = np.unique(hashes, return_index=True, return_inverse=True)
        ids = ids.reshape(-1).astype(np.int64)
    if equal_to_representatives(block.buf, offs, length, firsts[ids]):
        return ids, firsts.astype(np.int64)
    return distinct_ids_by_bytes(block.buf, offs, length)
