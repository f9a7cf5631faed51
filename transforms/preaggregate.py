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
:mod:`ldp_marginals.transforms.checks` through :mod:`ldp_marginals.transforms.screening` (Beam-free,
which the collector runs too), so they give identical results.
"""
from __future__ import annotations

import apache_beam as beam
import numpy as np

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.schemas.dead_letters import VALID
from ldp_marginals.transforms.avro_kernels import EVENT_MS
from ldp_marginals.transforms.checks import block_meta, keeps_clients
from ldp_marginals.transforms.dead_letters import count, dead_letter
from ldp_marginals.transforms.screening import Fault, screen_rows
from ldp_marginals.transforms.source import Partial

FLUSH_ROWS = 1 << 20     # buffered reports counted in one go (~32 MiB of packed bits at d = 256)


class _Buffer:
    """The reports of one (collection, dimensions, slice) waiting to be counted: packed arrays, with
    client extremes each report's client key and whether it names a client, and under a device bound
    each report's event ms (what its rank hashes)."""

    __slots__ = ("packed", "keys", "named", "event_ms", "singles")

    def __init__(self):
        self.packed, self.keys, self.named, self.event_ms, self.singles = [], [], [], [], []


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

    def add_packed(self, name, dims: tuple, start: int, packed: np.ndarray, clients=None, event_ms=None):
        """``packed`` (n, n_bytes) reports; ``clients``: None (no client extremes, or no clients), or
        ``(keys, named)``: each report's client key (uint64) and whether it names a client;
        ``event_ms``: each report's event time (int64 ms), required under a device bound and with a
        client sample (``reports_per_client``): what their ranks hash."""
        buf = self._buffer(name, dims, start)
        buf.packed.append(packed)
        cfg = self.configs[name]
        n = packed.shape[0]
        if event_ms is not None and len(event_ms) == n:
            buf.event_ms.append(np.asarray(event_ms, dtype=np.int64))
        elif cfg.device is not None or cfg.client_sample is not None:
            raise ValueError(f"event_ms must give each of the {n} reports of collection {name!r} its time under a "
                             f"device bound or a client sample, got event_ms={event_ms!r}")
        else:   # no rank reads them
            buf.event_ms.append(np.zeros(n, np.int64))
        if keeps_clients(cfg):
            keys, named = clients if clients is not None else (np.zeros(n, np.uint64), np.zeros(n, bool))
            buf.keys.append(keys)
            buf.named.append(named)
        self.buffered += packed.shape[0]

    def add_report(self, name, dims: tuple, event_ms: int, bits: bytes, client=None):
        """One validated report (the per-record path)."""
        start = self.configs[name].window.slice_of(event_ms)
        self._buffer(name, dims, start).singles.append(
            (bytes(bits), 0 if client is None else client_key(client), client is not None, int(event_ms)))
        self.buffered += 1

    def flush(self) -> list:
        out = []
        for (name, dims, start), buf in sorted(self.buffers.items(), key=lambda kv: kv[0]):
            cfg = self.configs[name]
            parts, keys, named, times = list(buf.packed), list(buf.keys), list(buf.named), list(buf.event_ms)
            if buf.singles:
                parts.append(np.frombuffer(b"".join(b for b, _, _, _ in buf.singles), dtype=np.uint8).reshape(
                    len(buf.singles), cfg.wire.n_bytes))
                keys.append(np.array([k for _, k, _, _ in buf.singles], dtype=np.uint64))
                named.append(np.array([m for _, _, m, _ in buf.singles], dtype=bool))
                times.append(np.array([t for _, _, _, t in buf.singles], dtype=np.int64))
            packed = parts[0] if len(parts) == 1 else np.concatenate(parts)
            aggregator = cfg.aggregator
            if cfg.device is not None:   # every report names its device (checked): an open accumulator
                acc = aggregator.add_devices(aggregator.create_open(), packed, np.concatenate(keys),
                                             np.concatenate(times))
            elif cfg.client_extremes:
                keys = np.concatenate(keys)
                ranks = None if cfg.client_sample is None else report_ranks(aggregator.collection_key, keys,
                                                                            np.concatenate(times))
                acc = aggregator.add_packed(aggregator.create(), packed, keys, np.concatenate(named), ranks)
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


def screen_block(block, configs: dict, pre: Preaggregator, source_of):
    """The reports of a decoded block (contract writer schema) -> valid ones into ``pre``, a dead
    letter (yielded) for every other one, screened by
    :func:`~ldp_marginals.transforms.screening.screen_rows` (the collector's screening too).
    ``source_of(i)`` names record i's source."""
    f = block.fields
    for item in screen_rows(block, configs):
        if isinstance(item, Fault):
            yield dead_letter(item.reason, item.detail, source_of(item.row), block_meta(block, item.row, configs))
            continue
        name, cfg, view, rows, passed, dims_of = item
        packed = view.packed(passed)
        clients = view.clients(passed) if keeps_clients(cfg) else None
        kept = rows[passed]
        starts = cfg.window.slice_starts(f[kept, EVENT_MS])
        row_dims = view.dims_ids(passed)
        groups = row_dims * (1 << 44) + (starts - starts.min())
        times = f[kept, EVENT_MS]   # what the ranks of a device bound and of a client sample hash
        if groups.min() == groups.max():  # the common case: one key and slice in the batch
            pre.add_packed(name, _key(dims_of[row_dims[0]]), int(starts[0]), packed, clients, times)
            continue
        order = np.argsort(groups, kind="stable")
        cuts = np.flatnonzero(np.diff(groups[order])) + 1
        for sel in np.split(order, cuts):
            pre.add_packed(name, _key(dims_of[row_dims[sel[0]]]), int(starts[sel[0]]), packed[sel],
                           None if clients is None else (clients[0][sel], clients[1][sel]), times[sel])


def _key(dims: dict) -> tuple:
    return tuple(sorted(dims.items()))
