"""Attacks on one device's reports, computed exactly or simulated with a seed: what the epsilons of
:mod:`ldp_marginals.ldp.longitudinal` promise, checked from the attacker's side (tests/ldp).

- :func:`attacker_accuracy`: guessing one bit from n reports of a device, by the Bayes-optimal
  rule (the best any attacker can do, prior 1/2) or by averaging (the mean of the reports against
  the midpoint of the channel the mean converges to). Bounded by ``e^eps_n / (1 + e^eps_n)``.
- :func:`change_epsilon`: whether a device's bit changed between ``before`` reports and ``after``
  reports that the attacker knows are the device's: the largest log-likelihood ratio of "changed"
  against "unchanged". Without memoization it is ``after * eps_1``; with memoization the reports
  before and after share the permanent response when the value did not change, so it is larger.
- :func:`linkage_rate`: devices whose reports in one window an attacker links to their reports in
  another, though their tokens differ, through the fingerprint of their memoized bits and their
  true values (a likelihood attacker on per-bit counts, one guess per device).
"""
from __future__ import annotations

import math

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_probability
from ldp_marginals.ldp.memoized import ClientChannels


def _states(channels: ClientChannels, bit: int, x: int) -> list:
    """``[(weight, P(report bit = 1)), ...]``: the device's latent state given true bit x."""
    inst, perm = channels.instantaneous[bit], channels.permanent[bit]
    if perm is None:
        return [(1.0, inst.q if x else inst.p)]
    w = perm.q if x else perm.p
    return [(w, inst.q), (1.0 - w, inst.p)]


def _binomial(n: int, theta: float) -> np.ndarray:
    k = np.arange(n + 1)
    log_c = np.array([math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) for j in k])
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = log_c + np.where(k == 0, 0.0, k * np.log(theta)) + np.where(k == n, 0.0, (n - k) * np.log1p(-theta))
    return np.exp(logs)


def count_law(channels: ClientChannels, bit: int, x: int, n_reports: int) -> np.ndarray:
    """``P(k ones among n reports | x)`` for k = 0..n."""
    n = check_int("n_reports", n_reports, minimum=1)
    return sum(w * _binomial(n, t) for w, t in _states(channels, bit, x))


def attacker_accuracy(channels: ClientChannels, bit: int, n_reports: int, rule: str = "bayes") -> float:
    """Exact accuracy of guessing a bit (prior 1/2) from n reports: ``bayes`` (optimal) or
    ``average`` (guess 1 when the mean exceeds the midpoint of ``(p_I, q_I)`` for a memoized bit,
    of ``(p, q)`` otherwise; a tie is a fair coin)."""
    p0, p1 = count_law(channels, bit, 0, n_reports), count_law(channels, bit, 1, n_reports)
    if rule == "bayes":
        return float(0.5 * np.maximum(p0, p1).sum())
    if rule != "average":
        raise ValueError(f"rule must be 'bayes' or 'average', got rule={rule!r}")
    inst = channels.instantaneous[bit]
    mid = (inst.p + inst.q) / 2.0 * n_reports
    k = np.arange(n_reports + 1)
    guess_one = np.where(np.isclose(k, mid), 0.5, (k > mid).astype(float))
    return float(0.5 * (p1 * guess_one).sum() + 0.5 * (p0 * (1.0 - guess_one)).sum())


def change_epsilon(channels: ClientChannels, bit: int, before: int, after: int) -> float:
    """Largest ``|ln P(reports | changed) - ln P(reports | unchanged)|`` over the device's first
    value and its ``before`` and ``after`` reports (one bit; a memoized bit keys its permanent
    response by the value, so a change draws a new one)."""
    b, a = check_int("before", before, minimum=1), check_int("after", after, minimum=1)
    worst = 0.0
    for x in (0, 1):
        same = sum(w * np.outer(_binomial(b, t), _binomial(a, t)) for w, t in _states(channels, bit, x))
        changed = np.outer(count_law(channels, bit, x, b), count_law(channels, bit, 1 - x, a))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.log(changed) - np.log(same)
        ratio = ratio[~np.isnan(ratio)]
        worst = max(worst, float(np.max(np.abs(ratio))))
    return worst


def linkage_rate(channels: ClientChannels, n_devices: int, reports: tuple, one_probability: float,
                 rng: np.random.Generator) -> float:
    """Simulated share of devices an attacker links across two windows.

    Each device holds true bits drawn once (1 with ``one_probability``, the same in both windows)
    and its permanent responses (memoized bits); in window w it sends ``reports[w]`` reports under a
    token of that window. The attacker knows the channels and ``one_probability`` and, for each
    token of the second window, picks the token of the first whose per-bit counts of ones are the
    most likely to come from the same device: the largest ``sum_bits ln P(k1, k2 | same device) /
    (P(k1) P(k2))``. Chance is ``1 / n_devices``.
    """
    n = check_int("n_devices", n_devices, minimum=2)
    r1, r2 = (check_int("reports", r, minimum=1) for r in reports)
    pi = check_probability("one_probability", one_probability)
    d = len(channels)
    x = (rng.random((n, d)) < pi).astype(np.int64)
    first, second = [], []   # per bit: each first-window token's log-ratio row; second-window counts one-hot
    for i in range(d):
        states = {v: _states(channels, i, v) for v in (0, 1)}
        theta = np.empty(n)
        u = rng.random(n)    # which state (permanent response) each device drew
        for v in (0, 1):
            held = x[:, i] == v
            (w, t_first), *rest = states[v]
            theta[held] = np.where(u[held] < w, t_first, rest[0][1] if rest else t_first)
        joint = sum((pi if v else 1.0 - pi) * w * np.outer(_binomial(r1, t), _binomial(r2, t))
                    for v in (0, 1) for w, t in states[v])
        with np.errstate(divide="ignore", invalid="ignore"):
            table = np.nan_to_num(np.log(joint) - np.log(np.outer(joint.sum(1), joint.sum(0))), nan=-np.inf)
        first.append(table[rng.binomial(r1, theta)])
        second.append(np.eye(r2 + 1)[rng.binomial(r2, theta)])
    scores = np.hstack(first) @ np.hstack(second).T      # scores[a, b]: first-window a, second-window b
    return float(np.mean(np.argmax(scores, axis=0) == np.arange(n)))
