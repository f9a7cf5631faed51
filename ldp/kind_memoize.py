"""Memoization for the whole-report kinds (``hadamard``, ``subset``; docs/client.md section 13), Beam-free:
the two stages a device runs, the effective mechanism the server inverts, and the epsilons.

A device keeps one *permanent* response per distinct value (its true bits): the kind's randomizer run
once at ``epsilon_infinity`` with coins derived from its secret. Each report then re-randomizes the
permanent response with fresh coins, keeping what the kind cannot hide from the value anyway (hadamard: the
slots' coefficient indices; subset: the chosen positions), through the kind's own randomized response at
``epsilon_I``:

- hadamard: each slot's permanent parity through a symmetric flip, ``2 keep - 1 = tanh(e / 2)`` per slot at
  ``e = epsilon / slots``; two flips compose by multiplying ``2 keep - 1``, so the effective mechanism is
  Hadamard sampling at ``epsilon_1`` with ``tanh(epsilon_1 / 2m) = tanh(epsilon_inf / 2m) tanh(epsilon_I / 2m)``;
- subset: the permanent pattern through subset RR over the ``K = 2^s`` patterns (keep ``p``, else a uniform
  other pattern); two such channels compose into one: ``p* = p_P p_I + (1 - p_P)(1 - p_I)/(K - 1)``, i.e.
  subset RR at ``epsilon_1 = ln(p* (K - 1) / (1 - p*))``.

So the server inverts the kind's mechanism at ``epsilon_1`` (:func:`effective`), which is also one report's
epsilon (the effective channel is the kind's at epsilon_1, epsilon_1 < epsilon_inf), and a device that
holds one value for ever spends ``epsilon_inf`` however many reports it sends; a device whose reports of a
window hold V distinct values spends at most ``min(n epsilon_1, V epsilon_inf)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ldp_marginals.ldp._checks import check_positive
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.subset_rr import SubsetRR


def _with_epsilon(mechanism, epsilon: float):
    if isinstance(mechanism, SubsetRR):
        return SubsetRR(mechanism.n_bits, mechanism.max_order, epsilon, mechanism.width)
    if isinstance(mechanism, HadamardSampling):
        return HadamardSampling(mechanism.n_bits, mechanism.max_order, epsilon, mechanism.slots, mechanism.weights)
    raise ValueError(f"mechanism must be a HadamardSampling or a SubsetRR, got mechanism={mechanism!r}")


@dataclass(frozen=True)
class MemoizedKind:
    """The two stages of a memoized whole-report collection: ``permanent`` (the kind at epsilon_inf) and
    ``instantaneous`` (the kind at epsilon_I), same order, slots/width and weights."""

    permanent: object
    instantaneous: object

    @classmethod
    def of(cls, mechanism, epsilon_1: float) -> "MemoizedKind":
        """The stages for ``mechanism`` (the kind at ``epsilon_inf``, what the config's ``epsilon`` makes) and
        one report's ``epsilon_1`` (``0 < epsilon_1 < epsilon_inf``)."""
        e1 = check_positive("epsilon_1", epsilon_1)
        e_inf = float(mechanism.epsilon)
        if not e1 < e_inf:
            raise ValueError(f"epsilon_1 must be below the permanent response's epsilon {e_inf!r} (epsilon_infinity), "
                             f"got epsilon_1={epsilon_1!r}")
        if isinstance(mechanism, SubsetRR):
            k = 2.0 ** mechanism.width
            p_p, p_star = mechanism.p, math.exp(e1) / (math.exp(e1) + k - 1.0)
            q_p = (1.0 - p_p) / (k - 1.0)
            p_i = (p_star - q_p) / (p_p - q_p)
            e_i = math.log(p_i * (k - 1.0) / (1.0 - p_i))
        else:
            m = mechanism.slots
            e_i = 2.0 * m * math.atanh(math.tanh(e1 / (2.0 * m)) / math.tanh(e_inf / (2.0 * m)))
        return cls(mechanism, _with_epsilon(mechanism, e_i))

    @property
    def epsilon_infinity(self) -> float:
        return float(self.permanent.epsilon)

    @property
    def epsilon_1(self) -> float:
        return effective_epsilon(self.permanent, self.instantaneous)

    @property
    def effective(self):
        """The mechanism the server inverts: the kind at ``epsilon_1``."""
        return _with_epsilon(self.permanent, self.epsilon_1)


def effective_epsilon(permanent, instantaneous) -> float:
    """One report's epsilon through both stages (module docstring)."""
    if isinstance(permanent, SubsetRR):
        k = 2.0 ** permanent.width
        p = permanent.p * instantaneous.p + (1.0 - permanent.p) * (1.0 - instantaneous.p) / (k - 1.0)
        return math.log(p * (k - 1.0) / (1.0 - p))
    m = permanent.slots
    return 2.0 * m * math.atanh(math.tanh(permanent.epsilon / (2.0 * m)) * math.tanh(instantaneous.epsilon / (2.0 * m)))
