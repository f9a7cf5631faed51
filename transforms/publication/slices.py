"""The bound on a slice's keys per device in streaming (``privacy.unit: device`` with dimensions): one
engine per (collection, slice), between the partials and the keys' atoms (Beam-free; the adapter is
:mod:`ldp_marginals.transforms.slice_keys`).

::

    partial ──DeviceKeys──▶ slice (per collection and slice) ──Kept──▶ atoms (per key)
    clock ──Accept, Drop──▶ slice

Batch ranks every (device, key) pair of a slice once the slice is complete and drops, per device, the
keys past its K of smallest key rank (:mod:`ldp_marginals.transforms.device_keys`). Streaming makes the
same choice at the same point: a slice's devices across keys are known only when the slice can take no
more reports, so under this bound the clock *seals* a slice at the close of its first window (a partial
of it that comes later is late, a dead letter, even if a later window of a sliding slice is open) and
the keys' atoms hold the slice's reports pending until then (:mod:`.key_atoms`): no pane, early or on
time, publishes a report of a slice that is not sealed, so none publishes a device's contribution that
a key seen later would displace. At the seal each key learns which of its devices keep it
(:class:`Kept`), drops the others (``reports.over_key_bound``) and releases what is left, as batch does.

What this step sees: per partial the distinct 64-bit device keys (:class:`DeviceKeys`, 8 bytes a
device, never a report), and from the clock which partials it accepted (:class:`Accept`, at each of its
events, and at the seal how many in all) or found late (:class:`~.messages.Drop`). Beam orders nothing,
so a partial's device keys are kept raw until the clock's word on it comes, then merged into the
slice's :class:`~ldp_marginals.ldp.key_table.KeyTable` (per device its K keys of smallest rank, at most
``24 * K`` bytes a device) or discarded. The choice is a bottom-K over (device, key) pairs: the same
for any order and grouping of the partials and after a restore, whose state holds the table.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ldp_marginals.ldp.devices import key_id
from ldp_marginals.ldp.key_table import KeyTable, kept_in, key_table, merge_key_tables, table_from_bytes, table_to_bytes
from ldp_marginals.ldp.versioned import join, pack, split, unpack
from ldp_marginals.transforms.publication.messages import Drop

DEVICE_KEYS, ACCEPT, KEPT, SLICE, TABLE = b"LDPU", b"LDPJ", b"LDPT", b"LDPS", b"LDPG"   # LDPA: an accumulator


class DeviceKeys(NamedTuple):
    """A partial's distinct device keys, to its collection and slice."""

    id: str
    dims: tuple
    start: int
    devices: np.ndarray   # uint64, sorted, distinct


class Accept(NamedTuple):
    """Clock -> a slice: the partials ``ids`` of the slice were counted at an event; ``seal``: the slice's
    first window closed, and ``total`` partials of the slice were counted in all."""

    start: int
    ids: tuple
    seal: bool = False
    total: int = 0


class Kept(NamedTuple):
    """A slice -> one of its keys' atoms, at the seal: the devices that keep this key (the rest drop it)."""

    start: int
    devices: np.ndarray   # uint64, sorted


def sealed_by(window_spec, window: tuple) -> set:
    """The slices a window's close seals: those whose first window it is (the global window: its one
    slice, at the end of the input)."""
    slices = window_spec.slices_of(window)
    if slices is None:
        return {0}
    return {s for s in slices if window_spec.windows_of_slice(s)[0] == window}


# -- records (versioned, as :mod:`.state`'s) --------------------------------------------------------

def _words(devices) -> bytes:
    return np.asarray(devices, dtype=np.uint64).astype("<u8").tobytes()


def _devices(tail) -> np.ndarray:
    return np.frombuffer(bytes(tail), dtype="<u8").astype(np.uint64)


def message_to_bytes(message) -> bytes | None:
    """A message of this step as a record, or None when it is not one."""
    if isinstance(message, DeviceKeys):
        return pack(DEVICE_KEYS, {"id": message.id, "dims": [list(kv) for kv in message.dims], "start": message.start},
                    _words(message.devices))
    if isinstance(message, Accept):
        return pack(ACCEPT, {"start": message.start, "ids": list(message.ids), "seal": message.seal,
                             "total": message.total})
    if isinstance(message, Kept):
        return pack(KEPT, {"start": message.start}, _words(message.devices))
    return None


def message_from_bytes(data: bytes):
    """A message of this step from its record, or None when the record is another's."""
    magic = bytes(data[:4])
    if magic not in (DEVICE_KEYS, ACCEPT, KEPT):
        return None
    _, h, tail = unpack(magic, bytes(data))
    if magic == DEVICE_KEYS:
        return DeviceKeys(h["id"], tuple(tuple(kv) for kv in h["dims"]), int(h["start"]), _devices(tail))
    if magic == ACCEPT:
        return Accept(int(h["start"]), tuple(h["ids"]), bool(h["seal"]), int(h["total"]))
    return Kept(int(h["start"]), _devices(tail))


