"""Means of numeric features, and their conditional means given bits, from the TMDH counts of one
window.

A numeric feature in ``[low, high]`` is sent as one bit ``e`` that is 1 with probability
``u = (x - low) / (high - low)`` (Ding, Kulkarni & Yekhanin 2017, "Collecting telemetry data
privately", the 1-bit mechanism), then randomized like any bit. With ``w = high - low`` and the
TMDH count ``t_e`` of the bit over ``n`` reports (``B`` a set of other bits, ``t_B`` its count)::

    mean      = low + w t_e / n
    mean | B  = low + w t_{e u B} / t_B

Variance. TMDH's closed form (:mod:`~ldp_marginals.ldp.tmdh`) is the channel's variance given the
encoded bits. The encoding adds its own Bernoulli noise: given the true values, ``sum_j e_j`` has
variance ``sum_j u_j (1 - u_j)``, which is at most ``n ubar (1 - ubar)`` (Jensen; ``ubar`` the mean
of ``u``), and equal to it when the reports are an i.i.d. sample of a population whose mean is the
target. So::

    Var(mean)     = w^2 ( Var_TMDH(t_e) + n m (1 - m) ) / n^2,          m = t_e / n clipped to [0, 1]
    Var(mean | B) = w^2 ( Var_delta(t_{e u B} / t_B) + r (1 - r) / t_B ),  r = t_{e u B} / t_B clipped

with ``Var_delta`` the delta-method variance of :mod:`~ldp_marginals.ldp.conditional` (the encoding
noise of ``t_{e u B}`` is independent of ``t_B``, which counts other bits). When reports of one device
share permanent responses (``est.repeats``, :mod:`~ldp_marginals.ldp.memoized`) the TMDH (co)variances
carry their term, and a memoized numeric bit, whose encoding coin is the device's, multiplies the
encoding term by ``1 + s`` (a device's ``m <= 1 + s`` reports of one value share one encoded bit). The interval targets the
window's own mean of ``x``: exact for an i.i.d. sample, conservative otherwise (the values spread
between ``low`` and ``high`` encode with less noise than the bound). Estimates are unbiased and the
interval is the estimate's own (never clipped, so the estimate lies inside it); what a reader should
display, projected into ``[low, high]``, is added by the job's rows. A conditional mean is biased for
small ``t_B`` like any ratio (see :mod:`~ldp_marginals.ldp.conditional`); the job publishes one only
when ``B`` passes the presence test. ``tests/ldp/test_means.py`` checks the variances against the
exact variance over every noisy outcome of a small window (of the linearization, for the conditional
mean) and by simulation, with bias and coverage.
"""
from __future__ import annotations

from typing import NamedTuple

from ldp_marginals.ldp.conditional import DEFAULT_ALPHA, conditional
from ldp_marginals.ldp.intervals import normal_interval


class Mean(NamedTuple):
    estimate: float
    variance: float
    ci_low: float
    ci_high: float
    given: float        # t_B (n for an unconditional mean)
    threshold: float    # t_B must exceed this for B to be there (0 for an unconditional mean)

    @property
    def present(self) -> bool:
        return self.given > self.threshold


def _bernoulli_variance(m: float) -> float:
    """``m (1 - m)``, ``m`` clipped to ``[0, 1]``: the variance of the encoding's bit at mean ``m``, the
    noise per report that the channel's variance (TMDH) does not hold."""
    m = min(max(m, 0.0), 1.0)
    return m * (1.0 - m)


def _shared_encodings(est, bit: int) -> float:
    """``1 + s`` when the numeric bit memoizes and a device's reports share it
    (``est.repeats``, :func:`~ldp_marginals.ldp.memoized.with_repeats`), else 1: a memoized numeric bit
    keeps the device's encoding coin, so its ``m`` reports of one value carry one encoded bit and its
    encoding noise ``m^2 u (1 - u)``, at most ``(1 + s)`` times the independent ``m u (1 - u)``."""
    rep = getattr(est, "repeats", None)
    if rep is None or not rep.s or not rep.memoizes[bit]:
        return 1.0
    return 1.0 + rep.s


def feature_mean(est, bit: int, low: float, high: float, given=(), level: float = 0.95,
                 alpha: float = DEFAULT_ALPHA) -> Mean:
    """The mean of a numeric feature sent as ``bit`` (range ``[low, high]``), over all reports of
    a :class:`~ldp_marginals.ldp.tmdh.TMDHEstimate`, or over those with every bit of ``given`` set
    (with the presence test of ``given`` at false-positive rate ``alpha``)."""
    if not low < high:
        raise ValueError(f"low must be < high, got low={low!r}, high={high!r}")
    if bit in tuple(given):
        raise ValueError(f"given must not hold the numeric bit itself, got bit={bit}, given={list(given)}")
    w = high - low
    shared = _shared_encodings(est, bit)
    if given:
        c = conditional(est, (bit,), given, level, alpha)
        r = c.estimate
        var = w * w * (c.variance + shared * _bernoulli_variance(r) / c.given) if c.given > 0 else float("nan")
        estimate, given_count, threshold = low + w * r, c.given, c.threshold
    else:
        n = est.n
        m = est.mean((bit,)) / n
        var = w * w * (est.variance((bit,)) + shared * n * _bernoulli_variance(m)) / (n * n)
        estimate, given_count, threshold = low + w * m, float(n), 0.0
    ci_low, ci_high = (float(v) for v in normal_interval(estimate, var, level))
    return Mean(float(estimate), float(var), ci_low, ci_high, float(given_count), float(threshold))
