"""Hadamard sampling: a whole report epsilon-LDP, each report a few sampled parity coefficients.

Mechanism (Cormode, Kulkarni & Srivastava, SIGMOD 2018, "InpHT", with two changes). The k-way
marginals of d bits are linear in the parity (Hadamard) coefficients of orders 1..k::

    theta_a = mean over reports of phi_a(x),   phi_a(x) = (-1)^(sum_{i in a} x_i)
    pi_K(z) = 2^-k sum_{a subset K} (-1)^(|a & z|) theta_a          (theta_{} = 1)

A device draws ``m`` coefficient indices ``a`` independently from the weights ``w`` (over the
``T`` sets of the counted family, the *pool*: every set of 1..k bits, ``sum_{j<=k} C(d, j)``, plus every
subset of each extra set wider than k, :attr:`HadamardSampling.sets`) and sends, for each, its parity
``(1 - phi_a(x)) / 2`` through symmetric randomized response at ``epsilon / m``: the indices do not
depend on x, so the report is epsilon-LDP by composition. InpHT is ``m = 1`` with uniform
weights; the defaults here weigh a coefficient by ``sqrt(C(d-|a|, k-|a|))`` (how many top-order
tables hold it), which minimizes the mean top-order cell variance (Lagrange: sum n_a / w_a is
smallest at w_a ~ sqrt(n_a)), and take the ``m`` that minimizes ``c(epsilon/m)^2 / m``
(:func:`best_slots`: several coefficients at a lower epsilon each pay off above epsilon ~ 3).

Extra sets (issue 48 item 1: a table wider than k, for a conditional, a mean, an extreme over reports, a
group or an explicit ``sets`` entry): each set E wider than k adds its subsets of more than k bits to the
pool, so E's table is estimated as every k-bit table is, from the coefficients of its subsets. Their
``sqrt`` weight is 1, that of a top-order coefficient (``sqrt(C(d-j, k-j))`` at j = k): the same Lagrange
rule with each such coefficient in one target table (E's); every coefficient of one order keeps one
weight, so a client reads one weight per order 1..top. The pool's growth dilutes every weight: the
variances (:meth:`HadamardSampling.table_variance_per_report`, what ``plan`` states) include it. Without
extra sets the pool, the weights and the reports are exactly those of the plain mechanism.

Accumulator: per coefficient, how many slots drew it (``n_a``) and how many of them sent an odd
parity (``o_a``): integer sums over reports, so merging is addition.

Estimate (per coefficient, ``c = (e^e' + 1)/(e^e' - 1)``, ``e' = epsilon / m``)::

    theta_a = c (n_a - 2 o_a) / n_a

Variance and covariance conditional on the counts ``n`` and on the window's true reports (the
same conditioning as TMDH: given ``n``, which of the ``M = N m`` slots drew ``a`` is a simple
random sample without replacement, and the noise is independent per slot)::

    Var(theta_a)         = (c^2 - 1) / n_a  +  (M - n_a) / (n_a (M - 1)) (1 - theta_a^2)
    Cov(theta_a, theta_b) = -(theta_{a ^ b} - theta_a theta_b) / (M - 1)          (a != b)

The first term is the randomized response, the second the sampling of slots (the paper's
``(c^2 - theta^2) / n_a`` is their sum without the finite-population correction). Cell covariances
of a table follow by the Hadamard transform; they need theta of ``a ^ b`` (a subset of K), so a
table's variance needs nothing beyond the coefficients of its own subsets. Plugged-in estimates
(``theta^2`` capped at 1) give the published variances.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.intervals import normal_interval
from ldp_marginals.ldp.randomizer import SecureUniform
from ldp_marginals.ldp.sets import SetFamily, _normalize, extra_sets, family_from_spec
from ldp_marginals.ldp.tables import MarginalTable

WEIGHTS = ("sqrt", "uniform")
_MAX_SLOTS = 64


def rr_scale(epsilon: float) -> float:
    """``c = (e^eps + 1)/(e^eps - 1)``: the factor that debiases a +-1 randomized-response answer."""
    e = math.exp(check_positive("epsilon", epsilon))
    return (e + 1.0) / (e - 1.0)


def best_slots(epsilon: float, limit: int = _MAX_SLOTS) -> int:
    """The number of coefficients per report that minimizes ``c(epsilon/m)^2 / m``, the noise per
    slot at data-free worst case (theta = 0): 1 up to epsilon ~ 3, 2 at 4, 4 at 8."""
    check_positive("epsilon", epsilon)
    return min(range(1, check_int("limit", limit, minimum=1) + 1), key=lambda m: rr_scale(epsilon / m) ** 2 / m)


@dataclass(frozen=True)
class HadamardSampling:
    """Parameters of a Hadamard-sampling collection: ``n_bits`` bits, tables up to ``max_order``,
    a whole report ``epsilon``-LDP, ``slots`` coefficients per report (``None``: :func:`best_slots`)
    drawn with ``weights`` ``"sqrt"`` (default) or ``"uniform"`` (InpHT); ``sets``: extra sets (bit index
    tuples) whose tables are estimated too (module docstring), kept as the sorted distinct sets wider than
    ``max_order`` (a narrower one is in the pool already)."""

    n_bits: int
    max_order: int
    epsilon: float
    slots: int | None = None
    weights: str = "sqrt"
    sets: tuple = ()
    family: SetFamily = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        d = check_int("n_bits", self.n_bits, minimum=1)
        k = check_int("max_order", self.max_order, minimum=1)
        if k > d:
            raise ValueError(f"max_order must be <= n_bits={d}, got max_order={self.max_order}")
        eps = check_positive("epsilon", self.epsilon)
        m = best_slots(eps) if self.slots is None else check_int("slots", self.slots, minimum=1)
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {WEIGHTS}, got weights={self.weights!r}")
        object.__setattr__(self, "slots", m)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "sets", extra_sets(d, k, self.sets))
        object.__setattr__(self, "family", family_from_spec(d, k, self.sets))

    @property
    def top_order(self) -> int:
        """The widest table estimated: ``max_order``, or the widest extra set."""
        return self.family.top_order

    @property
    def n_coefficients(self) -> int:
        """``T``: the coefficients a report can carry (family indices 1..T; index 0 is the empty set)."""
        return len(self.family) - 1

    @property
    def slot_epsilon(self) -> float:
        return self.epsilon / self.slots

    @property
    def keep(self) -> float:
        """Probability that a slot sends its true parity: ``e^e' / (1 + e^e')``."""
        return 1.0 / (1.0 + math.exp(-self.slot_epsilon))

    @property
    def scale(self) -> float:
        return rr_scale(self.slot_epsilon)

    @cached_property
    def probabilities(self) -> np.ndarray:
        """``w``: the probability of each coefficient (family index 1..T), in family order: ``sqrt(C(d-j, k-j))``
        for order j <= k, 1 above (module docstring), or uniform; normalized over the pool."""
        d, k, fam = self.n_bits, self.max_order, self.family
        orders = np.concatenate([np.full(fam.members(j).shape[0], j) for j in range(1, fam.top_order + 1)])
        if self.weights == "uniform":
            w = np.ones(orders.size)
        else:
            w = np.sqrt([math.comb(d - j, k - j) if j <= k else 1 for j in orders])
        w = w / w.sum()
        w.setflags(write=False)
        return w

    def table_variance_per_report(self, order: int | None = None) -> float:
        """N times the worst-case (every theta = 0) trace of an ``order``-bit table's frequency
        covariance as N grows (``order`` defaults to ``max_order``): with ``n_b = N m w_b`` slots,
        ``N Var(theta_b) -> (c^2 - w_b) / (m w_b)``, and a table's trace is ``2^-o sum_{b in K} Var(theta_b)``
        (the cells are ``2^-o H theta`` with ``H H = 2^o I``)."""
        o = self.max_order if order is None else check_int("order", order, minimum=1)
        if o > self.top_order:
            raise ValueError(f"order must be <= {self.top_order} (max_order or the widest extra set), "
                             f"got order={order}")
        first = self.family.offset(1)
        total = 0.0
        for j in range(1, o + 1):              # a table's C(o, j) coefficients of order j share one weight
            w = float(self.probabilities[self.family.offset(j) - first])
            total += math.comb(o, j) * (self.scale ** 2 - w) / (self.slots * w)
        return total / (1 << o)

    @cached_property
    def masks(self) -> np.ndarray:
        """Bit mask of each coefficient's set (family index 1..T), for parities of packed bits."""
        return np.array([sum(1 << i for i in self.family[j]) for j in range(1, len(self.family))], dtype=np.int64)


