"""The canonical order of the bit sets whose co-occurrences are counted.

A :class:`SetFamily` is downward closed (every subset of a member is a member, so TMDH means of
every member can be computed) and ordered by size, then lexicographically. Index 0 is the empty
set, whose count is the number of reports ``N``. Index lookups are vectorized: a set of order
``m`` is keyed by ``sum_j S_j * d^(m-1-j)``, so lexicographic order is key order.
"""
from __future__ import annotations

from functools import cached_property, lru_cache
from itertools import combinations
from typing import Iterable, Sequence

import numpy as np

from ldp_marginals.ldp._checks import check_int

_KEY_LIMIT = 2 ** 62


def _keys(members: np.ndarray, base: int) -> np.ndarray:
    keys = np.zeros(members.shape[0], dtype=np.int64)
    for j in range(members.shape[1]):
        keys = keys * base + members[:, j]
    return keys


def _normalize(n_bits: int, s: Iterable[int]) -> tuple:
    try:
        t = tuple(sorted(int(i) for i in s))
    except (TypeError, ValueError):
        raise ValueError(f"a set must be an iterable of bit indices, got set={s!r}") from None
    if len(set(t)) != len(t):
        raise ValueError(f"a set must not repeat a bit, got set={s!r}")
    if t and (t[0] < 0 or t[-1] >= n_bits):
        raise ValueError(f"set bits must be in [0, {n_bits}), got set={s!r}")
    return t


