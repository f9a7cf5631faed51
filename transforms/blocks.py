"""The batch fast path: whole Avro blocks of reports decoded to arrays, validated with numpy and
pre-aggregated per (collection, dimensions, window slice) inside the reader, so Beam moves a few
accumulators per file instead of one element per report.

Records the fast path cannot take (blocks of another writer schema, collections with client
extremes, which need per-client grouping) go down the per-element path unchanged; malformed
reports become dead letters with the same reasons as :class:`transforms.reports.ValidateReportsFn`.
"""
from __future__ import annotations

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from numba import njit

from ldp_marginals.ldp.encoding import padding_mask
from ldp_marginals.ldp.windows import MAX_EVENT_MS, MIN_EVENT_MS, slice_starts
from ldp_marginals.transforms.avro_blocks import (
    BITS_LEN,
    BITS_OFF,
    COLLECTION_LEN,
    COLLECTION_OFF,
    DIMS_END,
    DIMS_OFF,
    EVENT_MS,
    distinct_ids,
    gather_bytes,
)
from ldp_marginals.transforms.avro_container import Damage
from ldp_marginals.transforms.dead_letters import (
    NAMESPACE,
    TAG,
    VALID,
    collection_detail,
    damaged,
    dead_letter,
    length_detail,
    padding_detail,
    time_detail,
)
from ldp_marginals.transforms.reports import read_file, record_or_dead_letter
from ldp_marginals.transforms.source import PARTIALS, RECORDS, Partial, ReportSource

FLUSH_ROWS = 1 << 20  # buffered reports counted in one go (~32 MiB of packed bits at d = 256)

