"""The per-window accumulator of one collection and key, and the logic that fills it from packed
reports. Combiners contain logic, accumulators contain data: :class:`ReportAggregator` holds the
parameters (counted sets, channels, extremes) and :class:`WindowAccumulator` only the numbers, so
the accumulator stays small when it crosses a shuffle.

What a window keeps, per key:

- the co-occurrence counts ``c_S`` of every counted set (:mod:`ldp_marginals.ldp.cooccurrence`);
- per OR/AND extreme taken over the bits of one report, the sums over reports of that report's
  estimate and of its unbiased variance estimate (:mod:`ldp_marginals.ldp.extremes`, Hehir Thm 1
  and 3): reports are independent, so the sums estimate the number of reports whose OR (AND) is 1
  and its variance;
- per OR/AND extreme taken over all the reports of one client (``over: client``), each client's
  estimator state: the product's sign parity, log-magnitude and zero count, for the estimator and
  for its variance. A state is a sum over the client's bits, so states merge by addition: a batch
  of reports is reduced per client before any shuffle, and the shuffle moves one state per client.
  Clients are keyed by a 64-bit hash of their token (:func:`client_key`): the table is two numpy
  arrays (sorted keys, states), which merge and pickle without a Python object per client, and no
  raw token is kept in state. Two tokens collide with probability ~n^2 / 2^65 (about 3e-8 for a
  million clients in one window); a collision merges two clients' states. Each client's state
  also counts the client's reports (column ``REPORTS``): the publication rule for per-client
  statistics groups a window's clients by how many reports each sent in each released increment
  (:func:`client_groups`) and counts the reports that name no client (:func:`unnamed_reports`).
- with a *client sample* of ``c`` reports (``reports_per_client``; under ``privacy.unit: device`` the
  bound M by default), each client's ``c + 1`` reports of smallest rank, each with its own state
  (``sample_owner``, ``sample_rank``, ``sample_states``, sorted by (owner, rank)): the rank is a hash
  of (collection, client, event ms), never of the bits (:func:`ldp_marginals.ldp.devices.report_ranks`),
  so the sample is blind to content, and a bottom-(c+1) merges in any order. The client rows then
  take, per client, the OR/AND over exactly its ``c`` reports of smallest rank; a client with fewer
  (or whose c-th and (c+1)-th ranks tie) is left out of them (:func:`sampled_clients`), so every
  client in the rows has the same number of reports and the rows treat them alike
  (docs/design.md, section 7, "Extremes over clients: a sample of c reports").

Reports are added as packed ``(n, n_bytes)`` arrays, one vectorized pass per batch.

State that outlives a process (a streaming job's state, a Flink savepoint, a Dataflow update) and
what crosses a shuffle is written as a versioned record with named parts and the shape it was
written for, never a positional pickle (:mod:`ldp_marginals.ldp.versioned`, which reads every
earlier version and refuses, naming both, a state whose shape is not the configuration's).
"""
from __future__ import annotations

import math
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from ldp_marginals.ldp import _compiled
from ldp_marginals.ldp.channels import ChannelSet
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.devices import (
    RANK_RULE,
    DeviceTable,
    bottom_indices,
    kept_digest,
    kept_per_device,
    lexsort_order,
    merge_tables,
    report_ranks,
    table_of,
    trimmed,
    unique_inverse,
    without_devices,
)
from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.ldp.extremes import OPS, ExtremeAccumulator, _factors
from ldp_marginals.ldp.memoized import extreme_repeat_terms
from ldp_marginals.ldp.sets import SetFamily

# the columns of one client's state per extreme: estimator product, then variance product, then the
# number of the client's reports (the same in every extreme's row; NaN in states of version 1)
NEG_F, LOG_F, ZEROS_F, NEG_V, LOG_V, ZEROS_V, REPORTS = range(7)
STATE_WIDTH = 7


_ONE_SPAN = np.zeros(1, dtype=np.int64)


def client_key(token: str) -> int:
    """The 64-bit key of a client token: FNV-1a over its UTF-8 bytes, xor its byte length, by the
    one definition of :func:`ldp_marginals.ldp.hashing.span_hashes` (the block readers hash the
    token's bytes in a block with it)."""
    data = np.frombuffer(token.encode("utf-8"), dtype=np.uint8)
    return int(_compiled.span_hashes(data, _ONE_SPAN, np.array([data.size], dtype=np.int64))[0])


