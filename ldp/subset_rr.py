"""Subset randomized response: a whole report epsilon-LDP as one sampled subset of ``s`` bits whose
``2^s`` pattern is sent by k-ary randomized response.

Mechanism. A device draws a set S of ``s`` of its ``d`` bits uniformly (``width`` s, ``k <= s <= d``)
and sends S and its pattern ``x_S`` through generalized randomized response over the ``D = 2^s``
patterns: the true one with probability ``p = e^eps / (e^eps + D - 1)``, each other with
``q = 1 / (e^eps + D - 1)``. S does not depend on x, so the report is epsilon-LDP. ``s = k`` is
MargPS and ``s = d`` is randomized response over the whole input ("InpPS"; both Cormode,
Kulkarni & Srivastava, SIGMOD 2018); between them, a wider subset reaches every table through more
reports but spreads the same epsilon over more patterns.

Projection. On a table K (``o = |K|`` bits) inside S, the pattern sent is again k-ary randomized
response over ``2^o`` cells, with ``p' = p + (2^(s-o) - 1) q`` and ``q' = 2^(s-o) q``; ``p' - q' = p - q
=: delta`` whatever o.

Accumulator: per table K of every order ``1..max_order``, how many reports' subsets held K and sent
each cell of K (``counts[o][K, z]``): integer sums, so merging is addition.

Estimate of K's table from its ``n_K`` reports (those whose S holds K), with the shares
``P = counts / n_K``::

    pi_K = (P - q') / delta

Covariance, conditional on ``n_K`` and on the window's true reports (given ``n_K``, which reports
hold K is a simple random sample without replacement of the N; the noise is independent per
report; ``Pbar = q' + delta pi_K`` = E[P])::

    Cov(pi_K) = (diag(Pbar) - Pbar Pbar^T) / (n_K delta^2)  -  (n_K - 1) / (n_K (N - 1)) (diag(pi_K) - pi_K pi_K^T)

(the first term is the multinomial of the shares, the second takes out the part of it that is the
sample's own spread and puts back the finite-population sampling; at ``s = k`` each cell's variance
is MargPS's ``(pi p(1-p) + (1-pi) q(1-q)) / (n_K delta^2) + (N - n_K)/(n_K (N - 1)) pi (1 - pi)``).
Plugged in, ``Pbar`` is the observed share ``P``.

Choice of s (:func:`best_width`). The trace of that covariance (the table's summed cell variance) is
largest for a uniform table; at the expected ``n_K = f_o N`` with ``f_o = prod_{i<o} (s-i)/(d-i)`` (the
share of subsets that hold a given K), N times the trace tends to::

    V_o(s) = (1 - 2^-o) (1 / (f_o delta^2) - 1),     delta = (e^eps - 1) / (e^eps + 2^s - 1)

a closed form of d, o, eps and s alone: the default width minimizes ``V_k``. At d = 7, k = 3 it is
s = 4 at epsilon 0.5 to 2, 6 at epsilon 4 and 7 (the whole input) at 8; at d = 20, 10 at epsilon 8.

Extra sets (issue 48 item 1: a table wider than k, for a conditional, a mean, an extreme over reports, a
group or an explicit ``sets`` entry; :attr:`SubsetRR.sets`). A report already sends the pattern of all
``s`` bits of its subset, so every table of at most ``s`` bits is estimated exactly as a k-bit one, from
the ``n_E = f_|E| N`` reports whose subset holds E, with the projection and covariance above at
``o = |E|``: the job counts E's cells beside the k-bit tables, and the device does nothing new (its
client config, the width and keep, is the same). So the design is the plain one with a width of at least
the widest extra set: the default width minimizes ``V_k`` over ``[max(k, widest), d]``; a set wider than
the width is held by no report and cannot be estimated (schemas/composition.py refuses it, rule
kind-subset-width: raise the width). Without extra sets nothing changes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.randomizer import SecureUniform
from ldp_marginals.ldp.sets import SetFamily, _normalize, extra_sets, family_from_spec
from ldp_marginals.ldp.tables import MarginalTable

_MAX_BITS = 62      # subsets and patterns are int64 bit masks
_CHUNK = 8192       # reports per vectorized pass of the accumulator


def holding_share(n_bits: int, width: int, order: int) -> float:
    """``f_o``: the probability that a uniform subset of ``width`` of ``n_bits`` bits holds a given set of
    ``order`` bits."""
    return math.prod((width - i) / (n_bits - i) for i in range(order))


def table_variance_per_report(n_bits: int, width: int, order: int, epsilon: float) -> float:
    """``V_o(s)`` of the module docstring: N times the worst-case trace of an ``order``-bit table's
    frequency covariance, as N grows."""
    e = math.exp(check_positive("epsilon", epsilon))
    delta = (e - 1.0) / (e + (1 << width) - 1.0)
    return (1.0 - 2.0 ** -order) * (1.0 / (holding_share(n_bits, width, order) * delta * delta) - 1.0)


def best_width(n_bits: int, max_order: int, epsilon: float, at_least: int = 1) -> int:
    """The width ``s`` in ``[max(max_order, at_least), n_bits]`` that minimizes the worst-case variance of the
    top-order tables (:func:`table_variance_per_report`); ``at_least``: the widest extra set."""
    d = check_int("n_bits", n_bits, minimum=1)
    k = check_int("max_order", max_order, minimum=1)
    if k > d:
        raise ValueError(f"max_order must be <= n_bits={d}, got max_order={max_order}")
    low = max(k, check_int("at_least", at_least, minimum=1))
    if low > d:
        raise ValueError(f"at_least must be <= n_bits={d}, got at_least={at_least}")
    return min(range(low, min(d, _MAX_BITS) + 1), key=lambda s: table_variance_per_report(d, s, k, epsilon))


@dataclass(frozen=True)
class SubsetRR:
    """``n_bits`` bits, tables up to ``max_order``, a whole report ``epsilon``-LDP, subsets of ``width``
    bits (``None``: :func:`best_width`, at least the widest extra set); ``sets``: extra sets (bit index
    tuples, each at most ``width`` bits) whose tables are estimated too (module docstring), kept as the
    sorted distinct sets wider than ``max_order``."""

    n_bits: int
    max_order: int
    epsilon: float
    width: int | None = None
    sets: tuple = ()

    def __post_init__(self):
        d = check_int("n_bits", self.n_bits, minimum=1)
        k = check_int("max_order", self.max_order, minimum=1)
        if d > _MAX_BITS:
            raise ValueError(f"subset RR holds at most {_MAX_BITS} bits, got n_bits={d}")
        if k > d:
            raise ValueError(f"max_order must be <= n_bits={d}, got max_order={self.max_order}")
        eps = check_positive("epsilon", self.epsilon)
        extra = extra_sets(d, k, self.sets)
        widest = max([k] + [len(e) for e in extra])
        s = best_width(d, k, eps, widest) if self.width is None else check_int("width", self.width, minimum=1)
        if not k <= s <= d:
            raise ValueError(f"width must be in [max_order={k}, n_bits={d}], got width={self.width}")
        if s < widest:
            raise ValueError(f"width must be at least the widest extra set ({widest} bits: no subset of fewer holds "
                             f"it), got width={self.width}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "width", s)
        object.__setattr__(self, "sets", extra)

    @property
    def family(self) -> SetFamily:
        """Every set of 1..max_order bits and every subset of an extra set (index 0: the empty set), the
        order of the tables."""
        return family_from_spec(self.n_bits, self.max_order, self.sets)

    @property
    def top_order(self) -> int:
        """The widest table estimated: ``max_order``, or the widest extra set."""
        return self.family.top_order

    @property
    def p(self) -> float:
        """Probability of sending the true pattern of the subset."""
        e = math.exp(self.epsilon)
        return e / (e + (1 << self.width) - 1)

    @property
    def q(self) -> float:
        """Probability of sending any one other pattern."""
        return 1.0 / (math.exp(self.epsilon) + (1 << self.width) - 1)

    def projected(self, order: int) -> tuple:
        """``(p', q')``: the randomized response a table of ``order`` bits inside the subset sees."""
        extra = 1 << (self.width - check_int("order", order, minimum=0))
        return self.p + (extra - 1) * self.q, extra * self.q

    def table_variance_per_report(self, order: int | None = None) -> float:
        """:func:`table_variance_per_report` of this mechanism (``order`` defaults to ``max_order``)."""
        o = self.max_order if order is None else order
        return table_variance_per_report(self.n_bits, self.width, o, self.epsilon)


def _check_bits(bits, d: int) -> np.ndarray:
    x = np.atleast_2d(np.asarray(bits))
    if x.shape[1] != d or not np.isin(x, (0, 1)).all():
        raise ValueError(f"bits must be 0/1 with {d} columns, got shape={np.shape(bits)}")
    return x


def randomize_subset(bits, mechanism: SubsetRR, rng=None):
    """What a device sends: true 0/1 ``bits`` ``(n, d)`` (or ``(d,)``) -> ``(subsets, patterns)``, each
    int64 ``(n,)``: the sampled subset as a bit mask (bit i <-> bit i of the report) and the sent
    pattern as the values of those bits at their own positions (0 elsewhere). ``rng`` is a seeded
    ``numpy.random.Generator``; ``None`` uses the OS CSPRNG."""
    single = np.asarray(bits).ndim == 1
    x = _check_bits(bits, mechanism.n_bits)
    source = SecureUniform() if rng is None else rng
    n, d, s = x.shape[0], mechanism.n_bits, mechanism.width
    big = 1 << s
    chosen = np.sort(np.argsort(source.random((n, d)), axis=1)[:, :s], axis=1)   # a uniform s-subset
    shift = np.arange(s, dtype=np.int64)
    cell = (x[np.arange(n)[:, None], chosen].astype(np.int64) << shift).sum(axis=1)
    other = (cell + 1 + np.minimum((source.random(n) * (big - 1)).astype(np.int64), big - 2)) % big
    sent = np.where(source.random(n) < mechanism.p, cell, other)
    subsets = (np.int64(1) << chosen.astype(np.int64)).sum(axis=1)
    patterns = (((sent[:, None] >> shift) & 1) << chosen.astype(np.int64)).sum(axis=1)
    return (subsets[0], patterns[0]) if single else (subsets, patterns)


class SubsetAccumulator:
    """Mergeable counts of a subset-RR window.

    accumulator: ``n_reports`` int; ``counts[o]`` int64 ``(sets of o bits, 2^o)`` for o = 1..top_order (index 0
    unused): the reports whose subset held each counted set of o bits (``family.members(o)`` order: all
    of them up to max_order, the extra sets' subsets above) and sent each of its cells.
    """

    def __init__(self, mechanism: SubsetRR):
        self.mechanism = mechanism
        fam = mechanism.family
        self.n_reports = 0
        self.counts = [np.zeros((0, 1), dtype=np.int64)] + [
            np.zeros((fam.members(o).shape[0], 1 << o), dtype=np.int64) for o in range(1, mechanism.top_order + 1)]

    def add(self, subsets, patterns) -> "SubsetAccumulator":
        mech = self.mechanism
        sub = np.atleast_1d(np.asarray(subsets, dtype=np.int64))
        pat = np.atleast_1d(np.asarray(patterns, dtype=np.int64))
        if sub.shape != pat.shape or sub.ndim != 1:
            raise ValueError(f"subsets and patterns must both have shape (n,), got {sub.shape} and {pat.shape}")
        if sub.size:
            if (sub < 0).any() or (sub >> mech.n_bits).any():
                raise ValueError(f"subsets must be bit masks of {mech.n_bits} bits")
            if (np.bitwise_count(sub) != mech.width).any():
                raise ValueError(f"every subset must hold width={mech.width} bits")
            if (pat & ~sub).any():
                raise ValueError("patterns must set no bit outside their subset")
        fam = mech.family
        for start in range(0, sub.size, _CHUNK):
            s, v = sub[start:start + _CHUNK], pat[start:start + _CHUNK]
            held = (s[:, None] >> np.arange(mech.n_bits, dtype=np.int64)) & 1
            pos = np.nonzero(held)[1].reshape(s.size, mech.width)         # each subset's bits, ascending
            val = (v[:, None] >> pos) & 1
            for o in range(1, mech.top_order + 1):
                combos = np.array(list(combinations(range(mech.width), o)), dtype=np.int64)   # (C(s, o), o)
                sets = pos[:, combos].reshape(-1, o)                        # every table each subset holds
                row = fam.lookup(sets) - fam.offset(o)
                code = (val[:, combos].reshape(-1, o) << np.arange(o, dtype=np.int64)).sum(axis=1)
                if o > mech.max_order:   # above max_order only the extra sets' subsets are counted
                    counted = row >= 0
                    row, code = row[counted], code[counted]
                flat = self.counts[o].reshape(-1)
                flat += np.bincount(row * (1 << o) + code, minlength=flat.size)
        self.n_reports += int(sub.size)
        return self

    def merge(self, other: "SubsetAccumulator") -> "SubsetAccumulator":
        if other.mechanism != self.mechanism:
            raise ValueError(f"cannot merge accumulators of different mechanisms: {self.mechanism} and {other.mechanism}")
        self.n_reports += other.n_reports
        for mine, theirs in zip(self.counts[1:], other.counts[1:]):
            mine += theirs
        return self


@dataclass(frozen=True)
class SubsetEstimate:
    """Table estimates of a subset-RR window with the closed-form covariance of the module docstring."""

    mechanism: SubsetRR
    n_reports: int
    counts: tuple          # counts[o], as the accumulator's

    def drawn(self, order: int) -> np.ndarray:
        """``n_K`` of every set of ``order`` bits (``family.members(order)`` order)."""
        return self.counts[order].sum(axis=-1)

    def frequencies(self, order: int) -> np.ndarray:
        """Every table of ``order`` bits, ``(C(d, order), 2^order)`` frequencies (cell b: bit j <-> the
        set's j-th bit); NaN rows where no report's subset held the set."""
        o = check_int("order", order, minimum=1)
        if o > self.mechanism.top_order:
            raise ValueError(f"order must be <= {self.mechanism.top_order} (max_order or the widest extra set), got "
                             f"order={order}")
        c = self.counts[o].astype(np.float64)     # (..., C(d, o), 2^o): leading axes (many windows) allowed
        n = c.sum(axis=-1, keepdims=True)
        p1, q1 = self.mechanism.projected(o)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (c / n - q1) / (p1 - q1)

    def covariance(self, columns, truth=None) -> np.ndarray:
        """Covariance of the frequencies of the table of bits ``columns``, at the true table ``truth``
        (frequencies) or at the plugged-in estimate; inf where no report held the set."""
        cols = _normalize(self.mechanism.n_bits, columns)
        o = len(cols)
        if o < 1 or cols not in self.mechanism.family:
            raise ValueError(f"columns must name 1..{self.mechanism.max_order} bits or an extra set's bits, got "
                             f"columns={list(columns)}")
        row = self.mechanism.family.index(cols) - self.mechanism.family.offset(o)
        n_k, big_n = float(self.drawn(o)[row]), float(self.n_reports)
        if n_k == 0:
            return np.full((1 << o, 1 << o), np.inf)
        if truth is None:
            p1, q1 = self.mechanism.projected(o)
            pi = (self.counts[o][row] / n_k - q1) / (p1 - q1)
        else:
            pi = np.asarray(truth, dtype=np.float64)
        return table_covariance(pi, n_k, big_n, self.mechanism, o)

    def table(self, columns, labels=None, truth=None) -> MarginalTable:
        """The table of bits ``columns`` as estimated counts ``N pi`` with their covariance."""
        cols = _normalize(self.mechanism.n_bits, columns)
        o = len(cols)
        cov = self.covariance(cols, truth)
        row = self.mechanism.family.index(cols) - self.mechanism.family.offset(o)
        n = self.n_reports
        names = tuple(labels or (str(c) for c in cols))
        return MarginalTable(cols, names, n, n * self.frequencies(o)[row], n * n * cov)


def table_covariance(pi, n_k: float, n_total: float, mechanism: SubsetRR, order: int) -> np.ndarray:
    """The module docstring's covariance of one table's frequencies at ``pi``, from ``n_k`` of ``n_total``
    reports."""
    pi = np.asarray(pi, dtype=np.float64)
    p1, q1 = mechanism.projected(order)
    delta = p1 - q1
    shares = q1 + delta * pi
    noise = (np.diag(shares) - np.outer(shares, shares)) / (n_k * delta * delta)
    spread = (n_k - 1) / (n_k * (n_total - 1)) if n_total > 1 else 0.0
    return noise - spread * (np.diag(pi) - np.outer(pi, pi))


def estimate_subset(acc: SubsetAccumulator) -> SubsetEstimate:
    return SubsetEstimate(acc.mechanism, acc.n_reports, tuple(c.copy() for c in acc.counts))
