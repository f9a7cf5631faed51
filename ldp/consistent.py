"""Consistent, non-negative marginal tables beside the unbiased ones.

The unbiased tables (TMDH / Kronecker inverse, Hadamard sampling) are already consistent (every
table is a linear function of one estimate per set, so two tables agree on what they share) and
sum to one, but can have negative cells. Three post-processings return tables that are
non-negative, sum to one and agree on every shared marginal; :func:`consistent_tables` chooses:

- :func:`~ldp_marginals.ldp.sure_em.joint_sure_em` (d <= 8, every order counted): among EM's iterates
  from the uniform joint and the exact MLE below, the one with the least estimated squared error (SURE)
  of the published tables (within 5%, the closest fit). The MLE fits the channel-amplified noise of the
  high orders; EM stopped early does not: on GSS at per-bit epsilon 1 the 3-way tables' total
  variation is 0.64 of the raw tables' against the MLE's 0.72 (400 windows; ``ldp/sure_em.py``).

- :func:`joint_mle` (small d): maximum likelihood over the joint distribution of the d bits
  (``2^d`` cells). Its data are the noisy pattern histograms ``y_K`` of counted sets, which the
  co-occurrence counts hold. With every order up to d counted (the accumulator is then ``2^d``
  counts, the same size as the joint), ``y`` of all d bits is the whole sufficient statistic and
  this is the exact MLE, the one :func:`consistent_tables` uses above d = 8 (and a candidate below);
  with fewer orders it maximizes the
  composite likelihood ``sum_K sum_y y_K(y) log (A_K pi_K)(y)``. Each term is the log of a linear
  function of pi, so the likelihood is concave and every KKT point is the maximum: with ``g`` the
  gradient of the mean log-likelihood per set, ``g(z) = 1`` where ``pi(z) > 0`` and ``g(z) <= 1`` where
  ``pi(z) = 0``. The objective ``-sum_K y_K . log(A_K x_K) / N + (#sets) sum(x)`` over ``x >= 0`` (the sum
  left free) has the same maximizer with ``sum(x) = 1`` (scale x by t: the optimum is at ``t sum(x) = 1``),
  so only bounds remain. Solved, for d <= 10, by projected Newton (Bertsekas 1982: cells at 0 whose
  gradient pushes them out stay at 0, the others take the Newton step of the dense 2^d Hessian, cut back
  until the objective falls): about 15 steps at per-bit epsilon 1 and 40 at 0.5 on GSS (d = 7), each
  O(#sets 4^d + 8^d); by L-BFGS-B (scipy) above. The fit is checked against the KKT conditions.
  L-BFGS-B was the solver at every d before: it reached the maximum on most GSS windows (100 seeded
  windows at per-bit epsilon 1 met the check; six others within 1.3e-6 log-likelihood units of
  100,000 EM steps) but stopped 2.4e-3 off the KKT conditions on one bench window at 0.5, which then
  fell back to the projection (``BENCH_MISS`` in the tests), and took about 100-270 iterations.
  EM (and its SQUAREM acceleration) was tried first as its solver and is not used: EM's
  multiplicative step never revives a cell once it is 0, SQUAREM's extrapolation clipped at 0 sets
  cells to exactly 0, and the fit stopped 4 to 8 log-likelihood units below the maximum (GSS at
  per-bit epsilon 1; KKT violated by 1-2% at the zeroed cells), with mean 3-way TV 0.77 of the raw
  tables' instead of the maximum's ~0.70-0.72 (130 seeded windows: 0.72; 100 others: 0.703; 400
  others: 0.717); plain EM gets there but takes 50,000 to 200,000 steps.
- :func:`project_tables` (any d): the Euclidean projection of the top-order tables onto the set
  of non-negative, consistent tables that sum to one (Dykstra's alternating projections: onto the
  affine set of consistent tables, in closed form by averaging each Hadamard coefficient over
  the tables that hold it, and onto the non-negative orthant by clipping). Cost: O(#sets * 2^k)
  per iteration, nothing exponential in d.

No library for the model: Private-PGM (``mbi``) fits graphical models to measured marginals but
needs JAX (and Python >= 3.11) on every worker, and its exact inference is exponential in the width
of a junction tree, which for all 3-way marginals is d; a QP solver (OSQP) would solve the same
projection but adds a compiled dependency for a problem whose two projections are closed forms.
The likelihood's solvers are numpy's dense linear algebra (projected Newton) and scipy's L-BFGS-B
(both already dependencies). scipy's trust-constr (not tried) is an interior-point method for bounds:
it reaches the zero cells, about two thirds of GSS's joint, only in the limit.

Uncertainty (:func:`consistent_intervals`): the unbiased estimate's normal interval, clipped to
[0, 1] and stretched to hold the consistent estimate. Every true cell lies in [0, 1], so the
clipped interval holds the truth exactly as often as the unbiased one (nominal, tested by
seeded simulation); it is narrower where the bound cuts it, never wider but for the stretch.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.sure_em import SURE_MAX_BITS, joint_sure_em
from ldp_marginals.ldp.tables import kron_apply, marginal_table, noisy_histogram
from ldp_marginals.ldp.tmdh import TMDHEstimate


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


JOINT_MAX_BITS = 16   # joint_mle holds 2^d cells; consistent_tables uses it up to here


NEWTON_MAX_BITS = 10  # joint_mle's projected Newton holds the dense 2^d x 2^d Hessian up to here


def joint_mle(noisy: dict, channel_of, d: int, *, tol: float = 1e-5, max_iter: int = 20000):
    """Maximum (composite) likelihood over the joint of ``d`` bits (see the module docstring).

    ``noisy`` maps a sorted tuple of bits K to its noisy pattern histogram ``y_K`` (counts, cell b:
    bit j <-> K[j]); ``channel_of(i)`` gives bit i's channel matrix ``C_i = [[1-p, 1-q], [p, q]]``.
    Returns ``(joint, iterations)``, the joint's cell z with bit i of z <-> bit i. ``tol`` bounds the
    KKT violation ``|g - 1|`` on positive cells and ``g - 1`` on zero cells; a fit that misses it
    raises ``RuntimeError``. Solved by projected Newton (:func:`_newton_fit`) for ``d <=``
    :data:`NEWTON_MAX_BITS`, by L-BFGS-B above.
    """
    check_int("d", d, minimum=1)
    if d > JOINT_MAX_BITS:
        raise ValueError(f"joint_mle holds 2^d cells; use project_tables for d > {JOINT_MAX_BITS}, got d={d}")
    check_positive("tol", tol)
    check_int("max_iter", max_iter, minimum=1)
    if not noisy:
        raise ValueError("noisy must hold at least one set's histogram, got noisy={}")
    sets = [tuple(sorted(s)) for s in noisy]
    n = float(np.sum(noisy[next(iter(noisy))]))
    if n <= 0:
        raise ValueError(f"the histograms must hold reports, got N={n}")
    shape = (2,) * d
    parts = []
    for s in sets:
        mats = [np.asarray(channel_of(i), dtype=np.float64) for i in s]
        drop = tuple(d - 1 - i for i in range(d) if i not in s)    # axis d-1-i is bit i
        share = np.asarray(noisy[s], dtype=np.float64).reshape(-1) / n
        parts.append((s, mats, drop, share))

    def value_and_gradient(x):
        t = x.reshape(shape)
        value, grad = 0.0, np.zeros(shape)
        for _, mats, drop, share in parts:
            expected = np.maximum(kron_apply(mats, t.sum(axis=drop).reshape(-1)), 1e-300)
            value -= share @ np.log(expected)
            ratio = kron_apply([m.T for m in mats], share / expected).reshape((2,) * (d - len(drop)))
            grad -= np.expand_dims(ratio, drop) if drop else ratio
        return value + len(parts) * x.sum(), grad.reshape(-1) + len(parts)

    start = np.full(1 << d, 1.0 / (1 << d))
    if d <= NEWTON_MAX_BITS:
        x, nit, message = _newton_fit([(_dense_channel(s, mats, d), share) for s, mats, _, share in parts], start,
                                      tol * 1e-3, min(max_iter, 1000))
    else:
        from scipy.optimize import minimize
        fit = minimize(value_and_gradient, start, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * start.size,
                       options={"maxiter": max_iter, "maxfun": 2 * max_iter, "ftol": 0.0,
                                "gtol": tol * len(parts) / 10, "maxcor": 30})
        x, nit, message = fit.x, int(fit.nit), fit.message
    joint = x / x.sum()
    g = 1.0 - value_and_gradient(joint)[1] / len(parts)            # mean log-likelihood gradient per set
    positive = joint > 0
    gap = max(float(np.max(np.abs(g[positive] - 1.0))), float(np.max(g[~positive] - 1.0, initial=0.0)))
    if gap > tol:
        raise RuntimeError(f"joint_mle: the fit misses the KKT conditions by {gap:.2e} > tol={tol} after "
                           f"{nit} iterations ({message})")
    return joint, nit


def _dense_channel(bits: tuple, mats: list, d: int) -> np.ndarray:
    """The ``2^k x 2^d`` matrix from the joint of d bits to the noisy histogram of ``bits``: the channel
    ``C_{K[k-1]} (x) ... (x) C_{K[0]}`` applied to the marginal of ``bits``."""
    a = np.ones((1, 1))
    for m in mats:
        a = np.kron(m, a)
    z = np.arange(1 << d)
    cell = np.zeros(1 << d, dtype=np.int64)
    for j, bit in enumerate(bits):
        cell |= ((z >> bit) & 1) << j
    return a[:, cell]


def _newton_fit(parts: list, x: np.ndarray, tol: float, max_iter: int) -> tuple:
    """Projected Newton (Bertsekas 1982) for ``min f(x) = -sum_K share_K . log(M_K x) + (#parts) sum(x)``
    over ``x >= 0`` (``parts``: ``(M_K, share_K)``, dense). Each step: the cells at (within epsilon of) 0
    whose gradient pushes them below stay at 0; the others take the Newton step of the Hessian
    ``sum_K M_K^T diag(share_K / (M_K x)^2) M_K`` restricted to them; the step is cut back (Armijo,
    along the projection onto x >= 0) until f falls. Converges quadratically once the zero cells are
    found; stops when ``|grad| / #parts <= tol`` on positive cells and ``-grad / #parts <= tol`` on zero
    ones. Returns ``(x, iterations, message)``."""
    k = float(len(parts))

    def value(v):
        out = k * v.sum()
        for m, share in parts:
            e = m @ v
            used = share > 0
            if np.any(e[used] <= 0):
                return np.inf
            out -= share[used] @ np.log(e[used])
        return out

    for it in range(max_iter + 1):
        grad, hess = np.full(x.size, k), np.zeros((x.size, x.size))
        for m, share in parts:
            e = m @ x
            r = np.divide(share, e, out=np.zeros_like(e), where=share > 0)
            grad -= m.T @ r
            hess += (m.T * (r / np.where(e > 0, e, 1.0))) @ m
        gap = max(float(np.max(np.abs(grad[x > 0]), initial=0.0)), float(np.max(-grad[x <= 0], initial=0.0))) / k
        if gap <= tol or it == max_iter:
            return x, it, f"projected Newton: KKT gap {gap:.1e}"
        eps = min(1e-10, float(np.linalg.norm(x - np.maximum(x - grad, 0.0))))
        free = ~((x <= eps) & (grad > 0))
        h = hess[np.ix_(free, free)]
        h[np.diag_indices_from(h)] += 1e-12 * max(float(np.trace(h)), 1.0) / h.shape[0]
        step = -x.copy()                                   # the held cells go to 0
        step[free] = -np.linalg.solve(h, grad[free])
        before, alpha = value(x), 1.0
        while True:
            trial = np.maximum(x + alpha * step, 0.0)
            if value(trial) <= before + 1e-4 * float(grad @ (trial - x)):
                break
            alpha /= 2.0
            if alpha < 1e-14:
                return x, it, f"projected Newton: no descent, KKT gap {gap:.1e}"
        x = trial
    return x, max_iter, "projected Newton"


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


@dataclass(frozen=True)
class ConsistentTables:
    """Non-negative tables that sum to one and agree on shared bits: ``tables[o]`` holds every table
    of ``o`` bits (rows in ``family.members(o)`` order, frequencies; cell b: bit j <-> the set's j-th
    bit) for o = 1..order; ``method`` is ``"joint-em"`` (EM over the joint, stopped after ``iterations``
    steps), ``"joint-mle"`` (the exact MLE, ``iterations`` its solver's steps) or ``"projection"``;
    ``fallback`` is None, or why the joint MLE was tried and not used (its fit missed the KKT check) when
    ``method`` is ``"projection"``."""

    method: str
    tables: dict
    iterations: int
    fallback: str | None = None


def consistent_tables(est, order: int) -> ConsistentTables:
    """The consistent tables of a per-bit window (a :class:`~ldp_marginals.ldp.tmdh.TMDHEstimate`) up to
    ``order`` bits. When the window counted every order of its d bits (its counts are then the whole
    sufficient statistic): for ``d <=`` :data:`~ldp_marginals.ldp.sure_em.SURE_MAX_BITS`, the joint that
    :func:`~ldp_marginals.ldp.sure_em.joint_sure_em` chooses for the ``order``-bit tables among EM's
    iterates and the exact MLE (``method`` ``"joint-em"`` or ``"joint-mle"``); up to :data:`JOINT_MAX_BITS`,
    the exact MLE. Otherwise the projection of the raw ``order``-bit tables. Should the MLE's fit miss its
    KKT check, it is no candidate (below SURE_MAX_BITS) or the tables are the projection (above), as the
    job's (:func:`consistent_group_tables`), and ``fallback`` says why."""
    fam = est.family
    d, k = fam.n_bits, check_int("order", order, minimum=1)
    if k > fam.max_order:
        raise ValueError(f"order must be <= the counted max_order={fam.max_order}, got order={order}")
    fallback = None
    if fam.max_order == d and d <= JOINT_MAX_BITS:
        fit = _joint_of_every_bit(est, [tuple(s) for s in fam.members(k)])
        if isinstance(fit, str):
            fallback = fit
        else:
            method, joint, it = fit
            tables = {o: np.array([marginal_of_joint(joint, d, s) for s in fam.members(o)]) for o in range(1, k + 1)}
            return ConsistentTables(method, tables, it)
    top = SetFamily.all_up_to(d, k)
    raw = np.array([marginal_table(est, s).frequencies for s in top.members(k)])
    projected, it = project_tables(raw, top, k)
    tables = {o: lower_from_tables(projected, top, k, o) for o in range(1, k)}
    tables[k] = projected
    return ConsistentTables("projection", tables, it, fallback)


def _joint_of_every_bit(est, published: list):
    """``(method, joint, iterations)`` of a window that counted every order of its ``d <=`` JOINT_MAX_BITS
    bits (see :func:`consistent_tables`), or why there is none (the MLE's missed check, above SURE_MAX_BITS)."""
    d = est.family.n_bits
    every = tuple(range(d))
    counts = noisy_histogram(est, every)
    channel_of = lambda i: est.channels[i].matrix()          # noqa: E731
    try:
        mle, why = joint_mle({every: counts}, channel_of, d), None
    except RuntimeError as missed:
        mle, why = None, str(missed)
    if d <= SURE_MAX_BITS:
        fit = joint_sure_em(counts, channel_of, d, published, mle)
        return fit.method, fit.joint, fit.iterations
    return why if mle is None else ("joint-mle", mle[0], mle[1])


def consistent_intervals(lower, upper, point):
    """The unbiased estimate's interval clipped to [0, 1] (frequencies) and stretched to hold the
    consistent ``point``: it covers the truth whenever the unbiased interval does."""
    lo = np.minimum(np.clip(lower, 0.0, 1.0), point)
    hi = np.maximum(np.clip(upper, 0.0, 1.0), point)
    return lo, hi


def _group_constraints(shapes: tuple) -> tuple:
    """``(A, b)`` of the affine set of consistent group tables: each table sums to one, and two tables
    that share features have the same marginal on them. ``shapes``: per table, ``((feature, n_values),
    ...)`` in the table's axis order (cells stacked table after table, C order)."""
    sizes = [int(np.prod([n for _, n in shape])) for shape in shapes]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    rows, b = [], []
    for g, size in enumerate(sizes):
        row = np.zeros(offsets[-1])
        row[offsets[g]:offsets[g + 1]] = 1.0
        rows.append(row)
        b.append(1.0)
    cells = [np.indices([n for _, n in shape]).reshape(len(shape), -1).T for shape in shapes]   # values per cell
    for g in range(len(shapes)):
        for h in range(g + 1, len(shapes)):
            names_g, names_h = [f for f, _ in shapes[g]], [f for f, _ in shapes[h]]
            shared = [f for f in names_g if f in names_h]
            if not shared:
                continue
            ag, ah = [names_g.index(f) for f in shared], [names_h.index(f) for f in shared]
            for value in np.ndindex(*[dict(shapes[g])[f] for f in shared]):
                row = np.zeros(offsets[-1])
                row[offsets[g] + np.flatnonzero((cells[g][:, ag] == value).all(axis=1))] = 1.0
                row[offsets[h] + np.flatnonzero((cells[h][:, ah] == value).all(axis=1))] -= 1.0
                rows.append(row)
                b.append(0.0)
    return np.array(rows), np.array(b), offsets


_AFFINE: dict = {}


def project_group_tables(tables, shapes, *, tol: float = 1e-10, max_iter: int = 100000):
    """Dykstra's Euclidean projection of feature-group tables (frequencies, each flattened in C order of
    its ``shapes`` entry, ``((feature, n_values), ...)``) onto tables that are non-negative, each sum to
    one and agree on the marginals of the features they share. A feature is any categorical or
    boolean one (a categorical's values are one axis), so the constraints are those of the true
    tables (one value per feature per report). Returns ``(tables, iterations)``; the affine step is
    ``x - A^+ (A x - b)``, held as ``(I - A^+ A) x + A^+ b`` computed once per shapes (``cells^2`` per
    iteration); it stops when the tables are within ``tol`` of consistent (they are non-negative
    after every step).
    """
    shapes = tuple(tuple((str(f), int(n)) for f, n in shape) for shape in shapes)
    if not shapes:
        return [], 0
    cached = _AFFINE.get(shapes)
    if cached is None:
        a, b, offsets = _group_constraints(shapes)
        pinv = np.linalg.pinv(a)
        cached = _AFFINE[shapes] = (np.eye(offsets[-1]) - pinv @ a, pinv @ b, offsets)
    keep, shift, offsets = cached                   # the affine projection is x -> keep @ x + shift
    x = np.concatenate([np.asarray(t, dtype=np.float64).reshape(-1) for t in tables])
    if x.size != offsets[-1]:
        raise ValueError(f"tables must hold {offsets[-1]} cells in all (their shapes), got {x.size}")

    def onto_consistent(t):
        return keep @ t + shift

    q = np.zeros_like(x)
    it = 0
    for it in range(1, max_iter + 1):
        y = onto_consistent(x)
        x = np.maximum(y + q, 0.0)
        q = y + q - x
        if np.max(np.abs(onto_consistent(x) - x)) <= tol:
            break
    return [x[offsets[g]:offsets[g + 1]] for g in range(len(shapes))], it


@dataclass(frozen=True)
class ConsistentGroups:
    """Consistent tables of a window's feature groups: ``tables[g]`` the frequencies of group g's
    cells in :func:`~ldp_marginals.ldp.tables.group_cells` order; ``method`` ``"joint-em"``, ``"joint-mle"``
    or ``"projection"`` (as :class:`ConsistentTables`')."""

    method: str
    tables: list
    iterations: int


def consistent_group_tables(est, layout, groups, frequencies) -> ConsistentGroups:
    """Consistent tables of the feature ``groups`` (the unbiased group tables' ``frequencies``, one
    array per group in ``group_cells`` order) of a window (``est``).

    - ``joint-em`` / ``joint-mle``: when ``est`` is a per-bit window's :class:`~ldp_marginals.ldp.tmdh.TMDHEstimate`
      (its likelihood is that of per-bit randomized response), every feature is boolean and it counted every order of its
      ``d <=`` :data:`JOINT_MAX_BITS` bits, a joint over the 2^d cells, as :func:`consistent_tables` chooses
      it (SURE of the groups' tables up to SURE_MAX_BITS bits, the exact MLE above); each group's cells are
      marginals of it. Its input, the noisy histogram of all d bits, is then an invertible function of the
      published marginals (every set is one).
    - ``projection`` otherwise (and should the fit miss its KKT check): :func:`project_group_tables`
      of the unbiased group tables themselves. It needs only them, so it serves every estimator of
      unbiased tables (the channel kinds hadamard's and subset's too; subset RR's tables come from
      different reports and need not agree before it).
    Both are functions of the window's published rows only.
    """
    from ldp_marginals.ldp.encoding import BOOLEAN
    from ldp_marginals.ldp.tables import group_cells

    groups = [tuple(g) for g in groups]
    if len(frequencies) != len(groups):
        raise ValueError(f"frequencies must give one table per group ({len(groups)}), got {len(frequencies)}")
    fam, d = est.family, est.family.n_bits
    if groups and isinstance(est, TMDHEstimate) and fam.max_order == d and d <= JOINT_MAX_BITS and all(f.kind == BOOLEAN for f in layout.features):
        cells = [group_cells(layout, g) for g in groups]
        columns = [tuple(sorted(c[0][1] + c[0][2])) for c in cells]
        fit = _joint_of_every_bit(est, columns)
        if not isinstance(fit, str):
            method, joint, it = fit
            tables = []
            for cols, cell in zip(columns, cells):
                table = marginal_of_joint(joint, d, cols)
                tables.append(np.array([table[sum(1 << j for j, c in enumerate(cols) if c in ones)]
                                        for _, ones, _ in cell]))
            return ConsistentGroups(method, tables, it)
    shapes = [[(f, len(layout.feature(f).values) if layout.feature(f).kind != BOOLEAN else 2) for f in g]
              for g in groups]
    tables, it = project_group_tables(frequencies, shapes)
    return ConsistentGroups("projection", tables, it)


def all_sets(d: int, order: int) -> list:
    return list(combinations(range(d), order))
