"""Tolerances for statistical tests, derived from closed-form variances, and the power they have.

False alarms. Every band fails a correct estimator with probability at most ``ALPHA`` = 1e-6
(two-sided, per assertion; Bonferroni over the elements one assertion checks), so the seeded suite
(a few hundred such assertions) stays green when it is re-seeded: all of them together fail a
correct build less than once in a thousand re-seedings.

Power. A variance band must also catch a variance formula that is ``DETECT`` = 5% off, too high or
too low, with probability at least ``1 - MISS`` = 0.999: :func:`assert_variance_ratio` refuses to
run on fewer replicates than :func:`replicates_for` says that takes (about 47,000 replicates of a
normal estimate for one element; more for several elements or heavy tails), and
:func:`detectable_error` gives the smallest error a band catches. A band sized to
``[0.80, 1.23]`` (1,000 replicates) let a 15% error pass; the simulations are vectorized
(``tests/simulate.py``) so that the replicates this needs stay cheap.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy.optimize import brentq
from scipy.stats import chi2, norm

# Two-sided false-alarm rate per assertion; small enough that a seeded suite never flakes when
# re-seeded.
ALPHA = 1e-6
Z = float(norm.isf(ALPHA / 2))  # ~4.9
# Every variance band catches a formula off by DETECT (either way) except with probability MISS.
DETECT = 0.05
MISS = 1e-3


def assert_mean_close(samples, truth, variance, z: float = Z):
    """|mean - truth| <= z sqrt(variance / R), elementwise over the last axes."""
    samples = np.asarray(samples, dtype=float)
    r = samples.shape[0]
    err = np.abs(samples.mean(axis=0) - truth)
    tol = z * np.sqrt(np.asarray(variance, dtype=float) / r)
    assert np.all(err <= tol), f"bias beyond {z:.1f} standard errors: err={err}, tol={tol}"


def _band(r: int, elements: int, kurtosis, alpha: float) -> tuple:
    """``(low, high)`` for ``s^2 / sigma^2`` over ``r`` replicates: the chi-square band with r - 1
    degrees of freedom (normal estimates), or, given the exact ``kurtosis`` (mu4 / sigma^4) of a
    heavy-tailed estimate, ``1 +- z sqrt((kurtosis - 1) / r)``; Bonferroni over ``elements``."""
    a = alpha / elements
    if kurtosis is None:
        return chi2.ppf(a / 2, r - 1) / (r - 1), chi2.isf(a / 2, r - 1) / (r - 1)
    tol = float(norm.isf(a / 2)) * math.sqrt((kurtosis - 1.0) / r)
    return 1.0 - tol, 1.0 + tol


def _passes(r: int, factor: float, elements: int, kurtosis, alpha: float) -> float:
    """P(one element passes its band) when the formula is ``factor`` times the true variance: then
    ``s^2 / formula`` is ``chi2_{r-1} / ((r - 1) factor)`` (or normal, mean ``1 / factor``)."""
    low, high = _band(r, elements, kurtosis, alpha)
    if kurtosis is None:
        d = r - 1
        return float(chi2.cdf(high * factor * d, d) - chi2.cdf(low * factor * d, d))
    sd = math.sqrt((kurtosis - 1.0) / r) / factor
    return float(norm.cdf((high - 1 / factor) / sd) - norm.cdf((low - 1 / factor) / sd))


@functools.lru_cache(maxsize=None)
def detectable_error(r: int, elements: int = 1, kurtosis: float | None = None, alpha: float = ALPHA,
                     miss: float = MISS) -> float:
    """The smallest relative error e of a variance formula (``1 + e`` or ``1 - e`` times the true
    variance) that the band over ``r`` replicates catches with probability at least ``1 - miss``."""
    def excess(e):
        return max(_passes(r, 1 + e, elements, kurtosis, alpha), _passes(r, 1 - e, elements, kurtosis, alpha)) - miss
    if excess(0.99) > 0:
        return 1.0
    return float(brentq(excess, 1e-9, 0.99, xtol=1e-7))


@functools.lru_cache(maxsize=None)
def replicates_for(error: float = DETECT, elements: int = 1, kurtosis: float | None = None,
                   alpha: float = ALPHA, miss: float = MISS) -> int:
    """The fewest replicates whose variance band catches a formula ``error`` off (either way) with
    probability at least ``1 - miss``, at false-alarm rate ``alpha`` over ``elements`` elements."""
    if not 0 < error < 1:
        raise ValueError(f"error must be in (0, 1), got error={error!r}")
    low, high = 2, 4
    while detectable_error(high, elements, kurtosis, alpha, miss) > error:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if detectable_error(mid, elements, kurtosis, alpha, miss) <= error else (mid, high)
    return high


def assert_variance_ratio(samples, variance, alpha: float = ALPHA, kurtosis=None, detect: float = DETECT):
    """``s^2 / sigma^2`` inside its band (see :func:`_band`) for every element, after checking that the
    band is narrow enough to catch a variance formula ``detect`` off (at most ``DETECT``) with
    probability ``1 - MISS``: too few replicates is a ``ValueError`` naming how many are needed."""
    samples = np.asarray(samples, dtype=float)
    r = samples.shape[0]
    var = np.broadcast_to(np.asarray(variance, dtype=float), samples.shape[1:])
    elements = max(var.size, 1)
    k = None if kurtosis is None else float(np.max(kurtosis))
    if not 0 < detect <= DETECT:
        raise ValueError(f"detect must be in (0, {DETECT}], got detect={detect!r}")
    if detectable_error(r, elements, k, alpha) > detect:
        raise ValueError(f"{r} replicates cannot catch a variance {detect:.1%} off (they catch "
                         f"{detectable_error(r, elements, k, alpha):.1%}): use "
                         f"replicates_for({detect}, elements={elements}, kurtosis={k}) = "
                         f"{replicates_for(detect, elements, k, alpha)}")
    low, high = _band(r, elements, k, alpha)
    ratio = samples.var(axis=0, ddof=1) / var
    assert np.all((ratio >= low) & (ratio <= high)), f"variance ratio outside [{low:.4f}, {high:.4f}]: {ratio}"


def assert_coverage(covered, level: float, z: float = Z):
    """Fraction of covered intervals within z binomial standard errors of the level."""
    covered = np.asarray(covered, dtype=float)
    n = covered.size
    se = np.sqrt(level * (1 - level) / n)
    rate = covered.mean()
    assert abs(rate - level) <= z * se, f"coverage {rate:.4f} vs {level} (tolerance {z * se:.4f}, n={n})"
