"""Subset randomized response as a channel kind of the job: its reports on the wire, the job's accumulator
of them, and the window's estimates (marginals and tables) from it. The mechanism and its estimator are
:mod:`ldp_marginals.ldp.subset_rr`; this module adapts them to the job's contracts.

Wire format (the ``bits`` of a ``NoisyReport`` of a collection with ``channel: {kind: subset}``). With
``d`` bits and width ``s``, a report is ``d + s`` bits: bits ``0..d-1`` the subset mask (bit i: position
i is in the subset), then bits ``d..d+s-1`` the sent pattern, bit ``d + j`` the sent value of the
subset's j-th position (ascending). Bits are packed as every report's: bit ``i`` is
``(bits[i // 8] >> (i % 8)) & 1``, the bits past ``d + s`` zero. The report's length is
``ceil((d + s) / 8)`` bytes (2 bytes for d = 7, s = 6); a subset mask that does not hold exactly ``s``
bits is a ``bad_subset`` dead letter (a pattern bit cannot fall outside the subset: the pattern holds
only the subset's values).

Accumulator. The job keeps the same :class:`~ldp_marginals.ldp.aggregate.WindowAccumulator` as for
per-bit channels, over ``V = sum_{o<=k} C(d, o) 2^o`` *virtual bits* counted at order 1: its counts
are ``N`` then, order by order (``o = 1..k``), table by table (``family.members(o)`` order), cell by cell,
the reports whose subset held the table and sent the cell: ``counts[o]`` of
:class:`~ldp_marginals.ldp.subset_rr.SubsetAccumulator`, flattened. They are sums over reports: merging
is addition, and every published field is a function of the released sum, as the per-bit counts are
(the publication rule's atoms apply unchanged). The coders, the versioned state and the combiners see
an ordinary accumulator; the state's shape records the mechanism (:attr:`SubsetAggregator.shape_extra`).

Estimates (:func:`window_marginals`): for each set K of 1..k bits, the count of reports whose bits are
all 1 on K, ``N pi_K(1..1)``, and its variance ``N^2 Cov(pi_K)[1..1, 1..1]``, with ``pi_K`` and its
closed-form covariance (plugged in) those of :class:`~ldp_marginals.ldp.subset_rr.SubsetEstimate`; a
table no report's subset held gives a NaN estimate and an infinite variance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp_marginals.ldp.aggregate import WindowAccumulator
from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.ldp.hadamard_reports import WindowMarginals
from ldp_marginals.ldp.subset_rr import (
    SubsetAccumulator,
    SubsetRR,
    estimate_subset,
    holding_share,
    randomize_subset,
)
from ldp_marginals.ldp.whole_report import WholeReportAggregator

KIND = "subset"   # the channel kind's name in configs, client specs and descriptions


@dataclass(frozen=True)
class SubsetFormat:
    """The wire format of one subset-RR collection's reports (module docstring)."""

    mechanism: SubsetRR

    @property
    def n_bits(self) -> int:
        return self.mechanism.n_bits + self.mechanism.width

    @property
    def n_bytes(self) -> int:
        return (self.n_bits + 7) // 8

    def pack(self, subsets, patterns) -> np.ndarray:
        """``(n,)`` subset masks and patterns (as :func:`~ldp_marginals.ldp.subset_rr.randomize_subset`
        gives them: each pattern bit at its own position) -> ``(n, n_bytes)`` uint8 reports."""
        d, s = self.mechanism.n_bits, self.mechanism.width
        sub = np.atleast_1d(np.asarray(subsets, dtype=np.int64))
        pat = np.atleast_1d(np.asarray(patterns, dtype=np.int64))
        if sub.shape != pat.shape or sub.ndim != 1:
            raise ValueError(f"subsets and patterns must both have shape (n,), got {sub.shape} and {pat.shape}")
        held = (sub[:, None] >> np.arange(d, dtype=np.int64)) & 1
        if sub.size and ((sub < 0).any() or (sub >> d).any() or (held.sum(axis=1) != s).any() or (pat & ~sub).any()):
            raise ValueError(f"subsets must be masks of width={s} of {d} bits and patterns inside them")
        bits = np.zeros((sub.size, self.n_bits), dtype=np.uint8)
        bits[:, :d] = held
        if sub.size:
            pos = np.nonzero(held)[1].reshape(sub.size, s)
            bits[:, d:] = (pat[:, None] >> pos) & 1
        return np.packbits(bits, axis=1, bitorder="little")

    def unpack(self, packed) -> tuple:
        """``(n, n_bytes)`` reports (padding and :meth:`bad_subset` checked first) -> ``(subsets, patterns)``,
        each ``(n,)`` int64, the pattern's bits at their own positions."""
        d, s = self.mechanism.n_bits, self.mechanism.width
        bits = unpack_bits(np.atleast_2d(np.asarray(packed, dtype=np.uint8)), self.n_bits).astype(np.int64)
        held = bits[:, :d]
        subsets = (held << np.arange(d, dtype=np.int64)).sum(axis=1)
        patterns = np.zeros(bits.shape[0], dtype=np.int64)
        if bits.shape[0]:
            pos = np.nonzero(held)[1].reshape(bits.shape[0], s)
            patterns = (bits[:, d:] << pos).sum(axis=1)
        return subsets, patterns

    def bad_subset(self, packed) -> np.ndarray:
        """Per report (length and padding already checked), True where the subset mask does not hold exactly
        ``width`` bits."""
        arr = np.atleast_2d(np.asarray(packed, dtype=np.uint8))
        if arr.shape[0] == 0:
            return np.zeros(0, dtype=bool)
        bits = unpack_bits(arr, self.n_bits)
        return bits[:, :self.mechanism.n_bits].sum(axis=1) != self.mechanism.width


