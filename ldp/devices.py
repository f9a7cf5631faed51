"""The device as the privacy unit: a bound on how many reports one device adds to a slice and key,
chosen the same way whatever order the reports arrive in (Beam-free, numpy only).

A collection with ``privacy.unit: device`` names a device in every report (the slice-scoped device
token in ``client``, docs/client.md section 5). Per slice and key a device contributes at most
``M = max_reports_per_device`` reports, chosen *blind to their content*: each report has a *rank*,
a 64-bit hash keyed by the collection of ``(device, the report's event time in ms)``
(:func:`report_ranks`; never its bits), and a device keeps every report whose rank is below its
*ceiling*, the (M+1)-th smallest rank of its reports (none when it sent at most M). That keeps
its M reports of smallest rank; where reports of one device share a millisecond (equal ranks)
and that group straddles the M-th place, the whole group is left out, counted beyond the bound:
any rule that picked among them would have to read what tells them apart, their bits (which a
device could bias, and which an attacker holding the token could test, a likelihood ratio
per report). So which reports count depends only on the device and the event times, and an
estimate over the kept reports is unbiased for the mean of every report's truth, however many
a device sends. Such ties need a device to stamp two reports in one millisecond; a device's
reports stamped alike and more than M all drop (see docs/design.md section 3).

Keeping what is below the (M+1)-th smallest rank is a *bottom-M*: the (M+1)-th smallest rank of a
union is the smaller of the parts' ceilings and the (M+1)-th smallest of their kept candidates, so
tables merge in any order and any grouping (bundles, hot-key fanout, a combine's retries, a
restored state) and give the same reports; and a table holds at most M candidates and one ceiling
per device, so its size is bounded by the devices of the slice, never by their reports.

:class:`DeviceTable` holds, per device (its 64-bit key, :func:`~ldp_marginals.ldp.aggregate.client_key`
of the token: no raw token is kept), how many reports it sent (``seen``) and its kept candidates
(rank and packed bits) and its ceiling. Two tokens collide with probability ~n^2 / 2^65 per slice (a collision
makes two devices one, which only lowers what they may add).

Across keys (a device that changes region), per slice a device adds to at most
``K = max_keys_per_device`` keys: the K of its keys with the smallest *key rank*, a 64-bit hash keyed
by the collection of (device, key) (:func:`keys_over_bound`). The choice reads only which devices
each key of the slice holds, so it is the same for any split and order of the reports.

What a settled slice and key kept is summed up by :func:`kept_digest`, a digest of its kept
(device, rank) pairs that adds over disjoint parts (the release ledger compares it between runs,
docs/design.md section 7, "The release ledger"); :func:`witness_order` orders a slice's devices for the
ledger's few witnesses of them.
"""
from __future__ import annotations

import json

import numpy as np

from ldp_marginals.ldp import _compiled
from ldp_marginals.ldp._checks import check_int

