"""Pre-aggregation before the shuffle, shared by every reader: valid reports are screened in
compiled, vectorized passes over decoded blocks (a file's, a container message's, or a batch of
single-report messages) and summed per (collection, dimensions, window slice) into
:class:`~ldp_marginals.transforms.source.Partial` accumulators, so Beam moves a few accumulators per
batch instead of one element per report. Reports of one client inside a batch are reduced to one
state per client (:mod:`ldp_marginals.ldp.aggregate`).

A slice is the period-long piece of event time whose reports all lie in the same windows
(:func:`ldp_marginals.ldp.windows.slice_starts`); a partial is timestamped with its slice's start,
so the windows Beam (or the streaming panes) assign it are exactly its reports' windows, whatever
batch they arrived in.

Malformed reports become dead letters with the reasons and details of the per-record check in
:class:`ldp_marginals.transforms.reports.ValidateReportsFn`; both paths give identical results.
"""
from __future__ import annotations

import apache_beam as beam
import numpy as np
from numba import njit

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.encoding import padding_mask
from ldp_marginals.ldp.windows import MAX_EVENT_MS, MIN_EVENT_MS, slice_starts
from ldp_marginals.transforms.avro_blocks import (
    BITS_LEN,
    BITS_OFF,
    CLIENT_LEN,
    CLIENT_OFF,
    COLLECTION_LEN,
    COLLECTION_OFF,
    DIMS_END,
    DIMS_OFF,
    EVENT_MS,
    distinct_ids,
    gather_bytes,
    span_hashes,
)
from ldp_marginals.transforms.dead_letters import (
    VALID,
    collection_detail,
    count,
    dead_letter,
    length_detail,
    padding_detail,
    time_detail,
)
from ldp_marginals.transforms.source import Partial

MAX_CLIENT_LENGTH = 128  # characters of a client token (a pseudonymous id, not a payload)
FLUSH_ROWS = 1 << 20     # buffered reports counted in one go (~32 MiB of packed bits at d = 256)

_OTHER, _OK, _BAD_TIME, _WRONG_LENGTH, _PADDING = -1, 0, 1, 2, 3


def client_detail(length: int) -> str:
    return f"client has {length:,} characters, over {MAX_CLIENT_LENGTH}"


@njit(cache=True, nogil=True)
def _screen(buf, fields, coll_ids, cid, n_bytes, lo_ms, hi_ms):
    """One compiled pass over the reports of collection ``cid``: a code per record (``_OTHER`` for
    other collections, else ``_OK`` or the first failed check of timestamp and length, in the
    per-record check's order), the rows that passed, and their bits gathered into a contiguous
    ``(n_ok, n_bytes)`` array (padding bits are checked on that array afterwards)."""
    n = coll_ids.shape[0]
    codes = np.full(n, _OTHER, dtype=np.int8)
    n_ok = 0
    for i in range(n):
        if coll_ids[i] != cid:
            continue
        if fields[i, EVENT_MS] < lo_ms or fields[i, EVENT_MS] >= hi_ms:
            codes[i] = _BAD_TIME
        elif fields[i, BITS_LEN] != n_bytes:
            codes[i] = _WRONG_LENGTH
        else:
            codes[i] = _OK
            n_ok += 1
    rows = np.empty(n_ok, dtype=np.int64)
    offsets = np.empty(n_ok, dtype=np.int64)
    k = 0
    for i in range(n):
        if codes[i] == _OK:
            rows[k] = i
            offsets[k] = fields[i, BITS_OFF]
            k += 1
    return codes, rows, gather_bytes(buf, offsets, n_bytes)


class _Buffer:
    """The reports of one (collection, dimensions, slice) waiting to be counted: packed arrays, and
    with client extremes each report's client key and whether it names a client."""

    __slots__ = ("packed", "keys", "named", "singles")

    def __init__(self):
        self.packed, self.keys, self.named, self.singles = [], [], [], []