def encode_reports(true_bits, mechanism: SubsetRR, rng=None) -> np.ndarray:
    """Simulated devices: true 0/1 bits ``(n, d)`` -> packed reports ``(n, n_bytes)`` (``rng`` a seeded
    ``numpy.random.Generator``; None: the OS CSPRNG). The client of record is
    :mod:`ldp_marginals.ldp.subset_client`."""
    subsets, patterns = randomize_subset(np.atleast_2d(true_bits), mechanism, rng)
    return SubsetFormat(mechanism).pack(subsets, patterns)


def cell_variance_per_report(mechanism: SubsetRR, order: int) -> float:
    """N times the largest variance of one cell of an ``order``-bit table (the all-ones cell is a marginal) as
    N grows, over the cell's true frequency pi: with ``n_K = f_o N`` reports holding the table and the share
    ``P = q' + delta pi`` the cell is sent, the covariance of :mod:`~ldp_marginals.ldp.subset_rr` gives
    ``g(pi) = P (1 - P) / (f_o delta^2) - pi (1 - pi)``, a concave (at ``f_o = 1`` linear) quadratic in pi
    whose maximum on [0, 1] is at its stationary point clipped to [0, 1]. Not the table's trace over its
    cells (:meth:`~ldp_marginals.ldp.subset_rr.SubsetRR.table_variance_per_report`, largest at the uniform
    table): one cell is at its worst near ``pi = 1/2``. The figure ``plan`` and the dashboard give per cell."""
    f = holding_share(mechanism.n_bits, mechanism.width, order)
    p1, q1 = mechanism.projected(order)
    delta = p1 - q1

    def g(pi):
        share = q1 + delta * pi
        return share * (1 - share) / (f * delta * delta) - pi * (1 - pi)

    candidates = [0.0, 1.0]
    if f < 1:   # g'(pi) = (1 - 2 q' - 2 delta pi) / (f delta) - 1 + 2 pi = 0
        candidates.append(min(1.0, max(0.0, (1 - (1 - 2 * q1) / (f * delta)) / (2 - 2 / f))))
    return max(g(pi) for pi in candidates)


def table_cells(mechanism: SubsetRR) -> int:
    """``V``: the counts of a window beside N (module docstring)."""
    fam = mechanism.family
    return sum(fam.members(o).shape[0] << o for o in range(1, mechanism.max_order + 1))


def sets_per_report(mechanism: SubsetRR) -> int:
    """The tables one report's subset holds, each a count the job adds to: ``sum_{o<=k} C(s, o)``."""
    return sum(math.comb(mechanism.width, o) for o in range(1, mechanism.max_order + 1))


