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

The same argument covers a table cell (:mod:`~ldp_marginals.ldp.tables`): per report the cell's
estimate is a product of factors, ``z_i`` for a bit that must be 1 and ``1 - z_j`` for a boolean
that must be 0, with ``E[1 - z | x] = 1 - x`` and ``E[(1 - z)^2 | x] = 1 - 2x + m(x)``; the report
adds ``prod E[factor^2 | x] - prod E[factor | x]^2``, largest over the patterns x of the cell's
bits in the worst case. A numeric feature's mean (:mod:`~ldp_marginals.ldp.means`) over N reports
whose encoded bit is 1 with mean probability ``u`` has variance
``w^2 ((1 - u) m(0) + u m(1) - u^2) / N`` (``w = high - low``: channel and encoding noise together),
largest at ``u = (m(1) - m(0)) / 2`` clipped to [0, 1].

The interval's half-width is ``z_{level} sqrt(variance)``; inverting gives the reports a target
half-width needs.
"""
from __future__ import annotations

import math

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive, check_probability
from ldp_marginals.ldp.extremes import noise_terms
from ldp_marginals.ldp.intervals import z_of


def second_moments(p: np.ndarray, q: np.ndarray) -> tuple:
    """``(m0, m1)``: ``E[z^2 | x = 0]`` and ``E[z^2 | x = 1]`` per bit."""
    low, high = noise_terms(np.asarray(p, dtype=float), np.asarray(q, dtype=float))
    return low, 1 + high


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
    return half_width_of(frequency_variance(p, q, n_reports, frequency), level)


def reports_for_half_width(p, q, target: float, level: float = 0.95, frequency: float | None = None) -> int:
    """The fewest reports per window for which :func:`half_width` is at most ``target``."""
    return reports_for(frequency_variance(p, q, 1, frequency), target, level)


def cell_variance(p_ones, q_ones, p_zeros=(), q_zeros=(), n_reports: int = 1) -> float:
    """Upper bound (the worst case over true patterns) of the variance of a table cell's frequency in
    a window of ``n_reports``: the cell needs the bits with channels ``p_ones``, ``q_ones`` to be 1
    and the (boolean) bits with ``p_zeros``, ``q_zeros`` to be 0."""
    n = check_int("n_reports", n_reports, minimum=1)
    m0, m1 = second_moments(np.concatenate([np.asarray(p_ones, float), np.asarray(p_zeros, float)]),
                            np.concatenate([np.asarray(q_ones, float), np.asarray(q_zeros, float)]))
    k, ones = len(m0), len(np.asarray(p_ones))
    worst = 0.0
    for pattern in range(1 << k):
        x = np.array([(pattern >> i) & 1 for i in range(k)], dtype=bool)
        square = np.where(x, m1, m0)                       # E[z^2 | x]
        mean = x.astype(float)                             # E[z | x]
        square[ones:] = 1 - 2 * mean[ones:] + square[ones:]   # E[(1 - z)^2 | x]
        mean[ones:] = 1 - mean[ones:]
        worst = max(worst, float(np.prod(square) - np.prod(mean) ** 2))
    return worst / n


def table_variance_per_report(p, q) -> float:
    """N times the worst-case trace of the frequency covariance of the full table of bits with channels
    ``p``, ``q`` (the summed variance of its ``2^k`` cells): a report with true pattern x adds
    ``sum_y P(y | x) |A e_y|^2 - 1`` (``A = (x) C_i^{-1}``; the ``-1`` is ``|A C e_x|^2``), a product over
    bits of ``sum_y C_i[y, x_i] |C_i^{-1} e_y|^2``, so the worst pattern takes each bit's larger factor.
    Data-free for symmetric channels."""
    worst = 1.0
    for pi, qi in zip(np.atleast_1d(np.asarray(p, float)), np.atleast_1d(np.asarray(q, float))):
        c = np.array([[1 - pi, 1 - qi], [pi, qi]])
        norms = (np.linalg.inv(c) ** 2).sum(axis=0)        # |C^{-1} e_y|^2 per noisy value y
        worst *= float(np.max(norms @ c))                  # per true value x: sum_y C[y, x] |C^{-1} e_y|^2
    return worst - 1.0


def mean_variance(p: float, q: float, low: float, high: float, n_reports: int) -> float:
    """Upper bound (the worst mean) of the variance of a numeric feature's mean over ``n_reports``,
    its bit sent through the channel ``(p, q)``."""
    n = check_int("n_reports", n_reports, minimum=1)
    m0, m1 = (float(v) for v in second_moments(p, q))
    u = min(max((m1 - m0) / 2, 0.0), 1.0)
    return (high - low) ** 2 * ((1 - u) * m0 + u * m1 - u * u) / n


def half_width_of(variance: float, level: float = 0.95) -> float:
    """``z_{level} sqrt(variance)``: the half-width of a normal interval."""
    return z_of(level) * math.sqrt(variance)


def reports_for(variance_per_report: float, target: float, level: float = 0.95) -> int:
    """The fewest reports for which ``half_width_of(variance_per_report / N) <= target``."""
    h = check_positive("target_half_width", target)
    z = z_of(level)
    return max(1, math.ceil(z * z * variance_per_report / (h * h)))


def client_rows_outlook(clients: int, low: int, high: int, min_reports: int, c: int | None) -> dict:
    """Whether a window and key's extremes over clients would publish, for ``clients`` clients each
    sending between ``low`` and ``high`` reports (uniformly, in expectation): under the groups rule
    (``c`` None) every number of reports must be sent by 0 or at least ``min_reports`` clients; under a
    sample of ``c`` reports (``reports_per_client``) at least ``min_reports`` clients must send ``c`` or
    more, and the parties whose reports the client rows leave out (clients that send other than ``c``)
    must number 0 or at least ``min_reports`` (docs/design.md, section 7). ``{"published": bool,
    "reason": str | None, "kept_clients": float, "suggested_reports_per_client": int | None}``: the
    suggestion is the smallest ``c`` under which the rows publish (None if none does): it keeps the
    most clients, and a client's variance grows exponentially with its bits (``c`` times the
    extreme's), so a larger ``c`` buys an OR over more of each client's reports at a steep price."""
    clients = int(clients)
    low, high = int(low), int(high)
    if clients < 1 or low < 1 or high < low:
        raise ValueError(f"the population must be clients >= 1 and 1 <= low <= high, got clients={clients}, "
                         f"low={low}, high={high}")
    per = clients / (high - low + 1)   # clients sending each number of reports, in expectation

    def verdict(c):
        if c is None:
            if per < min_reports:
                return clients, (f"about {per:.0f} clients send each number of reports from {low} to {high}, fewer "
                                 f"than min_reports={min_reports}: the groups rule withholds the client rows "
                                 "(set reports_per_client)")
            return clients, None
        kept = per * max(0, high - max(c, low) + 1)
        other = clients - (per if low <= c <= high else 0)
        if kept < min_reports:
            return kept, (f"about {kept:.0f} clients send at least reports_per_client={c} reports, fewer than "
                          f"min_reports={min_reports}: the client rows are withheld")
        if 0 < other < min_reports:
            return kept, (f"about {other:.0f} clients send other than reports_per_client={c} reports, between 1 and "
                          f"min_reports={min_reports}: the reports the client rows leave out would be singled out")
        return kept, None
    kept, reason = verdict(c)
    good = [k for k in range(low, high + 1) if verdict(k)[1] is None]
    return {"published": reason is None, "reason": reason, "kept_clients": float(kept),
            "suggested_reports_per_client": good[0] if good else None}