class Preaggregator:
    """Buffers screened reports per (collection, dimensions, slice start) and turns them into
    partials: ``flush()`` returns ``[(slice start ms, Partial)]``, one vectorized count per key."""

    def __init__(self, configs: dict):
        self.configs = configs
        self.buffers = {}
        self.buffered = 0

    def _buffer(self, name, dims: tuple, start: int) -> _Buffer:
        key = (name, dims, start)
        buf = self.buffers.get(key)
        if buf is None:
            buf = self.buffers[key] = _Buffer()
        return buf

    def add_packed(self, name, dims: tuple, start: int, packed: np.ndarray, clients=None):
        """``packed`` (n, n_bytes) reports; ``clients``: None (no client extremes, or no clients), or
        ``(keys, named)``: each report's client key (uint64) and whether it names a client."""
        buf = self._buffer(name, dims, start)
        buf.packed.append(packed)
        if self.configs[name].client_extremes:
            n = packed.shape[0]
            keys, named = clients if clients is not None else (np.zeros(n, np.uint64), np.zeros(n, bool))
            buf.keys.append(keys)
            buf.named.append(named)
        self.buffered += packed.shape[0]

    def add_report(self, name, dims: tuple, event_ms: int, bits: bytes, client=None):
        """One validated report (the per-record path)."""
        start = int(slice_starts(self.configs[name].window, np.array([event_ms]))[0])
        self._buffer(name, dims, start).singles.append(
            (bytes(bits), 0 if client is None else client_key(client), client is not None))
        self.buffered += 1

    def flush(self) -> list:
        out = []
        for (name, dims, start), buf in sorted(self.buffers.items(), key=lambda kv: kv[0]):
            cfg = self.configs[name]
            parts, keys, named = list(buf.packed), list(buf.keys), list(buf.named)
            if buf.singles:
                parts.append(np.frombuffer(b"".join(b for b, _, _ in buf.singles), dtype=np.uint8).reshape(
                    len(buf.singles), cfg.layout.n_bytes))
                keys.append(np.array([k for _, k, _ in buf.singles], dtype=np.uint64))
                named.append(np.array([m for _, _, m in buf.singles], dtype=bool))
            packed = parts[0] if len(parts) == 1 else np.concatenate(parts)
            aggregator = cfg.aggregator
            if cfg.client_extremes:
                acc = aggregator.add_packed(aggregator.create(), packed, np.concatenate(keys), np.concatenate(named))
            else:
                acc = aggregator.add_packed(aggregator.create(), packed)
            out.append((start, Partial(name, dims, acc)))
        self.buffers = {}
        self.buffered = 0
        return out


def timestamped_partials(pre: Preaggregator, valid_counter=None):
    """Flush ``pre``: each partial timestamped with its slice's start (so it lands in exactly its
    reports' windows), its reports counted valid when a counter is given."""
    for start, partial in pre.flush():
        if valid_counter is not None:  # counted once safely in an accumulator
            count(VALID, int(partial.accumulator.n), valid_counter)
        yield beam.window.TimestampedValue(partial, start / 1000.0)


def _dead(block, rows, reason, detail, source_of):
    for i in rows:
        yield dead_letter(reason, detail(i), source_of(i), record=block.record(i))


def _undecodable(block, coll_ids, coll_first, dims_ids, dims_first):
    """Rows whose strings are not UTF-8 (collection, dimension map or client), as the per-record
    path finds them when it builds each record; and each distinct dimension map, decoded once
    (None where it is not UTF-8)."""
    bad = ~block.client_utf8_ok()
    f = block.fields
    for cid, first in enumerate(coll_first):
        try:
            block.text(f[first, COLLECTION_OFF], f[first, COLLECTION_LEN])
        except UnicodeDecodeError:
            bad |= coll_ids == cid
    dims_of = []
    for did, first in enumerate(dims_first):
        try:
            dims_of.append(block.dimensions(int(first)))
        except (UnicodeDecodeError, ValueError):
            dims_of.append(None)
            bad |= dims_ids == did
    return np.flatnonzero(bad), dims_of


