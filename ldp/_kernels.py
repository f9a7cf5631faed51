"""numba kernels of the core, imported through :mod:`ldp_marginals.ldp._compiled` (numba is imported
with this module), and by the batch readers, which require numba, for :data:`span_hashes`."""
from __future__ import annotations

import numpy as np
from numba import njit

from ldp_marginals.ldp import hashing

# the client key's hash over a block's spans: the one definition in ldp.hashing, compiled
span_hashes = njit(cache=True, nogil=True)(hashing.span_hashes)


@njit(inline="always")
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True, nogil=True)
def count_sets(cols, members, out):
    """``out[r] += popcount(AND of cols[members[r, :]])`` over all words, for sets sorted so that
    sets sharing their prefix (all members but the last) are adjacent: the prefix's AND is
    computed once and fused with the last column's AND and the popcount in one pass."""
    n_sets, m = members.shape
    w_count = cols.shape[1]
    pre = np.empty(w_count, np.uint64)
    for r in range(n_sets):
        same = r > 0
        if same:
            for t in range(m - 1):
                if members[r, t] != members[r - 1, t]:
                    same = False
                    break
        if not same:
            for w in range(w_count):
                pre[w] = cols[members[r, 0], w]
            for t in range(1, m - 1):
                c = members[r, t]
                for w in range(w_count):
                    pre[w] &= cols[c, w]
        last = members[r, m - 1]
        s = np.uint64(0)
        for w in range(w_count):
            s += _popcount(pre[w] & cols[last, w])
        out[r] += np.int64(s)


@njit(cache=True, nogil=True)
def bottom_per_owner(owner, rank, bound):
    """Per distinct owner (uint64), its number of candidates and the indices of its ``bound``
    smallest ranks, in one pass over an open-addressing table: ``(owners, counts, kept indices)``,
    owners in table order, kept indices grouped by owner (ranks ascending within each)."""
    n = owner.size
    cap = 16
    while cap < 2 * n:
        cap *= 2
    mask = np.uint64(cap - 1)
    keys = np.zeros(cap, np.uint64)
    used = np.zeros(cap, np.bool_)
    seen = np.zeros(cap, np.int64)
    best = np.full((cap, bound), -1, np.int64)
    for i in range(n):
        k = owner[i]
        h = np.int64((k ^ (k >> np.uint64(29))) & mask)
        while used[h] and keys[h] != k:
            h = (h + 1) & (cap - 1)
        if not used[h]:
            used[h] = True
            keys[h] = k
        seen[h] += 1
        r = rank[i]
        p = 0   # where r goes: after every kept rank <= r
        while p < bound and best[h, p] != -1 and rank[best[h, p]] <= r:
            p += 1
        if p == bound:
            continue
        for j in range(bound - 1, p, -1):
            best[h, j] = best[h, j - 1]
        best[h, p] = i
    slots = np.flatnonzero(used)
    kept = np.empty(slots.size * bound, np.int64)
    m = 0
    for s in slots:
        for j in range(bound):
            if best[s, j] == -1:
                break
            kept[m] = best[s, j]
            m += 1
    return keys[slots], seen[slots], kept[:m]
