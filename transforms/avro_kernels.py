"""The compiled kernels of the Avro readers (numba, required here): the named field layout of a
decoded block, the loop that walks a block's records (or messages laid end to end) into it, and the
per-span passes over its bytes (gathering bits, checking UTF-8, grouping equal strings). The client
key's hash of a span is :data:`ldp_marginals.ldp._kernels.span_hashes` (one definition with
``client_key``).

Avro binary encoding walked here: ``string``/``bytes`` = zigzag varint length + bytes; ``long`` =
zigzag varint; ``map`` = blocks of (count, [byte size if count < 0], key/value pairs) ended by a
zero count; ``["null", "string"]`` = branch index then the string.
"""
from __future__ import annotations

import numpy as np
from numba import njit

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
def decode_block(buf, n, fields):
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
def decode_message_spans(buf, bounds, fields):
    """Messages laid end to end in ``buf``, message i in ``[bounds[i], bounds[i + 1])``: row i of
    ``fields`` per message; ``ok[i]`` when message i is exactly one record (no byte short or over)."""
    n = bounds.shape[0] - 1
    ok = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        ok[i] = _decode_record(buf, bounds[i], bounds[i + 1], fields, i) == bounds[i + 1]
    return ok


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
def utf8_ok(buf, offs, lens):
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



@njit(cache=True, nogil=True)
def distinct_ids_by_bytes(buf, offs, lens):
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
def equal_to_representatives(buf, offs, lens, reps):
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

