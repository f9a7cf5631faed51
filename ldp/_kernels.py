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


_LAST_RANK = np.uint64(0xFFFFFFFFFFFFFFFE)


@njit(cache=True, nogil=True)
def report_ranks(collection_key, device_keys, event_ms):
    """:func:`ldp_marginals.ldp.devices.report_ranks` (its definition, run there with numpy) in one
    pass over the reports: ``event_ms`` uint64 (the int64 times' bits)."""
    n = device_keys.size
    out = np.empty(n, np.uint64)
    for r in range(n):
        h = _mix(_mix(device_keys[r] ^ collection_key) ^ event_ms[r])
        out[r] = h if h < _LAST_RANK else _LAST_RANK
    return out


@njit(inline="always")
def _slot_of(key, shift):
    """The slot of ``key`` in a table of ``2**(64 - shift)`` slots: the top bits of its Fibonacci hash."""
    return np.int64((key * _GOLDEN) >> np.uint64(shift))


@njit(cache=True, nogil=True)
def _table_of(keys, m, bits):
    """The open-addressing table of ``2**bits`` slots (int64, -1 empty) that holds ``keys[:m]`` (uint64), each
    slot the number of its key, placed in order at its slot (:func:`_slot_of`) or the next free one: what
    :func:`below_per_owner` and :func:`distinct_rows` build again when their table is half full."""
    mask = (1 << bits) - 1
    table = np.full(1 << bits, -1, np.int64)
    for r in range(m):
        g = _slot_of(keys[r], 64 - bits)
        while table[g] != -1:
            g = (g + 1) & mask
        table[g] = r
    return table


_NO_CEILING = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True)
def below_per_owner(owner, rank, cap, bound, n_real):
    """:func:`ldp_marginals.ldp.devices._below` in one pass: the first ``n_real`` entries are candidates
    (``cap``, when not empty, the ceiling each had in its part), the rest a part's ceiling for its owner.
    Per distinct owner (uint64): its number of candidates, its ceiling (the smallest of its given
    ceilings and of the ranks it did not keep among its ``bound`` smallest, which is the (bound+1)-th
    smallest rank; ``2^64 - 1`` for none) and the indices of its candidates below the ceiling:
    ``(owners, counts, ceilings, best)``, owners in order of first appearance and ``best``
    int64[owners, bound] those indices, ranks ascending (a later equal rank after an earlier one),
    -1 past them.

    An open-addressing table maps an owner to its row, and a row holds the owner's count, its ceiling
    and its ``bound`` smallest ranks beside their indices, so an entry reads one slot and one row
    (never the ``rank`` array again). The table doubles when half full, so it is sized by the owners;
    the rows are reserved for every entry but written (so resident) only for the owners."""
    n = owner.size
    capped = cap.size > 0
    bits = 4
    table = np.full(1 << bits, -1, np.int64)   # slot -> the owner's row, -1 empty
    owners = np.empty(n, np.uint64)
    # a row: [count, ceiling, rank_0, index_0, ..., rank_{bound-1}, index_{bound-1}] (ranks as int64 bits,
    # compared unsigned)
    rows = np.empty((n, 2 + 2 * bound), np.int64)
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
            rows[row, 1] = np.int64(_NO_CEILING)
            table[h] = row
            if 2 * m > (1 << bits):   # half full: twice the slots, every owner placed again
                bits += 1
                table = _table_of(owners, m, bits)
        r = rank[i]
        if i >= n_real:   # a part's ceiling
            if r < np.uint64(rows[row, 1]):
                rows[row, 1] = np.int64(r)
            continue
        if capped and cap[i] < np.uint64(rows[row, 1]):
            rows[row, 1] = np.int64(cap[i])
        filled = rows[row, 0]
        rows[row, 0] = filled + 1
        if filled > bound:
            filled = bound
        p = 0   # where r goes: after every kept rank <= r
        while p < filled and np.uint64(rows[row, 2 + 2 * p]) <= r:
            p += 1
        if p == bound:   # not kept: a ceiling
            if r < np.uint64(rows[row, 1]):
                rows[row, 1] = np.int64(r)
            continue
        if filled == bound:   # the largest kept rank leaves: a ceiling
            out = np.uint64(rows[row, 2 * bound])
            if out < np.uint64(rows[row, 1]):
                rows[row, 1] = np.int64(out)
            filled -= 1
        for j in range(filled, p, -1):
            rows[row, 2 + 2 * j] = rows[row, 2 * j]
            rows[row, 3 + 2 * j] = rows[row, 1 + 2 * j]
        rows[row, 2 + 2 * p] = np.int64(r)
        rows[row, 3 + 2 * p] = i
    ceilings = np.empty(m, np.uint64)
    best = np.full((m, bound), -1, np.int64)
    for r in range(m):
        c = np.uint64(rows[r, 1])
        ceilings[r] = c
        for j in range(min(rows[r, 0], bound)):
            if np.uint64(rows[r, 2 + 2 * j]) < c:
                best[r, j] = rows[r, 3 + 2 * j]
    counts = rows[:m, 0].copy()
    return owners[:m].copy(), counts, ceilings, best


