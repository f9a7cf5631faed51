"""Noise calibration for clients: local DP and sufficient DP (Zhilyaev & Zeber).

Flip probabilities here are the papers' ``q`` (Zhilyaev & Zeber: flip ``q``, keep ``p = 1-q``);
in our notation a symmetric channel with flip ``f`` is ``(p, q) = (f, 1 - f)``.

Sufficient DP: with perfectly anonymized (shuffled) reports, a window of N reports of L bits is
protected at privacy ratio ``lambda = e^eps`` except with small probability by far less noise
than local DP's ``1/(1 + lambda^(1/L))`` (eq. 4.2). With ``phi = (p^3 + q^3)/(pq)`` (eq. 3.14)
the flip solves, for one report per user (eq. 3.15)::

    1 + phi^L/N + beta sqrt(phi^L/N + ((phi^2 + phi - 1)^L - phi^(2L))/N^2) <= lambda

and for k reports per user (eq. 6.3)::

    (1 + phi^L/(kN))^k + beta sqrt((phi^L/(kN) + (phi^2+phi-1)^L/(kN)^2)^k - (1/(kN) + phi^(2L)/(kN)^2)^k) <= lambda

then ``flip = 1/(1 + rho)`` with ``rho = ((phi+1) + sqrt((phi+1)^2 - 4))/2`` (eq. 3.16).
Vectors with at most w set bits protect like ``L = 2w`` (sec. 5). At k = 1, eq. 6.3 differs from
eq. 3.15 by a ``-1/N`` inside the root; we use eq. 3.15 for k = 1 as the paper does.

Checked by Monte Carlo (tests/ldp/test_privacy.py): the ``mu + 3 sigma`` rule is a heuristic whose
tail can exceed 1% (2.5% at L = 12, N = 20000, lambda = 2), and eq. 6.3 understates the variance
for k > 1 (tail ~30% at L = 5, N = 1000, lambda = 2, k = 2). :func:`sufficient_dp_flip_by_tail`
calibrates on the Monte Carlo tail itself and is the one to rely on for a promise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive, check_probability


def local_dp_epsilon(layout, channels) -> float:
    """Tight local-DP epsilon of a whole report of ``layout`` under per-bit ``channels``.

    Two users may differ in every feature. A boolean feature's bit (or a numeric feature's encoded
    bit, 1 with probability 1 for ``high`` and 0 for ``low``) contributes its ``eps_bit``; a
    categorical (one-hot) feature changes one bit 1 -> 0 and another 0 -> 1, which contributes
    ``max_{i != j} ln(q_i/p_i) + ln((1-p_j)/(1-q_j))`` (``swap_epsilon`` for equal channels).
    """
    if len(channels) != layout.n_bits:
        raise ValueError(f"channels must have {layout.n_bits} bits, got len(channels)={len(channels)}")
    total = 0.0
    for feature in layout.features:
        bits = list(layout.bits_of(feature.name))
        if len(bits) == 1:   # a boolean, or a numeric feature's encoded bit (which any two values can set or clear)
            total += channels[bits[0]].epsilon_bit
            continue
        best = 0.0
        for i in bits:
            for j in bits:
                if i != j:
                    ci, cj = channels[i], channels[j]
                    up = math.inf if ci.p == 0 else math.log(ci.q / ci.p)
                    down = math.inf if cj.q == 1 else math.log((1 - cj.p) / (1 - cj.q))
                    best = max(best, up + down)
        total += best
    return total


def local_dp_flip(n_bits: int, lam: float) -> float:
    """Flip probability that makes a whole L-bit report ``ln(lambda)``-LDP: ``1/(1 + lambda^(1/L))`` (eq. 4.2)."""
    n = check_int("n_bits", n_bits, minimum=1)
    lam = check_positive("lam", lam)
    if lam <= 1.0:
        raise ValueError(f"lam must be > 1, got lam={lam}")
    return 1.0 / (1.0 + lam ** (1.0 / n))


def phi_of_flip(flip: float) -> float:
    """``phi = (p^3 + q^3)/(pq)`` of eq. 3.14 with keep ``p = 1 - flip``, flip ``q``."""
    f = check_probability("flip", flip, open_low=True)
    if not f <= 0.5:
        raise ValueError(f"flip must be in (0, 0.5], got flip={flip}")
    keep = 1.0 - f
    return (keep ** 3 + f ** 3) / (keep * f)


def flip_of_phi(phi: float) -> float:
    """Inverse of :func:`phi_of_flip` (eq. 3.16)."""
    if not phi >= 1.0:
        raise ValueError(f"phi must be >= 1, got phi={phi}")
    rho = ((phi + 1.0) + math.sqrt(max((phi + 1.0) ** 2 - 4.0, 0.0))) / 2.0
    return 1.0 / (1.0 + rho)


def effective_bits(n_bits: int, max_ones: int | None) -> int:
    """Bits that sufficient DP must protect: ``min(L, 2w)`` when true vectors have at most w set bits."""
    n = check_int("n_bits", n_bits, minimum=1)
    if max_ones is None:
        return n
    w = check_int("max_ones", max_ones, minimum=1)
    return min(n, 2 * w)


def sufficient_dp_lhs(phi: float, n_bits: int, population: int, repeats: int = 1, sigmas: float = 3.0) -> float:
    """Left side of eq. 3.15 (``repeats == 1``) or eq. 6.3: mean plus ``sigmas`` deviations of R."""
    L, N, k = n_bits, float(population), repeats
    log_phi = math.log(phi)
    if k == 1:
        mean = 1.0 + math.exp(L * log_phi - math.log(N))
        # ((phi^2+phi-1)^L - phi^(2L)) / N^2 computed as phi^(2L)/N^2 * expm1(L log1p((phi-1)/phi^2))
        extra = math.exp(2 * L * log_phi - 2 * math.log(N)) * math.expm1(L * math.log1p((phi - 1.0) / phi ** 2))
        var = math.exp(L * log_phi - math.log(N)) + extra
    else:
        kn = k * N
        a = math.exp(L * log_phi) / kn
        mean = math.exp(k * math.log1p(a))
        upper = a + math.exp(L * math.log(phi ** 2 + phi - 1.0)) / kn ** 2
        lower = 1.0 / kn + math.exp(2 * L * log_phi) / kn ** 2
        var = lower ** k * math.expm1(k * (math.log(upper) - math.log(lower)))
    return mean + sigmas * math.sqrt(max(var, 0.0))


def sufficient_dp_flip(n_bits: int, population: int, lam: float, repeats: int = 1, sigmas: float = 3.0,
                       max_ones: int | None = None) -> float:
    """Smallest flip probability meeting sufficient DP at ``lambda`` (eq. 3.15 / 6.3 solved for phi,
    then eq. 3.16). ``ValueError`` when even a fair coin (flip 1/2) cannot meet it for this N."""
    L = effective_bits(n_bits, max_ones)
    N = check_int("population", population, minimum=1)
    k = check_int("repeats", repeats, minimum=1)
    beta = check_positive("sigmas", sigmas, allow_zero=True)
    lam = check_positive("lam", lam)
    if lam <= 1.0:
        raise ValueError(f"lam must be > 1, got lam={lam}")

    def gap(log_phi):
        return sufficient_dp_lhs(math.exp(log_phi), L, N, k, beta) - lam

    if gap(0.0) > 0:
        raise ValueError(f"population={N} is too small for lam={lam} with L={L} bits, repeats={k}, "
                         f"sigmas={beta}: even flip=0.5 fails")
    hi = max(1.0, (math.log(lam * k * N) + 1.0) / L)
    while gap(hi) <= 0:
        hi *= 2.0
        if hi > 1e4:
            return 0.0
    from scipy.optimize import brentq  # imported here: scipy stays off the core's import path

    log_phi = brentq(gap, 0.0, hi, xtol=1e-14, rtol=1e-14)
    return flip_of_phi(math.exp(log_phi))


def privacy_ratio_moments(flip: float, n_bits: int, population: int):
    """Exact mean and variance of R(T) for one report per user (sec. 3.1)."""
    phi = phi_of_flip(flip)
    L, N = n_bits, float(population)
    mean = (N - 1) / N + phi ** L / N
    var = (N - 1) / N ** 2 * (phi ** L - 1) + (((phi ** 2 + phi - 1) ** L) - phi ** (2 * L)) / N ** 2
    return mean, var


def concentration_bound(flip: float, n_bits: int, population: int, sigmas: float) -> float:
    """Zhilyaev & Zeber eq. 3.17 (after Maurer): bound on the probability that R deviates by more
    than ``sigmas`` standard deviations."""
    phi = phi_of_flip(flip)
    L, N = n_bits, float(population)
    beta = check_positive("sigmas", sigmas)
    frac = ((N - 1) + phi ** L) / ((N - 1) * phi ** L + (phi ** 2 + phi - 1) ** L)
    return math.exp(-beta ** 2 / 2.0 * (1.0 - frac))


@dataclass(frozen=True)
class TailEstimate:
    probability: float
    standard_error: float
    trials: int


def _log_elementary_symmetric_mean(log_x: np.ndarray, counts: np.ndarray, k: int, total: int) -> np.ndarray:
    """``log(e_k(x) / C(total, k))`` for multisets given as values ``x_l`` with multiplicities,
    per row, via Newton's identities on ``x / total`` (k is small)."""
    scale = math.log(total)
    y = np.exp(log_x - scale)                       # (L+1,)
    power = np.stack([(counts * y ** j).sum(axis=1) for j in range(1, k + 1)], axis=1)  # (trials, k)
    e = [np.ones(counts.shape[0])]
    for m in range(1, k + 1):
        s = np.zeros(counts.shape[0])
        for i in range(1, m + 1):
            s += (-1) ** (i - 1) * e[m - i] * power[:, i - 1]
        e.append(s / m)
    from scipy.special import gammaln

    log_binom = gammaln(total + 1) - gammaln(k + 1) - gammaln(total - k + 1)
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(e[k], 0.0)) + k * scale - log_binom


