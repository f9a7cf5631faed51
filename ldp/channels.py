"""Per-bit randomized-response channels and channel sets for a whole bit layout.

Notation (docs/design.md, Carette and RAPPOR convention): a channel ``(p, q)`` has
``p = P(noisy 1 | true 0)`` and ``q = P(noisy 1 | true 1)`` with ``0 <= p < q <= 1``.
Other papers are translated at these constructors:

- Hehir's and Zhilyaev & Zeber's flip probability ``f``: ``p = f, q = 1 - f``;
- Vinterbo's bisymmetric keep probability ``a``: ``p = 1 - a, q = a``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Sequence

import numpy as np

from ldp_marginals.ldp._checks import check_int, check_positive, check_probability


@dataclass(frozen=True)
class Channel:
    """One bit's randomized-response channel ``(p, q)``, validated on construction."""

    p: float
    q: float

    def __post_init__(self):
        p = check_probability("p", self.p)
        q = check_probability("q", self.q)
        if not p < q:
            raise ValueError(f"q must be in (p, 1], got p={self.p}, q={self.q}")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def identity(cls) -> "Channel":
        """No noise: ``(0, 1)`` (infinite epsilon)."""
        return cls(0.0, 1.0)

    @classmethod
    def symmetric(cls, flip: float) -> "Channel":
        """Symmetric randomized response that flips each bit with probability ``flip`` < 1/2."""
        f = check_probability("flip", flip)
        if not f < 0.5:
            raise ValueError(f"flip must be in [0, 0.5), got flip={flip!r}")
        return cls(f, 1.0 - f)

    @classmethod
    def symmetric_from_epsilon(cls, epsilon: float) -> "Channel":
        """Symmetric randomized response with per-bit ``epsilon``: flip = 1 / (e^eps + 1)."""
        eps = check_positive("epsilon", epsilon)
        return cls.symmetric(1.0 / (math.exp(eps) + 1.0))

    @classmethod
    def optimized_unary(cls, epsilon: float) -> "Channel":
        """Optimized unary encoding (Wang et al. 2017): ``p = 1/(e^eps + 1), q = 1/2``.

        A one-hot report under this channel is ``epsilon``-LDP (see :meth:`swap_epsilon`).
        """
        eps = check_positive("epsilon", epsilon)
        return cls(1.0 / (math.exp(eps) + 1.0), 0.5)

    @classmethod
    def warner(cls, truth_probability: float) -> "Channel":
        """Warner's spinner: answer truthfully with probability ``a`` > 1/2 (``p = 1-a, q = a``)."""
        a = check_probability("truth_probability", truth_probability)
        if not a > 0.5:
            raise ValueError(f"truth_probability must be in (0.5, 1], got truth_probability={truth_probability!r}")
        return cls(1.0 - a, a)

    @classmethod
    def unrelated_question(cls, coin_probability: float) -> "Channel":
        """Simmons' unrelated question: with probability ``u`` answer a fair coin instead.

        ``p = u/2, q = 1 - u/2`` (Vinterbo sec. 5.1, bisymmetric with ``a = (2-u)/2``).
        """
        u = check_probability("coin_probability", coin_probability)
        if not u < 1.0:
            raise ValueError(f"coin_probability must be in [0, 1), got coin_probability={coin_probability!r}")
        return cls(u / 2.0, 1.0 - u / 2.0)

    @classmethod
    def rappor(cls, f: float, p: float, q: float) -> "Channel":
        """RAPPOR (Erlingsson et al. 2014): permanent response ``(f/2, 1-f/2)`` then instantaneous ``(p, q)``."""
        f = check_probability("f", f)
        if not f < 1.0:
            raise ValueError(f"f must be in [0, 1), got f={f!r}")
        permanent = cls(f / 2.0, 1.0 - f / 2.0)
        return permanent.then(cls(p, q))

    # -- algebra ------------------------------------------------------------------------------
    def then(self, second: "Channel") -> "Channel":
        """This channel followed by ``second`` (Carette eq. 3):

        ``p = p2 + p1 (q2 - p2)``, ``q = p2 + q1 (q2 - p2)``.
        """
        gap = second.q - second.p
        return Channel(second.p + self.p * gap, second.p + self.q * gap)

    @property
    def gap(self) -> float:
        """``q - p``, the factor that divides every debiased bit."""
        return self.q - self.p

    def matrix(self) -> np.ndarray:
        """Vinterbo's column-stochastic ``C = [[1-p, 1-q], [p, q]]`` (rows: noisy 0/1; columns: true 0/1)."""
        return np.array([[1.0 - self.p, 1.0 - self.q], [self.p, self.q]])

    def inverse_matrix(self) -> np.ndarray:
        """``C^{-1} = [[q, q-1], [-p, 1-p]] / (q - p)``."""
        return np.array([[self.q, self.q - 1.0], [-self.p, 1.0 - self.p]]) / self.gap

    @property
    def is_symmetric(self) -> bool:
        """True for bisymmetric channels, ``p = 1 - q``."""
        return math.isclose(self.p, 1.0 - self.q, rel_tol=0.0, abs_tol=1e-12)

    # -- privacy ------------------------------------------------------------------------------
    @property
    def epsilon_bit(self) -> float:
        """Local DP of one bit: ``max(ln(q/p), ln((1-p)/(1-q)))`` (``inf`` when p = 0 or q = 1)."""
        up = math.inf if self.p == 0.0 else math.log(self.q / self.p)
        down = math.inf if self.q == 1.0 else math.log((1.0 - self.p) / (1.0 - self.q))
        return max(up, down)

    def epsilon(self, differing_bits: int = 1) -> float:
        """Epsilon of a report whose possible true vectors differ in at most ``w`` bits: ``w * eps_bit``."""
        w = check_int("differing_bits", differing_bits)
        return 0.0 if w == 0 else w * self.epsilon_bit

    def swap_epsilon(self) -> float:
        """Tight epsilon when one bit goes 1 -> 0 and another 0 -> 1 (a one-hot value change).

        ``ln(q/p) + ln((1-p)/(1-q))``; equals ``2 eps_bit`` for symmetric channels and ``eps`` for
        optimized unary encoding.
        """
        if self.p == 0.0 or self.q == 1.0:
            return math.inf
        return math.log(self.q / self.p) + math.log((1.0 - self.p) / (1.0 - self.q))


