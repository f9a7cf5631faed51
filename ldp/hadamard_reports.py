"""Hadamard sampling as a channel kind of the job: its reports on the wire, the job's accumulator of
them, and the window's estimates (marginals and tables) from it. The mechanism and its estimator are
:mod:`ldp_marginals.ldp.hadamard`; this module adapts them to the job's contracts.

Wire format (the ``bits`` of a ``NoisyReport`` of a collection with ``channel: {kind: hadamard}``).
With ``T`` the coefficients of orders 1..k (``sum_{j<=k} C(d, j)``) and ``B = T.bit_length()``, a
report is ``m`` slots of ``B + 1`` bits each, slot ``j`` at bits ``j (B + 1) ...``: the coefficient's
family index ``a`` in ``1..T`` (``B`` bits, least significant first) then its randomized parity
(1 odd). Bits are packed as every report's: bit ``i`` is ``(bits[i // 8] >> (i % 8)) & 1``, the bits
past ``m (B + 1)`` zero. The report's length is ``ceil(m (B + 1) / 8)`` bytes (1 byte for d = 7,
k = 3, m = 1); an index 0 or above ``T`` is a ``bad_coefficient`` dead letter.

Accumulator. The job keeps the same :class:`~ldp_marginals.ldp.aggregate.WindowAccumulator` as for
per-bit channels, over ``2T`` *virtual bits* counted at order 1: virtual bit ``a - 1`` is "a slot
drew coefficient a" and ``T + a - 1`` "a slot drew a and sent odd", so its counts are ``N`` then
``n_a`` (``drawn``) then ``o_a`` (``odd``) of :class:`~ldp_marginals.ldp.hadamard.HadamardAccumulator`.
They are sums over reports: merging is addition, and every published field is a function of the
released sum, as the per-bit counts are (the publication rule's atoms apply unchanged). The coders,
the versioned state and the combiners see an ordinary accumulator.

Estimates (:func:`window_marginals`): for each set S of 1..k bits, the count of reports whose bits
are all 1 on S, ``N pi_S(1..1) = N 2^-|S| sum_{a subset S} (-1)^|a| theta_a``, and its variance
``N^2 h^T Cov(theta_{a subset S}) h / 4^|S|`` (``h_a = (-1)^|a|``; the coefficients' covariance of
:meth:`~ldp_marginals.ldp.hadamard.HadamardEstimate.coefficient_covariance`, plugged in).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ldp_marginals.ldp.aggregate import WindowAccumulator
from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.ldp.hadamard import (
    HadamardAccumulator,
    HadamardEstimate,
    HadamardSampling,
    checked_slots,
    estimate_hadamard,
    randomize_hadamard,
)
from ldp_marginals.ldp.intervals import normal_interval
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.whole_report import WholeReportAggregator

KIND = "hadamard"   # the channel kind's name in configs, client specs and descriptions


@dataclass(frozen=True)
class HadamardFormat:
    """The wire format of one Hadamard-sampling collection's reports (module docstring)."""

    mechanism: HadamardSampling

    @property
    def index_bits(self) -> int:
        return int(self.mechanism.n_coefficients).bit_length()

    @property
    def slot_bits(self) -> int:
        return self.index_bits + 1

    @property
    def n_bits(self) -> int:
        return self.mechanism.slots * self.slot_bits

    @property
    def n_bytes(self) -> int:
        return (self.n_bits + 7) // 8

    def pack(self, indices, parities) -> np.ndarray:
        """``(n, m)`` family indices (1..T) and parities (0/1) -> ``(n, n_bytes)`` uint8 reports."""
        idx, par = (a.astype(np.int64) for a in checked_slots(self.mechanism, indices, parities))
        m, b = self.mechanism.slots, self.index_bits
        bits = np.zeros((idx.shape[0], self.n_bits), dtype=np.uint8)
        for j in range(m):
            at = j * self.slot_bits
            bits[:, at:at + b] = (idx[:, j:j + 1] >> np.arange(b)) & 1
            bits[:, at + b] = par[:, j]
        return np.packbits(bits, axis=1, bitorder="little")

    def unpack(self, packed) -> tuple:
        """``(n, n_bytes)`` reports -> ``(indices, parities)``, each ``(n, m)`` int64 (indices not checked:
        :meth:`bad_index`)."""
        bits = unpack_bits(np.atleast_2d(np.asarray(packed, dtype=np.uint8)), self.n_bits).astype(np.int64)
        b, m = self.index_bits, self.mechanism.slots
        slots = bits.reshape(bits.shape[0], m, self.slot_bits)
        indices = (slots[:, :, :b] << np.arange(b)).sum(axis=2)
        return indices, slots[:, :, b]

    def bad_index(self, packed) -> np.ndarray:
        """Per report (padding already checked), True where a slot names no coefficient (0 or above T)."""
        arr = np.atleast_2d(np.asarray(packed, dtype=np.uint8))
        if arr.shape[0] == 0:
            return np.zeros(0, dtype=bool)
        indices, _ = self.unpack(arr)
        return ((indices < 1) | (indices > self.mechanism.n_coefficients)).any(axis=1)


def encode_reports(true_bits, mechanism: HadamardSampling, rng=None) -> np.ndarray:
    """Simulated devices: true 0/1 bits ``(n, d)`` -> packed reports ``(n, n_bytes)`` (``rng`` a seeded
    ``numpy.random.Generator``; None: the OS CSPRNG). The client of record is
    :mod:`ldp_marginals.ldp.hadamard_client`."""
    indices, parities = randomize_hadamard(np.atleast_2d(true_bits), mechanism, rng)
    return HadamardFormat(mechanism).pack(indices, parities)


