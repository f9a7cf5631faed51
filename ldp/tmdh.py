"""TMDH: unbiased joint-frequency estimates from co-occurrence counts, with closed-form
variances and covariances (Carette 2022, Thm 3.5 and 3.6, generalized to per-bit channels).

Mean (Carette eq. 35, in the per-bit form of docs/design.md): each report contributes
``prod_{i in S} (y_i - p_i)/(q_i - p_i)``, unbiased for ``prod x_i``; summed over reports::

    t_S = sum_{A subset S} c_A prod_{i in S\\A} (-p_i) / prod_{i in S} (q_i - p_i)

Covariance (Carette appendix eq. 136, not the main-text eq. 40 which has a typo), in the form
that is linear in the truth (docs/design.md)::

    Cov(t_J, t_J') = sum_{A subset I} prod_{I\\A} alpha_i prod_A beta_i t_{A u D}  -  t_{J u J'}
    I = J n J',  D = J (sym. diff.) J',
    alpha_i = p_i (1 - p_i)/(q_i - p_i)^2,  beta_i = (1 - 2 p_i)/(q_i - p_i)

Plugging the TMDH means into it gives an unbiased estimate of the covariance (which can be
negative for tiny windows; intervals use ``max(variance, 0)``). The variance of an order-k set
needs counts up to order k; a covariance needs the count of ``J u J'``. Sets that hit one
categorical feature's one-hot bits twice have a true count of exactly 0 and need no count.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from ldp_marginals.ldp.channels import ChannelSet
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.intervals import normal_interval
from ldp_marginals.ldp.sets import SetFamily, _normalize


def _subset_sum(family: SetFamily, values: np.ndarray, coef_out, coef_in) -> np.ndarray:
    """For every set S of the family: ``sum_{A subset S} values[A] prod_{S\\A} coef_out prod_A coef_in``.

    ``coef_out`` and ``coef_in`` are per-bit arrays. Vectorized per order over the subset table.
    """
    out = np.empty(len(family), dtype=np.float64)
    out[0] = values[0]
    for m in range(1, family.top_order + 1):
        members = family.members(m)
        sub = family.subset_indices(m)
        c_out = coef_out[members]  # (n_m, m)
        c_in = coef_in[members]
        acc = np.zeros(members.shape[0])
        for mask in range(1 << m):
            inside = np.array([(mask >> j) & 1 for j in range(m)], dtype=bool)
            weight = np.prod(np.where(inside, c_in, c_out), axis=1)
            acc += weight * values[sub[:, mask]]
        out[family.order_slice(m)] = acc
    return out


def tmdh_means(counts, family: SetFamily, channels: ChannelSet) -> np.ndarray:
    """TMDH estimates ``t_S`` (Carette eq. 35) of every set of ``family``; index 0 is ``N``."""
    c = np.asarray(counts, dtype=np.float64)
    if len(channels) != family.n_bits:
        raise ValueError(f"channels must have {family.n_bits} bits, got len(channels)={len(channels)}")
    if c.shape != (len(family),):
        raise ValueError(f"counts must have shape ({len(family)},), got shape={c.shape}")
    p, gap = channels.p, channels.q - channels.p
    raw = _subset_sum(family, c, -p, np.ones_like(p))
    for m in range(1, family.top_order + 1):
        raw[family.order_slice(m)] /= np.prod(gap[family.members(m)], axis=1)
    return raw


def expected_counts(true_counts, family: SetFamily, channels: ChannelSet) -> np.ndarray:
    """``E[c_S]`` given the true counts ``t_A`` of the family (Carette eq. 22, per-bit form):
    ``sum_{A subset S} t_A prod_{S\\A} p_i prod_A (q_i - p_i)``."""
    t = np.asarray(true_counts, dtype=np.float64)
    return _subset_sum(family, t, channels.p, channels.q - channels.p)


class Repeats(NamedTuple):
    """What a device's reports share (:mod:`ldp_marginals.ldp.memoized`): ``s``, the other reports of
    its device a report shares its permanent responses with (``M - 1`` for a bound of M), and per bit
    ``c0`` and ``a`` (``c(0)`` and ``1 + c(1) - c(0)``, 0 and 1 for a bit that does not memoize) and
    ``memoizes``. Two reports of one device add ``prod_D x prod_I (c0 + a x) - prod_{J u J'} x`` to
    ``Cov(t_J, t_J')``, the form of Carette's covariance with ``(c0, a)`` for ``(alpha, beta)``."""
    s: float
    c0: np.ndarray
    a: np.ndarray
    memoizes: np.ndarray


def _alpha_beta(channels: ChannelSet):
    p, gap = channels.p, channels.q - channels.p
    return p * (1.0 - p) / gap ** 2, (1.0 - 2.0 * p) / gap


@dataclass(frozen=True)
class TMDHEstimate:
    """TMDH means and variances of every counted set of one window, plus covariances on demand.

    ``means[i]`` and ``variances[i]`` follow ``family``'s canonical order (index 0: ``N``, variance 0).
    ``repeats``: None for independent reports; else what a device's memoized reports share
    (:class:`Repeats`, set by :func:`~ldp_marginals.ldp.memoized.with_repeats`, which also adds their
    term to ``variances``), and :meth:`covariance` adds their term too.
    """

    family: SetFamily
    channels: ChannelSet
    counts: np.ndarray
    means: np.ndarray
    variances: np.ndarray
    exclusive_groups: tuple = ()
    repeats: Repeats | None = None

    @property
    def n(self) -> int:
        return int(self.counts[0])

    def mean(self, s) -> float:
        return float(self.means[self.family.index(s)])

    def variance(self, s) -> float:
        return float(self.variances[self.family.index(s)])

    @property
    def frequencies(self) -> np.ndarray:
        """``t_S / N`` (NaN for an empty window)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.means / self.n if self.n else np.full_like(self.means, np.nan)

    def intervals(self, level: float = 0.95):
        """Normal confidence intervals ``(low, high)`` of the counts at ``level``."""
        return normal_interval(self.means, self.variances, level)

    def is_structural_zero(self, s) -> bool:
        """Whether set ``s`` holds two values of one categorical feature: its true count is 0 by
        construction (one-hot), so its estimate is pure noise and is not published."""
        return any(len(set(s) & set(g)) > 1 for g in self.exclusive_groups)

    def _truth(self, s: tuple, needed_by: str) -> float:
        if self.is_structural_zero(s):
            return 0.0
        if s not in self.family:
            raise ValueError(f"{needed_by} needs the count of set {list(s)}, which was not counted "
                             f"(max_order={self.family.max_order}); raise max_order or add the set")
        return float(self.means[self.family.index(s)])

    def covariance(self, first: Iterable[int], second: Iterable[int]) -> float:
        """Estimated ``Cov(t_J, t_J')`` (Carette eq. 136 in the linear form of docs/design.md).

        Needs the count of ``J u J'``; ``ValueError`` naming the missing set otherwise.
        """
        j1 = _normalize(self.family.n_bits, first)
        j2 = _normalize(self.family.n_bits, second)
        inter = sorted(set(j1) & set(j2))
        if not inter:
            return 0.0
        union = tuple(sorted(set(j1) | set(j2)))
        sym = set(j1) ^ set(j2)
        who = f"covariance of {list(j1)} and {list(j2)}"
        alpha, beta = _alpha_beta(self.channels)
        rep = self.repeats if self.repeats is not None and self.repeats.s else None
        t_union = self._truth(union, who)
        total, shared = -t_union, -t_union
        for r in range(len(inter) + 1):
            for a in combinations(inter, r):
                t = self._truth(tuple(sorted(sym | set(a))), who)
                rest = [i for i in inter if i not in a]
                total += np.prod([beta[i] for i in a]) * np.prod([alpha[i] for i in rest]) * t
                if rep is not None:   # reports of one device sharing permanent responses: (c0, a) for (alpha, beta)
                    shared += np.prod([rep.a[i] for i in a]) * np.prod([rep.c0[i] for i in rest]) * t
        return total + rep.s * shared if rep is not None else total

    def covariance_matrix(self, sets: Sequence[Iterable[int]]) -> np.ndarray:
        """Covariance matrix of the estimates of the given sets (only when asked for: O(len^2))."""
        sets = [_normalize(self.family.n_bits, s) for s in sets]
        k = len(sets)
        out = np.zeros((k, k))
        for a in range(k):
            for b in range(a, k):
                out[a, b] = out[b, a] = self.covariance(sets[a], sets[b])
        return out


def estimate_tmdh(source, channels: ChannelSet, family: SetFamily | None = None,
                  exclusive_groups: Sequence[Sequence[int]] = ()) -> TMDHEstimate:
    """TMDH means and variances from a :class:`CooccurrenceAccumulator` (or raw counts + family).

    Variance of every set (Carette Thm 3.6 with J = J'):
    ``Var(t_S) = sum_{A subset S} prod_{S\\A} alpha_i prod_A beta_i t_A - t_S``, with ``t_{} = N``.
    """
    if isinstance(source, CooccurrenceAccumulator):
        family, counts = source.family, source.counts
    else:
        if family is None:
            raise ValueError("family must be given with raw counts, got family=None")
        counts = np.asarray(source)
        if not np.issubdtype(counts.dtype, np.integer):
            counts = counts.astype(np.float64)  # expected counts, as in exact-algebra checks
    means = tmdh_means(counts, family, channels)
    alpha, beta = _alpha_beta(channels)
    variances = _subset_sum(family, means, alpha, beta) - means
    variances[0] = 0.0
    groups = tuple(tuple(int(i) for i in g) for g in exclusive_groups)
    return TMDHEstimate(family, channels, np.array(counts), means, variances, groups)