def sample_log_privacy_ratio(flip: float, n_bits: int, population: int, repeats: int = 1,
                             trials: int = 20_000, rng=None) -> np.ndarray:
    """Monte Carlo draws of ``log R`` from the multinomial law of eq. 3.5, generalized to k
    reports per user: ``T ~ MN(kN - k, p_0) + MN(k, p_1)`` and ``R = e_k(x) / C(kN, k)`` (eq. 8.21),
    where ``x_l = (q/p)^(L - 2l)`` is the contribution of a report with l set bits."""
    f = check_probability("flip", flip, open_low=True)
    if not f < 0.5:
        raise ValueError(f"flip must be in (0, 0.5), got flip={flip}")
    L = check_int("n_bits", n_bits, minimum=1)
    N = check_int("population", population, minimum=1)
    k = check_int("repeats", repeats, minimum=1)
    n_trials = check_int("trials", trials, minimum=1)
    from scipy.special import gammaln, logsumexp  # imported here: scipy stays off the core's import path

    rng = np.random.default_rng() if rng is None else rng
    keep = 1.0 - f
    ls = np.arange(L + 1)
    log_binom = gammaln(L + 1) - gammaln(ls + 1) - gammaln(L - ls + 1)
    p0 = np.exp(log_binom + ls * math.log(f) + (L - ls) * math.log(keep))
    p1 = np.exp(log_binom + ls * math.log(keep) + (L - ls) * math.log(f))
    t = rng.multinomial(k * N - k, p0 / p0.sum(), size=n_trials) + rng.multinomial(k, p1 / p1.sum(), size=n_trials)
    log_x = (L - 2 * ls) * math.log(f / keep)
    if k == 1:
        with np.errstate(divide="ignore"):
            return logsumexp(np.log(t) + log_x, axis=1) - math.log(N)
    return _log_elementary_symmetric_mean(log_x, t, k, k * N)


