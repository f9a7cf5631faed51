"""k-way marginal tables from co-occurrence counts (Vinterbo 2018), and post-processing for display.

For a set K of k bits the 2^k cells are indexed by ``b`` with bit ``j`` of ``b`` the value of
``K[j]`` (K sorted). Both the noisy histogram ``y_K`` and the table are linear (Moebius)
transforms of the counts of the subsets of K (Carette Lemma A.1), so no extra accumulator is
needed::

    y_K  = (x)_j U c_K,           U = [[1, -1], [0, 1]]       (counts -> noisy patterns)
    pi_K = (x)_j C_j^{-1} y_K,    C_j = [[1-p, 1-q], [p, q]]  (Vinterbo Thm 4.4 / sec. 4.2)

applied factor by factor (O(k 2^k)), never as a dense 2^k x 2^k Kronecker matrix.

Cell covariance, conditional on the window's true reports (the same conditioning as TMDH)::

    Cov(pi_K) = A diag(y_K) A^T - diag(pi_K),   A = (x)_j C_j^{-1}

which is unbiased with the estimates plugged in. Vinterbo's ``N^{-1}(C^{-1} diag(C pi) C^{-T} - pi pi^T)``
is the covariance when the true patterns are themselves a multinomial sample from ``pi``; it adds
the sampling term ``N (diag(pi) - pi pi^T)`` (see :meth:`MarginalTable.superpopulation_covariance`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations, product
from typing import Sequence

import numpy as np

from ldp_marginals.ldp.encoding import CATEGORICAL, Layout
from ldp_marginals.ldp.intervals import normal_interval
from ldp_marginals.ldp.sets import _normalize
from ldp_marginals.ldp.tmdh import TMDHEstimate

_MOEBIUS = np.array([[1.0, -1.0], [0.0, 1.0]])


def kron_apply(factors: Sequence[np.ndarray], values: np.ndarray) -> np.ndarray:
    """``(factors[k-1] (x) ... (x) factors[0]) @ values`` without forming the Kronecker product.

    ``values`` has ``2**k`` rows indexed by ``b`` (bit ``j`` of ``b`` <-> factor ``j``), and may
    have further columns. Cost O(k 2^k) per column.
    """
    k = len(factors)
    v = np.asarray(values, dtype=np.float64)
    tail = v.shape[1:]
    t = v.reshape((2,) * k + tail)
    for j, f in enumerate(factors):
        axis = k - 1 - j  # C-order reshape: the last tensor axis is bit 0
        t = np.moveaxis(np.tensordot(f, t, axes=([1], [axis])), 0, axis)
    return t.reshape(v.shape)


def cell_patterns(k: int) -> np.ndarray:
    """``(2**k, k)`` 0/1 patterns of the cells: row ``b``, column ``j`` = bit ``j`` of ``b``."""
    b = np.arange(1 << k)
    return ((b[:, None] >> np.arange(k)[None, :]) & 1).astype(np.uint8)


def _subset_vector(values_of, columns: tuple) -> np.ndarray:
    """Vector over cells ``b``: the value of the subset of ``columns`` whose members are the bits set in b."""
    k = len(columns)
    return np.array([values_of(tuple(columns[j] for j in range(k) if b >> j & 1)) for b in range(1 << k)])


@dataclass(frozen=True)
class MarginalTable:
    """Estimated counts of the 2^k patterns of bits ``columns``, with their covariance."""

    columns: tuple
    labels: tuple
    n: int
    estimate: np.ndarray      # (2^k,) estimated counts per cell
    covariance: np.ndarray    # (2^k, 2^k), conditional on the window's reports

    @property
    def patterns(self) -> np.ndarray:
        return cell_patterns(len(self.columns))

    @property
    def variances(self) -> np.ndarray:
        return np.diagonal(self.covariance).copy()

    @property
    def frequencies(self) -> np.ndarray:
        return self.estimate / self.n if self.n else np.full_like(self.estimate, np.nan)

    def intervals(self, level: float = 0.95):
        return normal_interval(self.estimate, self.variances, level)

    def superpopulation_covariance(self) -> np.ndarray:
        """Vinterbo's covariance of the counts when the true patterns are a multinomial sample:
        the conditional covariance plus ``N (diag(pi) - pi pi^T)``."""
        if not self.n:
            return self.covariance.copy()
        f = self.estimate / self.n
        return self.covariance + self.n * (np.diag(f) - np.outer(f, f))


def noisy_histogram(est: TMDHEstimate, columns) -> np.ndarray:
    """``y_K``: how many reports showed each noisy pattern on K, from the co-occurrence counts."""
    cols = _normalize(est.family.n_bits, columns)
    counts = _subset_vector(lambda s: est.counts[est.family.index(s)], cols)
    return kron_apply([_MOEBIUS] * len(cols), counts)


def marginal_table(est: TMDHEstimate, columns, labels: Sequence[str] | None = None) -> MarginalTable:
    """The 2^k-cell table of a counted set K (Vinterbo's Kronecker inverse), with its covariance.

    Needs the counts of every subset of K (so K itself must be counted).
    """
    cols = _normalize(est.family.n_bits, columns)
    if not cols:
        raise ValueError("columns must name at least one bit, got columns=()")
    if cols not in est.family:
        raise ValueError(f"the table of {list(cols)} needs the count of set {list(cols)}, which was not counted "
                         f"(max_order={est.family.max_order}); raise max_order or add the set")
    inverses = [est.channels[i].inverse_matrix() for i in cols]
    y = noisy_histogram(est, cols)
    table = kron_apply(inverses, y)
    a_diag = kron_apply(inverses, np.diag(y))           # A diag(y)
    cov = kron_apply(inverses, a_diag.T).T - np.diag(table)  # A diag(y) A^T - diag(pi)
    cov = (cov + cov.T) / 2.0
    names = tuple(labels) if labels is not None else tuple(str(i) for i in cols)
    return MarginalTable(cols, names, est.n, table, cov)


@dataclass(frozen=True)
class GroupTable:
    """Joint counts of the value combinations of a group of features (categorical values, and
    ``false`` / ``true`` for booleans), with the covariance of the cells."""

    features: tuple
    cells: tuple              # tuples of values, one per feature
    columns: tuple            # per cell: the bits the cell depends on
    n: int
    estimate: np.ndarray
    covariance: np.ndarray

    @property
    def variances(self) -> np.ndarray:
        return np.diagonal(self.covariance).copy()

    def intervals(self, level: float = 0.95):
        return normal_interval(self.estimate, self.variances, level)


def group_cells(layout: Layout, features: Sequence[str]) -> list:
    """``(cell values, bits T that must be 1, boolean bits F that must be 0)`` of each cell of a
    group's table, in table order: per feature a categorical value (its one-hot bit in T) or a
    boolean's ``false`` (its bit in F) and ``true`` (in T)."""
    options = []
    for f in (layout.feature(n) for n in features):
        bits = list(layout.bits_of(f.name))
        if f.kind == CATEGORICAL:
            options.append([(v, (b,), ()) for v, b in zip(f.values, bits)])
        else:
            options.append([("false", (), (bits[0],)), ("true", (bits[0],), ())])
    return [(tuple(v for v, _, _ in combo), tuple(sorted(b for _, t, _ in combo for b in t)),
             tuple(sorted(b for _, _, z in combo for b in z))) for combo in product(*options)]


def group_table(est: TMDHEstimate, layout: Layout, features: Sequence[str]) -> GroupTable:
    """Table of a group of features. A cell fixes one value per feature: the bits ``T`` that must be 1
    (the categorical values' one-hot bits and the booleans that are true) and the boolean bits ``F``
    that must be 0. By inclusion-exclusion (Carette Lemma A.1) its count is
    ``sum_{B subset F} (-1)^|B| t_{T u B}``, a linear combination of TMDH estimates, so its covariance
    is ``C Sigma C^T`` with ``Sigma`` the TMDH covariance (Carette eq. 136) of the sets involved.

    Needs the count of the group's full cell sets (one bit per feature). For categorical-only groups
    the covariance is diagonal: two different cells differ on some feature f, so their union holds
    two one-hot bits of f, whose true count is 0 (a structural zero of the one-hot encoding).
    """
    names = tuple(features)
    if not names:
        raise ValueError("features must name at least one feature, got features=()")
    group_est = est if est.exclusive_groups else replace(est, exclusive_groups=layout.exclusive_groups)
    cells, columns, terms = [], [], []
    for values, ones, zeros in group_cells(layout, names):
        cells.append(values)
        columns.append(tuple(sorted(ones + zeros)))
        cell_terms = []
        for r in range(len(zeros) + 1):
            for extra in combinations(zeros, r):
                cell_terms.append((tuple(sorted(ones + extra)), (-1) ** r))
        terms.append(cell_terms)
    sets = sorted({s for cell_terms in terms for s, _ in cell_terms}, key=lambda s: (len(s), s))
    where = {s: i for i, s in enumerate(sets)}
    coef = np.zeros((len(cells), len(sets)))
    for row, cell_terms in enumerate(terms):
        for s, sign in cell_terms:
            coef[row, where[s]] += sign
    means = np.array([group_est.mean(s) for s in sets])
    sigma = group_est.covariance_matrix(sets)
    return GroupTable(names, tuple(cells), tuple(columns), est.n, coef @ means, coef @ sigma @ coef.T)


def project_to_simplex(frequencies) -> np.ndarray:
    """Euclidean projection of a table's frequencies onto valid probabilities (non-negative,
    summing to 1), for display only (Duchi et al. 2008, sort-based).

    This is post-processing: the result is biased and has no closed-form variance. Publish the
    unbiased estimate and its interval; show this only where a chart needs probabilities.
    """
    v = np.asarray(frequencies, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
        raise ValueError(f"frequencies must be a non-empty finite 1-D array, got shape={v.shape}")
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    idx = np.arange(1, v.size + 1)
    rho = np.nonzero(u - css / idx > 0)[0][-1]
    theta = css[rho] / (rho + 1.0)
    return np.maximum(v - theta, 0.0)


def phi_from_frequencies(f_i: float, f_j: float, f_ij: float) -> float | None:
    """Phi correlation of two bits from their (estimated) frequencies and joint frequency:
    ``(f_ij - f_i f_j) / sqrt(f_i (1 - f_i) f_j (1 - f_j))`` (the point estimate of
    :func:`phi_coefficient`); None where a frequency is outside (0, 1) and phi is undefined. An
    estimate from noisy frequencies can fall outside [-1, 1]; it is returned as it is."""
    values = (float(f_i), float(f_j), float(f_ij))
    if not all(np.isfinite(values)) or not (0.0 < values[0] < 1.0 and 0.0 < values[1] < 1.0):
        return None
    a, b, ab = values
    return (ab - a * b) / float(np.sqrt(a * (1.0 - a) * b * (1.0 - b)))


def phi_coefficient(est: TMDHEstimate, i: int, j: int):
    """Correlation (phi) of bits i and j with its delta-method variance.

    ``phi = (N t_ij - t_i t_j) / sqrt(t_i (N - t_i) t_j (N - t_j))``; the variance is
    ``g^T Sigma g`` with ``g`` the gradient in ``(t_i, t_j, t_ij)`` and ``Sigma`` the TMDH
    covariance of those three estimates (Carette sec. 3.2 illustrates this estimator).
    Returns ``(phi, variance)``.
    """
    a, b = sorted((int(i), int(j)))
    if a == b:
        raise ValueError(f"i and j must be different bits, got i={i}, j={j}")
    n = float(est.n)
    ti, tj, tij = est.mean((a,)), est.mean((b,)), est.mean((a, b))
    for name, t in (("t_i", ti), ("t_j", tj)):
        if not 0.0 < t < n:
            raise ValueError(f"phi needs 0 < {name} < N, got {name}={t:.6g}, N={n:.0f}")
    d = n * tij - ti * tj
    qi, qj = ti * (n - ti), tj * (n - tj)
    root = np.sqrt(qi * qj)
    phi = d / root
    grad = np.array([
        -tj / root - 0.5 * phi * (n - 2 * ti) / ti / (n - ti),
        -ti / root - 0.5 * phi * (n - 2 * tj) / tj / (n - tj),
        n / root,
    ])
    sigma = est.covariance_matrix([(a,), (b,), (a, b)])
    return float(phi), float(grad @ sigma @ grad)
