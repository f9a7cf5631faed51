"""Normal confidence intervals, shared by every estimator of the core."""
from __future__ import annotations

from statistics import NormalDist

import numpy as np

from ldp_marginals.ldp._checks import check_level


def normal_interval(estimate, variance, level: float = 0.95):
    """``estimate -+ z sqrt(max(variance, 0))`` with ``z`` the two-sided normal quantile of ``level``.

    A plug-in variance estimate can be slightly negative in tiny windows; it is clipped at 0 here.
    """
    z = NormalDist().inv_cdf(0.5 + check_level(level) / 2.0)
    est = np.asarray(estimate, dtype=np.float64)
    half = z * np.sqrt(np.maximum(variance, 0.0))
    return est - half, est + half