def tail_probability(flip: float, n_bits: int, population: int, lam: float, repeats: int = 1,
                     trials: int = 20_000, rng=None) -> TailEstimate:
    """Monte Carlo ``P[R(T) > lambda]`` with its standard error (see :func:`sample_log_privacy_ratio`)."""
    lam = check_positive("lam", lam)
    log_r = sample_log_privacy_ratio(flip, n_bits, population, repeats, trials, rng)
    prob = float(np.mean(log_r > math.log(lam)))
    return TailEstimate(prob, math.sqrt(prob * (1 - prob) / log_r.size), int(log_r.size))


def sufficient_dp_flip_by_tail(n_bits: int, population: int, lam: float, eta: float = 0.01, repeats: int = 1,
                               max_ones: int | None = None, trials: int = 20_000, seed: int = 0) -> float:
    """Smallest flip whose Monte Carlo tail ``P[R > lambda]`` is at most ``eta`` (bisection with
    common random numbers, so the tail is monotone in the flip for a fixed seed).

    Use this to check or replace the moment rules: the ``mu + 3 sigma`` rule of eq. 3.15 is a
    heuristic (its tail can exceed 1%), and eq. 6.3 for k > 1 understates Var R(S^k) because its
    derivation adds the variances of overlapping k-subsets as if independent, so it calibrates
    far too little noise (see tests/ldp/test_privacy.py).
    """
    L = effective_bits(n_bits, max_ones)
    N = check_int("population", population, minimum=1)
    k = check_int("repeats", repeats, minimum=1)
    eta = check_probability("eta", eta, open_low=True, open_high=True)
    lam = check_positive("lam", lam)
    if lam <= 1.0:
        raise ValueError(f"lam must be > 1, got lam={lam}")

    def tail(f):
        log_r = sample_log_privacy_ratio(f, L, N, k, trials, np.random.default_rng(seed))
        return float(np.mean(log_r > math.log(lam)))

    hi = local_dp_flip(L, lam)  # local DP: R <= lambda always
    lo = 1e-6
    if tail(lo) <= eta:
        return lo
    for _ in range(40):
        mid = (lo + hi) / 2.0
        if tail(mid) <= eta:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-6:
            break
    return hi


