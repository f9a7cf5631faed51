"""The block decoder of NoisyReport Avro container files (an I/O kernel of the readers): block bytes
decoded by a compiled loop. numba is required here (and by :mod:`ldp_marginals.transforms.blocks`);
the math core ``ldp`` only uses it when installed.

fastavro decodes ~170-400k records/s here, one Python dict per record; polars' Avro reader does
not read our schema (it fails on the ``map`` field). Our writer schema is fixed by the contract,
so each block's bytes are walked by a numba-compiled decoder that records, per report, the
offsets of its fields (no Python object per report). Blocks whose writer schema differs from the
contract, or whose bytes do not parse, fall back to fastavro record by record, so every file
stays readable and nothing is lost silently.

Avro binary encoding walked here: ``string``/``bytes`` = zigzag varint length + bytes; ``long`` =
zigzag varint; ``map`` = blocks of (count, [byte size if count < 0], key/value pairs) ended by a
zero count; ``["null", "string"]`` = branch index then the string.
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
from numba import njit

from ldp_marginals import schemas
from ldp_marginals.ldp._kernels import span_hashes
from ldp_marginals.transforms.avro_container import Damage, iter_container

_ERR_OVERFLOW = -1

# The field layout of a decoded block: one row per record, one int64 column per named field.
# Offsets and lengths index the block's bytes; CLIENT_OFF and CLIENT_LEN are -1 for a null client.
(COLLECTION_OFF, COLLECTION_LEN, EVENT_MS, BITS_OFF, BITS_LEN, DIMS_OFF, DIMS_END, DIMS_COUNT,
 CLIENT_OFF, CLIENT_LEN, RECORD_START, RECORD_END) = range(12)
N_FIELDS = 12


@njit(cache=True, nogil=True)
def _varint(buf, pos, end):
    """The zigzag varint (Avro ``long``) at ``pos``: ``(value, next_pos)``, ``next_pos`` -1 when it
    runs past ``end`` or past 10 bytes. Unsigned arithmetic: values near +-2**63 decode exactly."""
    result = np.uint64(0)
    shift = np.uint64(0)
    while True:
        if pos >= end or shift > 63:
            return 0, -1
        b = buf[pos]
        pos += 1
        result |= np.uint64(b & 0x7F) << shift
        if b < 0x80:
            break
        shift += np.uint64(7)
    return np.int64(result >> np.uint64(1)) ^ -np.int64(result & np.uint64(1)), pos


@njit(cache=True, nogil=True)
def _span(buf, pos, end):
    """A length-prefixed ``string`` or ``bytes`` at ``pos``: ``(offset, length, next_pos)``;
    ``next_pos`` is -1 when it does not fit in the block."""
    ln, pos = _varint(buf, pos, end)
    if pos < 0 or ln < 0 or pos + ln > end:
        return 0, 0, -1
    return pos, ln, pos + ln


@njit(cache=True, nogil=True)
def _decode_record(buf, pos, end, fields, i):
    """Decode one record starting at ``pos`` into row i of ``fields``: the position after it, or -1
    when it does not parse within ``end``."""
    fields[i, RECORD_START] = pos
    fields[i, COLLECTION_OFF], fields[i, COLLECTION_LEN], pos = _span(buf, pos, end)
    if pos < 0:
        return _ERR_OVERFLOW
    fields[i, EVENT_MS], pos = _varint(buf, pos, end)
    if pos < 0:
        return _ERR_OVERFLOW
    fields[i, BITS_OFF], fields[i, BITS_LEN], pos = _span(buf, pos, end)
    if pos < 0:
        return _ERR_OVERFLOW
    fields[i, DIMS_OFF] = pos
    count_total = 0
    while True:
        cnt, pos = _varint(buf, pos, end)
        if pos < 0:
            return _ERR_OVERFLOW
        if cnt == 0:
            break
        if cnt < 0:
            cnt = -cnt
            _, pos = _varint(buf, pos, end)  # block size in bytes
            if pos < 0:
                return _ERR_OVERFLOW
        for _ in range(2 * cnt):  # key, value
            _, _, pos = _span(buf, pos, end)
            if pos < 0:
                return _ERR_OVERFLOW
        count_total += cnt
    fields[i, DIMS_END] = pos
    fields[i, DIMS_COUNT] = count_total
    branch, pos = _varint(buf, pos, end)
    if pos < 0:
        return _ERR_OVERFLOW
    if branch == 0:
        fields[i, CLIENT_OFF] = -1
        fields[i, CLIENT_LEN] = -1
    elif branch == 1:
        fields[i, CLIENT_OFF], fields[i, CLIENT_LEN], pos = _span(buf, pos, end)
        if pos < 0:
            return _ERR_OVERFLOW
    else:
        return _ERR_OVERFLOW
    fields[i, RECORD_END] = pos
    return pos


@njit(cache=True, nogil=True)
def _decode_block(buf, n, fields):
    """Fill ``fields`` (n, N_FIELDS) int64, one row per record in the named layout above. Returns
    ``(end position, n)``, or ``(-1, i)`` when record i does not parse (rows before it are filled)."""
    pos = 0
    end = buf.shape[0]
    for i in range(n):
        pos = _decode_record(buf, pos, end, fields, i)
        if pos < 0:
            return _ERR_OVERFLOW, i
    return pos, n


@njit(cache=True, nogil=True)
def _decode_messages(buf, bounds, fields):
    """Messages laid end to end in ``buf``, message i in ``[bounds[i], bounds[i + 1])``: row i of
    ``fields`` per message; ``ok[i]`` when message i is exactly one record (no byte short or over)."""
    n = bounds.shape[0] - 1
    ok = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        ok[i] = _decode_record(buf, bounds[i], bounds[i + 1], fields, i) == bounds[i + 1]
    return ok


def _schema_signature(schema) -> tuple:
    return tuple((f["name"], json.dumps(f["type"], sort_keys=True)) for f in schema["fields"])


_CONTRACT = _schema_signature(schemas.raw_schema("noisy_report"))


@njit(cache=True, nogil=True)
def gather_bytes(buf, offsets, width):
    """``(n, width)`` bytes starting at each offset, as one contiguous array."""
    out = np.empty((offsets.shape[0], width), dtype=np.uint8)
    for i in range(offsets.shape[0]):
        o = offsets[i]
        for j in range(width):
            out[i, j] = buf[o + j]
    return out


@njit(cache=True, nogil=True)
def _utf8_ok(buf, offs, lens):
    """Per span ``buf[off:off+len]`` (len < 0: no span), whether it is valid UTF-8 (RFC 3629: no
    overlong forms, no surrogates, nothing above U+10FFFF)."""
    n = offs.shape[0]
    ok = np.ones(n, dtype=np.bool_)
    for r in range(n):
        i = offs[r]
        end = i + lens[r]
        while i < end:
            b = buf[i]
            if b < 0x80:
                i += 1
                continue
            if 0xC2 <= b <= 0xDF:
                need, lo, hi = 1, 0x80, 0xBF
            elif 0xE0 <= b <= 0xEF:
                need = 2
                lo = 0xA0 if b == 0xE0 else 0x80
                hi = 0x9F if b == 0xED else 0xBF
            elif 0xF0 <= b <= 0xF4:
                need = 3
                lo = 0x90 if b == 0xF0 else 0x80
                hi = 0x8F if b == 0xF4 else 0xBF
            else:
                ok[r] = False
                break
            if i + need >= end:  # the sequence runs past the span
                ok[r] = False
                break
            c = buf[i + 1]
            if c < lo or c > hi:
                ok[r] = False
                break
            for t in range(2, need + 1):
                c = buf[i + t]
                if c < 0x80 or c > 0xBF:
                    ok[r] = False
                    break
            if not ok[r]:
                break
            i += need + 1
    return ok


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
        return bool(_utf8_ok(self.buf, np.array([off]), np.array([length]))[0])

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
        return _utf8_ok(self.buf, self.fields[:, CLIENT_OFF], self.fields[:, CLIENT_LEN])


@dataclass
class MessageBlock(ReportBlock):
    """Single-report messages decoded together: row i is message ``labels[i]`` (its source)."""

    labels: list = None

    def source(self, path: str, i: int) -> str:
        return self.labels[i]


def decode_messages(payloads: list, labels: list):
    """Single-report Avro messages -> ``(block, failed)``: a :class:`MessageBlock` of the messages
    that decode (None if none), and ``(index, payload, label)`` of each that does not (its own
    record does not parse or leaves bytes over), for a record-by-record decode that names the
    error. One compiled pass for the whole batch."""
    bounds = np.zeros(len(payloads) + 1, dtype=np.int64)
    np.cumsum([len(m) for m in payloads], out=bounds[1:])
    buf = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    fields = np.empty((N_FIELDS, len(payloads)), dtype=np.int64).T
    ok = _decode_messages(buf, bounds, fields)
    failed = [(int(i), payloads[i], labels[i]) for i in np.flatnonzero(~ok)]
    if not ok.any():
        return None, failed
    rows = np.flatnonzero(ok)
    if rows.size < len(payloads):
        fields = np.ascontiguousarray(fields[rows].T).T  # columns stay contiguous
        labels = [labels[i] for i in rows]
    return MessageBlock(fields, buf, None, [(0, 0)], int(bounds[-1]), labels), failed


def _decode(data: bytes, n: int):
    """``(fields, buf, n_ok)``: the records of ``data`` decoded up to the first that does not parse;
    ``n_ok = -1`` when all ``n`` parse but do not fill the bytes (the count or a length is wrong, so
    none of the records can be trusted)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    fields = np.empty((N_FIELDS, n), dtype=np.int64).T  # columns contiguous: cheap per-field slices
    end, n_ok = _decode_block(buf, n, fields)
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


