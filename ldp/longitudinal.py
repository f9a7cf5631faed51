"""Epsilon over time: what a device's reports of one value reveal, by how many it sent.

A device that holds one value and sends n reports releases, per bit, n draws that are independent
given the bit's permanent response (memoized) or given its true bit (not memoized). The exact
local-DP epsilon of those n reports, ``epsilon_n``, is the largest log-likelihood ratio over two
values and all output sequences (:func:`epsilon_reports`). Per bit the ratio depends on a sequence
only through its number k of ones::

    not memoized:  ln r(k) = k ln(q/p) + (n - k) ln((1-q)/(1-p))              -> n * eps_bit
    memoized:      r(k) = (q_P q_I^k (1-q_I)^(n-k) + (1-q_P) p_I^k (1-p_I)^(n-k))
                        / (p_P q_I^k (1-q_I)^(n-k) + (1-p_P) p_I^k (1-p_I)^(n-k))

and a whole report combines bits as :func:`~ldp_marginals.ldp.privacy.local_dp_epsilon` does:
a one-bit feature (boolean, or a numeric feature's encoded bit) adds its larger direction, a
categorical feature its worst pair of one bit going 1 -> 0 and another 0 -> 1; two devices may
differ in every feature, so features add. ``epsilon_1`` is the local epsilon of the effective
channel (RAPPOR's ``h ln(q*(1-p*)/(p*(1-q*)))`` for h-hot values); ``epsilon_infinity``, its limit
for any number of reports of the same value, is the local epsilon of the permanent channels
(RAPPOR's ``2h ln((1-f/2)/(f/2))``), infinite when a bit does not memoize.

What these numbers do not cover: a device that takes k distinct values draws k independent
permanent responses (up to ``k * epsilon_infinity`` when the times of the changes are known), and
when its reports are linked (one window's token, or the fingerprint of its memoized bits,
docs/client.md) a change of value is detected beyond ``epsilon_1`` (:mod:`ldp_marginals.ldp.attacks`).

A whole-report kind (``hadamard``, ``subset``) passes its :class:`~ldp_marginals.ldp.kind_memoize.WholeReportSpend`
in place of ``channels`` (the layout is then unused): one report ``epsilon_1``, ``n`` reports of one value at
most ``min(n epsilon_1, epsilon_infinity)`` (``n epsilon`` when it does not memoize), the bound of
docs/client.md section 13.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.memoized import ClientChannels

DAYS_PER_MONTH = 30


def _log_power(base: float, k: np.ndarray) -> np.ndarray:
    """``k ln(base)`` with ``0 ln 0 = 0``."""
    with np.errstate(divide="ignore"):
        return np.where(k == 0, 0.0, k * np.log(base) if base > 0 else -np.inf)


def bit_log_ratios(channels: ClientChannels, bit: int, n_reports: int) -> np.ndarray:
    """``ln P(k | x = 1) - ln P(k | x = 0)`` for k = 0..n ones among n reports of one bit
    (``inf``/``-inf`` where one side is impossible, NaN where both are)."""
    n = check_int("n_reports", n_reports, minimum=1)
    k = np.arange(n + 1)
    inst, perm = channels.instantaneous[bit], channels.permanent[bit]
    # P(b = 1 | x = 1), P(b = 1 | x = 0); a bit that does not memoize has b = x
    w1, w0 = (perm.q, perm.p) if perm is not None else (1.0, 0.0)
    one = _log_power(inst.q, k) + _log_power(1.0 - inst.q, n - k)     # ln P(sequence | b = 1)
    zero = _log_power(inst.p, k) + _log_power(1.0 - inst.p, n - k)    # ln P(sequence | b = 0)

    def mix(w):
        with np.errstate(divide="ignore"):
            return np.logaddexp(math.log(w) + one if w > 0 else -np.inf,
                                math.log1p(-w) + zero if w < 1 else -np.inf)
    with np.errstate(invalid="ignore"):
        return mix(w1) - mix(w0)


def _directions(channels: ClientChannels, bit: int, n_reports: int) -> tuple:
    """``(up, down)``: the largest log ratio for x = 1 over x = 0, and for x = 0 over x = 1."""
    if n_reports is None:  # any number of reports: the permanent channel's, or unbounded
        perm = channels.permanent[bit]
        if perm is None:
            return math.inf, math.inf
        return (math.inf if perm.p == 0 else math.log(perm.q / perm.p),
                math.inf if perm.q == 1 else math.log((1 - perm.p) / (1 - perm.q)))
    r = bit_log_ratios(channels, bit, n_reports)
    r = r[~np.isnan(r)]
    return float(np.max(r)), float(np.max(-r))


def _layout_epsilon(layout, channels: ClientChannels, n_reports) -> float:
    if len(channels) != layout.n_bits:
        raise ValueError(f"channels must have {layout.n_bits} bits, got len(channels)={len(channels)}")
    total = 0.0
    for feature in layout.features:
        bits = list(layout.bits_of(feature.name))
        dirs = {i: _directions(channels, i, n_reports) for i in bits}
        if len(bits) == 1:
            total += max(dirs[bits[0]])
        else:
            total += max(dirs[i][0] + dirs[j][1] for i in bits for j in bits if i != j)
    return total


def _spend(channels):
    """``channels`` when it is a whole-report collection's spending (``WholeReportSpend`` of
    :mod:`ldp_marginals.ldp.kind_memoize`: ``one``, ``infinity``, ``at_most``), else None (per-bit channels)."""
    return channels if hasattr(channels, "at_most") else None


def epsilon_reports(layout, channels: ClientChannels, n_reports: int) -> float:
    """Exact local-DP epsilon of ``n_reports`` reports of one device holding one value (module
    docstring); ``n_reports = 1`` gives ``epsilon_1``. A whole-report kind (``channels`` its
    ``WholeReportSpend``): its bound ``min(n epsilon_1, epsilon_inf)`` (docs/client.md section 13)."""
    if _spend(channels) is not None:
        return channels.at_most(check_int("n_reports", n_reports, minimum=1))
    return _layout_epsilon(layout, channels, check_int("n_reports", n_reports, minimum=1))


def epsilon_one(layout, channels: ClientChannels) -> float:
    """Epsilon of one report: the local epsilon of the effective channel."""
    if _spend(channels) is not None:
        return channels.one
    return epsilon_reports(layout, channels, 1)


def epsilon_infinity(layout, channels: ClientChannels) -> float:
    """Epsilon of any number of reports of one value: the permanent channels' local epsilon
    (``inf`` when a bit does not memoize)."""
    if _spend(channels) is not None:
        return channels.infinity
    return _layout_epsilon(layout, channels, None)


@dataclass(frozen=True)
class LongitudinalEpsilon:
    """A collection's stated epsilons for a device holding one value: one report, any number, and
    a day's and a month's (30 days) reports at the declared rate (at most ``ceil(rate * days)``)."""

    one: float
    infinity: float
    reports_per_day: float
    per_day: float
    per_month: float

    def describe(self) -> dict:
        def num(v):
            return None if math.isinf(v) else float(v)
        return {"epsilon_1": num(self.one), "epsilon_infinity": num(self.infinity),
                "reports_per_day": self.reports_per_day, "epsilon_per_day": num(self.per_day),
                "epsilon_per_month": num(self.per_month)}


def longitudinal_epsilon(layout, channels: ClientChannels, reports_per_day: float) -> LongitudinalEpsilon:
    """epsilon_1, epsilon_infinity and the epsilons of a day and of a month of reports at
    ``reports_per_day`` (exact, :func:`epsilon_reports`; ``n * epsilon_1`` for channels that do not
    memoize)."""
    rate = check_positive("reports_per_day", reports_per_day)
    per_day = math.ceil(round(rate, 9))                      # round: 0.1 * 30 is 3.0000000000000004
    per_month = math.ceil(round(rate * DAYS_PER_MONTH, 9))
    return LongitudinalEpsilon(epsilon_one(layout, channels), epsilon_infinity(layout, channels), rate,
                               epsilon_reports(layout, channels, per_day), epsilon_reports(layout, channels, per_month))


# Above this many reports a memoized channel's exact epsilon (arrays of n + 1 per bit) gives way to
# its bound min(n * epsilon_1, epsilon_infinity): never smaller than the exact value.
EXACT_REPORTS_LIMIT = 100_000


def _memoizes(channels: ClientChannels) -> bool:
    return any(perm is not None for perm in channels.permanent)


def epsilon_at_most(layout, channels: ClientChannels, n_reports: int) -> float:
    """The epsilon of at most ``n_reports`` reports of one device holding one value (0 for none):
    ``n * epsilon_1`` when no bit memoizes (exact), :func:`epsilon_reports` when one does (exact,
    below ``min(n * epsilon_1, epsilon_infinity)``; that bound itself past :data:`EXACT_REPORTS_LIMIT`)."""
    n = check_int("n_reports", n_reports, minimum=0)
    if _spend(channels) is not None:
        return channels.at_most(n)
    if n == 0:
        return 0.0
    one = epsilon_one(layout, channels)
    if not _memoizes(channels):
        return n * one
    if n > EXACT_REPORTS_LIMIT:
        return min(n * one, epsilon_infinity(layout, channels))
    return epsilon_reports(layout, channels, n)


@dataclass(frozen=True)
class EnforcedEpsilon:
    """A device's epsilons over a day and a month (30 UTC days) as the job enforces them, for a device
    holding one value: its token is scoped to a slice, so the job cannot link it across slices, and
    per slice it publishes at most ``reports_per_slice`` of its reports (``M``, times ``K`` with
    dimensions); a day meets at most ``slices_per_day`` slices, a month ``slices_per_month``
    (:meth:`~ldp_marginals.ldp.windows.Window.slices_in_days`; the global window: one for all time)."""

    one: float
    infinity: float
    reports_per_slice: int
    slices_per_day: int
    slices_per_month: int
    per_day: float
    per_month: float

    @property
    def reports_per_day(self) -> int:
        return self.slices_per_day * self.reports_per_slice

    @property
    def reports_per_month(self) -> int:
        return self.slices_per_month * self.reports_per_slice

    def describe(self) -> dict:
        def num(v):
            return None if math.isinf(v) else float(v)
        return {"slices_per_day": self.slices_per_day, "slices_per_month": self.slices_per_month,
                "reports_per_slice": self.reports_per_slice, "reports_per_day": self.reports_per_day,
                "reports_per_month": self.reports_per_month, "epsilon_per_day": num(self.per_day),
                "epsilon_per_month": num(self.per_month)}


def enforced_epsilon(layout, channels: ClientChannels, window, reports_per_slice: int) -> EnforcedEpsilon:
    """The epsilons of the reports the job publishes of one device in a day and in a month: at most
    ``window.slices_in_days(d) * reports_per_slice`` reports, each ``epsilon_1``; where bits memoize,
    the exact epsilon of that many reports of one value (:func:`epsilon_at_most`), never above
    ``epsilon_infinity``."""
    m = check_int("reports_per_slice", reports_per_slice, minimum=1)
    day, month = window.slices_in_days(1), window.slices_in_days(DAYS_PER_MONTH)
    return EnforcedEpsilon(epsilon_one(layout, channels), epsilon_infinity(layout, channels), m, day, month,
                           epsilon_at_most(layout, channels, day * m), epsilon_at_most(layout, channels, month * m))


# Window lengths advice names (seconds): the divisors of a day a dashboard reads, then whole days.
ADVISED_SECONDS = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 14400, 21600, 28800, 43200, 86400,
                   2 * 86400, 3 * 86400, 5 * 86400, 6 * 86400, 10 * 86400, 15 * 86400, 30 * 86400)


def shortest_window_keeping(layout, channels: ClientChannels, reports_per_slice: int, per_day: float | None,
                            per_month: float | None):
    """The shortest fixed window of :data:`ADVISED_SECONDS` (else the global window) whose enforced
    epsilons keep ``per_day`` and ``per_month`` (either may be None: not promised) at
    ``reports_per_slice`` reports of a device per slice, or None when no window keeps them."""
    from ldp_marginals.ldp.windows import Window
    for window in [Window("fixed", float(s)) for s in ADVISED_SECONDS] + [Window("global")]:
        figures = enforced_epsilon(layout, channels, window, reports_per_slice)
        if (per_day is None or figures.per_day <= per_day + 1e-12) and (
                per_month is None or figures.per_month <= per_month + 1e-12):
            return window
    return None