def smallest_population(flip: float, n_bits: int, lam: float, eta: float = 0.01, repeats: int = 1,
                        max_ones: int | None = None, trials: int = 20_000, seed: int = 0,
                        max_population: int = 1 << 40) -> int:
    """The inverse question of :func:`sufficient_dp_flip_by_tail`: the smallest crowd N of reports
    for which the Monte Carlo tail ``P[R > lambda]`` at this ``flip`` is at most ``eta`` ("with this
    noise, how many reports do I need?"). 1 when the flip already gives local DP at ``lambda``.

    A promise errs on the safe side: N passes when the estimated tail plus 3 standard errors
    (``sqrt(p(1 - p)/trials)``) is at most ``eta``. Doubling then bisection on N, each N evaluated
    with the same seed (common random numbers). R concentrates on 1 as N grows, so the tail falls
    with N, though slowly near ``eta`` (a flip calibrated for N by the point estimate can pass at
    half that N or need more): the answer is the N this rule finds. A ``ValueError`` names the
    flip when not even ``max_population`` reports suffice."""
    f = check_probability("flip", flip, open_low=True)
    if not f < 0.5:
        raise ValueError(f"flip must be in (0, 0.5), got flip={flip}")
    L = effective_bits(n_bits, max_ones)
    k = check_int("repeats", repeats, minimum=1)
    eta = check_probability("eta", eta, open_low=True, open_high=True)
    lam = check_positive("lam", lam)
    if lam <= 1.0:
        raise ValueError(f"lam must be > 1, got lam={lam}")
    if f >= local_dp_flip(L, lam):
        return 1

    def ok(n: int) -> bool:
        log_r = sample_log_privacy_ratio(f, L, n, k, trials, np.random.default_rng(seed))
        p = float(np.mean(log_r > math.log(lam)))
        return p + 3.0 * math.sqrt(p * (1.0 - p) / trials) <= eta

    lo, hi = 1, 2
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > max_population:
            raise ValueError(f"flip={f} needs more than max_population={max_population} reports for "
                             f"P[R > {lam:g}] <= {eta}")
    while hi - lo > 1:  # ok(hi), not ok(lo)
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
