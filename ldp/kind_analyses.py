"""Conditionals and means for the whole-report channel kinds (``hadamard``, ``subset``), derived from
their marginals and the covariance of their tables (issue 48 item 1; Beam-free).

:func:`~ldp_marginals.ldp.conditional.conditional` and :func:`~ldp_marginals.ldp.means.feature_mean`
read an estimate with ``n``, ``family``, ``mean(set)``, ``variance(set)`` and, for a ratio, the joint
``all_ones(sets)`` and a ``presence_threshold(set, alpha)``. :class:`KindMarginals` gives them from a
kind's window marginals (``WindowMarginals`` of :mod:`~ldp_marginals.ldp.hadamard_reports` or
:mod:`~ldp_marginals.ldp.subset_reports`):

- ``mean(s)``, ``variance(s)``: the kind's all-ones count of ``s`` and its closed-form variance (what the
  marginal rows publish), so an unconditional mean is the numeric bit's marginal rescaled;
- ``all_ones(sets)``: the all-ones counts of several sets *from one table*, that of their union U (at
  most ``max_order`` bits), with their exact covariance ``H S H^T``: ``S`` the kind's covariance of U's
  table (``HadamardEstimate.table``: the Walsh-Hadamard transform of the sampled coefficients'
  covariance; ``SubsetEstimate.table``: the closed form of subset RR over the ``n_U`` reports whose
  subset holds U), ``H`` the 0/1 rows that sum the cells with every bit of a set at 1. The all-ones count
  of a set B in U is a linear function of U's table, so ``t_U / t_B`` is a ratio of two linear
  estimates of one table and its delta-method variance is exact to first order. For Hadamard sampling
  the table's marginal on B *is* the kind's all-ones estimate of B (the coefficients of B's subsets);
  for subset RR it is the estimate from the reports that drew U, unbiased as well (fewer reports than
  the marginal row of B uses: the price of a covariance in closed form);
- ``extreme(op, bits)``: the reports whose OR (AND) over ``bits`` is 1, ``N`` minus the all-zeros cell
  (the all-ones cell) of the table of ``bits``, with that cell's variance: extremes over reports for
  at most ``max_order`` bits (an OR over more bits needs a table the kind does not estimate: refused in
  schemas/composition.py; extremes over clients multiply one term per report instead,
  :mod:`~ldp_marginals.ldp.kind_client_extremes`);
- ``presence_threshold(B, alpha)``: the condition B is declared to hold when its count exceeds
  ``z_{1-alpha} sqrt(N c_|B|)``, ``c_o`` the kind's worst-case variance per report of one cell of an
  ``o``-bit table (``cell_variance_per_report``, the figure ``plan`` states), a bound on the count's
  variance whatever the truth, so at ``t_B = 0`` the test fires at rate at most about ``alpha``: a normal
  approximation (the per-bit kind's test is Bernstein's exact bound, :mod:`~ldp_marginals.ldp.conditional`).

``repeats`` is None (reports randomized afresh), or for a memoized kind (``channel: {kind: ..., memoize:
true}``) :func:`~ldp_marginals.ldp.kind_memoize.kind_repeats`, read by the means' encoding term; the
marginals and tables such an estimate reads already carry the repeats term
(:func:`~ldp_marginals.ldp.kind_memoize.with_kind_repeats`), and so does the presence threshold's
``cell_variance_per_report`` (:func:`~ldp_marginals.ldp.kind_memoize.cell_variance_with_repeats`).
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ldp_marginals.ldp._checks import check_probability
from ldp_marginals.ldp.sets import SetFamily, _normalize


class KindMarginals:
    """A whole-report kind's window estimate as the conditionals and means read it (module docstring).
    ``marginals``: the kind's ``WindowMarginals``; ``cell_variance_per_report(mechanism, order)``: the
    kind's (ldp/channel_kind.py)."""

    repeats = None

    def __init__(self, marginals, cell_variance_per_report):
        self.marginals = marginals
        self.estimate = marginals.estimate
        self.mechanism = marginals.estimate.mechanism
        self.family: SetFamily = marginals.family
        self.n = int(marginals.n)
        self._cell_variance = cell_variance_per_report

    def _index(self, s) -> int:
        cols = _normalize(self.family.n_bits, s)
        if not 1 <= len(cols) <= self.family.max_order:
            raise ValueError(f"set must name 1..{self.family.max_order} bits, got set={list(s)}")
        return self.family.index(cols)

    def mean(self, s) -> float:
        return float(self.marginals.means[self._index(s)])

    def variance(self, s) -> float:
        return float(self.marginals.variances[self._index(s)])

    def all_ones(self, sets) -> tuple:
        """``(counts, covariance)`` of the all-ones counts of ``sets``, all from the table of their union
        (module docstring); a ValueError when the union has more than ``max_order`` bits."""
        sets = [_normalize(self.family.n_bits, s) for s in sets]
        union = tuple(sorted(set().union(*map(set, sets))))
        if not 1 <= len(union) <= self.family.max_order:
            raise ValueError(f"sets must span 1..{self.family.max_order} bits (the kind's max_order), got "
                             f"union={list(union)}")
        table = self.estimate.table(union)
        cells = np.arange(1 << len(union))
        h = np.array([np.all([(cells >> union.index(b)) & 1 for b in s], axis=0) for s in sets], dtype=float)
        with np.errstate(invalid="ignore"):
            return h @ table.estimate, h @ table.covariance @ h.T

    def extreme(self, op: str, bits) -> tuple:
        """``(count, variance)`` of the reports whose OR (``op`` 'or') or AND ('and') over ``bits`` is 1, from
        the table of ``bits`` (at most ``max_order`` of them): OR = N - the all-zeros cell (N is known),
        AND = the all-ones cell."""
        if op not in ("or", "and"):
            raise ValueError(f"op must be 'or' or 'and', got op={op!r}")
        cols = _normalize(self.family.n_bits, bits)
        if not 1 <= len(cols) <= self.family.max_order:
            raise ValueError(f"bits must name 1..{self.family.max_order} bits (the kind's max_order), got "
                             f"bits={list(bits)}")
        table = self.estimate.table(cols)
        cell = 0 if op == "or" else (1 << len(cols)) - 1
        count = self.n - table.estimate[0] if op == "or" else table.estimate[cell]
        return float(count), float(table.covariance[cell, cell])

    def presence_threshold(self, given, alpha: float) -> float:
        """The count of ``given`` above which it is declared to hold (module docstring)."""
        alpha = check_probability("alpha", alpha, open_low=True, open_high=True)
        if self.n <= 0:
            return math.inf
        order = len(_normalize(self.family.n_bits, given))
        z = NormalDist().inv_cdf(1.0 - alpha)
        return z * math.sqrt(self.n * self._cell_variance(self.mechanism, order))
