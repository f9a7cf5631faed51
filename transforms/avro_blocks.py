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

import io
import json
from dataclasses import dataclass

import fastavro
import numpy as np
from numba import njit

from ldp_marginals import schemas

_ERR_OVERFLOW = -1

# The field layout of a decoded block: one row per record, one int64 column per named field.
# Offsets and lengths index the block's bytes; CLIENT_OFF and CLIENT_LEN are -1 for a null client.
(COLLECTION_OFF, COLLECTION_LEN, EVENT_MS, BITS_OFF, BITS_LEN, DIMS_OFF, DIMS_END, DIMS_COUNT,
 CLIENT_OFF, CLIENT_LEN) = range(10)
N_FIELDS = 10


@njit(cache=True, nogil=True)
def _varint(buf, pos, end):
    result = 0
    shift = 0
    while True:
        if pos >= end or shift > 63:
            return 0, -1
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


@njit(cache=True, nogil=True)
def _span(buf, pos, end):
    """A length-prefixed ``string`` or ``bytes`` at ``pos``: ``(offset, length, next_pos)``;
    ``next_pos`` is -1 when it does not fit in the block."""
    ln, pos = _varint(buf, pos, end)
    if pos < 0 or ln < 0 or pos + ln > end:
        return 0, 0, -1
    return pos, ln, pos + ln


@njit(cache=True, nogil=True)
def _decode_block(buf, n, fields):
    """Fill ``fields`` (n, N_FIELDS) int64, one row per record in the named layout above. Returns the
    end position, or -1 when the bytes do not parse."""
    pos = 0
    end = buf.shape[0]
    for i in range(n):
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
    return pos


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


@dataclass
class ReportBlock:
    """Reports of one or more Avro blocks as arrays (fast path) or as records (fallback)."""

    fields: np.ndarray | None   # (n, N_FIELDS) int64 in the named layout (columns contiguous)
    buf: np.ndarray | None      # the blocks' bytes
    records: list | None        # fallback: fastavro dicts
    first_index: int            # index of the first record in the file

    def __len__(self):
        return len(self.records) if self.records is not None else self.fields.shape[0]

    def text(self, off: int, length: int) -> str:
        return self.buf[off:off + length].tobytes().decode("utf-8")

    def packed(self, rows: np.ndarray, n_bytes: int) -> np.ndarray:
        """The ``bits`` of ``rows`` (all exactly ``n_bytes`` long) as a contiguous (n, n_bytes) array."""
        return gather_bytes(self.buf, self.fields[rows, BITS_OFF], n_bytes)

    def record(self, i: int) -> dict:
        """Record i as fastavro would give it (timestamps as int millis)."""
        if self.records is not None:
            return schemas.normalize("noisy_report", self.records[i])
        f = self.fields[i]
        return {"collection": self.text(f[COLLECTION_OFF], f[COLLECTION_LEN]), "event_time": int(f[EVENT_MS]),
                "bits": self.buf[f[BITS_OFF]:f[BITS_OFF] + f[BITS_LEN]].tobytes(), "dimensions": self.dimensions(i),
                "client": None if f[CLIENT_OFF] < 0 else self.text(f[CLIENT_OFF], f[CLIENT_LEN])}

    def dimensions(self, i: int) -> dict:
        f = self.fields[i]
        if f[DIMS_COUNT] == 0:
            return {}
        return fastavro.schemaless_reader(io.BytesIO(self.buf[f[DIMS_OFF]:f[DIMS_END]].tobytes()),
                                          {"type": "map", "values": "string"}, None)


def _decoded(data: bytes, n: int, first_index: int) -> ReportBlock | None:
    """``n`` records back to back in ``data`` as a fast block, or None when they do not parse."""
    buf = np.frombuffer(data, dtype=np.uint8)
    fields = np.empty((N_FIELDS, n), dtype=np.int64).T  # columns contiguous: cheap per-field slices
    if _decode_block(buf, n, fields) != buf.shape[0]:
        return None
    return ReportBlock(fields, buf, None, first_index)


def iter_report_batches(fileobj, min_records: int = 1 << 16):
    """Reports of a NoisyReport container file in batches: consecutive Avro blocks of the contract's
    writer schema decompressed, joined and decoded by one compiled call per batch of at least
    ``min_records`` reports; blocks of another writer schema, or whose bytes do not parse, as
    fastavro records on their own, in order. Raises like fastavro on a corrupt container."""
    checked = {}  # the writer schema is the file's: compare it once, not per block
    pending = []
    index = 0

    def batch():
        n = sum(b.num_records for b in pending)
        joined = _decoded(b"".join(b.bytes_.getvalue() for b in pending), n, index)
        if joined is not None:
            yield joined
            return
        at = index  # some block does not parse: decode each on its own, records for the bad ones
        for b in pending:
            one = _decoded(b.bytes_.getvalue(), b.num_records, at)
            yield one if one is not None else ReportBlock(None, None, list(b), at)
            at += b.num_records

    count = 0
    for block in fastavro.block_reader(fileobj):
        key = id(block.writer_schema)
        if key not in checked:
            checked[key] = _schema_signature(block.writer_schema) == _CONTRACT
        if not checked[key]:
            if pending:
                yield from batch()
                index, pending, count = index + count, [], 0
            records = list(block)
            yield ReportBlock(None, None, records, index)
            index += len(records)
            continue
        pending.append(block)
        count += block.num_records
        if count >= min_records:
            yield from batch()
            index, pending, count = index + count, [], 0
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


def distinct_ids(block: ReportBlock, offset_col: int, end_col: int | None = None, length_col: int | None = None):
    """``(ids, first_records)`` of equal byte strings in a fast block: the field starting at column
    ``offset_col`` and ending at ``end_col`` or ``length_col`` long (collections, dimension maps)."""
    f = block.fields
    length = f[:, end_col] - f[:, offset_col] if end_col is not None else f[:, length_col]
    return _distinct_ids(block.buf, f[:, offset_col], np.ascontiguousarray(length))
