"""Conditional frequencies ``P(A | B) = t_{A u B} / t_B`` for sets A, B of bits, from the TMDH counts
of one window, with a delta-method variance that uses the covariance of the two counts.

With ``U = A u B``, ``r = t_U / t_B`` and the estimated (co)variances of TMDH (Carette; both counts
need only counts up to U)::

    Var(r) ~= ( Var(t_U) - 2 r Cov(t_U, t_B) + r^2 Var(t_B) ) / t_B^2

A ratio of noisy counts is biased for small ``t_B`` (the delta method is first order: the bias is
of order ``Var(t_B) / t_B^2``) and its interval is unreliable when ``t_B`` may be near 0, so the
job publishes nothing (a withheld row says why) when the interval of ``t_B`` at the same level
includes 0. Coverage at realistic window sizes is checked by simulation
(``tests/ldp/test_conditional.py``).
"""
from __future__ import annotations

from typing import NamedTuple

from ldp_marginals.ldp.intervals import normal_interval
from ldp_marginals.ldp.sets import _normalize


class Conditional(NamedTuple):
    estimate: float        # P(A | B)
    variance: float
    ci_low: float
    ci_high: float
    given: float           # t_B
    given_low: float       # the interval of t_B at the same level
    joint: float           # t_{A u B}


def conditional(est, of, given, level: float = 0.95) -> Conditional:
    """``P(of | given)`` from a :class:`~ldp_marginals.ldp.tmdh.TMDHEstimate`."""
    n_bits = est.family.n_bits
    a, b = _normalize(n_bits, of), _normalize(n_bits, given)
    if not a or not b:
        raise ValueError(f"of and given must name bits, got of={list(a)}, given={list(b)}")
    union = tuple(sorted(set(a) | set(b)))
    t_u, t_b = est.mean(union), est.mean(b)
    v_u, v_b = est.variance(union), est.variance(b)
    cov = est.covariance(union, b)
    b_low, _ = normal_interval(t_b, v_b, level)
    r = t_u / t_b if t_b else float("nan")
    var = (v_u - 2 * r * cov + r * r * v_b) / (t_b * t_b) if t_b else float("nan")
    low, high = normal_interval(r, var, level)
    return Conditional(float(r), float(var), float(low), float(high), float(t_b), float(b_low), float(t_u))
