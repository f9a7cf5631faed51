"""The bound on the keys a device adds to per slice, as a mergeable table (Beam-free, numpy only): the
streaming form of :func:`~ldp_marginals.ldp.devices.keys_over_bound`.

A :class:`KeyTable` holds, per device of one slice (its 64-bit key), the ``K = max_keys_per_device``
keys of smallest key rank (:func:`~ldp_marginals.ldp.devices.key_ranks`, ties broken by key id) among
the keys it was seen in: 24 bytes a kept (device, key) pair, at most K per device, so the table is
bounded by the slice's devices, never by their reports or bundles. Keeping the K smallest is a
bottom-K over the distinct (device, key) pairs: the bottom-K of a union is the bottom-K of its parts'
bottom-Ks, so tables merge in any order and any grouping and give the same choice as batch, which
ranks every (device, key) pair of the slice at once.
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp._checks import check_int
from ldp_marginals.ldp.devices import key_ranks


class KeyTable:
    """``device``, ``rank``, ``key`` uint64[c], sorted by (device, rank, key), at most the bound per
    device, no (device, key) pair twice."""

    __slots__ = ("device", "rank", "key")

    def __init__(self, device=None, rank=None, key=None):
        empty = np.zeros(0, dtype=np.uint64)
        self.device = empty if device is None else device
        self.rank = empty if rank is None else rank
        self.key = empty if key is None else key

    @property
    def size(self) -> int:
        return int(self.device.size)


def _bottom(device: np.ndarray, rank: np.ndarray, key: np.ndarray, bound: int) -> KeyTable:
    order = np.lexsort((key, rank, device))
    device, rank, key = device[order], rank[order], key[order]
    distinct = np.r_[True, (device[1:] != device[:-1]) | (key[1:] != key[:-1])] if device.size else \
        np.zeros(0, dtype=bool)   # a pair seen twice has one rank: equal pairs are adjacent
    device, rank, key = device[distinct], rank[distinct], key[distinct]
    starts = np.flatnonzero(np.r_[True, device[1:] != device[:-1]]) if device.size else np.zeros(0, dtype=np.int64)
    position = np.arange(device.size) - np.repeat(starts, np.diff(np.r_[starts, device.size]))
    keep = position < bound
    return KeyTable(device[keep], rank[keep], key[keep])


def key_table(collection_key: int, key: int, devices, bound: int) -> KeyTable:
    """The table of one key's ``devices`` (uint64) in a slice: each device with this key (id ``key``,
    :func:`~ldp_marginals.ldp.devices.key_id`) and its key rank."""
    bound = check_int("max_keys_per_device", bound, minimum=1)
    devices = np.unique(np.asarray(devices, dtype=np.uint64))
    ids = np.full(devices.size, key & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    return KeyTable(devices, key_ranks(collection_key, devices, key), ids)


def merge_key_tables(tables, bound: int) -> KeyTable:
    """One table of the union of ``tables``: per device the ``bound`` distinct keys of smallest (rank, key)."""
    bound = check_int("max_keys_per_device", bound, minimum=1)
    tables = [t for t in tables if t.size]
    if not tables:
        return KeyTable()
    return _bottom(np.concatenate([t.device for t in tables]), np.concatenate([t.rank for t in tables]),
                   np.concatenate([t.key for t in tables]), bound)


def kept_in(table: KeyTable, key: int) -> np.ndarray:
    """The devices (uint64, sorted) that keep the key of id ``key``."""
    return np.sort(table.device[table.key == np.uint64(key & 0xFFFFFFFFFFFFFFFF)])


def table_to_bytes(table: KeyTable) -> bytes:
    return np.stack([table.device, table.rank, table.key]).astype("<u8").tobytes()


def table_from_bytes(data: bytes) -> KeyTable:
    words = np.frombuffer(bytes(data), dtype="<u8").astype(np.uint64)
    if words.size % 3:
        raise ValueError(f"a key table must hold 3 words per pair, got {words.size} words")
    device, rank, key = words.reshape(3, -1)
    return KeyTable(device.copy(), rank.copy(), key.copy())
