"""The per-window accumulator of one collection and key, and the logic that fills it from packed
reports. Combiners contain logic, accumulators contain data: :class:`ReportAggregator` holds the
parameters (counted sets, channels, per-report extremes) and :class:`WindowAccumulator` only the
numbers, so the accumulator stays small when Beam pickles it across a shuffle.

What a window keeps, per key:

- the co-occurrence counts ``c_S`` of every counted set (:mod:`ldp_marginals.ldp.cooccurrence`);
- per OR/AND extreme taken over the bits of one report, the sums over reports of that report's
  estimate and of its unbiased variance estimate (:mod:`ldp_marginals.ldp.extremes`, Hehir Thm 1
  and 3): reports are independent, so the sums estimate the number of reports whose OR (AND) is 1
  and its variance.

Reports added one at a time are buffered and counted in vectorized batches of ``FLUSH_REPORTS``.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ldp_marginals.ldp.channels import ChannelSet
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.ldp.extremes import OPS, ExtremeAccumulator
from ldp_marginals.ldp.sets import SetFamily

FLUSH_REPORTS = 4096  # packed reports buffered before one vectorized count


class WindowAccumulator:
    """Data of one window and key: ``cooc`` (co-occurrence counts), ``extreme_sums``
    float64[n_extremes, 2] (sums over reports of each per-report OR/AND estimate and of its variance
    estimate) and ``pending`` (packed reports not yet counted)."""

    __slots__ = ("cooc", "extreme_sums", "pending")

    def __init__(self, cooc: CooccurrenceAccumulator, n_extremes: int):
        self.cooc = cooc
        self.extreme_sums = np.zeros((n_extremes, 2))
        self.pending = []

    def __getstate__(self):
        return (self.cooc, self.extreme_sums, self.pending)

    def __setstate__(self, state):
        self.cooc, self.extreme_sums, self.pending = state

    @property
    def n(self) -> int:
        """Reports counted (after a flush, every report added)."""
        return self.cooc.n + len(self.pending)


class ReportAggregator:
    """Fills :class:`WindowAccumulator` s of one collection.

    ``family``: the counted sets; ``channels``: one ``(p, q)`` per bit; ``extremes``: ``(op, bits)``
    per OR/AND taken over the bits of each report (``op`` in ``or``, ``and``).
    """

    def __init__(self, family: SetFamily, channels: ChannelSet, extremes: Sequence[tuple] = ()):
        if len(channels) != family.n_bits:
            raise ValueError(f"channels must have one channel per bit ({family.n_bits}), got len={len(channels)}")
        self.family = family
        self.channels = channels
        self.extremes = tuple((op, tuple(int(b) for b in bits)) for op, bits in extremes)
        for op, bits in self.extremes:
            if op not in OPS or not bits or not all(0 <= b < family.n_bits for b in bits):
                raise ValueError(f"extremes must be (op in {list(OPS)}, bits of the layout), got extreme={(op, bits)!r}")

    def create(self) -> WindowAccumulator:
        return WindowAccumulator(CooccurrenceAccumulator(self.family), len(self.extremes))

    def add_packed(self, acc: WindowAccumulator, packed: np.ndarray) -> WindowAccumulator:
        """Vectorized: a whole ``(n, n_bytes)`` uint8 block of packed reports at once."""
        bits = unpack_bits(packed, self.family.n_bits)
        acc.cooc.add_bits(bits)
        p, q = self.channels.p, self.channels.q
        for i, (op, cols) in enumerate(self.extremes):
            cols = list(cols)
            per_report = ExtremeAccumulator(op, (bits.shape[0],)).add(bits[:, cols].T, p[cols][:, None],
                                                                       q[cols][:, None])
            acc.extreme_sums[i, 0] += per_report.estimate().sum()
            acc.extreme_sums[i, 1] += per_report.variance().sum()
        return acc

    def add_report(self, acc: WindowAccumulator, packed: bytes) -> WindowAccumulator:
        """One report's packed bits, buffered; counted with the next ``FLUSH_REPORTS``."""
        acc.pending.append(bytes(packed))
        if len(acc.pending) >= FLUSH_REPORTS:
            self.flush(acc)
        return acc

    def flush(self, acc: WindowAccumulator) -> WindowAccumulator:
        """Count the buffered reports."""
        if not acc.pending:
            return acc
        packed = np.frombuffer(b"".join(acc.pending), dtype=np.uint8).reshape(len(acc.pending), -1)
        acc.pending = []
        return self.add_packed(acc, packed)

    def merge(self, accumulators: Iterable[WindowAccumulator]) -> WindowAccumulator:
        """Merge into the first accumulator, the only one modified, and return it."""
        it = iter(accumulators)
        first = self.flush(next(it))
        for other in it:
            first.cooc.merge(other.cooc)
            first.extreme_sums += other.extreme_sums
            first.pending.extend(other.pending)
            if len(first.pending) >= FLUSH_REPORTS:
                self.flush(first)
        return first
