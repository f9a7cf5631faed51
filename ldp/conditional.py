"""Conditional frequencies ``P(A | B) = t_{A u B} / t_B`` for sets A, B of bits, from the TMDH counts
of one window, with a delta-method variance that uses the covariance of the two counts, and the
test that decides whether the condition B is there at all.

With ``U = A u B``, ``r = t_U / t_B`` and the estimated (co)variances of TMDH (Carette; both counts
need only counts up to U)::

    Var(r) ~= ( Var(t_U) - 2 r Cov(t_U, t_B) + r^2 Var(t_B) ) / t_B^2

At the true counts this is exactly the variance of the linearization ``r + (t_U - r t_B) / t_B``,
to which the ratio's variance tends as the window grows (``tests/ldp/test_conditional.py``: exact
enumeration of a small window, simulation at 20,000 reports).

A ratio of noisy counts means nothing when B never holds, and is biased and wide when it rarely
does (the delta method is first order: the bias is of order ``Var(t_B) / t_B^2``). So a conditional
(or a conditional mean) is published only when the data show that B holds in some report: a test of
``t_B = 0`` at a stated false-positive rate ``alpha``.

The test (:func:`presence_threshold`). Per report, the TMDH term of B is ``X = prod_{i in B} z_i``
with ``z_i = (y_i - p_i)/(q_i - p_i)``. When ``t_B = 0`` no report has every bit of B, so each
``X`` has mean 0 (the product of the true bits), variance at most ``V0 = max_{x != 1} prod_i
m_i(x_i)`` (the planning bound of :mod:`~ldp_marginals.ldp.planning`, ``m_i`` the second moments of
``z_i``) and ``|X| <= M = prod_i max(p_i, 1 - p_i)/(q_i - p_i)``; reports are independent. Bernstein's
inequality then bounds ``P(t̂_B >= t) <= exp(-t^2 / (2 (n V0 + M t / 3)))``, so with
``L = ln(1/alpha)`` the threshold ``t = M L / 3 + sqrt((M L / 3)^2 + 2 n V0 L)`` is crossed with
probability at most ``alpha`` when B never holds, for any n and any truth of the other bits: an
exact bound, not a normal approximation (``tests/ldp/test_conditional.py`` simulates it). The
earlier rule ("the 95% interval of t_B excludes 0") had no stated rate and published a never-true
condition about 3% of the time.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ldp_marginals.ldp._checks import check_probability
from ldp_marginals.ldp.intervals import normal_interval
from ldp_marginals.ldp.planning import report_variances
from ldp_marginals.ldp.sets import _normalize

DEFAULT_ALPHA = 0.001   # P(a conditional is published | its condition never holds) is at most this


class Conditional(NamedTuple):
    estimate: float        # P(A | B)
    variance: float
    ci_low: float
    ci_high: float
    given: float           # t_B
    threshold: float       # t_B must exceed this for B to be there (presence_threshold)
    joint: float           # t_{A u B}

    @property
    def present(self) -> bool:
        """Whether the test declares that the condition holds in some report."""
        return self.given > self.threshold


def presence_threshold(p, q, n_reports: int, alpha: float = DEFAULT_ALPHA) -> float:
    """The TMDH count of a set B (channels ``p``, ``q`` of its bits) above which B is declared to hold
    in some report of a window of ``n_reports``; exceeded with probability at most ``alpha`` when
    ``t_B = 0`` (Bernstein's inequality, see the module docstring)."""
    alpha = check_probability("alpha", alpha, open_low=True, open_high=True)
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if n_reports <= 0:
        return math.inf
    _, v0 = report_variances(p, q)
    bound = float(np.prod(np.maximum(p, 1 - p) / (q - p)))
    log = math.log(1.0 / alpha)
    third = bound * log / 3.0
    return third + math.sqrt(third * third + 2.0 * n_reports * v0 * log)


def _delta_variance(r: float, t_b: float, v_u: float, v_b: float, cov: float) -> float:
    """``Var(t_U / t_B)`` to first order (the delta method) at ``r = t_U / t_B``, from the counts'
    variances and covariance: ``(Var(t_U) - 2 r Cov(t_U, t_B) + r^2 Var(t_B)) / t_B^2``."""
    return (v_u - 2 * r * cov + r * r * v_b) / (t_b * t_b)


def conditional(est, of, given, level: float = 0.95, alpha: float = DEFAULT_ALPHA) -> Conditional:
    """``P(of | given)`` from a :class:`~ldp_marginals.ldp.tmdh.TMDHEstimate`, with the presence test
    of ``given`` at false-positive rate ``alpha``; or from a whole-report kind's
    :class:`~ldp_marginals.ldp.kind_analyses.KindMarginals` (both counts from the table of their union,
    with its covariance, and the kind's presence threshold)."""
    n_bits = est.family.n_bits
    a, b = _normalize(n_bits, of), _normalize(n_bits, given)
    if not a or not b:
        raise ValueError(f"of and given must name bits, got of={list(a)}, given={list(b)}")
    union = tuple(sorted(set(a) | set(b)))
    if hasattr(est, "all_ones"):   # a whole-report kind: both counts from one table (ldp/kind_analyses.py)
        (t_u, t_b), c2 = est.all_ones([union, b])
        v_u, v_b, cov = c2[0, 0], c2[1, 1], c2[0, 1]
    else:
        t_u, t_b = est.mean(union), est.mean(b)
        v_u, v_b = est.variance(union), est.variance(b)
        cov = est.covariance(union, b)
    r = t_u / t_b if t_b else float("nan")
    var = _delta_variance(r, t_b, v_u, v_b, cov) if t_b else float("nan")
    low, high = normal_interval(r, var, level)
    if hasattr(est, "presence_threshold"):
        threshold = est.presence_threshold(b, alpha)
    else:
        cols = list(b)
        threshold = presence_threshold(est.channels.p[cols], est.channels.q[cols], est.n, alpha)
    return Conditional(float(r), float(var), float(low), float(high), float(t_b), float(threshold), float(t_u))
