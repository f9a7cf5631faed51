"""Memoization for the whole-report kinds (``hadamard``, ``subset``; docs/client.md section 13), Beam-free:
the two stages a device runs, the effective mechanism the server inverts, and the epsilons.

A device keeps one *permanent* response per distinct value (its true bits): the kind's randomizer run
once at ``epsilon_infinity`` with coins derived from its secret. Each report then re-randomizes the
permanent response with fresh coins, keeping what the kind cannot hide from the value anyway (hadamard: the
slots' coefficient indices; subset: the chosen positions), through the kind's own randomized response at
``epsilon_I``:

- hadamard: each slot's permanent parity through a symmetric flip, ``2 keep - 1 = tanh(e / 2)`` per slot at
  ``e = epsilon / slots``; two flips compose by multiplying ``2 keep - 1``, so the effective mechanism is
  Hadamard sampling at ``epsilon_1`` with ``tanh(epsilon_1 / 2m) = tanh(epsilon_inf / 2m) tanh(epsilon_I / 2m)``;
- subset: the permanent pattern through subset RR over the ``K = 2^s`` patterns (keep ``p``, else a uniform
  other pattern); two such channels compose into one: ``p* = p_P p_I + (1 - p_P)(1 - p_I)/(K - 1)``, i.e.
  subset RR at ``epsilon_1 = ln(p* (K - 1) / (1 - p*))``.

So the server inverts the kind's mechanism at ``epsilon_1`` (:func:`effective`), which is also one report's
epsilon (the effective channel is the kind's at epsilon_1, epsilon_1 < epsilon_inf), and a device that
holds one value for ever spends ``epsilon_inf`` however many reports it sends; a device whose reports of a
window hold V distinct values spends at most ``min(n epsilon_1, V epsilon_inf)``.

In the job (``channel: {kind: ..., epsilon: <epsilon_inf>, memoize: true, epsilon_1: ...}``,
schemas/channel_kinds.py): :func:`with_kind_repeats` gives a window's marginals and every table the repeats
term of a device's reports sharing their permanent response (:func:`table_with_repeats`), so every statistic
derived from them carries it; :class:`WholeReportSpend` is what ldp/longitudinal.py reads for the day's and
month's figures (``n`` reports of one value: ``min(n epsilon_1, epsilon_inf)``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.hadamard import HadamardSampling, randomize_hadamard
from ldp_marginals.ldp.subset_rr import SubsetRR, randomize_subset


def _with_epsilon(mechanism, epsilon: float):
    if isinstance(mechanism, SubsetRR):
        return SubsetRR(mechanism.n_bits, mechanism.max_order, epsilon, mechanism.width, mechanism.sets)
    if isinstance(mechanism, HadamardSampling):
        return HadamardSampling(mechanism.n_bits, mechanism.max_order, epsilon, mechanism.slots, mechanism.weights,
                                mechanism.sets)
    raise ValueError(f"mechanism must be a HadamardSampling or a SubsetRR, got mechanism={mechanism!r}")


@dataclass(frozen=True)
class MemoizedKind:
    """The two stages of a memoized whole-report collection: ``permanent`` (the kind at epsilon_inf) and
    ``instantaneous`` (the kind at epsilon_I), same order, slots/width and weights."""

    permanent: object
    instantaneous: object

    @classmethod
    def of(cls, mechanism, epsilon_1: float) -> "MemoizedKind":
        """The stages for ``mechanism`` (the kind at ``epsilon_inf``, what the config's ``epsilon`` makes) and
        one report's ``epsilon_1`` (``0 < epsilon_1 < epsilon_inf``)."""
        e1 = check_positive("epsilon_1", epsilon_1)
        e_inf = float(mechanism.epsilon)
        if not e1 < e_inf:
            raise ValueError(f"epsilon_1 must be below the permanent response's epsilon {e_inf!r} (epsilon_infinity), "
                             f"got epsilon_1={epsilon_1!r}")
        if isinstance(mechanism, SubsetRR):
            k = 2.0 ** mechanism.width
            p_p, p_star = mechanism.p, math.exp(e1) / (math.exp(e1) + k - 1.0)
            q_p = (1.0 - p_p) / (k - 1.0)
            p_i = (p_star - q_p) / (p_p - q_p)
            e_i = math.log(p_i * (k - 1.0) / (1.0 - p_i))
        else:
            m = mechanism.slots
            e_i = 2.0 * m * math.atanh(math.tanh(e1 / (2.0 * m)) / math.tanh(e_inf / (2.0 * m)))
        return cls(mechanism, _with_epsilon(mechanism, e_i))

    @property
    def epsilon_infinity(self) -> float:
        return float(self.permanent.epsilon)

    @property
    def epsilon_1(self) -> float:
        return effective_epsilon(self.permanent, self.instantaneous)

    def spent(self, reports: int, values: int) -> float:
        """The epsilon a device spends on ``reports`` reports holding ``values`` distinct values (1 <= values <=
        reports): ``min(reports epsilon_1, values epsilon_infinity)`` (module docstring); 0 for no report."""
        n = check_int("reports", reports, minimum=0)
        v = check_int("values", values, minimum=0)
        if (n == 0) != (v == 0) or v > n:
            raise ValueError(f"values must be in [1, reports={n}] (0 when reports is 0), got values={values!r}")
        return min(n * self.epsilon_1, v * self.epsilon_infinity)

    @property
    def effective(self):
        """The mechanism the server inverts: the kind at ``epsilon_1``."""
        return _with_epsilon(self.permanent, self.epsilon_1)


def effective_epsilon(permanent, instantaneous) -> float:
    """One report's epsilon through both stages (module docstring)."""
    if isinstance(permanent, SubsetRR):
        k = 2.0 ** permanent.width
        p = permanent.p * instantaneous.p + (1.0 - permanent.p) * (1.0 - instantaneous.p) / (k - 1.0)
        return math.log(p * (k - 1.0) / (1.0 - p))
    m = permanent.slots
    return 2.0 * m * math.atanh(math.tanh(permanent.epsilon / (2.0 * m)) * math.tanh(instantaneous.epsilon / (2.0 * m)))


def _devices(true_bits, reports) -> tuple:
    """The simulations' devices: their true bits ``(n, d)`` as uint8 and a report count >= 0 per device."""
    x = np.asarray(true_bits, dtype=np.uint8)
    m = np.asarray(reports, dtype=np.int64)
    if m.shape != (x.shape[0],) or (m < 0).any():
        raise ValueError(f"reports must give a count >= 0 per device ({x.shape[0]}), got reports={reports!r}")
    return x, m


def randomize_memoized_hadamard(true_bits, reports, memo: MemoizedKind, rng: np.random.Generator):
    """Simulation (seeded, vectorized) of memoized Hadamard devices: device d holds ``true_bits[d]`` and sends
    ``reports[d]`` reports; its permanent response (indices, parities) is drawn once at epsilon_inf, each
    report flips each permanent parity afresh with probability ``1 - keep_I``. Returns ``(indices,
    parities, owner)``, one row per report. (The clients of record derive the same law from a device secret:
    tests/ldp/test_kind_memoize.py.)"""
    x, m = _devices(true_bits, reports)
    idx, held = randomize_hadamard(x, memo.permanent, rng)
    owner = np.repeat(np.arange(x.shape[0]), m)
    flip = (rng.random((owner.size, memo.permanent.slots)) >= memo.instantaneous.keep).astype(np.uint8)
    return idx[owner], held[owner] ^ flip, owner


def randomize_memoized_subset(true_bits, reports, memo: MemoizedKind, rng: np.random.Generator):
    """Simulation (seeded, vectorized) of memoized subset-RR devices, as :func:`randomize_memoized_hadamard`:
    the subset and permanent pattern drawn once per device at epsilon_inf, each report keeping the permanent
    pattern with probability ``p_I`` or sending it XOR a uniform non-zero mask on the subset. Returns
    ``(subsets, patterns, owner)`` in :func:`~ldp_marginals.ldp.subset_rr.randomize_subset`'s form."""
    x, m = _devices(true_bits, reports)
    subsets, held = randomize_subset(x, memo.permanent, rng)
    owner = np.repeat(np.arange(x.shape[0]), m)
    sub, pat = subsets[owner], held[owner]
    d, s = x.shape[1], memo.permanent.width
    member = (sub[:, None] >> np.arange(d, dtype=np.int64)) & 1
    chosen = np.sort(np.argsort(-member, axis=1, kind="stable")[:, :s], axis=1).astype(np.int64)
    code = 1 + np.minimum((rng.random(owner.size) * ((1 << s) - 1)).astype(np.int64), (1 << s) - 2)
    mask = (((code[:, None] >> np.arange(s, dtype=np.int64)) & 1) << chosen).sum(axis=1)
    keep = rng.random(owner.size) < memo.instantaneous.p
    return sub, np.where(keep, pat, pat ^ mask), owner


def table_with_repeats(estimate, memo: MemoizedKind, shared_reports: float, columns):
    """The table of ``columns`` of a memoized window (``estimate``, a Hadamard or subset estimate, inverts
    ``memo.effective``) whose devices' reports share their permanent responses: its covariance plus
    ``shared_reports`` times the same table's covariance under the permanent mechanism alone, at the same
    estimates (docs/client.md section 13: two reports of one value have the covariance of one report of the
    permanent stage, since the fresh stage's debiasing is linear; ``shared_reports`` as
    :func:`ldp_marginals.ldp.memoized.repeat_variance`'s: the mean over reports of ``m_d - 1``, or ``M - 1``
    for a bound). ``shared_reports = 0`` is the plain table."""
    s = check_positive("shared_reports", shared_reports, allow_zero=True)
    if estimate.mechanism != memo.effective:
        raise ValueError(f"estimate must invert the effective mechanism {memo.effective}, got {estimate.mechanism}")
    plain = estimate.table(columns)
    if not s:
        return plain
    permanent = replace(estimate, mechanism=memo.permanent)
    if isinstance(memo.permanent, SubsetRR):
        n = float(plain.n)
        extra = n * n * permanent.covariance(plain.columns, truth=plain.estimate / n)
    else:
        extra = permanent.table(columns).covariance
    return replace(plain, covariance=plain.covariance + s * extra)


class RepeatsEstimate:
    """A memoized window's estimate (a ``HadamardEstimate`` or ``SubsetEstimate`` inverting ``memo.effective``)
    whose every table carries the repeats term (:func:`table_with_repeats` at ``shared_reports``); every other
    attribute (``mechanism``, ``drawn``, ``n_reports``, ...) is the estimate's. Tables, consistent tables,
    conditionals, means and extremes over reports all read tables, so all carry the term
    (:mod:`ldp_marginals.ldp.kind_analyses`)."""

    def __init__(self, estimate, memo: MemoizedKind, shared_reports: float):
        self.inner = estimate
        self.memo = memo
        self.shared_reports = check_positive("shared_reports", shared_reports, allow_zero=True)

    def table(self, columns, labels=None, truth=None):
        if labels is not None or truth is not None:
            raise ValueError(f"a memoized window's table is at its estimates, got labels={labels!r}, truth={truth!r}")
        return table_with_repeats(self.inner, self.memo, self.shared_reports, columns)

    def __getattr__(self, name):
        if name in ("inner", "memo", "shared_reports") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def marginal_repeat_variances(marginals, memo: MemoizedKind) -> np.ndarray:
    """Per set of ``marginals.family`` (a memoized window's ``WindowMarginals``, inverting ``memo.effective``)
    the variance of its all-ones count under the permanent mechanism alone at the same estimates: the all-ones
    cell of its table's covariance under ``memo.permanent`` (:func:`table_with_repeats`'s term; 0 for the empty
    set). Hadamard: the coefficients' covariance at ``epsilon_inf`` (``_all_ones``); subset: the diagonal of
    ``subset_rr.table_covariance`` at the all-ones cell, ``N^2 (s (1 - s) / (n_K delta_P^2) - (n_K - 1) / (n_K
    (N - 1)) pi (1 - pi))`` with ``s = q_P + delta_P pi`` the permanent stage's share, vectorized per order."""
    est, family, n = marginals.estimate, marginals.family, float(marginals.n)
    out = np.zeros(len(family))
    if isinstance(memo.permanent, SubsetRR):
        spread = 0.0 if n <= 1 else 1.0 / (n - 1)
        for o in range(1, memo.permanent.max_order + 1):
            p1, q1 = memo.permanent.projected(o)
            delta = p1 - q1
            n_k = est.drawn(o).astype(np.float64)
            at = slice(family.offset(o), family.offset(o) + n_k.size)
            pi = marginals.means[at] / n if n else np.zeros(n_k.size)
            share = q1 + delta * pi
            with np.errstate(invalid="ignore", divide="ignore"):
                var = share * (1 - share) / (n_k * delta * delta) - (n_k - 1) / n_k * spread * pi * (1 - pi)
            out[at] = np.where(n_k > 0, n * n * var, np.inf)
        return out
    from ldp_marginals.ldp.hadamard_reports import _all_ones
    permanent = replace(est, mechanism=memo.permanent)
    for i in range(1, len(family)):
        out[i] = n * n * _all_ones(permanent, family[i])[1]
    return out


def with_kind_repeats(marginals, memo: MemoizedKind, shared_reports: float):
    """A memoized window's ``WindowMarginals`` whose devices' reports share their permanent responses, each
    with at most ``shared_reports`` others in the window (``M - 1`` from the device bound; docs/client.md
    section 13): the variances plus ``shared_reports`` times :func:`marginal_repeat_variances`, and the
    estimate a :class:`RepeatsEstimate` (every table plus ``shared_reports`` times its permanent covariance).
    Each device's reports of one value add ``m (m - 1)`` covariances of one permanent report's, ``m <= M``; a
    device whose value changes adds fewer (the permanent covariance is positive semi-definite), so the term
    bounds the truth. ``shared_reports = 0`` returns ``marginals``."""
    s = check_positive("shared_reports", shared_reports, allow_zero=True)
    if not s:
        return marginals
    if marginals.estimate.mechanism != memo.effective:
        raise ValueError(f"marginals must invert the effective mechanism {memo.effective}, got "
                         f"{marginals.estimate.mechanism}")
    return replace(marginals, variances=marginals.variances + s * marginal_repeat_variances(marginals, memo),
                   estimate=RepeatsEstimate(marginals.estimate, memo, s))


def cell_variance_with_repeats(cell_variance_per_report, memo: MemoizedKind | None, shared_reports: float):
    """The kind's ``cell_variance_per_report(mechanism, order)`` (ldp/channel_kind.py) of a memoized window:
    plus ``shared_reports`` times the permanent mechanism's, the bound the conditionals' presence test reads
    (:meth:`~ldp_marginals.ldp.kind_analyses.KindMarginals.presence_threshold`)."""
    if memo is None or not shared_reports:
        return cell_variance_per_report
    return lambda mechanism, order: (cell_variance_per_report(mechanism, order)
                                     + shared_reports * cell_variance_per_report(memo.permanent, order))


def kind_repeats(n_bits: int, shared_reports: float):
    """The ``repeats`` a memoized kind's :class:`~ldp_marginals.ldp.kind_analyses.KindMarginals` carries for
    :func:`~ldp_marginals.ldp.means.feature_mean` (whose channel variances already hold the term through the
    tables): every bit memoizes, so a numeric bit's encoding noise is multiplied by ``1 + s`` (the permanent
    response is per value, the true bits with the encoded one: a device's reports of one value carry one
    encoded bit; a device whose encoded bit changes holds two values and shares less, so it bounds)."""
    from ldp_marginals.ldp.tmdh import Repeats
    return Repeats(float(shared_reports), np.zeros(n_bits), np.ones(n_bits), np.ones(n_bits, dtype=bool))


@dataclass(frozen=True)
class WholeReportSpend:
    """What a whole-report collection's device spends (:mod:`ldp_marginals.ldp.longitudinal` reads it in place
    of per-bit channels): ``one`` report's epsilon, ``infinity`` for all reports of one value (``inf`` when the
    collection does not memoize: reports compose); ``n`` reports of one value spend at most
    ``min(n one, infinity)`` (module docstring)."""

    one: float
    infinity: float = math.inf

    def at_most(self, reports: int) -> float:
        n = check_int("reports", reports, minimum=0)
        return 0.0 if n == 0 else min(n * self.one, self.infinity)

    @classmethod
    def of(cls, mechanism, memo: MemoizedKind | None) -> "WholeReportSpend":
        if memo is None:
            return cls(float(mechanism.epsilon))
        return cls(memo.epsilon_1, memo.epsilon_infinity)
