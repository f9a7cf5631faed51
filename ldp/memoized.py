"""Memoized channels: a permanent response per bit and value, then an instantaneous response per
report (RAPPOR's two stages, Erlingsson et al. 2014), and what they do to the estimators.

A bit that memoizes first draws a *permanent* bit ``b`` from its true bit ``x`` through the channel
``(p_P, q_P)`` (the same ``b`` for every report of the same value: its coins are derived from the
device secret, :mod:`ldp_marginals.ldp.device`), then reports ``y`` through the *instantaneous*
channel ``(p_I, q_I)`` with fresh coins. The server inverts the *effective* channel, their
composition (docs/design.md): ``p* = p_I + p_P (q_I - p_I)``, ``q* = p_I + q_P (q_I - p_I)``; with
RAPPOR's parameters ``(p_P, q_P) = (f/2, 1 - f/2)`` this is RAPPOR's
``p* = f(p + q)/2 + (1 - f) p``, ``q* = f(p + q)/2 + (1 - f) q``. A bit that does not memoize
reports through ``(p_I, q_I)`` alone.

Reports of one device that share a permanent bit are correlated. With the debiased bit
``z = (y - p*)/(q* - p*)``, two reports of a device with the same true bit ``x`` have
``E[z z'] = x + c(x)``, ``c(x) = pi_x (1 - pi_x) / (q_P - p_P)^2``, ``pi_x = P(b = 1 | x)``
(the variance of the shared permanent bit, on the scale of ``z``); 0 for a bit that does not
memoize. For a set S the TMDH term of a report is ``prod_{i in S} z_i``, so two reports of one
device add the covariance ``C_S(x) = prod_{i in S} (c_i(0) + a_i x_i) - prod_{i in S} x_i`` with
``a_i = 1 + c_i(1) - c_i(0)``: a polynomial in the true bits with non-negative coefficients.
A device sending ``m`` reports of one value adds ``m (m - 1) C_S(x)``: the design effect
``1 + (m - 1) rho``, rho = ``c(x) / Var(z | x)`` for one bit (0.0545 at RAPPOR's f = 0.5, p = 0.5,
q = 0.75 and x = 1: x2.25 at 24 reports).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive, check_probability
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.tmdh import Repeats, _subset_sum   # the subset-sum kernel of the TMDH closed forms


@dataclass(frozen=True)
class ClientChannels:
    """Per bit, the instantaneous channel and, for a bit that memoizes, its permanent channel
    (``None`` otherwise), in bit order."""

    instantaneous: ChannelSet
    permanent: tuple

    def __post_init__(self):
        perm = tuple(self.permanent)
        if len(perm) != len(self.instantaneous):
            raise ValueError(f"permanent must have one entry per bit ({len(self.instantaneous)}), "
                             f"got len(permanent)={len(perm)}")
        for i, c in enumerate(perm):
            if c is not None and not isinstance(c, Channel):
                raise ValueError(f"permanent[{i}] must be a Channel or None, got permanent[{i}]={c!r}")
        object.__setattr__(self, "permanent", perm)

    @classmethod
    def plain(cls, channels: ChannelSet) -> "ClientChannels":
        """Channels that do not memoize: every report draws every bit afresh."""
        return cls(channels, (None,) * len(channels))

    @classmethod
    def rappor(cls, f: float, p: float, q: float, n_bits: int) -> "ClientChannels":
        """RAPPOR on every bit: permanent ``(f/2, 1 - f/2)``, instantaneous ``(p, q)``."""
        f = check_probability("f", f)
        if not f < 1.0:
            raise ValueError(f"f must be in [0, 1), got f={f!r}")
        n = check_int("n_bits", n_bits, minimum=1)
        return cls(ChannelSet.uniform(Channel(p, q), n), (Channel(f / 2.0, 1.0 - f / 2.0),) * n)

    def __len__(self) -> int:
        return len(self.instantaneous)

    @cached_property
    def memoizes(self) -> np.ndarray:
        """Per bit, whether it memoizes."""
        arr = np.array([c is not None for c in self.permanent])
        arr.setflags(write=False)
        return arr

    @cached_property
    def effective(self) -> ChannelSet:
        """The channel the server inverts, per bit: permanent then instantaneous, or instantaneous."""
        return ChannelSet(tuple(inst if perm is None else perm.then(inst)
                                for perm, inst in zip(self.permanent, self.instantaneous.channels)))

    @cached_property
    def shared(self) -> tuple:
        """``(c(0), c(1))`` per bit, float arrays: the covariance of the debiased bits of two reports
        of one device with true bit 0 or 1 (0 for bits that do not memoize)."""
        c0, c1 = np.zeros(len(self)), np.zeros(len(self))
        for i, perm in enumerate(self.permanent):
            if perm is not None:
                c0[i] = perm.p * (1.0 - perm.p) / perm.gap ** 2
                c1[i] = perm.q * (1.0 - perm.q) / perm.gap ** 2
        return c0, c1

    def correlation(self, bit: int, x: int) -> float:
        """rho of one bit: the correlation of the debiased bits of two reports of one device whose
        true bit is ``x``."""
        eff = self.effective[bit]
        t = eff.q if x else eff.p
        return float(self.shared[x][bit] / (t * (1.0 - t) / eff.gap ** 2))


def randomize_repeats(true_bits, reports, channels: ClientChannels, rng: np.random.Generator):
    """Simulation (seeded, vectorized): device d holds true bits ``true_bits[d]`` and sends
    ``reports[d]`` reports; each memoized bit draws its permanent bit once per device, each report
    its instantaneous bits afresh. Returns ``(noisy, owner)``: the noisy bits (uint8, one row per
    report, devices in order) and each report's device. The reference client derives the same law
    from a device secret (tests/ldp/test_client.py); this is for simulating many devices."""
    x = np.asarray(true_bits, dtype=np.uint8)
    m = np.asarray(reports, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != len(channels):
        raise ValueError(f"true_bits must have shape (devices, {len(channels)}), got shape={x.shape}")
    if m.shape != (x.shape[0],) or (m < 0).any():
        raise ValueError(f"reports must give a count >= 0 per device ({x.shape[0]}), got reports={reports!r}")
    perm_p = np.array([c.p if c is not None else 0.0 for c in channels.permanent])
    perm_q = np.array([c.q if c is not None else 1.0 for c in channels.permanent])
    held = (rng.random(x.shape) < np.where(x == 1, perm_q, perm_p)).astype(np.uint8)   # b = x where not memoized
    owner = np.repeat(np.arange(x.shape[0]), m)
    inst = channels.instantaneous
    noisy = (rng.random((owner.size, x.shape[1])) < np.where(held[owner] == 1, inst.q, inst.p)).astype(np.uint8)
    return noisy, owner


def design_effect(reports: int, rho: float) -> float:
    """``1 + (m - 1) rho``: the variance of a device's sum of ``m`` equally correlated reports over
    that of ``m`` independent ones."""
    m = check_int("reports", reports, minimum=1)
    return 1.0 + (m - 1) * check_probability("rho", rho)


def repeat_variance(estimate, channels: ClientChannels, shared_reports: float) -> np.ndarray:
    """Per counted set of a :class:`~ldp_marginals.ldp.tmdh.TMDHEstimate`, the variance to add to
    the TMDH variance for the permanent responses that a device's reports share.

    Exact: ``sum_d m_d (m_d - 1) C_S(x_d)`` (module docstring). Each report of device d shares its
    permanent bits with ``m_d - 1`` others, so with ``s`` the mean over reports of ``m_d - 1``
    (``sum_d m_d (m_d - 1) / N``) this is ``s sum_r C_S(x_r)`` when how many reports a device sends
    does not depend on its values, and at most ``(M - 1) sum_r C_S(x_r)`` when no device sends more
    than M (``C_S >= 0``): pass ``shared_reports = s`` or ``M - 1``. ``sum_r C_S(x_r)`` is linear in
    the true counts, ``sum_{A subset S} t_A prod_{S \\ A} c(0) prod_A a - t_S``, and is estimated
    without bias by the TMDH means. A device whose value changes within the window shares fewer
    permanent bits, which only lowers its covariance. Index 0 (the empty set) gets 0.
    """
    s = check_positive("shared_reports", shared_reports, allow_zero=True)
    if len(channels) != estimate.family.n_bits:
        raise ValueError(f"channels must have {estimate.family.n_bits} bits, got len(channels)={len(channels)}")
    c0, c1 = channels.shared
    extra = _subset_sum(estimate.family, estimate.means, c0, 1.0 + c1 - c0) - estimate.means
    extra[0] = 0.0
    return s * extra


def with_repeats(estimate, channels: ClientChannels, shared_reports: float):
    """The estimate of a window whose devices' reports share permanent responses: its variances plus
    :func:`repeat_variance`, and its :meth:`~ldp_marginals.ldp.tmdh.TMDHEstimate.covariance` with the
    same term for every pair of counted sets (``s * (sum_{A subset I} prod_{I \\ A} c(0) prod_A a
    t_{A u D} - t_{J u J'})``, ``I = J n J'``, ``D = J (sym. diff.) J'``), so that every statistic
    derived from the counts and their covariance (tables, conditionals, means) carries it. The
    cross-report covariance matrix of the sets, ``Cov(prod_J w, prod_J' w)`` of the debiased permanent
    bits ``w``, is positive semi-definite, so with ``s = M - 1`` the variance of every linear
    combination is bounded above, as for one set. ``s = 0`` returns ``estimate`` unchanged."""
    s = check_positive("shared_reports", shared_reports, allow_zero=True)
    if not s:
        return estimate
    c0, c1 = channels.shared
    return replace(estimate, variances=estimate.variances + repeat_variance(estimate, channels, s),
                   repeats=Repeats(float(s), c0, 1.0 + c1 - c0, channels.memoizes))


def extreme_repeat_terms(op: str, bits: np.ndarray, p, q, c0, c1) -> np.ndarray:
    """Per report (``bits``: its noisy bits of one extreme, ``(n, k)``, effective channels ``p``, ``q``
    and the bits' shared terms ``c0``, ``c1``), an unbiased estimate of the covariance of its OR/AND
    estimate with that of another report of its device with the same true bits: ``prod_i (1 - x_i +
    c_i(x_i)) - prod_i (1 - x_i)`` (OR: ``E[w w'] = 1 - x + c(x)`` per bit, ``w = 1 - z``) and
    ``prod_i (x_i + c_i(x_i)) - prod_i x_i`` (AND). Each factor is linear in ``x_i``, the bits of a report
    are independent given the truth, so the product of the factors at the debiased bits ``z_i`` (or
    ``w_i``) is unbiased: ``prod (c1 + (1 + c0 - c1) w) - prod w`` and ``prod (c0 + (1 + c1 - c0) z) - prod z``.
    A device sending ``m`` reports adds ``m (m - 1)`` times it to the variance of the extreme's sum."""
    y = np.asarray(bits, dtype=np.float64)
    z = (y - p) / (q - p)
    if op == "or":
        w = 1.0 - z
        return np.prod(c1 + (1.0 + c0 - c1) * w, axis=1) - np.prod(w, axis=1)
    if op == "and":
        return np.prod(c0 + (1.0 + c1 - c0) * z, axis=1) - np.prod(z, axis=1)
    raise ValueError(f"op must be 'or' or 'and', got op={op!r}")
