"""Consistent, non-negative marginal tables beside the unbiased ones.

The unbiased tables (TMDH / Kronecker inverse, Hadamard sampling) are already consistent (every
table is a linear function of one estimate per set, so two tables agree on what they share) and
sum to one, but can have negative cells. Two post-processings return tables that are
non-negative, sum to one and agree on every shared marginal:

- :func:`joint_mle` (small d): maximum likelihood over the joint distribution of the d bits
  (``2^d`` cells) by EM. Its data are the noisy pattern histograms ``y_K`` of the counted sets of
  top order, which the co-occurrence counts hold; with every order up to d counted, ``y`` of all
  d bits is the whole sufficient statistic and this is the exact MLE; with fewer orders it
  maximizes the composite likelihood ``sum_K sum_y y_K(y) log (A_K pi_K)(y)``. The EM step
  ``pi <- pi * mean_K A_K^T (y_K / (A_K pi_K)) / N`` is a minorize-maximize step of that sum
  (each term's EM surrogate is ``sum_z w_K(z) log pi(z)`` with ``sum_z w_K = N``), so the
  likelihood never decreases and pi stays on the simplex. Tables are the joint's marginals.
  Cost: O(#sets * 2^d) per EM step, three EM steps per SQUAREM iteration.
- :func:`project_tables` (any d): the Euclidean projection of the top-order tables onto the set
  of non-negative, consistent tables that sum to one (Dykstra's alternating projections: onto the
  affine set of consistent tables, in closed form by averaging each Hadamard coefficient over
  the tables that hold it, and onto the non-negative orthant by clipping). Cost: O(#sets * 2^k)
  per iteration, nothing exponential in d.

No library was taken: Private-PGM (``mbi``) fits graphical models to measured marginals but needs
JAX (and Python >= 3.11) on every worker, and its exact inference is exponential in the width of
a junction tree, which for all 3-way marginals is d; a QP solver (OSQP) would solve the same
projection but adds a compiled dependency for a problem whose two projections are closed forms.

Uncertainty (:func:`consistent_intervals`): the unbiased estimate's normal interval, clipped to
[0, 1] and stretched to hold the consistent estimate. Every true cell lies in [0, 1], so the
clipped interval holds the truth exactly as often as the unbiased one (nominal, tested by
seeded simulation); it is narrower where the bound cuts it, never wider but for the stretch.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.sets import SetFamily


def _signs(k: int) -> np.ndarray:
    z = np.arange(1 << k)
    return 1.0 - 2.0 * (np.bitwise_count(z[:, None] & z[None, :]) & 1)


def marginal_of_joint(joint: np.ndarray, d: int, columns) -> np.ndarray:
    """The ``2^k`` table of bits ``columns`` from a joint over d bits (cell b: bit j of b <-> columns[j];
    joint index: bit i <-> bit i)."""
    t = np.asarray(joint).reshape((2,) * d)          # axis d-1-i is bit i
    keep = sorted(columns)
    drop = tuple(d - 1 - i for i in range(d) if i not in keep)
    return t.sum(axis=drop).reshape(-1)


def joint_mle(noisy: dict, inverses_of, d: int, *, tol: float = 1e-10, max_iter: int = 5000,
              start: np.ndarray | None = None):
    """EM maximum (composite) likelihood over the joint of ``d`` bits.

    ``noisy`` maps a sorted tuple of bits K to its noisy pattern histogram ``y_K`` (counts, cell b:
    bit j <-> K[j]); ``inverses_of(i)`` gives bit i's channel matrix ``C_i = [[1-p, 1-q], [p, q]]``.
    Returns ``(joint, iterations)``; stops when no cell moves by more than ``tol``.
    """
    check_int("d", d, minimum=1)
    if d > 20:
        raise ValueError(f"joint_mle holds 2^d cells; use project_tables for d > 20, got d={d}")
    check_positive("tol", tol)
    if not noisy:
        raise ValueError("noisy must hold at least one set's histogram, got noisy={}")
    sets = [tuple(sorted(s)) for s in noisy]
    n = float(np.sum(noisy[next(iter(noisy))]))
    if n <= 0:
        raise ValueError(f"the histograms must hold reports, got N={n}")
    mats = {s: [inverses_of(i) for i in s] for s in sets}
    shape = (2,) * d

    def em_step(pi):
        t = pi.reshape(shape)
        weight = np.zeros(shape)
        for s in sets:
            k = len(s)
            drop = tuple(d - 1 - i for i in range(d) if i not in s)
            m = t.sum(axis=drop)                        # axes: bits of s, highest first
            for j, c in enumerate(mats[s]):             # expected noisy pattern: (x) C_j on axis k-1-j
                m = np.moveaxis(np.tensordot(c, m, axes=([1], [k - 1 - j])), 0, k - 1 - j)
            ratio = np.asarray(noisy[s], dtype=np.float64).reshape((2,) * k) / np.maximum(m, 1e-300)
            for j, c in enumerate(mats[s]):             # back: (x) C_j^T
                ratio = np.moveaxis(np.tensordot(c.T, ratio, axes=([1], [k - 1 - j])), 0, k - 1 - j)
            weight += np.expand_dims(ratio, drop)
        new = (t * weight).reshape(-1)
        return new / new.sum()

    # SQUAREM (Varadhan & Roland 2008, scheme S3): two EM steps, an extrapolation along them kept
    # on the simplex, and one more EM step, so the likelihood still never decreases in practice
    pi = np.full(1 << d, 1.0 / (1 << d)) if start is None else np.asarray(start, dtype=np.float64).copy()
    for it in range(1, max_iter + 1):
        p1 = em_step(pi)
        p2 = em_step(p1)
        r, v = p1 - pi, p2 - 2 * p1 + pi
        step = -np.sqrt((r @ r) / (v @ v)) if v @ v > 0 else -1.0
        step = min(step, -1.0)
        jump = np.maximum(pi - 2 * step * r + step * step * v, 0.0)
        new = em_step(jump / jump.sum())
        done = np.max(np.abs(new - pi)) <= tol
        pi = new
        if done:
            return pi, it
    return pi, max_iter


def project_tables(tables, family: SetFamily, order: int, *, tol: float = 1e-10, max_iter: int = 100000):
    """Dykstra's projection of the ``order``-bit tables (rows in ``family.members(order)`` order,
    frequencies) onto non-negative, consistent tables that sum to one.

    Returns ``(tables, iterations)``; every cell >= 0, and tables that share bits agree within
    ``tol``. Lower-order tables follow by summing (:func:`lower_from_tables`).
    """
    k = check_int("order", order, minimum=1)
    sub = family.subset_indices(k)                              # (n_sets, 2^k) family index of subset b
    x = np.array(tables, dtype=np.float64)
    if x.shape != sub.shape:
        raise ValueError(f"tables must have shape {sub.shape}, got shape={x.shape}")
    h = _signs(k)
    hits = np.bincount(sub.ravel(), minlength=len(family)).astype(np.float64)

    def onto_consistent(t):
        coef = t @ h                                            # theta^K_b = sum_z H[z, b] t[z]
        mean = np.bincount(sub.ravel(), weights=coef.ravel(), minlength=len(family)) / np.maximum(hits, 1)
        mean[0] = 1.0                                           # sum to one
        return mean[sub] @ h / float(1 << k)

    q = np.zeros_like(x)
    for it in range(1, max_iter + 1):
        y = onto_consistent(x)
        x = np.maximum(y + q, 0.0)
        q = y + q - x
        if np.max(np.abs(onto_consistent(x) - x)) <= tol:
            return x, it
    return x, max_iter


def lower_from_tables(tables, family: SetFamily, order: int, lower: int) -> np.ndarray:
    """Tables of ``lower`` bits (rows in ``family.members(lower)`` order), each summed from the first
    ``order``-bit table that holds it (consistent tables agree on every choice)."""
    members = [tuple(r) for r in family.members(order)]
    t = np.asarray(tables).reshape((-1,) + (2,) * order)
    out = []
    for s in (tuple(r) for r in family.members(lower)):
        row = next(i for i, big in enumerate(members) if set(s) <= set(big))
        big = members[row]
        drop = tuple(order - 1 - j for j in range(order) if big[j] not in s)
        out.append(t[row].sum(axis=drop).reshape(-1))
    return np.array(out)


def consistent_intervals(lower, upper, point):
    """The unbiased estimate's interval clipped to [0, 1] (frequencies) and stretched to hold the
    consistent ``point``: it covers the truth whenever the unbiased interval does."""
    lo = np.minimum(np.clip(lower, 0.0, 1.0), point)
    hi = np.maximum(np.clip(upper, 0.0, 1.0), point)
    return lo, hi


def all_sets(d: int, order: int) -> list:
    return list(combinations(range(d), order))