_ELEMENTS = 1 << 17   # tables per vectorized pass of the job's accumulator (bounds its memory, ~10 MiB)


class SubsetAggregator(WholeReportAggregator):
    """Fills the job's accumulators of a subset-RR collection (module docstring): counts of ``V`` virtual
    bits at order 1; under a device bound each device's kept reports
    (:mod:`ldp_marginals.ldp.whole_report`); with extremes over clients, each client's running products
    (:mod:`ldp_marginals.ldp.kind_client_extremes`)."""

    kind = KIND

    def __init__(self, mechanism: SubsetRR, device_bound: int | None = None, collection_key: int = 0,
                 client_extremes=(), client_sample: int | None = None):
        self.cells = table_cells(mechanism)
        super().__init__(self.cells, mechanism, SubsetFormat(mechanism), device_bound, collection_key,
                         client_extremes, client_sample)
        self._block = max(1, _ELEMENTS // sets_per_report(mechanism))

    def add_packed(self, acc: WindowAccumulator, packed, client_keys=None, named=None,
                   ranks=None) -> WindowAccumulator:
        """Vectorized: a block of ``(n, n_bytes)`` reports (subsets checked by the readers first)."""
        subsets, patterns = self.format.unpack(packed)
        part = SubsetAccumulator(self.mechanism)
        for start in range(0, subsets.size, self._block):
            part.add(subsets[start:start + self._block], patterns[start:start + self._block])
        counts = acc.cooc.counts
        counts[0] += part.n_reports
        counts[1:] += np.concatenate([c.ravel() for c in part.counts[1:]])
        self.add_client_terms(acc, subsets, patterns, client_keys, named, ranks)
        return acc

    def read_totals(self, acc: WindowAccumulator) -> np.ndarray:
        """Per relevant set (an extreme's bits), the reports of ``acc`` whose subset holds it."""
        counts, fam = self.table_counts(acc).counts, self.mechanism.family
        return np.array([float(counts[len(b)][fam.index(b) - fam.offset(len(b))].sum()) for b in self.terms.keys])

    def table_counts(self, acc: WindowAccumulator) -> SubsetAccumulator:
        """The window's counts as the mechanism's own accumulator."""
        out = SubsetAccumulator(self.mechanism)
        counts = acc.cooc.counts
        out.n_reports = int(counts[0])
        at = 1
        for o in range(1, self.mechanism.max_order + 1):
            size = out.counts[o].size
            out.counts[o] = counts[at:at + size].reshape(out.counts[o].shape)
            at += size
        return out

    def marginals(self, acc: WindowAccumulator) -> WindowMarginals:
        """:func:`window_marginals` of ``acc``."""
        return window_marginals(self, acc)

    @property
    def shape_extra(self) -> dict:
        """What a saved state must also match (beside the virtual family): the mechanism."""
        m = self.mechanism
        return {"kind": KIND, "bits": m.n_bits, "order": m.max_order, "epsilon": m.epsilon, "width": m.width}


def window_marginals(aggregator: SubsetAggregator, acc: WindowAccumulator) -> WindowMarginals:
    """Every set of 1..k bits' all-ones count and variance from the window's accumulator (module
    docstring)."""
    est = estimate_subset(aggregator.table_counts(acc))
    family = est.mechanism.family
    n = est.n_reports
    means, variances = np.empty(len(family)), np.empty(len(family))
    means[0], variances[0] = n, 0.0
    spread = 0.0 if n <= 1 else 1.0 / (n - 1)
    for o in range(1, est.mechanism.max_order + 1):
        ones = (1 << o) - 1
        p1, q1 = est.mechanism.projected(o)
        delta = p1 - q1
        n_k = est.drawn(o).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = est.counts[o][:, ones] / n_k              # the observed share of the all-ones cell
            pi = (share - q1) / delta
            # the all-ones diagonal entry of subset_rr.table_covariance at the plugged-in share
            var = share * (1 - share) / (n_k * delta * delta) - (n_k - 1) / n_k * spread * pi * (1 - pi)
        at = slice(family.offset(o), family.offset(o) + n_k.size)
        means[at] = n * pi
        variances[at] = np.where(n_k > 0, n * n * var, np.inf)
    return WindowMarginals(n, family, means, variances, est)
