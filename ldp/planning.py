"""Planning before collecting: the precision a window of N reports will give each published set,
and the N a target precision needs (the question RAPPOR users ask first: "how do I choose the
parameters?").

The TMDH count of a set S is, report by report, the product of the debiased bits
``z_i = (y_i - p_i)/(q_i - p_i)`` over S (Carette). Conditional on a report's true bits x, the bits
are randomized independently and ``E[z_i^2 | x_i] = m_i(x_i)`` with ``m_i(0) = p(1-p)/(q-p)^2`` and
``m_i(1) = 1 + q(1-q)/(q-p)^2`` (the same second moments as the AND estimator of ``ldp.extremes``),
so the report adds ``prod_i m_i(x_i) - 1{x_S = 1}`` to the variance of the count, and the frequency
``t_S / N`` of a window of N reports has variance ``sum_r v(x_r) / N^2``:

- worst case: every report has the pattern that maximizes ``v`` (an upper bound for any truth);
- at a frequency f of S: the reports with S all ones add ``prod m_i(1) - 1``, the others at most
  the largest ``prod m_i(x_i)`` over the other patterns (an upper bound, exact when the others
  share that pattern).

The interval's half-width is ``z_{level} sqrt(variance)``; inverting gives the reports a target
half-width needs.
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_level, check_positive, check_probability


def second_moments(p: np.ndarray, q: np.ndarray) -> tuple:
    """``(m0, m1)``: ``E[z^2 | x = 0]`` and ``E[z^2 | x = 1]`` per bit."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    gap2 = (q - p) ** 2
    return p * (1 - p) / gap2, 1 + q * (1 - q) / gap2


def report_variances(p, q) -> tuple:
    """For one set with channels ``p``, ``q`` (one per bit of the set): ``(all_ones, other)``, the
    variance a report adds to the set's count when all its bits are 1, and the largest it adds
    with any other pattern."""
    m0, m1 = second_moments(p, q)
    all_ones = float(np.prod(m1)) - 1.0
    best = np.maximum(m0, m1)
    top = float(np.prod(best))
    if np.all(m1 >= m0):  # the largest product is the all-ones pattern: the best other flips one bit
        other = top * float(np.max(m0 / m1))
    else:
        other = top
    return all_ones, other


def frequency_variance(p, q, n_reports: int, frequency: float | None = None) -> float:
    """Upper bound of the variance of a set's frequency ``t_S / N`` in a window of ``n_reports``:
    the worst case, or at the given ``frequency`` of the set."""
    n = check_int("n_reports", n_reports, minimum=1)
    all_ones, other = report_variances(p, q)
    if frequency is None:
        per_report = max(all_ones, other)
    else:
        f = check_probability("frequency", frequency)
        per_report = f * all_ones + (1 - f) * other
    return per_report / n


def half_width(p, q, n_reports: int, level: float = 0.95, frequency: float | None = None) -> float:
    """Expected half-width of the set frequency's normal interval at ``level`` (an upper bound)."""
    z = NormalDist().inv_cdf(0.5 + check_level(level) / 2)
    return z * math.sqrt(frequency_variance(p, q, n_reports, frequency))


def reports_for_half_width(p, q, target: float, level: float = 0.95, frequency: float | None = None) -> int:
    """The fewest reports per window for which :func:`half_width` is at most ``target``."""
    h = check_positive("target_half_width", target)
    z = NormalDist().inv_cdf(0.5 + check_level(level) / 2)
    per_report = frequency_variance(p, q, 1, frequency)
    return max(1, math.ceil(z * z * per_report / (h * h)))