@njit(cache=True, nogil=True)
def _distinct_ids(buf, offs, lens):
    """Id per record of the byte string ``buf[off:off+len]``, and the first record of each id."""
    n = offs.shape[0]
    ids = np.empty(n, dtype=np.int64)
    firsts = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        found = -1
        for j in range(k):
            r = firsts[j]
            if lens[r] == lens[i]:
                same = True
                for t in range(lens[i]):
                    if buf[offs[r] + t] != buf[offs[i] + t]:
                        same = False
                        break
                if same:
                    found = j
                    break
        if found < 0:
            firsts[k] = i
            found = k
            k += 1
        ids[i] = found
    return ids, firsts[:k]


@njit(cache=True, nogil=True)
def _equal_to(buf, offs, lens, reps):
    """Whether each span equals the span of its representative row ``reps[i]``."""
    n = offs.shape[0]
    for i in range(n):
        r = reps[i]
        if lens[r] != lens[i]:
            return False
        for t in range(lens[i]):
            if buf[offs[r] + t] != buf[offs[i] + t]:
                return False
    return True


def distinct_ids(block: ReportBlock, offset_col: int, end_col: int | None = None, length_col: int | None = None):
    """``(ids, first_records)`` of equal byte strings in a fast block: the field starting at column
    ``offset_col`` and ending at ``end_col`` or ``length_col`` long (collections, dimension maps).

    Grouped by a 64-bit hash and a sort (O(n log n) in the reports, whatever the number of distinct
    strings); the grouping is then checked byte for byte, and a hash collision (never seen by
    chance; possible by design) falls back to comparing every string with every distinct one."""
    f = block.fields
    offs = np.ascontiguousarray(f[:, offset_col])
    length = np.ascontiguousarray(f[:, end_col] - f[:, offset_col] if end_col is not None else f[:, length_col])
    _, firsts, ids = np.unique(span_hashes(block.buf, offs, length), return_index=True, return_inverse=True)
    ids = ids.reshape(-1).astype(np.int64)
    if _equal_to(block.buf, offs, length, firsts[ids]):
        return ids, firsts.astype(np.int64)
    return _distinct_ids(block.buf, offs, length)
