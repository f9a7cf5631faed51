"""Bit layouts built from features, and packing reports to and from bytes.

A layout lays out its features' bits in order: a boolean feature is one bit, a categorical
feature one bit per value (one-hot, values in the given order), a numeric feature with a declared
range ``[low, high]`` one bit that is 1 with probability ``(x - low) / (high - low)`` (the 1-bit
mean encoding of Ding, Kulkarni & Yekhanin 2017; randomized afterwards like any bit, the two steps
are their 1-bit mechanism when the channel is symmetric). Each bit has a label such as
``dark_mode`` or ``os=mac``. The byte order is fixed by the product:
bit ``i`` of a report is ``(data[i // 8] >> (i % 8)) & 1``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping, Sequence

import numpy as np

from ldp_marginals.ldp._checks import check_int

BOOLEAN = "boolean"
CATEGORICAL = "categorical"
NUMERIC = "numeric"
KINDS = (BOOLEAN, CATEGORICAL, NUMERIC)


@dataclass(frozen=True)
class Feature:
    """A boolean feature (one bit), a categorical feature (one bit per value, one-hot) or a numeric
    feature in ``[low, high]`` (one bit, 1 with probability ``(x - low) / (high - low)``)."""

    name: str
    kind: str = BOOLEAN
    values: tuple = ()
    low: float | None = None
    high: float | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or "=" in self.name:
            raise ValueError(f"name must be a non-empty string without '=', got name={self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got kind={self.kind!r}")
        values = tuple(self.values)
        if self.kind != CATEGORICAL and values:
            raise ValueError(f"values must be empty for a {self.kind} feature, got values={values!r}")
        if self.kind == NUMERIC:
            for end in ("low", "high"):
                v = getattr(self, end)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                    raise ValueError(f"{end} of numeric feature {self.name!r} must be a finite number, got {end}={v!r}")
            if not self.low < self.high:
                raise ValueError(f"numeric feature {self.name!r} needs low < high, got low={self.low!r}, "
                                 f"high={self.high!r}")
            object.__setattr__(self, "low", float(self.low))
            object.__setattr__(self, "high", float(self.high))
        elif self.low is not None or self.high is not None:
            raise ValueError(f"low and high are only for numeric features, got kind={self.kind!r}")
        if self.kind == CATEGORICAL:
            if len(values) < 2:
                raise ValueError(f"values must list at least 2 values for feature {self.name!r}, got values={values!r}")
            if not all(isinstance(v, str) and v for v in values):
                raise ValueError(f"values must be non-empty strings, got values={values!r}")
            if len(set(values)) != len(values):
                raise ValueError(f"values must be distinct, got values={values!r}")
        object.__setattr__(self, "values", values)

    @classmethod
    def boolean(cls, name: str) -> "Feature":
        return cls(name, BOOLEAN)

    @classmethod
    def categorical(cls, name: str, values: Sequence[str]) -> "Feature":
        return cls(name, CATEGORICAL, tuple(values))

    @classmethod
    def numeric(cls, name: str, low: float, high: float) -> "Feature":
        return cls(name, NUMERIC, (), low, high)

    @property
    def n_bits(self) -> int:
        return len(self.values) if self.kind == CATEGORICAL else 1

    @property
    def labels(self) -> tuple:
        if self.kind != CATEGORICAL:
            return (self.name,)
        return tuple(f"{self.name}={v}" for v in self.values)

    def unit(self, value) -> float:
        """A numeric value mapped to ``[0, 1]``: ``(x - low) / (high - low)``, the probability of its bit."""
        if self.kind != NUMERIC:
            raise ValueError(f"feature {self.name!r} is {self.kind}, not numeric")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not self.low <= value <= self.high:
            raise ValueError(f"value of numeric feature {self.name!r} must be a number in [{self.low:g}, "
                             f"{self.high:g}], got value={value!r}")
        return (float(value) - self.low) / (self.high - self.low)

    def encode(self, value, uniform: float | None = None) -> list:
        """This feature's bits for one true value; a numeric feature needs ``uniform``, one draw of
        U[0, 1): its bit is ``uniform < (x - low) / (high - low)``."""
        if self.kind == NUMERIC:
            if uniform is None:
                raise ValueError(f"numeric feature {self.name!r} is encoded at random: pass a uniform draw")
            return [int(uniform < self.unit(value))]
        if self.kind == BOOLEAN:
            if isinstance(value, (bool, np.bool_)) or value in (0, 1):
                return [int(bool(value))]
            raise ValueError(f"value of boolean feature {self.name!r} must be a bool, got value={value!r}")
        if value not in self.values:
            raise ValueError(f"value of feature {self.name!r} must be one of {list(self.values)}, got value={value!r}")
        return [int(v == value) for v in self.values]


@dataclass(frozen=True)
class Layout:
    """An ordered list of features and the bit layout they define."""

    features: tuple

    def __post_init__(self):
        feats = tuple(self.features)
        if not feats:
            raise ValueError("features must list at least one feature, got features=()")
        names = [f.name for f in feats]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"feature names must be unique, got duplicates={dupes}")
        object.__setattr__(self, "features", feats)

    @cached_property
    def n_bits(self) -> int:
        return sum(f.n_bits for f in self.features)

    @property
    def n_bytes(self) -> int:
        return (self.n_bits + 7) // 8

    @cached_property
    def labels(self) -> tuple:
        return tuple(label for f in self.features for label in f.labels)

    @cached_property
    def _slices(self) -> dict:
        out, start = {}, 0
        for f in self.features:
            out[f.name] = range(start, start + f.n_bits)
            start += f.n_bits
        return out

    def feature(self, name: str) -> Feature:
        for f in self.features:
            if f.name == name:
                return f
        raise ValueError(f"feature must be one of {[f.name for f in self.features]}, got feature={name!r}")

    def bits_of(self, name: str) -> range:
        """The bit indices of one feature."""
        self.feature(name)
        return self._slices[name]

    def bit_index(self, label: str) -> int:
        """The bit index of a label such as ``os=mac`` or ``dark_mode``."""
        try:
            return self.labels.index(label)
        except ValueError:
            raise ValueError(f"label must be one of the layout's bit labels, got label={label!r}") from None

    def group_sets(self, names: Sequence[str]) -> list:
        """The bit sets of a feature group's cells: one bit per feature (boolean: its bit;
        categorical: each value's bit), for counting the group's table explicitly."""
        if not names:
            raise ValueError("names must list at least one feature, got names=[]")
        ranges = [list(self.bits_of(n)) for n in names]
        out = [()]
        for r in ranges:
            out = [s + (b,) for s in out for b in r]
        return [tuple(sorted(s)) for s in out]

    @cached_property
    def exclusive_groups(self) -> tuple:
        """Bit groups of which at most one bit is set in any true vector (categorical features)."""
        return tuple(tuple(self._slices[f.name]) for f in self.features if f.kind == CATEGORICAL)

    def is_structural_zero(self, bits) -> bool:
        """Whether a set of bits holds two values of one categorical feature: no report has both,
        so its count is 0 by construction."""
        return any(len(set(bits) & set(g)) > 1 for g in self.exclusive_groups)

    @cached_property
    def numeric_bits(self) -> tuple:
        """The bits of numeric features (each one bit)."""
        return tuple(self._slices[f.name][0] for f in self.features if f.kind == NUMERIC)

    def encode(self, record: Mapping, rng=None) -> np.ndarray:
        """The encoded bits (uint8, length ``n_bits``) of one record mapping feature name -> value.
        Numeric features draw their bit from ``rng`` (anything with ``random(shape)``: a seeded
        ``numpy.random.Generator`` in simulations, the OS CSPRNG on a device)."""
        missing = [f.name for f in self.features if f.name not in record]
        if missing:
            raise ValueError(f"record must give a value for every feature, got missing={missing}")
        if self.numeric_bits and rng is None:
            raise ValueError(f"numeric features {[f.name for f in self.features if f.kind == NUMERIC]} are encoded "
                             "at random: pass rng")
        draws = iter(rng.random(len(self.numeric_bits)) if self.numeric_bits else ())
        bits = []
        for f in self.features:
            bits.extend(f.encode(record[f.name], next(draws) if f.kind == NUMERIC else None))
        return np.array(bits, dtype=np.uint8)

    def encode_many(self, records: Iterable[Mapping], rng=None) -> np.ndarray:
        """Encoded bits of many records, shape ``(n, n_bits)``."""
        rows = [self.encode(r, rng) for r in records]
        if not rows:
            return np.zeros((0, self.n_bits), dtype=np.uint8)
        return np.stack(rows)


def pack_bits(bits) -> np.ndarray:
    """Pack 0/1 bits, shape ``(d,)`` or ``(n, d)``, into bytes with bit ``i`` at
    ``(data[i // 8] >> (i % 8)) & 1``. Returns uint8 of shape ``(ceil(d/8),)`` or ``(n, ceil(d/8))``."""
    arr = np.asarray(bits)
    if arr.ndim not in (1, 2):
        raise ValueError(f"bits must be 1-D or 2-D, got bits.ndim={arr.ndim}")
    if arr.size and not np.isin(arr, (0, 1)).all():
        raise ValueError("bits must contain only 0 and 1")
    return np.packbits(arr.astype(np.uint8, copy=False), axis=-1, bitorder="little")


def unpack_bits(packed, n_bits: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: uint8 bytes ``(n, n_bytes)`` or ``(n_bytes,)`` -> bits ``(..., n_bits)``.

    Raises ``ValueError`` when the byte length does not match ``n_bits`` or a padding bit past
    ``n_bits`` is set (the report was not made with this layout).
    """
    d = check_int("n_bits", n_bits, minimum=1)
    if isinstance(packed, (bytes, bytearray, memoryview)):
        packed = np.frombuffer(packed, dtype=np.uint8)
    arr = np.asarray(packed)
    if arr.dtype != np.uint8:
        raise ValueError(f"packed must be uint8 bytes, got dtype={arr.dtype}")
    n_bytes = (d + 7) // 8
    if arr.shape[-1] != n_bytes:
        raise ValueError(f"packed reports must have {n_bytes} bytes for {d} bits, got length={arr.shape[-1]}")
    full = np.unpackbits(arr, axis=-1, bitorder="little")
    if full.shape[-1] > d and full[..., d:].any():
        raise ValueError(f"padding bits past bit {d - 1} must be 0, got a set padding bit")
    return full[..., :d]


def has_padding(data: bytes, n_bits: int) -> bool:
    """One packed report (``ceil(n_bits / 8)`` bytes): True where a padding bit is set. The
    per-report twin of :func:`padding_mask`, without building an array (message hot path)."""
    rem = n_bits % 8
    return rem != 0 and (data[-1] >> rem) != 0


def padding_mask(packed: np.ndarray, n_bits: int) -> np.ndarray:
    """Boolean per row of ``(n, n_bytes)`` packed reports: True where a padding bit is set."""
    d = check_int("n_bits", n_bits, minimum=1)
    arr = np.asarray(packed, dtype=np.uint8)
    rem = d % 8
    if rem == 0:
        return np.zeros(arr.shape[0], dtype=bool)
    return (arr[:, -1] >> rem) != 0