class WindowAccumulator:
    """Data of one window (or slice) and key: ``cooc`` (co-occurrence counts), ``extreme_sums``
    float64[n_extremes, 2] (sums over reports of each per-report OR/AND estimate and of its variance
    estimate), ``clients`` uint64[n_clients] (sorted client keys) and ``client_states``
    float64[n_clients, n_client_extremes, 7] (each client's estimator states and report count,
    columns ``NEG_F`` ... ``REPORTS``).

    Under a device bound (``privacy.unit: device``) an accumulator is first *open*: ``devices`` holds
    the slice and key's :class:`~ldp_marginals.ldp.devices.DeviceTable` (each device's kept reports,
    mergeable in any order) and the counts are empty; :meth:`ReportAggregator.settle` counts the
    kept reports and closes it (``devices`` None, ``device_count`` its devices, ``over_bound`` the
    reports sent beyond the bound, ``kept`` the digest of its kept (device, rank) pairs, which the
    release ledger compares between runs). A settled accumulator merges by plain addition, as without a
    bound (the counts of merged slices or atoms: ``device_count`` is then a sum over the parts, an
    upper bound of their distinct devices; ``kept`` the digest of the parts' kept pairs together)."""

    __slots__ = ("cooc", "extreme_sums", "clients", "client_states", "devices", "device_count", "over_bound",
                 "used_devices", "used_counts", "kept", "sample_owner", "sample_rank", "sample_states")

    def __init__(self, cooc: CooccurrenceAccumulator, n_extremes: int, n_client_extremes: int = 0):
        self.cooc = cooc
        self.extreme_sums = np.zeros((n_extremes, 2))
        self.clients = np.zeros(0, dtype=np.uint64)
        self.client_states = np.zeros((0, n_client_extremes, STATE_WIDTH))
        self.devices = None
        self.device_count = 0
        self.over_bound = 0
        # settled under a bound: each device's kept reports (what a later increment of the same slice
        # and key may still add, streaming)
        self.used_devices = np.zeros(0, dtype=np.uint64)
        self.used_counts = np.zeros(0, dtype=np.int64)
        # settled under a bound: the digest of the kept (device, rank) pairs (devices.kept_digest),
        # uint64[2]; it adds when settled accumulators merge (the empty digest is 0)
        self.kept = np.zeros(2, dtype=np.uint64)
        # with a client sample: each client's c + 1 reports of smallest rank, one state each
        self.sample_owner = np.zeros(0, dtype=np.uint64)
        self.sample_rank = np.zeros(0, dtype=np.uint64)
        self.sample_states = np.zeros((0, n_client_extremes, STATE_WIDTH))

    def __getstate__(self):   # a pickle (what crosses the wire is the versioned record instead)
        return {"cooc": self.cooc, "extreme_sums": self.extreme_sums, "clients": self.clients,
                "client_states": self.client_states, "devices": self.devices, "device_count": self.device_count,
                "over_bound": self.over_bound, "used_devices": self.used_devices, "used_counts": self.used_counts,
                "kept": self.kept, "sample_owner": self.sample_owner, "sample_rank": self.sample_rank,
                "sample_states": self.sample_states}

    def __setstate__(self, state):
        self.devices, self.device_count, self.over_bound = None, 0, 0
        self.kept = state.get("kept", np.zeros(2, dtype=np.uint64)) if isinstance(state, dict) \
            else np.zeros(2, dtype=np.uint64)
        get = state.get if isinstance(state, dict) else (lambda _k, d: d)
        self.sample_owner = get("sample_owner", np.zeros(0, dtype=np.uint64))
        self.sample_rank = get("sample_rank", np.zeros(0, dtype=np.uint64))
        self.used_devices = state.get("used_devices", np.zeros(0, dtype=np.uint64)) if isinstance(state, dict) \
            else np.zeros(0, dtype=np.uint64)
        self.used_counts = state.get("used_counts", np.zeros(0, dtype=np.int64)) if isinstance(state, dict) \
            else np.zeros(0, dtype=np.int64)
        if isinstance(state, tuple):  # version 1: (cooc, extreme_sums, clients, client_states, held)
            self.cooc, self.extreme_sums, self.clients, states, _held = state
            self.client_states = _with_report_counts(states)
            self.sample_states = np.zeros((0,) + self.client_states.shape[1:])
            return
        self.cooc, self.extreme_sums = state["cooc"], state["extreme_sums"]
        self.clients, self.client_states = state["clients"], state["client_states"]
        self.sample_states = state.get("sample_states", np.zeros((0,) + self.client_states.shape[1:]))
        self.devices = state.get("devices")
        self.device_count, self.over_bound = state.get("device_count", 0), state.get("over_bound", 0)

    @property
    def n(self) -> int:
        """Reports counted (open under a device bound: reports kept)."""
        return self.cooc.n if self.devices is None else self.devices.kept

    @property
    def received(self) -> int:
        """Reports received, kept or not: under a device bound also those beyond it."""
        return int(self.devices.seen.sum()) if self.devices is not None else self.n + self.over_bound

    @property
    def n_devices(self) -> int:
        """Distinct devices (exact while open and for one settled slice and key)."""
        return self.device_count if self.devices is None else self.devices.n_devices

    @property
    def n_clients(self) -> int:
        return int(self.clients.shape[0])

    @property
    def client_reports(self) -> np.ndarray:
        """float64[n_clients]: each client's number of reports (NaN where a state of version 1 did not
        count them; empty without client extremes)."""
        if self.client_states.shape[1] == 0:
            return np.zeros(self.n_clients)
        return self.client_states[:, 0, REPORTS]

    @property
    def named_reports(self) -> float:
        """Reports that name a client (NaN when a state of version 1 is merged in)."""
        return float(self.client_reports.sum())