def _bit_masks(bits: np.ndarray) -> np.ndarray:
    if bits.shape[1] > 62:
        raise ValueError(f"Hadamard sampling holds at most 62 bits, got n_bits={bits.shape[1]}")
    return (bits.astype(np.int64) << np.arange(bits.shape[1], dtype=np.int64)).sum(axis=1)


def randomize_hadamard(bits, mechanism: HadamardSampling, rng=None):
    """What a device sends: true 0/1 ``bits`` ``(n, d)`` (or ``(d,)``) -> ``(indices, parities)``,
    each ``(n, m)``: the family index (1..T) of each sampled coefficient and its randomized parity
    (0 even, 1 odd). ``rng`` is a seeded ``numpy.random.Generator``; ``None`` uses the OS CSPRNG."""
    x = np.asarray(bits)
    single = x.ndim == 1
    x = np.atleast_2d(x)
    if x.shape[1] != mechanism.n_bits or not np.isin(x, (0, 1)).all():
        raise ValueError(f"bits must be 0/1 with {mechanism.n_bits} columns, got shape={np.shape(bits)}")
    source = SecureUniform() if rng is None else rng
    n, m = x.shape[0], mechanism.slots
    cdf = np.cumsum(mechanism.probabilities)
    cdf[-1] = 1.0
    pos = np.minimum(np.searchsorted(cdf, source.random((n, m)), side="right"), cdf.size - 1)
    parity = (np.bitwise_count(_bit_masks(x)[:, None] & mechanism.masks[pos]) & 1).astype(np.uint8)
    flip = (source.random((n, m)) >= mechanism.keep).astype(np.uint8)
    indices, parities = (pos + 1).astype(np.int32), parity ^ flip
    return (indices[0], parities[0]) if single else (indices, parities)


