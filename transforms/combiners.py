"""CombineFns: thin adapters over ``ldp/``. Combiners contain logic, accumulators contain data."""
from __future__ import annotations

import apache_beam as beam
import numpy as np

from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.ldp.extremes import ExtremeAccumulator, union_from_state

FLUSH_REPORTS = 4096  # packed reports buffered before one vectorized count


def _merge_into_first(accumulators):
    """Merge mergeable ldp states; Beam's contract: only the first may be modified and returned."""
    it = iter(accumulators)
    first = next(it)
    for other in it:
        first.merge(other)
    return first


class WindowAccumulator:
    """Accumulator of one collection's window and key.

    Data: ``cooc`` (co-occurrence counts), ``extreme_sums`` float64[n_extremes, 2] (sums over reports
    of each per-report OR/AND estimate and of its variance estimate) and ``pending`` packed reports
    not yet counted (flushed in vectorized batches of ``FLUSH_REPORTS``).
    """

    __slots__ = ("cooc", "extreme_sums", "pending")

    def __init__(self, cooc, n_extremes):
        self.cooc = cooc
        self.extreme_sums = np.zeros((n_extremes, 2))
        self.pending = []

    def __getstate__(self):
        return (self.cooc, self.extreme_sums, self.pending)

    def __setstate__(self, state):
        self.cooc, self.extreme_sums, self.pending = state


class CollectionCombineFn(beam.CombineFn):
    """Adapts ``ldp.cooccurrence`` (and per-report ``ldp.extremes``) to Beam for one collection.

    Input: packed report bits (``bytes``). Output: the flushed :class:`WindowAccumulator`.
    """

    def __init__(self, config):
        self.config = config

    def create_accumulator(self):
        return WindowAccumulator(CooccurrenceAccumulator(self.config.family), len(self.config.report_extremes))

    def _flush(self, acc):
        if not acc.pending:
            return acc
        packed = np.frombuffer(b"".join(acc.pending), dtype=np.uint8).reshape(len(acc.pending), -1)
        acc.pending = []
        return self.add_packed(acc, packed)

    def add_packed(self, acc, packed):
        """Vectorized: a whole ``(n, n_bytes)`` block of packed reports at once."""
        bits = unpack_bits(packed, self.config.layout.n_bits)
        acc.cooc.add_bits(bits)
        channels = self.config.channels
        for i, ext in enumerate(self.config.report_extremes):
            cols = list(ext.bits)
            per_report = ExtremeAccumulator(ext.op, (bits.shape[0],)).add(
                bits[:, cols].T, channels.p[cols][:, None], channels.q[cols][:, None])
            acc.extreme_sums[i, 0] += per_report.estimate().sum()
            acc.extreme_sums[i, 1] += per_report.variance().sum()
        return acc

    def add_input(self, acc, element):
        """A report's packed bits, or a pre-aggregated :class:`WindowAccumulator` (block reader)."""
        if isinstance(element, WindowAccumulator):
            return self.merge_accumulators([acc, element])
        acc.pending.append(bytes(element))
        if len(acc.pending) >= FLUSH_REPORTS:
            self._flush(acc)
        return acc

    def merge_accumulators(self, accumulators):
        it = iter(accumulators)
        first = self._flush(next(it))
        for other in it:
            first.cooc.merge(other.cooc)
            first.extreme_sums += other.extreme_sums
            first.pending.extend(other.pending)
            if len(first.pending) >= FLUSH_REPORTS:
                self._flush(first)
        return first

    def compact(self, acc):
        return self._flush(acc)

    def extract_output(self, acc):
        return self._flush(acc)


class ClientExtremesCombineFn(beam.CombineFn):
    """Per (key, client): one OR/AND state per client extreme over all the client's reports in the
    window (``ldp.extremes``). Output: per extreme ``(estimate, variance)`` of that client."""

    def __init__(self, config):
        self.config = config

    def create_accumulator(self):
        return [ExtremeAccumulator(e.op) for e in self.config.client_extremes]

    def add_input(self, acc, report_bits):
        bits = unpack_bits(np.frombuffer(report_bits, np.uint8), self.config.layout.n_bits)
        ch = self.config.channels
        for state, ext in zip(acc, self.config.client_extremes):
            cols = list(ext.bits)
            state.add(bits[cols], ch.p[cols], ch.q[cols])
        return acc

    def merge_accumulators(self, accumulators):
        it = iter(accumulators)
        first = next(it)
        for other in it:
            for a, b in zip(first, other):
                a.merge(b)
        return first

    def extract_output(self, acc):
        return [(float(s.estimate()), float(s.variance())) for s in acc]


class ExtremeCombineFn(beam.CombineFn):
    """OR or AND over a stream of noisy bits ``(bit, p, q)`` with their own channels (Hehir).
    Output ``(estimate, variance, n_bits)``."""

    def __init__(self, op: str):
        ExtremeAccumulator(op)  # validates op
        self.op = op

    def create_accumulator(self):
        return ExtremeAccumulator(self.op)

    def add_input(self, acc, element):
        bit, p, q = element
        return acc.add_one(bit, p, q)

    def merge_accumulators(self, accumulators):
        return _merge_into_first(accumulators)

    def extract_output(self, acc):
        return float(acc.estimate()), float(acc.variance()), int(acc.n)


class UnionSizeCombineFn(beam.CombineFn):
    """Size of a union from noisy bitmap sketch reports (packed bytes of ``m`` positions, each with
    channel ``(p, q)``): per-position OR states summed (Hehir sec. 1). Output ``(estimate, variance)``."""

    def __init__(self, m: int, p, q):
        self.m = m
        self.p = np.broadcast_to(np.asarray(p, dtype=float), (m,)).copy()
        self.q = np.broadcast_to(np.asarray(q, dtype=float), (m,)).copy()
        ExtremeAccumulator("or", (m,)).add(np.zeros((0, m), np.uint8), self.p, self.q)  # validates channels

    def create_accumulator(self):
        return ExtremeAccumulator("or", (self.m,))

    def add_input(self, acc, sketch):
        bits = unpack_bits(np.frombuffer(bytes(sketch), np.uint8), self.m)
        return acc.add(bits[None, :], self.p, self.q)

    def merge_accumulators(self, accumulators):
        return _merge_into_first(accumulators)

    def extract_output(self, acc):
        return union_from_state(acc)


class EstimateExtremes(beam.PTransform):
    """``(key, (bit, p, q))`` -> ``(key, (estimate, variance, n_bits))`` of the OR or AND per key."""

    def __init__(self, op: str):
        super().__init__()
        self.op = op

    def expand(self, pcoll):
        return pcoll | "CombineExtremes" >> beam.CombinePerKey(ExtremeCombineFn(self.op))


class EstimateUnionSize(beam.PTransform):
    """Noisy bitmap sketches (packed bytes) -> one ``(estimate, variance)`` of their union's size."""

    def __init__(self, m: int, p, q):
        super().__init__()
        self.fn = UnionSizeCombineFn(m, p, q)

    def expand(self, pcoll):
        return pcoll | "CombineUnion" >> beam.CombineGlobally(self.fn)