def cell_variance_per_report(mechanism: HadamardSampling, order: int) -> float:
    """N times the variance of one cell of an ``order``-bit table (the all-ones cell is a marginal), at
    every coefficient 0 as N grows: ``4^-o sum_{b subset K, b != {}} (c^2 - w_b) / (m w_b)``, the table's
    trace (:meth:`~ldp_marginals.ldp.hadamard.HadamardSampling.table_variance_per_report`) over its ``2^o``
    cells, which all have it. The figure ``plan`` gives for this kind (its half-widths at N reports)."""
    return mechanism.table_variance_per_report(order) / float(1 << order)


class HadamardAggregator(WholeReportAggregator):
    """Fills the job's accumulators of a Hadamard-sampling collection (module docstring): counts of
    ``2T`` virtual bits at order 1; under a device bound each device's kept reports
    (:mod:`ldp_marginals.ldp.whole_report`); with extremes over clients, each client's running products
    (:mod:`ldp_marginals.ldp.kind_client_extremes`)."""

    kind = KIND

    def __init__(self, mechanism: HadamardSampling, device_bound: int | None = None, collection_key: int = 0,
                 client_extremes=(), client_sample: int | None = None):
        super().__init__(2 * mechanism.n_coefficients, mechanism, HadamardFormat(mechanism), device_bound,
                         collection_key, client_extremes, client_sample)

    def add_packed(self, acc: WindowAccumulator, packed, client_keys=None, named=None,
                   ranks=None) -> WindowAccumulator:
        """Vectorized: a block of ``(n, n_bytes)`` reports (indices checked by the readers first)."""
        indices, parities = self.format.unpack(packed)
        t = self.mechanism.n_coefficients
        if indices.size and (indices.min() < 1 or indices.max() > t):
            raise ValueError(f"indices must be in [1, {t}], got min={indices.min()}, max={indices.max()}")
        counts = acc.cooc.counts
        flat = indices.ravel()
        counts[0] += indices.shape[0]
        counts[1:t + 1] += np.bincount(flat, minlength=t + 1)[1:]
        counts[t + 1:] += np.bincount(flat, weights=parities.ravel(), minlength=t + 1)[1:].astype(np.int64)
        self.add_client_terms(acc, indices, parities, client_keys, named, ranks)
        return acc

    def read_totals(self, acc: WindowAccumulator) -> np.ndarray:
        """Per relevant coefficient (family index), the slots of ``acc``'s reports that drew it."""
        return acc.cooc.counts[list(self.terms.keys)].astype(np.float64)

    def coefficient_counts(self, acc: WindowAccumulator) -> HadamardAccumulator:
        """The window's ``(N, drawn, odd)`` as the mechanism's own accumulator."""
        t = self.mechanism.n_coefficients
        out = HadamardAccumulator(self.mechanism)
        counts = acc.cooc.counts
        out.n_reports = int(counts[0])
        out.drawn = np.concatenate([[0], counts[1:t + 1]])
        out.odd = np.concatenate([[0], counts[t + 1:]])
        return out

    def marginals(self, acc: WindowAccumulator) -> "WindowMarginals":
        """:func:`window_marginals` of ``acc``."""
        return window_marginals(self, acc)

    @property
    def shape_extra(self) -> dict:
        """What a saved state must also match (beside the virtual family): the mechanism."""
        m = self.mechanism
        return {"kind": KIND, "bits": m.n_bits, "order": m.max_order, "epsilon": m.epsilon, "slots": m.slots,
                "weights": m.weights}


@dataclass(frozen=True)
class WindowMarginals:
    """The marginals of a window, in the shape the marginal rows read (as
    :class:`~ldp_marginals.ldp.tmdh.TMDHEstimate`): per set of ``family`` the estimated count of
    reports whose bits are all 1 on it (``means``; the empty set: N) and its variance."""

    n: int
    family: SetFamily
    means: np.ndarray
    variances: np.ndarray
    estimate: HadamardEstimate

    def intervals(self, level: float = 0.95):
        return normal_interval(self.means, self.variances, level)


def _all_ones(estimate: HadamardEstimate, s: tuple) -> tuple:
    """``(pi, Var pi)`` of the frequency of reports whose bits are all 1 on ``s``."""
    subsets = [sub for r in range(len(s) + 1) for sub in combinations(s, r)]
    h = np.array([(-1.0) ** len(sub) for sub in subsets])
    theta = np.array([estimate.theta[estimate.mechanism.family.index(sub)] if sub else 1.0 for sub in subsets])
    scale = float(1 << len(s))
    cov = estimate.coefficient_covariance(subsets)
    return float(h @ theta) / scale, float(h @ cov @ h) / (scale * scale)


def window_marginals(aggregator: HadamardAggregator, acc: WindowAccumulator) -> WindowMarginals:
    """Every set of 1..k bits' all-ones count and variance from the window's accumulator (module
    docstring). A coefficient no slot drew gives a NaN estimate and an infinite variance."""
    est = estimate_hadamard(aggregator.coefficient_counts(acc))
    family = est.mechanism.family
    n = est.n_reports
    means, variances = np.empty(len(family)), np.empty(len(family))
    means[0], variances[0] = n, 0.0
    for i in range(1, len(family)):
        pi, var = _all_ones(est, family[i])
        means[i], variances[i] = n * pi, n * n * var
    return WindowMarginals(n, family, means, variances, est)
