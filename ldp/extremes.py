"""Online OR / AND estimators over many noisy bits (Hehir, "Easier estimation of extremes under
randomized response", Thm 1 and 3), generalized to per-bit channels ``(p_i, q_i)``.

With ``z_i = (y_i - p_i)/(q_i - p_i)`` (unbiased for ``x_i``) and ``w_i = 1 - z_i``::

    OR:  Y = 1 - prod w_i        AND:  Y = prod z_i

Variance (Hehir Thm 3 generalized): ``Var(OR) = prod E[w_i^2] - 1{all x_i = 0}``. ``E[w_i^2]`` is
linear in ``x_i``, so ``v_i = e1_i + (e0_i - e1_i) w_i`` is unbiased for it and
``prod v_i - prod w_i`` is an unbiased O(1) estimate of the variance, where
``e1 = q(1-q)/(q-p)^2`` and ``e0 = 1 + p(1-p)/(q-p)^2``. AND is symmetric with ``z`` for ``w``
(``E[z^2] = a0 + (a1 - a0) x`` with ``a0 = p(1-p)/(q-p)^2``, ``a1 = 1 + q(1-q)/(q-p)^2``).

Both are products, so the state is O(1): the count of bits and, for each of the two products, a
sign, a log-magnitude and a count of exactly-zero factors (``q = 1`` makes ``w`` zero for a noisy
1; ``p = 0`` makes ``z`` zero for a noisy 0). Merging adds logs and zero counts and multiplies
signs, so 10^6 bits neither overflow nor underflow. States are numpy arrays of any shape, so one
accumulator can hold many independent estimators (one per sketch position, say).
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.intervals import normal_interval

OPS = ("or", "and")


def _check_channel_arrays(p, q):
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(q)) and np.all(0 <= p) and np.all(q <= 1)
            and np.all(p < q)):
        raise ValueError(f"channels must satisfy 0 <= p < q <= 1, got p={p!r}, q={q!r}")
    return p, q


def noise_terms(p, q) -> tuple:
    """``(p(1-p)/(q-p)^2, q(1-q)/(q-p)^2)`` per bit: the channel's part of the second moments of the
    debiased bit ``z = (y - p)/(q - p)``, ``E[z^2 | x=0]`` and ``E[z^2 | x=1] - 1`` (and of ``w = 1 - z``,
    ``E[w^2 | x=1]`` and ``E[w^2 | x=0] - 1``)."""
    gap = q - p
    return p * (1 - p) / gap ** 2, q * (1 - q) / gap ** 2


def _factors(op: str, y, p, q):
    """The estimator factor (w for OR, z for AND) and its variance factor v, per bit."""
    gap = q - p
    low, high = noise_terms(p, q)
    if op == "or":
        f = (q - y) / gap                                   # w = 1 - z
        e1, e0 = high, 1 + low
        v = e1 + (e0 - e1) * f
    else:
        f = (y - p) / gap                                   # z
        a0, a1 = low, 1 + high
        v = a0 + (a1 - a0) * f
    # q = 1 (OR) or p = 0 (AND) gives factors that are exactly 0.0 here: counted, never logged
    return f, v


class ExtremeAccumulator:
    """Mergeable online OR or AND estimator(s) of shape ``shape``.

    Accumulator data (arrays of ``shape``): ``n`` bits seen; for the estimator product and the
    variance product each: ``neg`` (parity of negative factors), ``log`` (sum of log |factor|
    over non-zero factors) and ``zeros`` (number of zero factors).
    """

    __slots__ = ("op", "n", "neg_f", "log_f", "zeros_f", "neg_v", "log_v", "zeros_v")

    def __init__(self, op: str, shape=()):
        if op not in OPS:
            raise ValueError(f"op must be 'or' or 'and', got op={op!r}")
        self.op = op
        self.n = np.zeros(shape, dtype=np.int64)
        self.neg_f = np.zeros(shape, dtype=np.int64)
        self.log_f = np.zeros(shape, dtype=np.float64)
        self.zeros_f = np.zeros(shape, dtype=np.int64)
        self.neg_v = np.zeros(shape, dtype=np.int64)
        self.log_v = np.zeros(shape, dtype=np.float64)
        self.zeros_v = np.zeros(shape, dtype=np.int64)

    def __getstate__(self):
        return tuple(getattr(self, s) for s in self.__slots__)

    def __setstate__(self, state):
        for s, v in zip(self.__slots__, state):
            setattr(self, s, v)

    @property
    def shape(self):
        return self.n.shape

    def add(self, bits, p, q) -> "ExtremeAccumulator":
        """Add noisy bits of shape ``(m, *shape)`` (m bits per estimator) with channels ``p``, ``q``
        broadcastable to that shape. Vectorized: one pass over the batch."""
        y = np.asarray(bits)
        if y.shape[1:] != self.shape:
            raise ValueError(f"bits must have shape (m, *{self.shape}), got shape={y.shape}")
        if y.size and not np.isin(y, (0, 1)).all():
            raise ValueError("bits must contain only 0 and 1")
        p, q = _check_channel_arrays(p, q)
        p = np.broadcast_to(p, y.shape)
        q = np.broadcast_to(q, y.shape)
        f, v = _factors(self.op, y.astype(np.float64), p, q)
        self.n += y.shape[0]
        for fac, neg, log, zeros in ((f, "neg_f", "log_f", "zeros_f"), (v, "neg_v", "log_v", "zeros_v")):
            nz = fac != 0
            setattr(self, neg, getattr(self, neg) + (fac < 0).sum(axis=0))
            setattr(self, zeros, getattr(self, zeros) + (~nz).sum(axis=0))
            setattr(self, log, getattr(self, log) + np.log(np.abs(np.where(nz, fac, 1.0))).sum(axis=0))
        return self

    def add_one(self, bit: int, p: float, q: float) -> "ExtremeAccumulator":
        """Add one noisy bit to a scalar estimator (or the same bit to every estimator)."""
        return self.add(np.broadcast_to(np.asarray(bit), (1,) + self.shape), p, q)

    def merge(self, other: "ExtremeAccumulator") -> "ExtremeAccumulator":
        """Combine with the state of other bits of the same estimator(s); modifies only self."""
        if other.op != self.op or other.shape != self.shape:
            raise ValueError(f"cannot merge {other.op}{other.shape} into {self.op}{self.shape}")
        for s in self.__slots__[1:]:
            setattr(self, s, getattr(self, s) + getattr(other, s))
        return self

    def copy(self) -> "ExtremeAccumulator":
        out = ExtremeAccumulator(self.op, self.shape)
        out.__setstate__(tuple(np.copy(x) if isinstance(x, np.ndarray) else x for x in self.__getstate__()))
        return out

    @staticmethod
    def _product(neg, log, zeros):
        sign = np.where(neg % 2 == 1, -1.0, 1.0)
        with np.errstate(over="ignore"):
            return np.where(zeros > 0, 0.0, sign * np.exp(log))

    def product(self) -> np.ndarray:
        """``prod w_i`` (OR) or ``prod z_i`` (AND); 1 for no bits."""
        return self._product(self.neg_f, self.log_f, self.zeros_f)

    def estimate(self) -> np.ndarray:
        """Unbiased estimate of the OR (``1 - prod w``) or AND (``prod z``) of the true bits."""
        prod = self.product()
        return 1.0 - prod if self.op == "or" else prod

    def variance(self) -> np.ndarray:
        """Unbiased estimate of the estimator's variance: ``prod v_i - prod f_i`` (0 for no bits)."""
        return self._product(self.neg_v, self.log_v, self.zeros_v) - self.product()

    def interval(self, level: float = 0.95):
        return normal_interval(self.estimate(), self.variance(), level)


