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
