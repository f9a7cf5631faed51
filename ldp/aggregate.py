"""The per-window accumulator of one collection and key, and the logic that fills it from packed
reports. Combiners contain logic, accumulators contain data: :class:`ReportAggregator` holds the
parameters (counted sets, channels, extremes) and :class:`WindowAccumulator` only the numbers, so
the accumulator stays small when Beam pickles it across a shuffle.

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
  million clients in one window); a collision merges two clients' states.

Reports are added as packed ``(n, n_bytes)`` arrays, one vectorized pass per batch.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from ldp_marginals.ldp.channels import ChannelSet
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.ldp.extremes import OPS, ExtremeAccumulator, _factors
from ldp_marginals.ldp.sets import SetFamily

# the columns of one client's state per extreme: estimator product, then variance product
NEG_F, LOG_F, ZEROS_F, NEG_V, LOG_V, ZEROS_V = range(6)
STATE_WIDTH = 6


def client_key(token: str) -> int:
    """The 64-bit key of a client token: FNV-1a over its UTF-8 bytes, xor its byte length (the same
    function the compiled block decoder applies to the token's bytes, ``avro_blocks.span_hashes``)."""
    data = token.encode("utf-8")
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h ^ len(data)


class WindowAccumulator:
    """Data of one window and key: ``cooc`` (co-occurrence counts), ``extreme_sums``
    float64[n_extremes, 2] (sums over reports of each per-report OR/AND estimate and of its variance
    estimate), ``clients`` uint64[n_clients] (sorted client keys), ``client_states``
    float64[n_clients, n_client_extremes, 6] (each client's estimator states, columns ``NEG_F`` ...)
    and ``held`` (reports counted but held back from publication by the guard, not in the rest)."""

    __slots__ = ("cooc", "extreme_sums", "clients", "client_states", "held")

    def __init__(self, cooc: CooccurrenceAccumulator, n_extremes: int, n_client_extremes: int = 0):
        self.held = 0  # reports counted but held back from publication (slices below the guard)
        self.cooc = cooc
        self.extreme_sums = np.zeros((n_extremes, 2))
        self.clients = np.zeros(0, dtype=np.uint64)
        self.client_states = np.zeros((0, n_client_extremes, STATE_WIDTH))

    def __getstate__(self):
        return (self.cooc, self.extreme_sums, self.clients, self.client_states, self.held)

    def __setstate__(self, state):
        self.cooc, self.extreme_sums, self.clients, self.client_states, self.held = state

    @property
    def n(self) -> int:
        """Reports counted."""
        return self.cooc.n

    @property
    def n_clients(self) -> int:
        return int(self.clients.shape[0])


def _log_states(op: str, bits: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per report, the state of one extreme over its bits ``(n, m)``: ``(n, 6)`` in the columns above."""
    f, v = _factors(op, bits.astype(np.float64), p, q)
    out = np.empty((bits.shape[0], STATE_WIDTH))
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
    taken over all of a client's reports (``op`` in ``or``, ``and``).
    """

    def __init__(self, family: SetFamily, channels: ChannelSet, extremes: Sequence[tuple] = (),
                 client_extremes: Sequence[tuple] = ()):
        if len(channels) != family.n_bits:
            raise ValueError(f"channels must have one channel per bit ({family.n_bits}), got len={len(channels)}")
        self.family = family
        self.channels = channels
        self.extremes = self._checked(extremes, "extremes")
        self.client_extremes = self._checked(client_extremes, "client_extremes")

    def _checked(self, extremes, name: str) -> tuple:
        out = tuple((op, tuple(int(b) for b in bits)) for op, bits in extremes)
        for op, bits in out:
            if op not in OPS or not bits or not all(0 <= b < self.family.n_bits for b in bits):
                raise ValueError(f"{name} must be (op in {list(OPS)}, bits of the layout), got extreme={(op, bits)!r}")
        return out

    def create(self) -> WindowAccumulator:
        return WindowAccumulator(CooccurrenceAccumulator(self.family), len(self.extremes), len(self.client_extremes))

    def add_packed(self, acc: WindowAccumulator, packed: np.ndarray, client_keys: np.ndarray | None = None,
                   named: np.ndarray | None = None) -> WindowAccumulator:
        """Vectorized: a whole ``(n, n_bytes)`` uint8 block of packed reports at once. With client
        extremes, ``client_keys`` uint64 gives each report's client (:func:`client_key`) where
        ``named`` is true; a report without a client counts in no client extreme."""
        bits = unpack_bits(packed, self.family.n_bits)
        acc.cooc.add_bits(bits)
        p, q = self.channels.p, self.channels.q
        for i, (op, cols) in enumerate(self.extremes):
            cols = list(cols)
            per_report = ExtremeAccumulator(op, (bits.shape[0],)).add(bits[:, cols].T, p[cols][:, None],
                                                                       q[cols][:, None])
            acc.extreme_sums[i, 0] += per_report.estimate().sum()
            acc.extreme_sums[i, 1] += per_report.variance().sum()
        if self.client_extremes and client_keys is not None:
            self._add_clients(acc, bits, np.asarray(client_keys, dtype=np.uint64), named)
        return acc

    def _add_clients(self, acc, bits, keys, named):
        if named is not None:
            bits, keys = bits[named], keys[named]
        if keys.size == 0:
            return
        uniq, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        states = np.zeros((uniq.size, len(self.client_extremes), STATE_WIDTH))
        p, q = self.channels.p, self.channels.q
        for e, (op, cols) in enumerate(self.client_extremes):
            cols = list(cols)
            per_report = _log_states(op, bits[:, cols], p[cols], q[cols])
            for c in range(STATE_WIDTH):  # a per-client sum of each column
                states[:, e, c] = np.bincount(inverse, weights=per_report[:, c], minlength=uniq.size)
        self._merge_clients(acc, uniq, states)

    @staticmethod
    def _merge_clients(acc: WindowAccumulator, keys: np.ndarray, states: np.ndarray) -> None:
        """Add ``states`` of the distinct sorted ``keys`` into ``acc``'s client table."""
        if acc.clients.size == 0:
            acc.clients, acc.client_states = keys.copy(), states.copy()
            return
        merged, inverse = np.unique(np.concatenate([acc.clients, keys]), return_inverse=True)
        inverse = inverse.reshape(-1)
        out = np.zeros((merged.size,) + states.shape[1:])
        n_old = acc.clients.size
        out[inverse[:n_old]] += acc.client_states   # each side's keys are distinct: plain adds
        out[inverse[n_old:]] += states
        acc.clients, acc.client_states = merged, out

    def merge(self, accumulators: Iterable[WindowAccumulator]) -> WindowAccumulator:
        """Merge into the first accumulator, the only one modified, and return it."""
        it = iter(accumulators)
        first = next(it)
        for other in it:
            first.cooc.merge(other.cooc)
            first.extreme_sums += other.extreme_sums
            first.held += other.held
            if other.clients.size:
                self._merge_clients(first, other.clients, other.client_states)
        return first

    def copy(self, acc: WindowAccumulator) -> WindowAccumulator:
        """A new accumulator equal to ``acc`` (``merge`` into a fresh one)."""
        return self.merge([self.create(), acc])

    def client_sums(self, acc: WindowAccumulator) -> list:
        """Per client extreme, ``(estimate, variance)`` summed over the window's clients: each
        client's OR (AND) estimate over all its bits, and its unbiased variance estimate (Hehir Thm 1
        and 3); clients are independent, so the sums estimate the number of clients whose OR (AND)
        is 1 and its variance. ``math.fsum`` is exactly rounded: the result does not depend on the
        order clients arrived in."""
        out = []
        states = acc.client_states
        for e, (op, _) in enumerate(self.client_extremes):
            s = states[:, e, :]
            prod_f = ExtremeAccumulator._product(s[:, NEG_F], s[:, LOG_F], s[:, ZEROS_F])
            prod_v = ExtremeAccumulator._product(s[:, NEG_V], s[:, LOG_V], s[:, ZEROS_V])
            estimate = 1.0 - prod_f if op == "or" else prod_f
            out.append((math.fsum(estimate), math.fsum(prod_v - prod_f)))
        return out
