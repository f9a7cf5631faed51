"""Marginal sampling with preferential sampling ("MargPS", Cormode, Kulkarni & Srivastava, SIGMOD
2018): the anchor that reports one sampled k-way marginal cell per report.

A device draws one set K of ``k`` bits uniformly among the ``C(d, k)`` and sends its cell
``x_K`` (one of ``D = 2^k``) through generalized randomized response: the true cell with
probability ``p = e^eps / (e^eps + D - 1)``, each other cell with ``q = 1 / (e^eps + D - 1)``.
The report is epsilon-LDP (K does not depend on x).

Accumulator: ``counts[K, z]``, the reports that drew K and sent z (integer sums; merge adds).
Estimate of K's table from its ``n_K`` reports: ``pi_K(z) = (counts[K, z] / n_K - q) / (p - q)``;
a table of fewer bits averages the projections of every drawn table that holds it.

Cell variance, conditional on ``n_K`` and on the true reports (given ``n_K``, K's reports are a
simple random sample without replacement of the N; noise independent per report)::

    Var(pi_K(z)) = (pi p (1-p) + (1-pi) q (1-q)) / (n_K (p-q)^2)  +  (N - n_K) / (n_K (N - 1)) pi (1 - pi)

The paper's i.i.d. form drops the finite-population factor ``(N - n_K)/(N - 1)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.randomizer import SecureUniform


@dataclass(frozen=True)
class MarginalSampling:
    """``n_bits`` bits, tables of ``order`` bits sampled, a whole report ``epsilon``-LDP."""

    n_bits: int
    order: int
    epsilon: float

    def __post_init__(self):
        d = check_int("n_bits", self.n_bits, minimum=1)
        k = check_int("order", self.order, minimum=1)
        if k > d:
            raise ValueError(f"order must be <= n_bits={d}, got order={self.order}")
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))

    @property
    def cells(self) -> int:
        return 1 << self.order

    @property
    def sets(self) -> list:
        return list(combinations(range(self.n_bits), self.order))

    @property
    def p(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + self.cells - 1)

    @property
    def q(self) -> float:
        return 1.0 / (math.exp(self.epsilon) + self.cells - 1)


def randomize_marginal(bits, mechanism: MarginalSampling, rng=None):
    """True 0/1 ``bits`` ``(n, d)`` -> ``(set_index, cell)`` per report (OS CSPRNG when ``rng`` is None)."""
    x = np.atleast_2d(np.asarray(bits))
    if x.shape[1] != mechanism.n_bits:
        raise ValueError(f"bits must have {mechanism.n_bits} columns, got shape={np.shape(bits)}")
    source = SecureUniform() if rng is None else rng
    n, sets, big = x.shape[0], np.array(mechanism.sets), mechanism.cells
    which = np.minimum((source.random(n) * len(sets)).astype(np.int64), len(sets) - 1)
    cell = (x[np.arange(n)[:, None], sets[which]].astype(np.int64) << np.arange(mechanism.order)).sum(axis=1)
    other = (cell + 1 + np.minimum((source.random(n) * (big - 1)).astype(np.int64), big - 2)) % big
    sent = np.where(source.random(n) < mechanism.p, cell, other)
    return which, sent


def count_marginal_reports(which, sent, mechanism: MarginalSampling) -> np.ndarray:
    """The accumulator: ``counts[K, z]`` (int64, ``(C(d, k), 2^k)``); add two by ``+``."""
    counts = np.zeros((len(mechanism.sets), mechanism.cells), dtype=np.int64)
    np.add.at(counts, (np.asarray(which), np.asarray(sent)), 1)
    return counts


def estimate_marginals(counts, mechanism: MarginalSampling) -> np.ndarray:
    """``pi_K`` of every sampled set (rows in :attr:`MarginalSampling.sets` order); NaN rows where
    no report drew K."""
    c = np.asarray(counts, dtype=np.float64)
    n = c.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (c / n - mechanism.q) / (mechanism.p - mechanism.q)


def cell_variance(pi, n_k, n_total: int, mechanism: MarginalSampling) -> np.ndarray:
    """The module docstring's conditional variance of each cell estimate at the true ``pi``."""
    p, q = mechanism.p, mechanism.q
    pi, n_k = np.asarray(pi, dtype=np.float64), np.asarray(n_k, dtype=np.float64)
    noise = (pi * p * (1 - p) + (1 - pi) * q * (1 - q)) / (n_k * (p - q) ** 2)
    sampling = (n_total - n_k) / (n_k * (n_total - 1)) * pi * (1 - pi) if n_total > 1 else 0.0
    return noise + sampling


def lower_tables(tables, mechanism: MarginalSampling, order: int) -> np.ndarray:
    """Tables of ``order`` < k bits (sets in lexicographic order): the mean over every sampled set
    that holds one of the projection of its table (NaN rows of undrawn sets are skipped)."""
    o = check_int("order", order, minimum=1)
    k = mechanism.order
    if o > k:
        raise ValueError(f"order must be <= {k}, got order={order}")
    t = np.asarray(tables).reshape((-1,) + (2,) * k)  # axis k-1-j is bit j of the cell index
    sums, hits = {}, {}
    for row, big in enumerate(mechanism.sets):
        if np.isnan(t[row]).any():
            continue
        for pos in combinations(range(k), o):
            drop = tuple(k - 1 - j for j in range(k) if j not in pos)
            proj = t[row].sum(axis=drop).reshape(-1)
            key = tuple(big[j] for j in pos)
            sums[key] = sums.get(key, 0.0) + proj
            hits[key] = hits.get(key, 0) + 1
    out = [sums[s] / hits[s] if s in hits else np.full(1 << o, np.nan)
           for s in combinations(range(mechanism.n_bits), o)]
    return np.array(out)