_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise on uint64 (wrapping arithmetic)."""
    h = h ^ (h >> np.uint64(30))
    h = h * _MIX_1
    h = h ^ (h >> np.uint64(27))
    h = h * _MIX_2
    return h ^ (h >> np.uint64(31))


NO_CEILING = np.uint64(0xFFFFFFFFFFFFFFFF)   # a device's ceiling while it sent at most M reports
_LAST_RANK = np.uint64(0xFFFFFFFFFFFFFFFE)   # ranks stop below NO_CEILING, so every rank is below it


def report_ranks(collection_key: int, device_keys: np.ndarray, event_ms: np.ndarray) -> np.ndarray:
    """uint64 per report: the rank of report r, a hash of (collection key, its device key, its event
    time in ms) and of nothing in its content: the two keys mixed (splitmix64's finalizer), the
    event ms (int64, as its two's-complement uint64) xored in and mixed again, capped at
    2^64 - 2 (below :data:`NO_CEILING`). Reports of one device in one millisecond share a rank.
    The same for a per-report priority anywhere (the bound on devices, a bound on clients)."""
    keys = np.asarray(device_keys, dtype=np.uint64)
    ms = np.ascontiguousarray(event_ms, dtype=np.int64).view(np.uint64)
    if keys.shape != ms.shape:
        raise ValueError(f"event_ms must have one time per device key, got {ms.shape} for {keys.shape}")
    if _compiled.AVAILABLE:   # the same hash, in one compiled pass
        return _compiled.report_ranks(np.uint64(collection_key & 0xFFFFFFFFFFFFFFFF), keys, ms)
    with np.errstate(over="ignore"):
        h = _mix(_mix(keys ^ np.uint64(collection_key & 0xFFFFFFFFFFFFFFFF)) ^ ms)
        return np.minimum(h, _LAST_RANK)


RANK_RULE = "event_ms"   # what ranks hash besides the device: the state's shape names it
RANK_RULE_CHANGED = ("the saved device table ranks reports by (device, bits), the rule before reports were kept "
                     "blind to their content; this release ranks them by (device, event ms) (rank_rule "
                     f"{RANK_RULE!r}) and cannot merge the two: start without the savepoint")


class DeviceTable:
    """Data of one slice and key under a bound: ``devices`` uint64[k] (sorted device keys), ``seen``
    int64[k] (reports each device sent), ``ceiling`` uint64[k] (the (M+1)-th smallest rank of each
    device's reports, :data:`NO_CEILING` while it sent at most M), and the kept candidates (every
    report of rank below its device's ceiling) ``owner`` uint64[c], ``rank``
    uint64[c], ``bits`` uint8[c, n_bytes], sorted by (owner, rank), at most the bound per
    device."""

    __slots__ = ("devices", "seen", "ceiling", "owner", "rank", "bits")

    def __init__(self, n_bytes: int):
        self.devices = np.zeros(0, dtype=np.uint64)
        self.seen = np.zeros(0, dtype=np.int64)
        self.ceiling = np.zeros(0, dtype=np.uint64)
        self.owner = np.zeros(0, dtype=np.uint64)
        self.rank = np.zeros(0, dtype=np.uint64)
        self.bits = np.zeros((0, n_bytes), dtype=np.uint8)

    def __getstate__(self):
        return {"devices": self.devices, "seen": self.seen, "ceiling": self.ceiling, "owner": self.owner,
                "rank": self.rank, "bits": self.bits}

    def __setstate__(self, state):
        if "ceiling" not in state:
            raise ValueError(RANK_RULE_CHANGED)
        for k, v in state.items():
            setattr(self, k, v)

    @property
    def n_devices(self) -> int:
        """Devices with a kept report."""
        return int(np.count_nonzero(np.r_[True, self.owner[1:] != self.owner[:-1]])) if self.owner.size else 0

    @property
    def kept(self) -> int:
        """Reports kept (at most the bound per device)."""
        return int(self.owner.size)

    @property
    def over_bound(self) -> int:
        """Reports sent beyond the bound (seen and not kept)."""
        return int(self.seen.sum()) - self.kept


def _below(owner: np.ndarray, rank: np.ndarray, bound: int, n_real: int | None = None, cap=None) -> tuple:
    """``(devices, seen, ceilings, keep)``: the first ``n_real`` (default all) entries of ``owner``,
    ``rank`` are candidates (``cap``, if given, the ceiling each had in its part), the rest a part's
    ceiling for its device. Per distinct owner, sorted: how
    many candidates it has, its ceiling (the smaller of its smallest given ceiling and the
    (``bound``+1)-th smallest rank of its candidates; :data:`NO_CEILING` for none), and the indices of
    the candidates below it in (owner, rank) order: at most ``bound`` per owner, a tie straddling the
    bound left out whole. One compiled pass when numba is installed (an open-addressing table of the
    owners), else one sort."""
    n_real = owner.size if n_real is None else n_real
    if owner.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros(0, dtype=np.uint64), empty, np.zeros(0, dtype=np.uint64), empty
    if _compiled.AVAILABLE:
        caps = np.zeros(0, dtype=np.uint64) if cap is None else cap
        devices, seen, ceilings, best = _compiled.below_per_owner(owner, rank, caps, bound, n_real)
        order = np.argsort(devices)
        keep = best[order].reshape(-1)   # per owner in order, its kept ranks ascending
        return devices[order], seen[order], ceilings[order], keep[keep >= 0]
    devices, at = np.unique(owner, return_inverse=True)
    at = at.reshape(-1)
    ceilings = np.full(devices.size, NO_CEILING, dtype=np.uint64)
    np.minimum.at(ceilings, at[n_real:], rank[n_real:])
    if cap is not None:
        np.minimum.at(ceilings, at[:n_real], cap)
    order = np.lexsort((rank[:n_real], owner[:n_real]))
    own = owner[order]
    starts = np.flatnonzero(np.r_[True, own[1:] != own[:-1]]) if own.size else np.zeros(0, dtype=np.int64)
    sizes = np.diff(np.r_[starts, own.size])
    rows = at[order[starts]]   # each run's device
    seen = np.zeros(devices.size, dtype=np.int64)
    seen[rows] = sizes
    full = sizes > bound
    ceilings[rows[full]] = np.minimum(ceilings[rows[full]], rank[order[starts[full] + bound]])
    position = np.arange(order.size) - np.repeat(starts, sizes)
    keep = order[(position < bound) & (rank[order] < np.repeat(ceilings[rows], sizes))]
    return devices, seen, ceilings, keep


def in_lexsort_order(keys) -> bool:
    """Whether the rows of ``keys`` (arrays of one length, the last the primary key, as
    ``np.lexsort`` takes them) are already in nondecreasing lexicographic order: one vectorized pass,
    no sort."""
    n = keys[0].size
    if n < 2:
        return True
    ahead = np.zeros(n - 1, dtype=bool)   # row i < row i + 1 on the keys compared so far
    tied = np.ones(n - 1, dtype=bool)     # row i == row i + 1 on them
    for k in reversed(keys):
        a, b = k[:-1], k[1:]
        ahead |= tied & (a < b)
        tied &= a == b
        if not (ahead | tied).all():
            return False
    return True


def lexsort_order(keys) -> np.ndarray:
    """``np.lexsort(keys)``, without the sort when the rows are in that order already (the stable
    sort's answer is then ``arange``): the client sample's parts are kept sorted by (owner, rank),
    so most of its merges, and a batch job's single atom, need none."""
    if in_lexsort_order(keys):
        return np.arange(keys[0].size)
    return np.lexsort(keys)


def unique_inverse(values: np.ndarray) -> tuple:
    """``np.unique(values, return_inverse=True)`` (the inverse flat), in one pass when ``values`` is
    sorted already (the owners of a device table, a settled accumulator's clients)."""
    if values.size and in_lexsort_order((values,)):
        first = np.r_[True, values[1:] != values[:-1]]
        return values[first], np.cumsum(first) - 1
    uniq, inverse = np.unique(values, return_inverse=True)
    return uniq, inverse.reshape(-1)


def bottom_indices(owner: np.ndarray, rank: np.ndarray, bound: int) -> np.ndarray:
    """Indices of per owner its ``bound`` entries of smallest rank, in (owner, rank) order, ties at the
    bound taken in input order: a plain bottom-k, for a caller that reads only the tied ranks past it
    (the client sample keeps ``c + 1`` and leaves out a client whose c-th and (c+1)-th ranks tie), not
    the device bound (:func:`_below`, which leaves a straddling tie out whole)."""
    if owner.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = lexsort_order((rank, owner))
    own = owner[order]
    starts = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
    position = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
    return order[position < bound]


def table_of(device_keys, ranks, packed, bound: int) -> DeviceTable:
    """The table of one batch of reports: each report's device key, rank and packed bits."""
    bound = check_int("max_reports_per_device", bound, minimum=1)
    packed = np.asarray(packed, dtype=np.uint8)
    keys = np.asarray(device_keys, dtype=np.uint64)
    ranks = np.asarray(ranks, dtype=np.uint64)
    out = DeviceTable(packed.shape[1])
    out.devices, out.seen, out.ceiling, keep = _below(keys, ranks, bound)
    out.owner, out.rank, out.bits = keys[keep], ranks[keep], packed[keep]
    return out


def merge_tables(tables, bound: int) -> DeviceTable:
    """One table of the union of ``tables`` (new arrays; the inputs are not modified): reports seen
    add up per device, a device's ceiling is the smallest of its parts' ceilings and of the
    (``bound``+1)-th smallest rank of its candidates, and it keeps its candidates below it."""
    tables = list(tables)
    nonempty = [t for t in tables if t.devices.size]
    if len(nonempty) <= 1:
        return nonempty[0] if nonempty else tables[0]
    tables = nonempty
    out = DeviceTable(tables[0].bits.shape[1])
    devices = np.concatenate([t.devices for t in tables])
    seen = np.concatenate([t.seen for t in tables])
    out.devices, inverse = np.unique(devices, return_inverse=True)
    inverse = inverse.reshape(-1)
    out.seen = np.bincount(inverse, weights=seen, minlength=out.devices.size).astype(np.int64)
    owner = np.concatenate([t.owner for t in tables])
    rank = np.concatenate([t.rank for t in tables])
    bits = np.concatenate([t.bits for t in tables])
    # a part's ceiling enters the selection beside each of the device's candidates there (``cap``),
    # and after them for a device it kept none of (a tie left out whole: every device of the union
    # then has candidates or a ceiling below NO_CEILING, so the selection's owners are its devices)
    caps, orphans, orphan_ceilings = [], [], []
    for t in tables:
        at = np.searchsorted(t.devices, t.owner)   # candidates and devices are sorted
        caps.append(t.ceiling[at])
        alone = t.ceiling < NO_CEILING
        alone[at] = False
        orphans.append(t.devices[alone])
        orphan_ceilings.append(t.ceiling[alone])
    owners = np.concatenate([owner] + orphans)
    ranks = np.concatenate([rank] + orphan_ceilings)
    devices, _, out.ceiling, keep = _below(owners, ranks, bound, owner.size, np.concatenate(caps))
    if devices.size != out.devices.size:   # a cut table's device (trimmed) may have neither
        ceiling = np.full(out.devices.size, NO_CEILING, dtype=np.uint64)
        ceiling[np.searchsorted(out.devices, devices)] = out.ceiling
        out.ceiling = ceiling
    out.owner, out.rank, out.bits = owner[keep], rank[keep], bits[keep]
    return out


def kept_per_device(table: DeviceTable) -> tuple:
    """``(devices uint64, kept int64)``: each device with kept reports and how many it has (runs of the
    candidates, sorted by owner)."""
    owner = table.owner
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if owner.size else np.zeros(0, dtype=np.int64)
    return owner[starts], np.diff(np.r_[starts, owner.size]).astype(np.int64)


def trimmed(table: DeviceTable, used_devices: np.ndarray, used_counts: np.ndarray, bound: int) -> DeviceTable:
    """``table`` (new arrays) with each device's candidates cut to what its bound leaves after
    ``used_counts`` reports it already has elsewhere in the slice and key (released increments):
    those of rank below the (``bound - used`` + 1)-th smallest of its candidates (as :func:`table_of`:
    a tie straddling the cut left out whole). Reports seen and ceilings are unchanged, so the cut ones
    count beyond the bound."""
    out = DeviceTable(table.bits.shape[1])
    out.devices, out.seen, out.ceiling = table.devices, table.seen, table.ceiling
    if table.owner.size == 0 or used_devices.size == 0:
        out.owner, out.rank, out.bits = table.owner, table.rank, table.bits
        return out
    order = np.argsort(used_devices, kind="stable")
    used_devices, used_counts = used_devices[order], used_counts[order]
    at = np.minimum(np.searchsorted(used_devices, table.owner), used_devices.size - 1)
    used = np.where(used_devices[at] == table.owner, used_counts[at], 0)
    first = np.r_[True, table.owner[1:] != table.owner[:-1]]   # candidates are sorted by (owner, rank)
    starts = np.flatnonzero(first)
    # per candidate, how many of its owner's candidates rank at most as it does: the end of its tie
    runs = np.flatnonzero(first | np.r_[True, table.rank[1:] != table.rank[:-1]])
    run_end = np.repeat(np.r_[runs[1:], table.owner.size], np.diff(np.r_[runs, table.owner.size]))
    at_most = run_end - np.repeat(starts, np.diff(np.r_[starts, table.owner.size]))
    keep = at_most <= bound - used
    out.owner, out.rank, out.bits = table.owner[keep], table.rank[keep], table.bits[keep]
    return out


_DIGEST_LANES = (np.uint64(0x6C64702D6B657074), np.uint64(0x3C6EF372FE94F82B))   # "ldp-kept", and a second lane
_WITNESS = np.uint64(0x6C64702D7769746E)   # "ldp-witn"


def kept_digest(owner: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """uint64[2]: the digest of a multiset of kept ``(device key, rank)`` pairs, per lane the sum
    (mod 2^64) of a mixed hash of each pair, so the digest of a union of disjoint parts is the sum of
    theirs and it does not depend on the pairs' order. It reads only which devices keep which ranks,
    never how a rank is made. Two different multisets share a digest with probability ~2^-128 unless
    one chooses the pairs to collide, which needs every changed pair's device key."""
    owner = np.asarray(owner, dtype=np.uint64)
    rank = np.asarray(rank, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return np.array([_mix(_mix(owner ^ lane) ^ rank).sum(dtype=np.uint64) for lane in _DIGEST_LANES],
                        dtype=np.uint64)


def witness_order(device_keys: np.ndarray) -> np.ndarray:
    """uint64 per device key: the order in which the release ledger picks a slice's witnesses (the
    devices of smallest order), a keyed bijective mix of the key, so a sample of the devices that any
    two runs over the same devices pick alike."""
    with np.errstate(over="ignore"):
        return _mix(np.asarray(device_keys, dtype=np.uint64) ^ _WITNESS)


def key_id(dims) -> int:
    """The 64-bit id of a key (sorted ``(name, value)`` pairs): the hash of
    :func:`~ldp_marginals.ldp.aggregate.client_key` over its canonical JSON, so every process gives a
    key the same id."""
    data = np.frombuffer(json.dumps([list(kv) for kv in dims], separators=(",", ":")).encode("utf-8"), dtype=np.uint8)
    return int(_compiled.span_hashes(data, np.zeros(1, dtype=np.int64), np.array([data.size], dtype=np.int64))[0])


def key_ranks(collection_key: int, device_keys: np.ndarray, key: int) -> np.ndarray:
    """uint64 per device: the rank of (device, ``key``) for the bound on keys, a hash of the collection
    key, the device key and the key's id (:func:`key_id`)."""
    keys = np.asarray(device_keys, dtype=np.uint64)
    with np.errstate(over="ignore"):
        start = _mix(np.array([(collection_key ^ key) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
        return _mix(_mix(keys ^ start) ^ np.uint64(key & 0xFFFFFFFFFFFFFFFF))


def keys_over_bound(collection_key: int, members, bound: int) -> list:
    """``members``: per key of one slice, ``(key id, devices uint64)`` (its distinct devices). Per key,
    the devices (uint64, sorted) that exceed their bound of ``bound`` keys there: each device keeps
    the ``bound`` keys of smallest :func:`key_ranks` (ties, with probability 2^-64, broken by key
    id), whatever order ``members`` come in."""
    bound = check_int("max_keys_per_device", bound, minimum=1)
    members = list(members)
    sizes = [np.asarray(d).size for _, d in members]
    if not members or sum(sizes) == 0:
        return [np.zeros(0, dtype=np.uint64) for _ in members]
    device = np.concatenate([np.asarray(d, dtype=np.uint64) for _, d in members])
    ids = np.array([k & 0xFFFFFFFFFFFFFFFF for k, _ in members], dtype=np.uint64)
    which = np.repeat(np.arange(len(members)), sizes)
    rank = np.concatenate([key_ranks(collection_key, d, k) for k, d in members])
    order = np.lexsort((ids[which], rank, device))
    own = device[order]
    starts = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
    position = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
    over = order[position >= bound]
    return [np.sort(device[over[which[over] == i]]) for i in range(len(members))]


def without_devices(table: DeviceTable, dropped: np.ndarray) -> tuple:
    """``(table, reports)``: ``table`` (new arrays) without the devices ``dropped`` (sorted uint64),
    and how many reports they had sent to it (counted apart: past the bound on keys)."""
    if dropped.size == 0 or table.devices.size == 0:
        return table, 0
    out = DeviceTable(table.bits.shape[1])
    gone = np.isin(table.devices, dropped, assume_unique=True)
    out.devices, out.seen, out.ceiling = table.devices[~gone], table.seen[~gone], table.ceiling[~gone]
    keep = ~np.isin(table.owner, dropped)
    out.owner, out.rank, out.bits = table.owner[keep], table.rank[keep], table.bits[keep]
    return out, int(table.seen[gone].sum())