def or_variance(true_bits, p, q) -> float:
    """Exact variance of the OR estimator given the true bits (Hehir Thm 3, per-bit channels):
    ``prod E[w_i^2] - 1{all x_i = 0}``."""
    x = np.asarray(true_bits, dtype=np.float64)
    p, q = _check_channel_arrays(np.broadcast_to(p, x.shape), np.broadcast_to(q, x.shape))
    low, high = noise_terms(p, q)
    return float(np.prod(np.where(x == 1, high, 1 + low)) - float(not x.any()))


def and_variance(true_bits, p, q) -> float:
    """Exact variance of the AND estimator: ``prod E[z_i^2] - prod x_i``."""
    x = np.asarray(true_bits, dtype=np.float64)
    p, q = _check_channel_arrays(np.broadcast_to(p, x.shape), np.broadcast_to(q, x.shape))
    low, high = noise_terms(p, q)
    return float(np.prod(np.where(x == 1, 1 + high, low)) - float(x.all()))


def union_cardinality(sketches, p, q):
    """Size of the union of sets given as noisy bitmap sketches ``(n_sketches, m)``: the sum over
    the m positions of the per-position OR estimates across sketches (Hehir sec. 1). Positions are
    independent, so the variance is the sum of their variances. Returns ``(estimate, variance)``.
    """
    y = np.asarray(sketches)
    if y.ndim != 2:
        raise ValueError(f"sketches must have shape (n_sketches, m), got shape={y.shape}")
    acc = ExtremeAccumulator("or", (y.shape[1],)).add(y, p, q)
    return union_from_state(acc)


def union_from_state(acc: ExtremeAccumulator):
    """``(estimate, variance)`` of a union's size from per-position OR states."""
    if acc.op != "or" or len(acc.shape) != 1:
        raise ValueError(f"union needs a 1-D OR accumulator, got op={acc.op!r}, shape={acc.shape}")
    return float(acc.estimate().sum()), float(acc.variance().sum())