_OTHER, _OK, _BAD_TIME, _WRONG_LENGTH, _PADDING = -1, 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _screen(buf, fields, coll_ids, cid, n_bytes, lo_ms, hi_ms):
    """One compiled pass over the reports of collection ``cid``: a code per record (``_OTHER`` for
    other collections, else ``_OK`` or the first failed check of timestamp and length, in the
    per-element path's order), the rows that passed, and their bits gathered into a contiguous
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


class ReadAndPreaggregateFn(beam.DoFn):
    """A matched Avro file -> ``partials`` (timestamped :class:`Partial`), per-element ``records``
    for what the fast path cannot take, and ``dead_letters`` rows."""

    def __init__(self, configs: dict):
        self.configs = configs

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)

    def process(self, readable_file):
        self._buffers = {}  # (collection, dims, slice start) -> [packed arrays], counted together
        self._buffered = 0
        path = readable_file.metadata.path
        for block in read_file(readable_file):
            if isinstance(block, Damage):
                yield damaged(path, block)
            elif block.records is not None:  # another writer schema: the per-element path decides
                for i in range(len(block)):
                    yield from self._record(block, i, path)
            else:
                yield from self._fast_block(block, path)
                if self._buffered >= FLUSH_ROWS:
                    yield from self._flush()
        yield from self._flush()

    def _record(self, block, i, path):
        """Record i on the per-element path, or its dead letter when its strings are not UTF-8."""
        for out in record_or_dead_letter(block, i, path):
            yield out if isinstance(out, beam.pvalue.TaggedOutput) else beam.pvalue.TaggedOutput(RECORDS, out)

    def _flush(self):
        """One vectorized count per (collection, dimensions, slice) for everything buffered."""
        for (name, dims, start), parts in sorted(self._buffers.items()):
            aggregator = self.configs[name].aggregator
            packed = parts[0] if len(parts) == 1 else np.concatenate(parts)
            acc = aggregator.add_packed(aggregator.create(), packed)
            self._valid.inc(packed.shape[0])  # counted once safely in an accumulator
            yield beam.pvalue.TaggedOutput(PARTIALS, beam.window.TimestampedValue(Partial(name, dims, acc),
                                                                                 start / 1000.0))
        self._buffers = {}
        self._buffered = 0

    def _dead(self, block, rows, reason, detail, path):
        for i in rows:
            yield dead_letter(reason, detail(i), block.source(path, i), record=block.record(i))

    def _undecodable(self, block, coll_ids, coll_first, dims_ids, dims_first):
        """Rows whose strings are not UTF-8 (collection, dimension map or client), as the
        per-element path finds them when it builds each record; and each distinct dimension map,
        decoded once (None where it is not UTF-8)."""
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

    def _fast_block(self, block, path):
        f = block.fields
        coll_ids, coll_first = distinct_ids(block, COLLECTION_OFF, length_col=COLLECTION_LEN)
        dims_ids, dims_first = distinct_ids(block, DIMS_OFF, end_col=DIMS_END)
        bad, dims_of = self._undecodable(block, coll_ids, coll_first, dims_ids, dims_first)
        if bad.size:
            for i in bad:
                yield dead_letter("undecodable", block.fault(i), block.source(path, i), payload=block.payload(i))
            coll_ids = coll_ids.copy()
            coll_ids[bad] = -1  # screened out of every collection below
        for cid, first in enumerate(coll_first):
            if not (coll_ids == cid).any():
                continue
            name = block.text(f[first, COLLECTION_OFF], f[first, COLLECTION_LEN])
            cfg = self.configs.get(name)
            if cfg is None:
                yield from self._dead(block, np.flatnonzero(coll_ids == cid), "unknown_collection",
                                      lambda i: collection_detail(name), path)
                continue
            if cfg.client_extremes:  # per-client grouping happens on the per-element path
                for i in np.flatnonzero(coll_ids == cid):
                    yield from self._record(block, i, path)
                continue
            n_bits, n_bytes = cfg.layout.n_bits, cfg.layout.n_bytes
            codes, rows, packed = _screen(block.buf, f, coll_ids, cid, n_bytes, MIN_EVENT_MS, MAX_EVENT_MS)
            padded = padding_mask(packed, n_bits)
            if padded.any():
                codes[rows[padded]] = _PADDING
                rows, packed = rows[~padded], packed[~padded]
            if rows.size < coll_ids.size:
                yield from self._dead(block, np.flatnonzero(codes == _BAD_TIME), "bad_timestamp",
                                      lambda i: time_detail(f[i, EVENT_MS]), path)
                yield from self._dead(block, np.flatnonzero(codes == _WRONG_LENGTH), "wrong_length",
                                      lambda i: length_detail(name, f[i, BITS_LEN], n_bits, n_bytes), path)
                yield from self._dead(block, np.flatnonzero(codes == _PADDING), "padding_bits",
                                      lambda i: padding_detail(n_bits), path)
            if rows.size:
                keep = np.ones(rows.size, dtype=bool)
                row_dims = dims_ids[rows]
                for did in np.unique(row_dims):  # each distinct dimensions map is checked once
                    fault = cfg.dimension_fault(dims_of[did])
                    if fault:
                        sel = row_dims == did
                        keep &= ~sel
                        yield from self._dead(block, rows[sel], fault[0], lambda i, d=fault[1]: d, path)
                if not keep.all():
                    rows, packed = rows[keep], packed[keep]
            if rows.size == 0:
                continue
            starts = slice_starts(cfg.window, f[rows, EVENT_MS])
            groups = dims_ids[rows] * (1 << 44) + (starts - starts.min())
            if groups.min() == groups.max():  # the common case: one key and slice in the batch
                self._buffer(name, dims_of[dims_ids[rows[0]]], int(starts[0]), packed)
                continue
            order = np.argsort(groups, kind="stable")
            cuts = np.flatnonzero(np.diff(groups[order])) + 1
            for sel in np.split(order, cuts):
                self._buffer(name, dims_of[dims_ids[rows[sel[0]]]], int(starts[sel[0]]), packed[sel])

    def _buffer(self, name, dims: dict, start, packed):
        self._buffers.setdefault((name, tuple(sorted(dims.items())), start), []).append(packed)
        self._buffered += packed.shape[0]


class ReadReportFilesFast(ReportSource):
    """Avro files matching a glob -> ``partials``, ``records`` and ``dead_letters``."""

    def __init__(self, pattern: str, configs: dict):
        super().__init__()
        self.pattern = pattern
        self.configs = configs

    def read(self, pbegin):
        from apache_beam.io import fileio
        outs = (pbegin
                | "Match" >> fileio.MatchFiles(self.pattern, empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW)
                | "Open" >> fileio.ReadMatches()
                | "ReadBlocks" >> beam.ParDo(ReadAndPreaggregateFn(self.configs)).with_outputs(
                    RECORDS, TAG, PARTIALS))
        return {tag: outs[tag] for tag in (RECORDS, TAG, PARTIALS)}