def kept_devices(accumulators) -> np.ndarray:
    """The distinct devices (sorted uint64 device keys) with a kept report in any of ``accumulators``
    (open: their device tables; settled: ``used_devices``), each once however many of them hold it:
    what a rollup's withheld part counts under ``privacy.unit: device`` (docs/design.md, section 7,
    "Rollups"). Accumulators of a merge are not read (a merge keeps its first part's ``used_devices``):
    pass the slices and increments themselves."""
    parts = [a.devices.owner if a.devices is not None else a.used_devices for a in accumulators if a is not None]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)


def _with_report_counts(states: np.ndarray) -> np.ndarray:
    """Client states of version 1 (6 columns) with the report count column, NaN: unknown."""
    if states.shape[2] == STATE_WIDTH:
        return states
    out = np.full(states.shape[:2] + (STATE_WIDTH,), np.nan)
    out[:, :, :states.shape[2]] = states
    return out


_PATTERN_BITS = 12   # extremes over at most this many bits take their states from a table of bit patterns


def _log_states(op: str, bits: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per report, the state of one extreme over its bits ``(n, m)`` (0/1): ``(n, 7)`` in the columns
    above. A report's state depends on its m bits alone, so with many more reports than the 2^m
    patterns each pattern's state is computed once (by the same operations, row by row) and looked up."""
    n, m = bits.shape
    if m <= _PATTERN_BITS and n > (4 << m):
        return _pattern_table(op, m, p, q)[_pattern_codes(bits)]
    return _pattern_states(op, bits, p, q)


def _pattern_table(op: str, m: int, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``(2^m, 7)``: the state of one extreme over m bits for each pattern of them (bit j of the pattern is
    the extreme's j-th bit, :func:`_pattern_codes`)."""
    patterns = ((np.arange(1 << m)[:, None] >> np.arange(m)) & 1).astype(np.uint8)
    return _pattern_states(op, patterns, p, q)


def _pattern_codes(bits: np.ndarray) -> np.ndarray:
    """intp per report: the pattern of its bits ``(n, m)`` (0/1), bit j its j-th bit."""
    return (bits.astype(np.intp) << np.arange(bits.shape[1])).sum(axis=1)


def _pattern_states(op: str, bits: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    f, v = _factors(op, bits.astype(np.float64), p, q)
    return factor_states(f, v)


def factor_states(f: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per report, the state of one extreme from its factors ``f`` (estimator) and ``v`` (variance), each
    ``(n, m)`` (m factors a report: its bits per bit, one term for a whole-report kind): ``(n, 7)``."""
    out = np.empty((f.shape[0], STATE_WIDTH))
    out[:, REPORTS] = 1.0
    for fac, neg, log, zeros in ((f, NEG_F, LOG_F, ZEROS_F), (v, NEG_V, LOG_V, ZEROS_V)):
        nz = fac != 0
        out[:, neg] = (fac < 0).sum(axis=1)
        out[:, zeros] = (~nz).sum(axis=1)
        out[:, log] = np.log(np.abs(np.where(nz, fac, 1.0))).sum(axis=1)
    return out


class ReportAggregator:
    """Fills :class:`WindowAccumulator` s of one collection.

    ``family``: the counted sets; ``channels``: one ``(p, q)`` per bit; ``extremes``: ``(op, bits)``
    per OR/AND taken over the bits of each report; ``client_extremes``: ``(op, bits)`` per OR/AND
    taken over all of a client's reports (``op`` in ``or``, ``and``); ``device_bound``: None (the
    report is the unit), or ``M`` for a collection whose unit is the device: open accumulators
    (:meth:`create_open`) keep at most M reports per device (:mod:`ldp_marginals.ldp.devices`),
    chosen by ranks keyed with ``collection_key``; with client extremes a device is the client.
    ``shared``: None, or ``(s, c0, c1)`` of memoized channels (:mod:`ldp_marginals.ldp.memoized`): each
    extreme over reports then adds ``s`` times each report's
    :func:`~ldp_marginals.ldp.memoized.extreme_repeat_terms` to its variance sum (the covariance of the
    reports of one device), so the state's variance sum is the honest one.
    """

    def __init__(self, family: SetFamily, channels: ChannelSet, extremes: Sequence[tuple] = (),
                 client_extremes: Sequence[tuple] = (), device_bound: int | None = None, collection_key: int = 0,
                 client_sample: int | None = None, shared: tuple | None = None):
        if len(channels) != family.n_bits:
            raise ValueError(f"channels must have one channel per bit ({family.n_bits}), got len={len(channels)}")
        if device_bound is not None and (isinstance(device_bound, bool) or not isinstance(device_bound, int)
                                         or device_bound < 1):
            raise ValueError(f"device_bound must be None or an int >= 1, got device_bound={device_bound!r}")
        self.family = family
        self.channels = channels
        self.extremes = self._checked(extremes, "extremes")
        self.client_extremes = self._checked(client_extremes, "client_extremes")
        self.device_bound = device_bound
        self.collection_key = int(collection_key)
        if client_sample is not None and (isinstance(client_sample, bool) or not isinstance(client_sample, int)
                                          or client_sample < 1):
            raise ValueError(f"client_sample must be None or an int >= 1, got client_sample={client_sample!r}")
        if client_sample is not None and device_bound is not None and client_sample > device_bound:
            raise ValueError(f"client_sample must be at most the device bound {device_bound}, got "
                             f"client_sample={client_sample}")
        self.client_sample = client_sample if self.client_extremes else None
        if shared is not None:
            s, c0, c1 = shared
            c0, c1 = np.asarray(c0, dtype=np.float64), np.asarray(c1, dtype=np.float64)
            if isinstance(s, bool) or not s >= 0 or c0.shape != (family.n_bits,) or c1.shape != (family.n_bits,):
                raise ValueError(f"shared must be (s >= 0, c0, c1) with one c0 and c1 per bit ({family.n_bits}), "
                                 f"got shared={shared!r}")
            shared = (float(s), c0, c1) if s else None
        self.shared = shared

    def _checked(self, extremes, name: str) -> tuple:
        out = tuple((op, tuple(int(b) for b in bits)) for op, bits in extremes)
        for op, bits in out:
            if op not in OPS or not bits or not all(0 <= b < self.family.n_bits for b in bits):
                raise ValueError(f"{name} must be (op in {list(OPS)}, bits of the layout), got extreme={(op, bits)!r}")
        return out

    def create(self) -> WindowAccumulator:
        return WindowAccumulator(CooccurrenceAccumulator(self.family), len(self.extremes), self.client_state_rows)

    @property
    def client_state_rows(self) -> int:
        """The rows of a client's state: one per extreme over clients (a whole-report kind adds rows of
        its reads, :class:`~ldp_marginals.ldp.whole_report.WholeReportAggregator`)."""
        return len(self.client_extremes)

    @property
    def wire_bytes(self) -> int:
        """Bytes of one packed report on the wire, as the device table keeps it: the counted bits' here
        (per bit); a channel kind's aggregator counts virtual bits and keeps its wire format's."""
        return (self.family.n_bits + 7) // 8

    def create_open(self) -> WindowAccumulator:
        """An empty open accumulator (under the device bound; :meth:`create` without one)."""
        acc = self.create()
        if self.device_bound is not None:
            acc.devices = DeviceTable(self.wire_bytes)
        return acc

    def add_devices(self, acc: WindowAccumulator, packed: np.ndarray, device_keys: np.ndarray,
                    event_ms: np.ndarray) -> WindowAccumulator:
        """Add reports of named devices (``device_keys`` uint64, :func:`client_key` of each token; each
        report's ``event_ms``, int64) to the open accumulator ``acc``: each device keeps its M reports of
        smallest rank, a hash of (device, event ms) blind to their bits
        (:mod:`ldp_marginals.ldp.devices`)."""
        if acc.devices is None:
            raise ValueError("add_devices needs an open accumulator (create_open under a device bound)")
        ranks = report_ranks(self.collection_key, device_keys, event_ms)
        batch = table_of(device_keys, ranks, packed, self.device_bound)
        acc.devices = merge_tables([acc.devices, batch], self.device_bound) if acc.devices.devices.size else batch
        return acc

    def settle(self, acc: WindowAccumulator) -> WindowAccumulator:
        """``acc`` closed: an open accumulator's kept reports counted (in their table's order, so the
        float sums do not depend on arrival order) into a new settled accumulator; a settled one as
        it is."""
        table = acc.devices
        if table is None:
            return acc
        out = self.create()
        if table.kept:
            if self.client_extremes:
                self.add_packed(out, table.bits, table.owner, ranks=table.rank)   # every kept report names its device
            else:
                self.add_packed(out, table.bits)
        out.device_count, out.over_bound = table.n_devices, table.over_bound
        out.used_devices, out.used_counts = kept_per_device(table)
        out.kept = kept_digest(table.owner, table.rank)
        return out

    def within_slice(self, acc: WindowAccumulator, released: Sequence[WindowAccumulator]) -> WindowAccumulator:
        """The open pending increment ``acc`` of a slice and key whose earlier increments ``released``
        (settled) were published: a new accumulator in which each device keeps only what its bound
        leaves after its reports in those, so the slice holds at most M of its reports in all
        (streaming: an increment released before a device's later reports cannot take them back)."""
        if acc.devices is None or not released:
            return acc
        used_d = np.concatenate([a.used_devices for a in released])
        used_c = np.concatenate([a.used_counts for a in released])
        if used_d.size == 0:
            return acc
        uniq, inverse = np.unique(used_d, return_inverse=True)
        counts = np.bincount(inverse.reshape(-1), weights=used_c, minlength=uniq.size).astype(np.int64)
        out = self.create()
        out.devices = trimmed(acc.devices, uniq, counts, self.device_bound)
        return out

    def without_devices(self, acc: WindowAccumulator, dropped: np.ndarray) -> tuple:
        """``(accumulator, reports)``: the open ``acc`` (a slice and key) without the devices ``dropped``
        (sorted uint64: past their bound on keys, :func:`~ldp_marginals.ldp.devices.keys_over_bound`), a
        new accumulator, and the reports those devices had sent to it."""
        if acc.devices is None:
            raise ValueError("without_devices needs an open accumulator (create_open under a device bound)")
        table, reports = without_devices(acc.devices, np.asarray(dropped, dtype=np.uint64))
        if not reports:
            return acc, 0
        out = self.create()
        out.devices = table
        return out, reports

    def add_packed(self, acc: WindowAccumulator, packed: np.ndarray, client_keys: np.ndarray | None = None,
                   named: np.ndarray | None = None, ranks: np.ndarray | None = None) -> WindowAccumulator:
        """Vectorized: a whole ``(n, n_bytes)`` uint8 block of packed reports at once. With client
        extremes, ``client_keys`` uint64 gives each report's client (:func:`client_key`) where
        ``named`` is true; a report without a client counts in no client extreme. With a client
        sample, ``ranks`` uint64 gives each report's rank
        (:func:`ldp_marginals.ldp.devices.report_ranks` of its client and event time)."""
        if acc.devices is not None:
            raise ValueError("add_packed needs a settled accumulator; an open one takes add_devices")
        bits = unpack_bits(packed, self.family.n_bits)
        acc.cooc.add_bits(bits)
        p, q = self.channels.p, self.channels.q
        for i, (op, cols) in enumerate(self.extremes):
            cols = list(cols)
            per_report = ExtremeAccumulator(op, (bits.shape[0],)).add(bits[:, cols].T, p[cols][:, None],
                                                                       q[cols][:, None])
            acc.extreme_sums[i, 0] += per_report.estimate().sum()
            acc.extreme_sums[i, 1] += per_report.variance().sum()
            if self.shared is not None:   # a device's reports share permanent responses (ldp/memoized.py)
                s, c0, c1 = self.shared
                acc.extreme_sums[i, 1] += s * extreme_repeat_terms(op, bits[:, cols], p[cols], q[cols], c0[cols],
                                                                   c1[cols]).sum()
        if self.client_extremes and client_keys is not None:
            if self.client_sample is not None and ranks is None:
                raise ValueError(f"add_packed needs each report's rank for the client sample "
                                 f"(client_sample={self.client_sample}), got ranks=None")
            self._add_clients(acc, bits, np.asarray(client_keys, dtype=np.uint64), named,
                              None if ranks is None else np.asarray(ranks, dtype=np.uint64))
        return acc

    def _add_clients(self, acc, bits, keys, named, ranks=None):
        if named is not None:
            bits, keys = bits[named], keys[named]
            ranks = None if ranks is None else ranks[named]
        if keys.size == 0:
            return
        p, q = self.channels.p, self.channels.q
        widest = max(len(cols) for _, cols in self.client_extremes)
        if _compiled.AVAILABLE and widest <= _PATTERN_BITS and keys.size > (4 << widest):
            self._add_client_patterns(acc, bits, keys, ranks, widest)
            return
        per_reports = np.empty((keys.size, len(self.client_extremes), STATE_WIDTH))
        for e, (op, cols) in enumerate(self.client_extremes):
            cols = list(cols)
            per_reports[:, e, :] = _log_states(op, bits[:, cols], p[cols], q[cols])
        self._add_client_states(acc, keys, per_reports, ranks)

    def _add_client_patterns(self, acc, bits, keys, ranks, widest: int) -> None:
        """:meth:`_add_client_states` of the states :meth:`_add_clients` would make (every extreme over at
        most ``widest`` <= 12 bits, numba installed), with the same arrays as its result: each client's sums
        in one compiled pass over the reports' bit patterns (no state per report), and states made only for
        the reports the client sample keeps (the bottom of a union is the bottom of the parts' bottoms)."""
        p, q = self.channels.p, self.channels.q
        n_ext = len(self.client_extremes)
        cols = np.zeros((n_ext, widest), dtype=np.int64)
        widths = np.zeros(n_ext, dtype=np.int64)
        tables = np.zeros((n_ext, 1 << widest, STATE_WIDTH))
        for e, (op, c) in enumerate(self.client_extremes):
            c = list(c)
            cols[e, :len(c)], widths[e] = c, len(c)
            tables[e, :1 << len(c)] = _pattern_table(op, len(c), p[c], q[c])
        uniq, inverse = unique_inverse(keys)   # sorted already when settled from a device table
        states = _compiled.pattern_state_sums(inverse, np.ascontiguousarray(bits, dtype=np.uint8), cols, widths,
                                              tables, uniq.size)
        self._merge_clients(acc, uniq, states)
        if self.client_sample is not None:   # each client's c + 1 reports of smallest rank, one state each
            keep = bottom_indices(keys, ranks, self.client_sample + 1)
            kept = np.empty((keep.size, n_ext, STATE_WIDTH))
            for e in range(n_ext):
                kept[:, e, :] = tables[e][_pattern_codes(bits[keep][:, cols[e, :widths[e]]])]
            self._merge_sample(acc, [(keys[keep], ranks[keep], kept)])

    def _add_client_states(self, acc, keys, per_reports, ranks=None):
        """Add per-report states ``per_reports`` ``(n, rows, 7)`` of clients ``keys`` (uint64, every
        report named) to ``acc``'s client table, and with a client sample to its sample."""
        uniq, inverse = unique_inverse(keys)   # sorted already when settled from a device table
        states = np.zeros((uniq.size,) + per_reports.shape[1:])
        for e in range(per_reports.shape[1]):
            for c in range(STATE_WIDTH):  # a per-client sum of each column
                states[:, e, c] = np.bincount(inverse, weights=per_reports[:, e, c], minlength=uniq.size)
        self._merge_clients(acc, uniq, states)
        if self.client_sample is not None:   # each client's c + 1 reports of smallest rank, one state each
            self._merge_sample(acc, [(keys, ranks, per_reports)])

    def _merge_sample(self, acc: WindowAccumulator, parts) -> None:
        """``acc``'s client sample and ``parts`` (``(owner, rank, states)`` each) cut to the bottom
        ``c + 1`` per client by rank: the bottom of a union is the bottom of the parts' bottoms. Sample
        arrays are replaced, never written in place, so an accumulator may share a part's arrays (a
        settled accumulator merged into an empty one keeps them as they are, without a copy)."""
        if acc.sample_owner.size == 0 and len(parts) == 1:
            owner, rank, states = parts[0]
        else:
            owner = np.concatenate([acc.sample_owner] + [o for o, _, _ in parts])
            rank = np.concatenate([acc.sample_rank] + [r for _, r, _ in parts])
            states = np.concatenate([acc.sample_states] + [s for _, _, s in parts])
        keep = bottom_indices(owner, rank, self.client_sample + 1)
        if keep.size == owner.size and (keep.size == 0 or (keep[0] == 0 and (np.diff(keep) == 1).all())):
            # every entry, in order: the states as they are (a part's, or built for this call), the keys and
            # ranks copied (they may be a caller's block)
            acc.sample_owner, acc.sample_rank, acc.sample_states = owner.copy(), rank.copy(), states
        else:
            acc.sample_owner, acc.sample_rank, acc.sample_states = owner[keep], rank[keep], states[keep]

    @staticmethod
    def _merge_clients(acc: WindowAccumulator, keys: np.ndarray, states: np.ndarray, distinct: bool = True) -> None:
        """Add ``states`` of ``keys`` into ``acc``'s client table: ``keys`` distinct and sorted, or
        (``distinct`` False) the concatenated tables of several accumulators, where a key may repeat."""
        if acc.clients.size == 0 and distinct:
            acc.clients, acc.client_states = keys.copy(), states.copy()
            return
        merged, inverse = np.unique(np.concatenate([acc.clients, keys]), return_inverse=True)
        inverse = inverse.reshape(-1)
        out = np.zeros((merged.size,) + states.shape[1:])
        n_old = acc.clients.size
        out[inverse[:n_old]] += acc.client_states   # acc's keys are distinct: a plain add
        if distinct:
            out[inverse[n_old:]] += states
        else:   # sum the repeated keys' states first (a sort and np.add.reduceat: np.add.at is slow)
            new = inverse[n_old:]
            order = np.argsort(new, kind="stable")
            ordered = new[order]
            starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
            out[ordered[starts]] += np.add.reduceat(states[order], starts, axis=0)
        acc.clients, acc.client_states = merged, out

    def merge(self, accumulators: Iterable[WindowAccumulator], clients: bool = True) -> WindowAccumulator:
        """Merge into the first accumulator, the only one modified, and return it. The client tables
        of all the others are merged in one pass (one sort of every key), so merging many small
        accumulators (a window's released increments) costs no more than merging their union; with
        ``clients`` False they are not merged at all (the first keeps its own), for a sum that only
        rows over reports will read."""
        it = iter(accumulators)
        first = next(it)
        if first.devices is not None:   # open: the union's bottom M per device
            rest = list(it)
            if any(a.devices is None for a in rest):
                raise ValueError("an open accumulator merges only open ones (settle the others' slice first)")
            first.devices = merge_tables([first.devices] + [a.devices for a in rest], self.device_bound)
            return first
        keys, states, samples = [], [], []
        for other in it:
            if other.devices is not None:   # a pending part under a bound, counted as it would be settled
                other = self.settle(other)
            first.device_count += other.device_count
            first.over_bound += other.over_bound
            first.kept = first.kept + other.kept   # uint64 arrays: wraps mod 2^64, per lane
            first.cooc.merge(other.cooc)
            first.extreme_sums += other.extreme_sums
            if other.clients.size and clients:
                keys.append(other.clients)
                states.append(other.client_states)
                if self.client_sample is not None and other.sample_owner.size:
                    samples.append((other.sample_owner, other.sample_rank, other.sample_states))
        if samples:
            self._merge_sample(first, samples)
        if len(keys) == 1:
            self._merge_clients(first, keys[0], states[0])
        elif keys:
            self._merge_clients(first, np.concatenate(keys), np.concatenate(states), distinct=False)
        return first

    def copy(self, acc: WindowAccumulator) -> WindowAccumulator:
        """A new accumulator equal to ``acc`` (``merge`` into a fresh one)."""
        return self.merge([self.create(), acc])

    def client_sums(self, acc: WindowAccumulator, atoms: Sequence[WindowAccumulator] | None = None,
                    min_clients: int = 0, sample: "ClientSample | None" = None) -> list:
        """Per client extreme, ``(estimate, variance)`` summed over the window's clients: each
        client's OR (AND) estimate over all its bits, and its unbiased variance estimate (Hehir Thm 1
        and 3); clients are independent, so the sums estimate the number of clients whose OR (AND)
        is 1 and its variance. ``math.fsum`` is exactly rounded: the result does not depend on the
        order clients arrived in. With a client sample, over the clients of ``atoms`` (the parts
        of ``acc`` rows were published from apart; None: ``acc``) that :func:`sampled_clients` keeps,
        each on its ``c`` reports of smallest rank; ``sample``: that :func:`sampled_clients`, when the
        caller has it already (None: computed here)."""
        out = []
        states = acc.client_states
        if self.client_sample is not None:
            if sample is None:
                sample = sampled_clients([acc] if atoms is None else atoms, self.client_sample, min_clients)
            states = sample.states
        for e, (op, _) in enumerate(self.client_extremes):
            s = states[:, e, :]
            prod_f = ExtremeAccumulator._product(s[:, NEG_F], s[:, LOG_F], s[:, ZEROS_F])
            prod_v = ExtremeAccumulator._product(s[:, NEG_V], s[:, LOG_V], s[:, ZEROS_V])
            estimate = 1.0 - prod_f if op == "or" else prod_f
            out.append((math.fsum(estimate), math.fsum(prod_v - prod_f)))
        return out


def unnamed_reports(acc: WindowAccumulator) -> int:
    """The reports of ``acc`` that name no client (they count in no extreme over clients)."""
    return acc.n - int(round(acc.named_reports))


def client_groups(atoms: Sequence[WindowAccumulator]) -> tuple:
    """``(clients, reports)`` over the union of ``atoms``, disjoint accumulators of one key (the
    increments of reports a window released, :mod:`ldp_marginals.transforms.publication.release`):
    per *group* of clients of one composition (the same numbers of reports in each atom), int64 its
    clients and int64 the reports each of them sent. Clients of one composition are the ones every
    published row treats alike (docs/design.md, section 7); with one atom the composition is the
    client's number of reports. States of version 1, which did not count reports, have NaN counts:
    the caller must refuse them first.

    Exact and O(reports log reports): each client's group is refined atom by atom, the clients of an
    atom taking new group numbers by (former group, reports in the atom)."""
    keys = [a.clients for a in atoms]
    if not any(k.size for k in keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    inverse = inverse.reshape(-1)
    group = np.zeros(int(inverse.max()) + 1, dtype=np.int64)
    total = np.zeros_like(group)
    at = 0
    for acc, k in zip(atoms, keys):
        idx, at = inverse[at:at + k.size], at + k.size
        if idx.size:
            counts = np.rint(acc.client_reports).astype(np.int64)
            _, new = np.unique(np.stack([group[idx], counts], axis=1), axis=0, return_inverse=True)
            group[idx] = group.max() + 1 + new.reshape(-1)
            total[idx] += counts
    _, first, clients = np.unique(group, return_index=True, return_counts=True)
    return clients, total[first]


class ClientSample(NamedTuple):
    """What the client rows take under a client sample of ``c`` reports (:func:`sampled_clients`):
    ``keys`` uint64 (sorted) and ``states`` float64[clients, client extremes, 7] of the clients kept,
    each the sum of the states of its ``c`` reports of smallest rank; ``short`` the clients left out
    for sending fewer than ``c`` reports (or a tie of ranks at the c-th place), ``split`` those left out
    because their composition (kept reports per atom) is shared by fewer than ``min_clients``
    clients; ``left_out`` per atom the *parties* of its reports the client rows do not take: reports
    without a client, and clients with a report there that is not among their kept ``c``."""
    keys: np.ndarray
    states: np.ndarray
    short: int
    split: int
    left_out: list
    by_atom: np.ndarray | None = None   # float64[atoms, rows, 7]: the kept reports' states summed per atom

    @property
    def clients_left_out(self) -> int:
        return self.short + self.split


def sampled_clients(atoms: Sequence[WindowAccumulator], c: int, min_clients: int = 0,
                    fold_row: int | None = None) -> ClientSample:
    """The clients of the union of ``atoms`` (disjoint accumulators of one key, as for
    :func:`client_groups`, in the order they were released) that the client rows take under a sample
    of ``c`` reports, on their first ``c`` reports by (atom, rank): its reports in earlier atoms
    first (so in streaming a client whose ``c`` reports came in the first release keeps them there,
    and late increments split few clients), by rank within an atom (in batch, one atom: the ``c`` of
    smallest rank). A client is kept when it has at least ``c`` reports and its c-th report comes
    strictly before its (c+1)-th (a tie, two reports of an atom stamped in one millisecond, would make
    the choice read something other than metadata); then, of those, the ones whose composition (their kept
    reports per atom) at least ``min_clients`` kept clients share (with one atom: all of them). Every
    kept client then holds exactly ``c`` reports and shares its composition with at least
    ``min_clients`` others, so the rows treat the clients of a composition alike (docs/design.md,
    section 7). Which clients are kept reads only ranks and counts, never bits. ``fold_row``: a row of the
    states holding report profile hashes (a whole-report kind's, :mod:`~ldp_marginals.ldp.kind_client_extremes`),
    each folded with its report's atom before the kept clients' sums."""
    n_ext = atoms[0].client_states.shape[1]
    owner = np.concatenate([a.sample_owner for a in atoms])
    rank = np.concatenate([a.sample_rank for a in atoms])
    states = np.concatenate([a.sample_states for a in atoms]) if owner.size else np.zeros((0, n_ext, STATE_WIDTH))
    atom = np.repeat(np.arange(len(atoms)), [a.sample_owner.size for a in atoms])
    every = unique_inverse(np.concatenate([a.clients for a in atoms]))[0]
    # per client its c + 1 first reports by (atom, rank): earlier atoms first (an atom's own sample holds
    # its c + 1 smallest ranks, so the union's first c + 1 are among them), then by rank
    order = lexsort_order((rank, atom, owner))   # one atom's sample is sorted by (owner, rank) already
    own = owner[order]
    starts = np.flatnonzero(np.r_[True, own[1:] != own[:-1]]) if own.size else np.zeros(0, dtype=np.int64)
    seen = np.diff(np.r_[starts, own.size])
    devices = own[starts]
    position = np.arange(own.size) - np.repeat(starts, seen)
    keep = order[position <= c]
    position = position[position <= c]
    lengths = np.minimum(seen, c + 1)
    starts = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64) if lengths.size else starts
    ok = seen >= c
    full = lengths > c   # has a (c+1)-th candidate: its c-th must come strictly before it
    if keep.size:
        cth = keep[np.minimum(starts + c - 1, keep.size - 1)]
        nxt = keep[np.minimum(starts + c, keep.size - 1)]
        ok &= ~full | (atom[cth] < atom[nxt]) | (rank[cth] < rank[nxt])
    short = int(every.size - np.count_nonzero(ok))
    client = np.repeat(np.arange(devices.size), lengths)
    taken = (position < c) & ok[client]
    idx = keep[taken]
    kept_client = client[taken]              # index into devices, runs of c
    comp = np.bincount(kept_client * len(atoms) + atom[idx], minlength=devices.size * len(atoms)).reshape(
        devices.size, len(atoms)).astype(np.int64)
    split = 0
    if min_clients > 1 and ok.any() and len(atoms) > 1:
        _, group, size = np.unique(comp[ok], axis=0, return_inverse=True, return_counts=True)
        small = np.zeros(devices.size, dtype=bool)
        small[np.flatnonzero(ok)] = size[group.reshape(-1)] < min_clients
        split = int(small.sum())
        ok &= ~small
        keep_taken = ok[kept_client]
        idx, kept_client = idx[keep_taken], kept_client[keep_taken]
    keys = devices[ok]
    out = np.zeros((keys.size, n_ext, STATE_WIDTH))
    kept_states, kept_atom = states[idx], atom[idx]
    if fold_row is not None and idx.size:
        from ldp_marginals.ldp.kind_client_extremes import atom_profiles
        kept_states[:, fold_row, LOG_F] = atom_profiles(kept_states[:, fold_row, LOG_F], kept_atom)
    by_atom = np.zeros((len(atoms), n_ext, STATE_WIDTH))
    np.add.at(by_atom, kept_atom, kept_states)
    if idx.size:
        run = np.flatnonzero(np.r_[True, kept_client[1:] != kept_client[:-1]])
        out = np.add.reduceat(kept_states, run, axis=0)
    left_out = []
    taken_in = comp[ok]   # kept reports of each kept client per atom
    for i, a in enumerate(atoms):
        at = np.searchsorted(keys, a.clients)
        inside = (at < keys.size) & (keys[np.minimum(at, max(keys.size - 1, 0))] == a.clients) if keys.size \
            else np.zeros(a.clients.size, dtype=bool)
        used = np.where(inside, taken_in[np.minimum(at, max(keys.size - 1, 0)), i] if keys.size else 0, 0)
        sent = np.rint(a.client_reports).astype(np.int64)
        left_out.append(unnamed_reports(a) + int(np.count_nonzero(sent > used)))
    return ClientSample(keys, out, short, split, left_out, by_atom)


# -- state that outlives a process: the versioned bytes of ldp_marginals.ldp.versioned -------------
def accumulator_shape(aggregator: "ReportAggregator") -> dict:
    """What a state must match to be read by ``aggregator``: the counted sets, the extremes and (under
    ``privacy.unit: device``) the bound and the rule its ranks follow (a state ranked by another rule
    cannot merge with this one's)."""
    fam = aggregator.family
    shape = {"n_bits": fam.n_bits, "max_order": fam.max_order, "extra": [list(s) for s in fam.extra],
             "extremes": [[op, list(bits)] for op, bits in aggregator.extremes],
             "client_extremes": [[op, list(bits)] for op, bits in aggregator.client_extremes]}
    if aggregator.device_bound is not None:
        shape["max_reports_per_device"] = aggregator.device_bound
        shape["rank_rule"] = RANK_RULE
    if getattr(aggregator, "client_sample", None) is not None:
        shape["reports_per_client"] = aggregator.client_sample
    rows = getattr(aggregator, "client_state_rows", len(aggregator.client_extremes))
    if rows != len(aggregator.client_extremes):   # a whole-report kind's client states hold its reads too
        shape["client_state_rows"] = rows
    shape.update(getattr(aggregator, "shape_extra", {}))   # a channel kind's parameters (ldp/hadamard_reports.py)
    return shape