def checked_slots(mechanism: HadamardSampling, indices, parities) -> tuple:
    """``(indices, parities)`` as ``(n, m)`` arrays, or a ValueError: each slot names a coefficient (1..T) and
    sends a parity 0 or 1."""
    idx, par = np.atleast_2d(np.asarray(indices)), np.atleast_2d(np.asarray(parities))
    m, t = mechanism.slots, mechanism.n_coefficients
    if idx.shape != par.shape or idx.shape[1] != m:
        raise ValueError(f"indices and parities must both have shape (n, {m}), got {idx.shape} and {par.shape}")
    if idx.size and (idx.min() < 1 or idx.max() > t):
        raise ValueError(f"indices must be in [1, {t}], got min={idx.min()}, max={idx.max()}")
    if not np.isin(par, (0, 1)).all():
        raise ValueError("parities must be 0 or 1")
    return idx, par


class HadamardAccumulator:
    """Mergeable counts of a Hadamard-sampling window.

    accumulator: ``n_reports`` int; ``drawn`` int64[T+1] (slots per coefficient, index 0 unused);
    ``odd`` int64[T+1] (of them, slots that sent an odd parity).
    """

    def __init__(self, mechanism: HadamardSampling):
        self.mechanism = mechanism
        self.n_reports = 0
        self.drawn = np.zeros(mechanism.n_coefficients + 1, dtype=np.int64)
        self.odd = np.zeros(mechanism.n_coefficients + 1, dtype=np.int64)

    def add(self, indices, parities) -> "HadamardAccumulator":
        idx, par = checked_slots(self.mechanism, indices, parities)
        t = self.mechanism.n_coefficients
        flat = idx.ravel()
        self.drawn += np.bincount(flat, minlength=t + 1)
        self.odd += np.bincount(flat, weights=par.ravel(), minlength=t + 1).astype(np.int64)
        self.n_reports += idx.shape[0]
        return self

    def merge(self, other: "HadamardAccumulator") -> "HadamardAccumulator":
        if other.mechanism != self.mechanism:
            raise ValueError(f"cannot merge accumulators of different mechanisms: {self.mechanism} and {other.mechanism}")
        self.n_reports += other.n_reports
        self.drawn += other.drawn
        self.odd += other.odd
        return self


