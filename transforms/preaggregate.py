"""Pre-aggregation before the shuffle, shared by every reader: valid reports are screened in
compiled, vectorized passes over decoded blocks (a file's, a container message's, or a batch of
single-report messages) and summed per (collection, dimensions, window slice) into
:class:`~ldp_marginals.transforms.source.Partial` accumulators, so Beam moves a few accumulators per
batch instead of one element per report. Reports of one client inside a batch are reduced to one
state per client (:mod:`ldp_marginals.ldp.aggregate`).

A slice is the period-long piece of event time whose reports all lie in the same windows
(:meth:`ldp_marginals.ldp.windows.Window.slice_starts`); a partial is timestamped with its slice's start,
so the windows Beam (or the streaming panes) assign it are exactly its reports' windows, whatever
batch they arrived in.

Malformed reports become dead letters: both this vectorized path and the per-record path of
:class:`ldp_marginals.transforms.reports.ValidateReportsFn` run the one table of checks of
:mod:`ldp_marginals.transforms.checks`, so they give identical results.
"""
from __future__ import annotations

import apache_beam as beam
import numpy as np

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.schemas.dead_letters import UNDECODABLE, UNKNOWN_COLLECTION, VALID
from ldp_marginals.transforms.avro_blocks import distinct_ids
from ldp_marginals.transforms.avro_kernels import COLLECTION_LEN, COLLECTION_OFF, DIMS_END, DIMS_OFF, EVENT_MS
from ldp_marginals.transforms.checks import BlockView, block_meta, collection_detail, keeps_clients, screen
from ldp_marginals.transforms.dead_letters import count, dead_letter
from ldp_marginals.transforms.source import Partial

FLUSH_ROWS = 1 << 20     # buffered reports counted in one go (~32 MiB of packed bits at d = 256)


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
        if keeps_clients(self.configs[name]):
            n = packed.shape[0]
            keys, named = clients if clients is not None else (np.zeros(n, np.uint64), np.zeros(n, bool))
            buf.keys.append(keys)
            buf.named.append(named)
        self.buffered += packed.shape[0]

    def add_report(self, name, dims: tuple, event_ms: int, bits: bytes, client=None):
        """One validated report (the per-record path)."""
        start = self.configs[name].window.slice_of(event_ms)
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
            if cfg.device is not None:   # every report names its device (checked): an open accumulator
                acc = aggregator.add_devices(aggregator.create_open(), packed, np.concatenate(keys))
            elif cfg.client_extremes:
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
            count(VALID, int(partial.accumulator.received), valid_counter)
        yield beam.window.TimestampedValue(partial, start / 1000.0)


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
    letter (yielded) for every other one: strings that are not UTF-8, an unknown collection, then
    the checks of :data:`~ldp_marginals.transforms.checks.CHECKS`. ``source_of(i)`` names record i's
    source."""
    f = block.fields
    coll_ids, coll_first = distinct_ids(block, COLLECTION_OFF, length_col=COLLECTION_LEN)
    dims_ids, dims_first = distinct_ids(block, DIMS_OFF, end_col=DIMS_END)
    bad, dims_of = _undecodable(block, coll_ids, coll_first, dims_ids, dims_first)
    if bad.size:
        for i in bad:
            yield dead_letter(UNDECODABLE, block.fault(i), source_of(i), block_meta(block, i, configs))
        coll_ids = coll_ids.copy()
        coll_ids[bad] = -1  # screened out of every collection below
    for cid, first in enumerate(coll_first):
        rows = np.flatnonzero(coll_ids == cid)
        if not rows.size:
            continue
        name = block.text(f[first, COLLECTION_OFF], f[first, COLLECTION_LEN])
        cfg = configs.get(name)
        if cfg is None:
            for i in rows:
                yield dead_letter(UNKNOWN_COLLECTION, collection_detail(name), source_of(i),
                                  block_meta(block, i, configs))
            continue
        view = BlockView(block, rows, cfg, dims_ids, dims_of)
        passed, faults = screen(view)
        for j, reason, detail in faults:
            yield dead_letter(reason, detail, source_of(rows[j]), block_meta(block, rows[j], configs))
        if not passed.any():
            continue
        packed = view.packed(passed)
        clients = view.clients(passed) if keeps_clients(cfg) else None
        kept = rows[passed]
        starts = cfg.window.slice_starts(f[kept, EVENT_MS])
        row_dims = view.dims_ids(passed)
        groups = row_dims * (1 << 44) + (starts - starts.min())
        if groups.min() == groups.max():  # the common case: one key and slice in the batch
            pre.add_packed(name, _key(dims_of[row_dims[0]]), int(starts[0]), packed, clients)
            continue
        order = np.argsort(groups, kind="stable")
        cuts = np.flatnonzero(np.diff(groups[order])) + 1
        for sel in np.split(order, cuts):
            pre.add_packed(name, _key(dims_of[row_dims[sel[0]]]), int(starts[sel[0]]), packed[sel],
                           None if clients is None else (clients[0][sel], clients[1][sel]))


def _key(dims: dict) -> tuple:
    return tuple(sorted(dims.items()))