@dataclass
class SliceStatus:
    merged: int = 0                                  # partials merged into the table
    total: int | None = None                         # partials the clock counted in all (once sealed)
    keys: set = field(default_factory=set)           # the keys (dims) of the partials merged
    accepted: set = field(default_factory=set)       # ids (:func:`id_hash`) counted, device keys not come yet
    dropped: set = field(default_factory=set)        # ids (:func:`id_hash`) found late, device keys not come yet


def id_hash(pid: str) -> int:
    """A partial's id as 64 bits (the status keeps ids it waits for in binary: thousands of them when a
    slice's device keys lag behind the clock's word)."""
    return int.from_bytes(hashlib.blake2b(pid.encode(), digest_size=8).digest(), "little")


def status_to_bytes(status: SliceStatus) -> bytes:
    return pack(SLICE, {"merged": status.merged, "total": status.total,
                        "keys": sorted([list(kv) for kv in d] for d in status.keys)},
                join(np.fromiter(sorted(ids), dtype=np.uint64, count=len(ids)).astype("<u8").tobytes()
                     for ids in (status.accepted, status.dropped)))


def status_from_bytes(data: bytes) -> SliceStatus:
    parsed = unpack(SLICE, bytes(data))
    if parsed is None:
        raise ValueError(f"state must be a record {SLICE.decode()}, got one starting {bytes(data[:4])!r}")
    h = parsed[1]
    accepted, dropped = (set(_devices(words).tolist()) for words in split(parsed[2]))
    return SliceStatus(int(h["merged"]), h["total"], {tuple(tuple(kv) for kv in d) for d in h["keys"]},
                       accepted, dropped)


def table_record(table: KeyTable) -> bytes:
    return pack(TABLE, {}, table_to_bytes(table))


def table_of_record(data: bytes) -> KeyTable:
    parsed = unpack(TABLE, bytes(data))
    if parsed is None:
        raise ValueError(f"state must be a record {TABLE.decode()}, got one starting {bytes(data[:4])!r}")
    return table_from_bytes(parsed[2])


# -- the engine ---------------------------------------------------------------------------------------

@dataclass
class SliceStep:
    """What one message produced: ``kept`` (``(dims, Kept)``, at the decision), the raw device keys to
    append (``append_raw``) or the bag's new contents (``raw``, None: unchanged), and the table to store
    (None: unchanged)."""

    kept: list = field(default_factory=list)
    changed: bool = True   # False: the status is unchanged (nothing to write)
    append_raw: object = None
    raw: list | None = None
    table: KeyTable | None = None


class SliceKeys:
    """The bound on one slice's keys per device (module docstring). ``read()`` returns ``(raw device
    keys, table)``; ``status`` is changed in place."""

    def __init__(self, config, start: int):
        self.config = config
        self.start = start
        self.bound = config.device.max_keys_per_device
        self.collection_key = config.aggregator.collection_key

    def on_message(self, status: SliceStatus, message, read: callable) -> SliceStep:
        if isinstance(message, DeviceKeys):
            pid = id_hash(message.id)
            if pid in status.dropped:
                status.dropped.discard(pid)
                return SliceStep()
            if pid not in status.accepted:
                return SliceStep(append_raw=message, changed=False)
            status.accepted.discard(pid)
            return self._merge(status, [message], None, read()[1])
        raw, table = read()
        if isinstance(message, Drop):
            left = [r for r in raw if r.id != message.id]
            if len(left) == len(raw):
                status.dropped.add(id_hash(message.id))
                return SliceStep()
            return SliceStep(raw=left, changed=False)
        if not isinstance(message, Accept):
            raise ValueError(f"message must be DeviceKeys, Accept or Drop, got {type(message).__name__}")
        ids = set(message.ids)
        taking = [r for r in raw if r.id in ids]
        status.accepted |= {id_hash(i) for i in ids - {r.id for r in taking}}
        if message.seal:
            status.total = message.total
        return self._merge(status, taking, [r for r in raw if r.id not in ids] if taking else None, table)

    def _merge(self, status: SliceStatus, records: list, raw: list | None, table: KeyTable) -> SliceStep:
        step = SliceStep(raw=raw)
        if records:
            table = merge_key_tables([table] + [key_table(self.collection_key, key_id(r.dims), r.devices, self.bound)
                                                for r in records], self.bound)
            status.merged += len(records)
            status.keys |= {r.dims for r in records}
            step.table = table
        if status.total is not None and status.merged >= status.total:
            step.kept = [(dims, Kept(self.start, kept_in(table, key_id(dims)))) for dims in sorted(status.keys)]
            status.merged, status.total, status.keys = 0, None, set()
            step.table = KeyTable()
        return step
