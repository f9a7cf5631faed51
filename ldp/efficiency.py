"""How many more reports the noise costs: Vinterbo's efficiency loss (2018, Prop. 3.1, Thm 4.6).

``L = Tr(cov(pi_hat)) / Tr(cov(pi_star))``: the factor by which randomized responses must
outnumber plain ones to estimate the 2^n-cell distribution ``pi`` equally well. With
``A = (x) C_i^{-1}``, ``Tr(A diag(C pi) A^T) = sum_b (C pi)_b prod_i ||col_{b_i}(C_i^{-1})||^2``,
so for any per-bit channels::

    L = (sum_b (C pi)_b prod_i n_i[b_i] - s) / (1 - s),    s = pi^T pi (Greenwood statistic)

For bisymmetric channels (``p = 1 - q = 1 - a``) every column norm is ``(a^2 + (1-a)^2)/(2a-1)^2``
and this is Thm 4.6: ``L = (c - s)/(1 - s)``, ``c = prod_i (a_i^2 + (1-a_i)^2)/(2a_i - 1)^2``.
Greenwood approximation (Moran 1947): for ``pi`` uniform on the simplex ``E[s] = 2/(2^n + 1)``,
so ``L ~ f_L(2/(2^n + 1))``.
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.channels import ChannelSet
from ldp_marginals.ldp.tables import kron_apply


def _column_norms(channels: ChannelSet) -> list:
    return [np.sum(c.inverse_matrix() ** 2, axis=0) for c in channels]


def _trace_term(channels: ChannelSet, pi: np.ndarray) -> float:
    n = len(channels)
    noisy = kron_apply([c.matrix() for c in channels], pi)  # C pi, the noisy pattern law
    b = np.arange(1 << n)
    weights = np.ones(1 << n)
    for j, norms in enumerate(_column_norms(channels)):
        weights *= norms[(b >> j) & 1]
    return float(noisy @ weights)


def _check_pi(pi, n: int) -> np.ndarray:
    arr = np.asarray(pi, dtype=np.float64)
    if arr.shape != (1 << n,) or np.any(arr < 0) or not np.isclose(arr.sum(), 1.0):
        raise ValueError(f"pi must be a probability vector of length {1 << n}, got pi={pi!r}")
    if np.isclose(arr @ arr, 1.0):
        raise ValueError("pi must not put all its mass on one cell (pi^T pi < 1 is required)")
    return arr


def efficiency_loss(channels: ChannelSet, pi) -> float:
    """Exact loss ``L`` for the true cell distribution ``pi`` of the bits (cell b: bit j of b is bit j)."""
    arr = _check_pi(pi, len(channels))
    s = float(arr @ arr)
    return (_trace_term(channels, arr) - s) / (1.0 - s)


def efficiency_loss_greenwood(channels: ChannelSet) -> float:
    """Greenwood approximation ``f_L(2/(2^n + 1))`` of the loss (Vinterbo sec. 4.1), with ``c`` the
    trace term at the simplex's mean ``pi = uniform`` (exactly Thm 4.6's c for bisymmetric channels)."""
    n = len(channels)
    s = 2.0 / ((1 << n) + 1.0)
    c = _trace_term(channels, np.full(1 << n, 1.0 / (1 << n)))
    return (c - s) / (1.0 - s)


def bisymmetric_trace_constant(channels: ChannelSet) -> float:
    """Vinterbo Lemma 4.5's ``c = prod_i (a_i^2 + (1-a_i)^2)/(2a_i - 1)^2`` (bisymmetric channels only)."""
    if not channels.is_symmetric:
        raise ValueError("channels must be bisymmetric (p = 1 - q) for Lemma 4.5, got asymmetric channels")
    a = channels.q
    return float(np.prod((a ** 2 + (1 - a) ** 2) / (2 * a - 1) ** 2))