@dataclass(frozen=True)
class ChannelSet:
    """One channel per bit of a layout (possibly different), in bit order."""

    channels: tuple

    def __post_init__(self):
        chans = tuple(self.channels)
        if not chans:
            raise ValueError("channels must name at least one bit, got channels=()")
        for i, c in enumerate(chans):
            if not isinstance(c, Channel):
                raise ValueError(f"channels[{i}] must be a Channel, got channels[{i}]={c!r}")
        object.__setattr__(self, "channels", chans)

    @classmethod
    def uniform(cls, channel: Channel, n_bits: int) -> "ChannelSet":
        """The same channel on each of ``n_bits`` bits."""
        n = check_int("n_bits", n_bits, minimum=1)
        return cls((channel,) * n)

    @classmethod
    def from_arrays(cls, p: Sequence[float], q: Sequence[float]) -> "ChannelSet":
        """Per-bit channels from parallel sequences of ``p`` and ``q``."""
        p, q = list(p), list(q)
        if len(p) != len(q):
            raise ValueError(f"p and q must have the same length, got len(p)={len(p)}, len(q)={len(q)}")
        return cls(tuple(Channel(a, b) for a, b in zip(p, q)))

    def __len__(self) -> int:
        return len(self.channels)

    def __getitem__(self, i: int) -> Channel:
        return self.channels[i]

    def __iter__(self):
        return iter(self.channels)

    def subset(self, bits: Iterable[int]) -> "ChannelSet":
        """The channels of the given bits, in the given order."""
        return ChannelSet(tuple(self.channels[i] for i in bits))

    @cached_property
    def p(self) -> np.ndarray:
        arr = np.array([c.p for c in self.channels])
        arr.setflags(write=False)
        return arr

    @cached_property
    def q(self) -> np.ndarray:
        arr = np.array([c.q for c in self.channels])
        arr.setflags(write=False)
        return arr

    @cached_property
    def epsilons(self) -> np.ndarray:
        """Per-bit local-DP epsilon."""
        arr = np.array([c.epsilon_bit for c in self.channels])
        arr.setflags(write=False)
        return arr

    def epsilon(self, differing_bits: int | None = None) -> float:
        """Epsilon of a report whose true vectors differ in at most ``w`` bits: the sum of the ``w``
        largest per-bit epsilons (all bits when ``w`` is None)."""
        w = len(self) if differing_bits is None else check_int("differing_bits", differing_bits)
        if w > len(self):
            raise ValueError(f"differing_bits must be <= {len(self)} bits, got differing_bits={w}")
        return float(np.sort(self.epsilons)[::-1][:w].sum())

    @property
    def is_symmetric(self) -> bool:
        return all(c.is_symmetric for c in self.channels)