@njit(cache=True, nogil=True)
def distinct_rows(words, limit):
    """:func:`ldp_marginals.ldp.versioned.state_table`'s table in one pass: ``words`` uint64[n, w] (rows'
    bits). Returns ``(first, index)``: the index of each distinct row's first occurrence, in order of
    first occurrence, and per row the number of its distinct row (int64); ``first`` empty when there are
    more than ``limit`` distinct rows. An open-addressing table of row hashes, each hit compared word by
    word, so rows are equal exactly when their bits are."""
    n, w = words.shape
    bits = 4
    table = np.full(1 << bits, -1, np.int64)   # slot -> distinct row number, -1 empty
    first = np.empty(min(n, limit + 1), np.int64)
    hashes = np.empty(min(n, limit + 1), np.uint64)
    index = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        h = np.uint64(0x6C64702D73746174)
        for j in range(w):   # a multiply per word, one mix at the end: a hit is checked word by word anyway
            h = (h ^ words[i, j]) * _MIX_1
        h = _mix(h)
        mask = (1 << bits) - 1
        s = _slot_of(h, 64 - bits)
        found = -1
        while table[s] != -1:
            d = table[s]
            if hashes[d] == h:
                same = True
                for j in range(w):
                    if words[first[d], j] != words[i, j]:
                        same = False
                        break
                if same:
                    found = d
                    break
            s = (s + 1) & mask
        if found == -1:
            if m == limit:
                return np.zeros(0, np.int64), index
            found = m
            first[m] = i
            hashes[m] = h
            m += 1
            table[s] = found
            if 2 * m > (1 << bits):   # half full: twice the slots, every row placed again
                bits += 1
                table = _table_of(hashes, m, bits)
        index[i] = found
    return first[:m].copy(), index


@njit(cache=True, nogil=True)
def pattern_state_sums(inverse, bits, cols, widths, tables, n_clients):
    """Per client, the sum of its reports' states of each extreme over few bits, read from the extremes'
    tables of bit patterns (:func:`ldp_marginals.ldp.aggregate._log_states`) without a state per report:
    ``inverse`` int64[n] each report's client (``< n_clients``), ``bits`` uint8[n, d] (0/1), ``cols``
    int64[E, m] extreme e's bits (the first ``widths[e]``), ``tables`` float64[E, 2^m, W] its states by
    pattern (bit j of the pattern is the extreme's j-th bit). Returns float64[n_clients, E, W]: per
    column, ``np.bincount(inverse, weights=states[:, e, w])`` bit for bit (each client's sum runs over
    its reports in order, from 0.0)."""
    n = inverse.size
    n_ext, _, width = tables.shape
    out = np.zeros((n_clients, n_ext, width))
    for i in range(n):
        c = inverse[i]
        for e in range(n_ext):
            code = 0
            for j in range(widths[e]):
                code |= np.int64(bits[i, cols[e, j]]) << j
            for w in range(width):
                out[c, e, w] += tables[e, code, w]
    return out
