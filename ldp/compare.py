"""Changes between two estimates of a frequency: between two windows, or between two values of a
dimension in one window, with a z score and an interval, and the Benjamini-Hochberg procedure over
the sets compared ("what moved this week?").

Two windows hold disjoint sets of reports (fixed windows, or different dimension values), so the
two frequency estimates are independent and the variance of their difference is the sum of their
variances. Overlapping sliding windows share reports: their estimates are positively correlated,
so the sum overstates the variance and the test is conservative (it finds fewer changes than
there are, never more).
"""
from __future__ import annotations

import math
from statistics import NormalDist
from typing import NamedTuple, Sequence

from ldp_marginals.ldp._checks import check_probability
from ldp_marginals.ldp.intervals import normal_interval


class Change(NamedTuple):
    difference: float   # second - first
    standard_error: float
    z: float
    p_value: float      # two-sided
    ci_low: float
    ci_high: float


def change(first: float, first_variance: float, second: float, second_variance: float,
           level: float = 0.95) -> Change:
    """The difference ``second - first`` of two independent estimates, with its normal test."""
    diff = second - first
    var = first_variance + second_variance
    if not var > 0:
        raise ValueError(f"variances must add up to > 0, got {first_variance!r} + {second_variance!r}")
    se = math.sqrt(var)
    z = diff / se
    p = 2 * (1 - NormalDist().cdf(abs(z)))
    low, high = normal_interval(diff, var, level)
    return Change(diff, se, z, p, float(low), float(high))


def benjamini_hochberg(p_values: Sequence[float], q: float = 0.05) -> list:
    """Which hypotheses are rejected at false discovery rate ``q`` (Benjamini & Hochberg 1995): the
    largest k with ``p_(k) <= k q / m``, and every hypothesis with a p-value up to that one."""
    q = check_probability("q", q, open_low=True, open_high=True)
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    cutoff = 0
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= rank * q / m:
            cutoff = rank
    rejected = [False] * m
    for i in order[:cutoff]:
        rejected[i] = True
    return rejected
