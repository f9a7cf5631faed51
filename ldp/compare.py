"""Changes between two estimates of a frequency: between two windows, or between two values of a
dimension in one window, with a z score and an interval, and the Benjamini-Hochberg procedure over
the sets compared ("what moved this week?").

The question is the population's: did the share change among the devices the reports come from,
not did these two windows' reports differ. The estimators' own variances are conditional on each
window's true reports (the randomization only); a window's reports are themselves a draw from the
population, which adds, for a frequency F over n reports, ``F (1 - F) / n``. Estimated without bias
(:func:`population_variance`): if the estimate f is unbiased for the window's true frequency with
conditional variance V (and V-hat unbiased for V), then over both draws ``E f = F``,
``Var f = E V + F (1 - F) / n`` and ``E[f (1 - f)] = F (1 - F) (1 - 1/n) - E V``, so::

    Var_population(f) = V + F (1 - F) / n,   estimated by   (n V-hat + f (1 - f)) / (n - 1)

(never below V-hat). A count's variance is n^2 times its frequency's. A conditional ``P(A | B)`` is a
frequency over the ``t_B`` reports in B (its ``given_count``). A mean of a numeric feature needs
nothing added: its variance already holds the encoding's Bernoulli term ``m (1 - m) / n``, which for
reports drawn from a population is the whole spread of the encoded bit, the draw of the values
included (ldp/means.py). Without the term, ``compare`` on stationary simulated data flagged a change
in half the replicates (benchmarks/detection.py).

Two windows hold disjoint sets of reports (fixed windows, or different dimension values), so the
two frequency estimates are independent and the variance of their difference is the sum of their
variances. Overlapping sliding windows share reports, and windows of one period share devices:
their estimates are positively correlated, so the sum overstates the variance and the test is
conservative (it finds fewer changes than there are, never more).
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


def population_variance(frequency: float, variance: float, n: float) -> float:
    """The variance of a frequency ``frequency`` estimated from ``n`` reports, as an estimate of the
    population's share: its own (randomization) ``variance`` plus the draw of the reports, unbiased:
    ``(n variance + f (1 - f)) / (n - 1)``, never below ``variance`` (an estimate outside [0, 1] would
    make ``f (1 - f)`` negative) nor 0; infinite for ``n <= 1`` (one report says nothing about a
    population's spread)."""
    if math.isnan(frequency) or math.isnan(variance) or math.isnan(n):
        raise ValueError(f"frequency, variance and n must be numbers, got {frequency!r}, {variance!r}, {n!r}")
    if not n > 1:
        return math.inf
    return max(variance, (n * variance + frequency * (1.0 - frequency)) / (n - 1.0), 0.0)


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