class SetFamily:
    """Downward-closed family of bit sets in canonical order, with index lookups both ways.

    Build with :meth:`all_up_to` (every set of size 1..k) and optionally ``extra`` sets (or feature
    groups) whose subsets are added too. Pickles as its specification, not its arrays.
    """

    def __init__(self, n_bits: int, max_order: int, extra: Sequence[Sequence[int]] = ()):
        self.n_bits = check_int("n_bits", n_bits, minimum=1)
        self.max_order = check_int("max_order", max_order, minimum=0)
        if self.max_order > self.n_bits:
            raise ValueError(f"max_order must be <= n_bits={self.n_bits}, got max_order={max_order}")
        self.extra = tuple(sorted({_normalize(self.n_bits, s) for s in extra}))
        top = max([self.max_order] + [len(s) for s in self.extra])
        if float(self.n_bits) ** max(top, 1) >= _KEY_LIMIT:
            raise ValueError(f"n_bits ** order must stay below 2**62, got n_bits={n_bits}, order={top}")
        by_order = {m: set() for m in range(top + 1)}
        for s in self.extra:
            for m in range(len(s) + 1):
                by_order[m].update(combinations(s, m))
        members = []
        for m in range(top + 1):
            if m == 0:
                arr = np.zeros((1, 0), dtype=np.int64)
            elif m <= self.max_order:
                arr = np.array(list(combinations(range(self.n_bits), m)), dtype=np.int64).reshape(-1, m)
            else:
                arr = np.array(sorted(by_order[m]), dtype=np.int64).reshape(-1, m)
            arr.setflags(write=False)
            members.append(arr)
        self._members = members
        self._keys = [_keys(a, self.n_bits) for a in members]
        sizes = [a.shape[0] for a in members]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    # -- pickling and equality by specification -----------------------------------------------
    def __reduce__(self):
        return (family_from_spec, (self.n_bits, self.max_order, self.extra))

    def _spec(self):
        return (self.n_bits, self.max_order, self.extra)

    def __eq__(self, other):
        return isinstance(other, SetFamily) and (self is other or self._spec() == other._spec())

    def __hash__(self):
        return hash(self._spec())

    def __repr__(self):
        return f"SetFamily(n_bits={self.n_bits}, max_order={self.max_order}, extra={len(self.extra)} sets, size={len(self)})"

    # -- structure ----------------------------------------------------------------------------
    @classmethod
    def all_up_to(cls, n_bits: int, max_order: int) -> "SetFamily":
        """Every set of 0..max_order bits."""
        return cls(n_bits, max_order)

    @property
    def top_order(self) -> int:
        """The largest set size counted."""
        return len(self._members) - 1

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def members(self, order: int) -> np.ndarray:
        """The sets of one order as a read-only ``(n_sets, order)`` array of sorted bit indices."""
        if not 0 <= order <= self.top_order:
            return np.zeros((0, order), dtype=np.int64)
        return self._members[order]

    def offset(self, order: int) -> int:
        """Index of the first set of ``order``."""
        return int(self._offsets[order])

    def order_slice(self, order: int) -> slice:
        return slice(int(self._offsets[order]), int(self._offsets[order + 1]))

    def __iter__(self):
        for arr in self._members:
            for row in arr:
                yield tuple(int(i) for i in row)

    def __getitem__(self, index: int) -> tuple:
        i = int(index)
        if not 0 <= i < len(self):
            raise ValueError(f"index must be in [0, {len(self)}), got index={index}")
        m = int(np.searchsorted(self._offsets, i, side="right") - 1)
        return tuple(int(b) for b in self._members[m][i - self._offsets[m]])

    def lookup(self, sets: np.ndarray) -> np.ndarray:
        """Indices of many sets of one order (rows of sorted bit indices); -1 where not counted."""
        arr = np.asarray(sets, dtype=np.int64)
        m = arr.shape[1]
        if m > self.top_order:
            return np.full(arr.shape[0], -1, dtype=np.int64)
        keys = _keys(arr, self.n_bits)
        table = self._keys[m]
        pos = np.searchsorted(table, keys)
        pos_c = np.minimum(pos, max(table.shape[0] - 1, 0))
        found = (pos < table.shape[0]) & (table[pos_c] == keys) if table.shape[0] else np.zeros(len(keys), bool)
        return np.where(found, self._offsets[m] + pos_c, -1)

    def index(self, s: Iterable[int]) -> int:
        """Index of one set; ``ValueError`` naming the set if it was not counted."""
        t = _normalize(self.n_bits, s)
        i = int(self.lookup(np.array([t], dtype=np.int64).reshape(1, len(t)))[0])
        if i < 0:
            raise ValueError(f"set {list(t)} was not counted (max_order={self.max_order}); "
                             f"raise max_order or add the set explicitly")
        return i

    def __contains__(self, s) -> bool:
        try:
            t = _normalize(self.n_bits, s)
        except ValueError:
            return False
        return bool(self.lookup(np.array([t], dtype=np.int64).reshape(1, len(t)))[0] >= 0)

    @cached_property
    def _subset_tables(self) -> list:
        tables = []
        for m, arr in enumerate(self._members):
            cols = []
            for mask in range(1 << m):
                keep = [j for j in range(m) if mask >> j & 1]
                cols.append(self.lookup(arr[:, keep]))
            table = np.stack(cols, axis=1) if cols else np.zeros((arr.shape[0], 0), np.int64)
            table.setflags(write=False)
            tables.append(table)
        return tables

    def subset_indices(self, order: int) -> np.ndarray:
        """``(n_sets, 2**order)`` table: column ``mask`` holds the index of the subset that keeps
        member ``j`` of each set where bit ``j`` of ``mask`` is set. Column 0 is the empty set,
        the last column the set itself."""
        return self._subset_tables[order]


def extra_sets(n_bits: int, max_order: int, sets) -> tuple:
    """The extra sets of a whole-report mechanism (``hadamard``, ``subset``) as it keeps them: bit index
    tuples, sorted, distinct, each of more than ``max_order`` bits (a narrower set is counted anyway), in
    ``[0, n_bits)``."""
    out = set()
    for s in sets:
        t = _normalize(n_bits, s)
        if len(t) > max_order:
            out.add(t)
    return tuple(sorted(out))


@lru_cache(maxsize=64)
def family_from_spec(n_bits: int, max_order: int, extra: tuple) -> SetFamily:
    """The family of a specification, built once per process (accumulators unpickle through this,
    so merging thousands of them does not rebuild the set tables each time)."""
    return SetFamily(n_bits, max_order, extra)