@dataclass(frozen=True)
class HadamardEstimate:
    """Coefficient estimates ``theta`` (family order, ``theta[0] = 1``) of a window, with the
    closed-form (co)variances of the module docstring."""

    mechanism: HadamardSampling
    n_reports: int
    drawn: np.ndarray
    theta: np.ndarray

    @property
    def slots_total(self) -> int:
        return self.n_reports * self.mechanism.slots

    def _theta_of(self, s: tuple) -> float:
        return self.theta[self.mechanism.family.index(s)]

    def coefficient_variances(self, theta=None) -> np.ndarray:
        """Variance of every coefficient estimate (family order; 0 for the known theta_{} and inf where
        no slot drew it), at ``theta`` (family order) or at the plugged-in estimates."""
        th = self.theta if theta is None else np.asarray(theta, dtype=np.float64)
        mm, n = self.slots_total, self.drawn.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            sampling = (mm - n) / (n * (mm - 1)) if mm > 1 else np.zeros_like(n)
            var = (self.mechanism.scale ** 2 - 1.0) / n + sampling * (1.0 - np.minimum(th ** 2, 1.0))
        var[n == 0] = np.inf
        var[0] = 0.0
        return var

    def coefficient_covariance(self, sets, truth=None) -> np.ndarray:
        """Covariance of the estimates of ``sets`` (subsets of the family, empty set allowed: zero),
        at ``truth`` (a function set -> theta) or at the plugged-in estimates."""
        theta_of = self._theta_of if truth is None else truth
        fam = self.mechanism.family
        sets = [_normalize(fam.n_bits, s) for s in sets]
        mm, noise = self.slots_total, self.mechanism.scale ** 2 - 1.0
        th = np.array([theta_of(s) if s else 1.0 for s in sets])
        cov = np.zeros((len(sets), len(sets)))
        for a, sa in enumerate(sets):
            if not sa:
                continue
            n_a = self.drawn[fam.index(sa)]
            if n_a == 0:
                cov[a, a] = np.inf
                continue
            sampling = (mm - n_a) / (n_a * (mm - 1)) if mm > 1 else 0.0
            cov[a, a] = noise / n_a + sampling * (1.0 - min(th[a] ** 2, 1.0))
            for b in range(a + 1, len(sets)):
                sb = sets[b]
                if not sb or mm <= 1:
                    continue
                sym = tuple(sorted(set(sa) ^ set(sb)))
                cov[a, b] = cov[b, a] = -((theta_of(sym) if sym else 1.0) - th[a] * th[b]) / (mm - 1)
        return cov

    def table(self, columns, labels=None, truth=None) -> MarginalTable:
        """The ``2^k``-cell table of bits ``columns`` (estimated counts ``N pi``, cell ``b`` as in
        :mod:`ldp.tables`), with its covariance (at ``truth`` when given)."""
        fam = self.mechanism.family
        cols = _normalize(fam.n_bits, columns)
        if not cols or cols not in fam:
            raise ValueError(f"columns must name 1..{fam.max_order} bits or an extra set's bits, got "
                             f"columns={list(columns)}")
        k = len(cols)
        subsets = [tuple(cols[j] for j in range(k) if b >> j & 1) for b in range(1 << k)]
        h = hadamard_signs(k)
        th = np.array([self._theta_of(s) if s else 1.0 for s in subsets])
        pi = h @ th / (1 << k)
        coef = self.coefficient_covariance(subsets, truth)
        if np.isfinite(coef).all():
            cov = h @ coef @ h.T / float(1 << (2 * k))
        else:   # a coefficient no slot drew: every cell carries it (signs +-1), so every (co)variance is infinite
            cov = np.full((1 << k, 1 << k), np.inf)
        n = self.n_reports
        return MarginalTable(cols, tuple(labels or (str(c) for c in cols)), n, n * pi, n * n * cov)

    def frequencies(self, order: int) -> np.ndarray:
        """Every table of ``order`` bits at once, ``(C(d, order), 2^order)`` frequencies, sets in family order."""
        fam = self.mechanism.family
        sub = fam.subset_indices(check_int("order", order, minimum=1))
        return self.theta[sub] @ hadamard_signs(order).T / float(1 << order)

    def intervals(self, level: float = 0.95):
        """Normal intervals of every coefficient (family order; index 0 is the known 1)."""
        return normal_interval(self.theta, self.coefficient_variances(), level)


def hadamard_signs(k: int) -> np.ndarray:
    """``H[z, b] = (-1)^(|z & b|)`` for cells ``z`` and subsets ``b`` of k bits (symmetric, H^2 = 2^k I)."""
    z = np.arange(1 << k)
    return 1.0 - 2.0 * (np.bitwise_count(z[:, None] & z[None, :]) & 1)


def estimate_hadamard(acc: HadamardAccumulator) -> HadamardEstimate:
    """theta_a = c (n_a - 2 o_a) / n_a per coefficient (NaN where no slot drew it); theta_{} = 1."""
    mech = acc.mechanism
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = mech.scale * (acc.drawn - 2.0 * acc.odd) / acc.drawn
    theta[0] = 1.0
    return HadamardEstimate(mech, acc.n_reports, acc.drawn.copy(), theta)


def true_coefficients(bits, family: SetFamily) -> np.ndarray:
    """theta of every set of ``family`` on true 0/1 ``bits`` ``(n, d)`` (for tests and the bench)."""
    x = np.asarray(bits)
    masks = _bit_masks(x)
    out = np.empty(len(family))
    for j, s in enumerate(family):
        mask = sum(1 << i for i in s)
        out[j] = 1.0 - 2.0 * (np.bitwise_count(masks & mask) & 1).mean()
    return out
