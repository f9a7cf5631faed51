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
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.ldp.subset_rr import SubsetRR

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