def screen_block(block, configs: dict, pre: Preaggregator, source_of):
    """The reports of a decoded block (contract writer schema) -> valid ones into ``pre``, a dead
    letter (yielded) for every other one. ``source_of(i)`` names record i's source."""
    f = block.fields
    coll_ids, coll_first = distinct_ids(block, COLLECTION_OFF, length_col=COLLECTION_LEN)
    dims_ids, dims_first = distinct_ids(block, DIMS_OFF, end_col=DIMS_END)
    bad, dims_of = _undecodable(block, coll_ids, coll_first, dims_ids, dims_first)
    if bad.size:
        for i in bad:
            yield dead_letter("undecodable", block.fault(i), source_of(i), payload=block.payload(i))
        coll_ids = coll_ids.copy()
        coll_ids[bad] = -1  # screened out of every collection below
    for cid, first in enumerate(coll_first):
        if not (coll_ids == cid).any():
            continue
        name = block.text(f[first, COLLECTION_OFF], f[first, COLLECTION_LEN])
        cfg = configs.get(name)
        if cfg is None:
            yield from _dead(block, np.flatnonzero(coll_ids == cid), "unknown_collection",
                             lambda i: collection_detail(name), source_of)
            continue
        n_bits, n_bytes = cfg.layout.n_bits, cfg.layout.n_bytes
        codes, rows, packed = _screen(block.buf, f, coll_ids, cid, n_bytes, MIN_EVENT_MS, MAX_EVENT_MS)
        padded = padding_mask(packed, n_bits)
        if padded.any():
            codes[rows[padded]] = _PADDING
            rows, packed = rows[~padded], packed[~padded]
        if rows.size < coll_ids.size:
            yield from _dead(block, np.flatnonzero(codes == _BAD_TIME), "bad_timestamp",
                             lambda i: time_detail(f[i, EVENT_MS]), source_of)
            yield from _dead(block, np.flatnonzero(codes == _WRONG_LENGTH), "wrong_length",
                             lambda i: length_detail(name, f[i, BITS_LEN], n_bits, n_bytes), source_of)
            yield from _dead(block, np.flatnonzero(codes == _PADDING), "padding_bits",
                             lambda i: padding_detail(n_bits), source_of)
        if rows.size:
            keep = np.ones(rows.size, dtype=bool)
            row_dims = dims_ids[rows]
            for did in np.unique(row_dims):  # each distinct dimensions map is checked once
                fault = cfg.dimension_fault(dims_of[did])
                if fault:
                    sel = row_dims == did
                    keep &= ~sel
                    yield from _dead(block, rows[sel], fault[0], lambda i, d=fault[1]: d, source_of)
            if not keep.all():
                rows, packed = rows[keep], packed[keep]
        clients = None
        if rows.size and cfg.client_extremes:  # elsewhere a client token is dropped at the door
            too_long = _too_long_clients(block, rows)
            if too_long.any():
                yield from _dead(block, rows[too_long], "bad_field",
                                 lambda i: client_detail(len(block.text(f[i, CLIENT_OFF], f[i, CLIENT_LEN]))),
                                 source_of)
                rows, packed = rows[~too_long], packed[~too_long]
            clients = (client_keys(block, rows), f[rows, CLIENT_LEN] >= 0)
        if rows.size == 0:
            continue
        starts = slice_starts(cfg.window, f[rows, EVENT_MS])
        groups = dims_ids[rows] * (1 << 44) + (starts - starts.min())
        if groups.min() == groups.max():  # the common case: one key and slice in the batch
            pre.add_packed(name, _key(dims_of[dims_ids[rows[0]]]), int(starts[0]), packed, clients)
            continue
        order = np.argsort(groups, kind="stable")
        cuts = np.flatnonzero(np.diff(groups[order])) + 1
        for sel in np.split(order, cuts):
            pre.add_packed(name, _key(dims_of[dims_ids[rows[sel[0]]]]), int(starts[sel[0]]), packed[sel],
                           None if clients is None else (clients[0][sel], clients[1][sel]))


def _key(dims: dict) -> tuple:
    return tuple(sorted(dims.items()))


def client_keys(block, rows) -> np.ndarray:
    """The client key (:func:`~ldp_marginals.ldp.aggregate.client_key`) of each row, hashed by the
    compiled pass over the token's bytes (a row without a client gets a key it never uses)."""
    f = block.fields
    return span_hashes(block.buf, np.ascontiguousarray(f[rows, CLIENT_OFF]),
                   np.ascontiguousarray(np.maximum(f[rows, CLIENT_LEN], 0)))


def _too_long_clients(block, rows) -> np.ndarray:
    """Rows whose client token has more than ``MAX_CLIENT_LENGTH`` characters (only tokens of more
    bytes than that can, so only those are decoded)."""
    f = block.fields
    out = np.zeros(rows.size, dtype=bool)
    for j in np.flatnonzero(f[rows, CLIENT_LEN] > MAX_CLIENT_LENGTH):
        i = rows[j]
        out[j] = len(block.text(f[i, CLIENT_OFF], f[i, CLIENT_LEN])) > MAX_CLIENT_LENGTH
    return out
