"""Normal confidence intervals, shared by every estimator of the core."""
from __future__ import annotations

from statistics import NormalDist

import numpy as np

from ldp_marginals.ldp._checks import check_level


def z_of(level: float) -> float:
    """The two-sided normal quantile of ``level``: 1.96 at 0.95."""
    return NormalDist().inv_cdf(0.5 + check_level(level) / 2.0)


def normal_interval(estimate, variance, level: float = 0.95):
    """``estimate -+ z sqrt(max(variance, 0))`` with ``z`` the two-sided normal quantile of ``level``.

    A plug-in variance estimate can be slightly negative in tiny windows; it is clipped at 0 here.
    """
    z = z_of(level)
    est = np.asarray(estimate, dtype=np.float64)
    half = z * np.sqrt(np.maximum(variance, 0.0))
    return est - half, est + half


def sidak_level(level: float, m: int) -> float:
    """The per-interval level at which ``m`` two-sided normal intervals hold all together with
    probability at least ``level``: ``level ** (1 / m)`` (Sidak 1967: valid for jointly normal
    estimates whatever their correlation)."""
    if m < 1:
        raise ValueError(f"m must be >= 1, got m={m}")
    return check_level(level) ** (1.0 / m)
