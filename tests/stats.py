"""Tolerances for statistical tests, derived from closed-form variances: z and chi-square bands at
a tiny false-alarm rate, for seeded simulations."""
from __future__ import annotations

import numpy as np
from scipy.stats import chi2, norm

# Two-sided false-alarm rate per assertion; small enough that a seeded suite never flakes when
# re-seeded, large enough that a wrong variance formula (off by a few percent) is caught.
ALPHA = 1e-6
Z = float(norm.ppf(1 - ALPHA / 2))  # ~4.9


def assert_mean_close(samples, truth, variance, z: float = Z):
    """|mean - truth| <= z sqrt(variance / R), elementwise over the last axes."""
    samples = np.asarray(samples, dtype=float)
    r = samples.shape[0]
    err = np.abs(samples.mean(axis=0) - truth)
    tol = z * np.sqrt(np.asarray(variance, dtype=float) / r)
    assert np.all(err <= tol), f"bias beyond {z:.1f} standard errors: err={err}, tol={tol}"


def assert_variance_ratio(samples, variance, alpha: float = ALPHA, kurtosis=None):
    """(R-1) s^2 / sigma^2 inside the two-sided chi-square band with R-1 degrees of freedom
    (Bonferroni over the elements). For heavy-tailed estimators pass the exact ``kurtosis``
    (mu4 / sigma^4): then s^2 / sigma^2 must lie within Z sqrt((kurtosis - 1) / R) of 1."""
    samples = np.asarray(samples, dtype=float)
    r = samples.shape[0]
    var = np.asarray(variance, dtype=float)
    if kurtosis is not None:
        ratio = samples.var(axis=0, ddof=1) / var
        tol = float(norm.ppf(1 - alpha / 2)) * np.sqrt((np.asarray(kurtosis) - 1.0) / r)
        assert np.all(np.abs(ratio - 1.0) <= tol), f"variance ratio {ratio} beyond 1 +- {tol}"
        return
    stat = (r - 1) * samples.var(axis=0, ddof=1) / var
    a = alpha / max(stat.size, 1)
    lo, hi = chi2.ppf(a / 2, r - 1), chi2.ppf(1 - a / 2, r - 1)
    assert np.all((stat >= lo) & (stat <= hi)), (
        f"variance ratio outside chi2 band [{lo / (r - 1):.3f}, {hi / (r - 1):.3f}]: {stat / (r - 1)}")


def assert_coverage(covered, level: float, z: float = Z):
    """Fraction of covered intervals within z binomial standard errors of the level."""
    covered = np.asarray(covered, dtype=float)
    n = covered.size
    se = np.sqrt(level * (1 - level) / n)
    rate = covered.mean()
    assert abs(rate - level) <= z * se, f"coverage {rate:.4f} vs {level} (tolerance {z * se:.4f}, n={n})"
