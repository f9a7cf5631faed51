"""The device bound of main at 340e214 (issue 47's baseline): the compiled ranks of (device, bits) and
the bottom-M selection per owner, copied verbatim from ``ldp/_kernels.py`` and ``ldp/devices.py`` of
that commit so that ``benchmarks/device_cost.py --rules`` times the old rule beside the new one in
one run. Nothing in the product imports this."""
from __future__ import annotations

import numpy as np
from numba import njit

_FNV_PRIME = np.uint64(0x100000001B3)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)   # Fibonacci hashing's multiplier: a slot from a key's top bits


@njit(inline="always")
def _mix(h):
    h = h ^ (h >> np.uint64(30))
    h = h * _MIX_1
    h = h ^ (h >> np.uint64(27))
    h = h * _MIX_2
    return h ^ (h >> np.uint64(31))


@njit(cache=True, nogil=True)
def report_ranks(collection_key, device_keys, packed):
    """:func:`ldp_marginals.ldp.devices.report_ranks` (its definition, run there with numpy) in one
    pass over the reports."""
    n, width = packed.shape
    out = np.empty(n, np.uint64)
    start = np.uint64(collection_key)
    for r in range(n):
        h = _mix(device_keys[r] ^ start)
        for j in range(width):
            h = (h ^ np.uint64(packed[r, j])) * _FNV_PRIME
        out[r] = _mix(h)
    return out


@njit(inline="always")
def _slot_of(key, shift):
    """The slot of ``key`` in a table of ``2**(64 - shift)`` slots: the top bits of its Fibonacci hash."""
    return np.int64((key * _GOLDEN) >> np.uint64(shift))


@njit(cache=True, nogil=True)
def bottom_per_owner(owner, rank, bound):
    """Per distinct owner (uint64), its number of candidates and its ``bound`` smallest ranks, in one
    pass: ``(owners, counts, best)``, owners in order of first appearance and ``best`` int64[owners,
    bound] the indices of each owner's kept candidates, ranks ascending (a later equal rank after an
    earlier one), -1 past its candidates.

    An open-addressing table maps an owner to its row, and a row holds the owner's count and its
    kept ranks beside their indices, so a candidate reads one slot and one row (never the ``rank``
    array again). The table doubles when half full, so it is sized by the owners; the rows are
    reserved for every candidate but written (so resident) only for the owners."""
    n = owner.size
    bits = 4
    table = np.full(1 << bits, -1, np.int64)   # slot -> the owner's row, -1 empty
    owners = np.empty(n, np.uint64)
    # a row: [count, rank_0, index_0, rank_1, index_1, ...] (ranks as int64 bits, compared unsigned)
    rows = np.empty((n, 1 + 2 * bound), np.int64)
    m = 0
    for i in range(n):
        k = owner[i]
        mask = (1 << bits) - 1
        h = _slot_of(k, 64 - bits)
        while True:
            row = table[h]
            if row == -1 or owners[row] == k:
                break
            h = (h + 1) & mask
        if row == -1:
            row = m
            m += 1
            owners[row] = k
            rows[row, 0] = 0
            for j in range(bound):
                rows[row, 2 + 2 * j] = -1
            table[h] = row
            if 2 * m > (1 << bits):   # half full: twice the slots, every owner placed again
                bits += 1
                mask = (1 << bits) - 1
                table = np.full(1 << bits, -1, np.int64)
                for r in range(m):
                    g = _slot_of(owners[r], 64 - bits)
                    while table[g] != -1:
                        g = (g + 1) & mask
                    table[g] = r
        rows[row, 0] += 1
        r = rank[i]
        p = 0   # where r goes: after every kept rank <= r
        while p < bound and rows[row, 2 + 2 * p] != -1 and np.uint64(rows[row, 1 + 2 * p]) <= r:
            p += 1
        if p == bound:
            continue
        for j in range(bound - 1, p, -1):
            rows[row, 1 + 2 * j] = rows[row, 2 * j - 1]
            rows[row, 2 + 2 * j] = rows[row, 2 * j]
        rows[row, 1 + 2 * p] = np.int64(r)
        rows[row, 2 + 2 * p] = i
    best = np.empty((m, bound), np.int64)
    for r in range(m):
        for j in range(bound):
            best[r, j] = rows[r, 2 + 2 * j]
    return owners[:m].copy(), rows[:m, 0].copy(), best


def select(owner: np.ndarray, rank: np.ndarray, bound: int) -> tuple:
    """Main's ``devices._select`` (compiled path)."""
    if owner.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros(0, dtype=np.uint64), empty, empty
    devices, seen, best = bottom_per_owner(owner, rank, bound)
    order = np.argsort(devices)
    keep = best[order].reshape(-1)
    return devices[order], seen[order], keep if bound == 1 else keep[keep >= 0]
