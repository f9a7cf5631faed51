"""Vectorized seeded simulations of many noisy windows at once, for the statistical tests.

A window's estimates depend on its noisy reports only through the histogram of their noisy
patterns (``2^d`` of them for ``d`` bits; pattern code ``k`` has bit ``i`` = ``(k >> i) & 1``). Given
the true reports, the reports that share a true pattern add a multinomial draw over the noisy
patterns; reports drawn i.i.d. from a population make the whole histogram one multinomial. So a
window costs one multinomial draw per distinct true pattern, not one random number per bit.

The estimators are then applied through the code under test: an estimate that is an affine function
of the histogram of a window of ``n`` reports (a TMDH count, a table cell, a mean; the joint and
given counts of a conditional) is the histogram-weighted mean of its values on the ``2^d`` windows
whose ``n`` reports all share one noisy pattern (:func:`window_fields`, which checks that against
direct calls on real windows).
"""
from __future__ import annotations

import numpy as np


def patterns(d: int) -> np.ndarray:
    """Every pattern of ``d`` bits, ``(2^d, d)`` uint8, row ``k`` holding the bits of code ``k``."""
    codes = np.arange(1 << d)
    return ((codes[:, None] >> np.arange(d)) & 1).astype(np.uint8)


def noisy_probabilities(rows, p, q) -> np.ndarray:
    """``P(noisy pattern k | true row)`` for each row of ``rows`` ``(m, d)``: ``(m, 2^d)``."""
    rows = np.asarray(rows)
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    one = np.where(rows[:, None, :] == 1, q, p)                         # P(noisy 1) per row and bit
    noisy = patterns(rows.shape[1])[None, :, :] == 1
    return np.prod(np.where(noisy, one, 1 - one), axis=2)


def noisy_histograms(truth, p, q, windows: int, rng) -> np.ndarray:
    """Histograms ``(windows, 2^d)`` of the noisy patterns of ``windows`` independent randomizations
    of the same true reports ``truth`` ``(n, d)`` through the channels ``(p, q)``."""
    rows, counts = np.unique(np.asarray(truth), axis=0, return_counts=True)
    probs = noisy_probabilities(rows, p, q)
    out = np.zeros((windows, probs.shape[1]), dtype=np.int64)
    for m, prob in zip(counts, probs):
        out += rng.multinomial(m, prob / prob.sum(), size=windows)
    return out


def sampled_histograms(population, n: int, p, q, windows: int, rng) -> np.ndarray:
    """Histograms ``(windows, 2^d)`` of windows of ``n`` reports drawn i.i.d. from a population whose
    true pattern ``k`` has probability ``population[k]``, then randomized."""
    population = np.asarray(population, dtype=float)
    d = int(population.size).bit_length() - 1
    noisy = population @ noisy_probabilities(patterns(d), p, q)
    return rng.multinomial(n, noisy / noisy.sum(), size=windows)


def reports(histogram) -> np.ndarray:
    """Noisy reports ``(n, d)`` with the given histogram of patterns."""
    histogram = np.asarray(histogram)
    return np.repeat(patterns(int(histogram.size).bit_length() - 1), histogram, axis=0)


def window_fields(fields, histograms, checks: int = 4) -> np.ndarray:
    """``fields(reports)`` (a vector of numbers the code under test computes from a window's noisy
    reports ``(n, d)``) for every window of ``histograms`` ``(windows, 2^d)``, each field affine in the
    histogram at the windows' common size n. Checked against direct calls on the first ``checks``
    windows: a field that is not affine fails here, not silently."""
    histograms = np.asarray(histograms)
    n = int(histograms[0].sum())
    if not np.all(histograms.sum(axis=1) == n):
        raise ValueError("histograms must all hold the same number of reports")
    d = int(histograms.shape[1]).bit_length() - 1
    pure = np.array([np.atleast_1d(fields(np.repeat(row[None, :], n, axis=0))) for row in patterns(d)],
                    dtype=float)
    out = histograms @ pure / n
    scale = np.abs(pure).max(axis=0) + 1.0
    for i in range(min(checks, len(histograms))):
        direct = np.atleast_1d(fields(reports(histograms[i]))).astype(float)
        assert np.all(np.abs(direct - out[i]) <= 1e-9 * scale), f"fields not affine in the histogram: {direct} != {out[i]}"
    return out


def histogram_counts(histograms, family) -> np.ndarray:
    """The co-occurrence counts ``(windows, len(family))`` of windows given by their histograms, through
    the job's counting (the counts of one report of each pattern, weighted)."""
    from ldp_marginals.ldp.cooccurrence import count_bits
    histograms = np.asarray(histograms)
    d = int(histograms.shape[-1]).bit_length() - 1
    contains = np.array([count_bits(row[None, :], family) for row in patterns(d)])
    return histograms @ contains
