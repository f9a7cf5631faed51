"""The engine's state as bytes, versioned, so that the state of a running job survives an upgrade of the
code (a Flink savepoint, a Dataflow ``--update``).

Two cells per collection: the windows' statuses (:func:`windows_to_bytes`) and the bag of entries
(:func:`entry_to_bytes`, the accumulator in :func:`~ldp_marginals.ldp.aggregate.accumulator_to_bytes`'s
format). Each starts with a magic and a version number; version 1 was Beam's pickle of positional
lists and tuples, and is still read. A state written for another shape of collection (counted sets,
extremes) is refused with a ``ValueError`` naming what changed.

Version 3 numbers each released entry (its atom); versions 1 and 2 kept a flag, and merged a slice's
released increments into one entry. Such an entry is read as atom 0 with its clients' report counts
unknown (NaN): the client rule cannot tell how the merged increments split each client's reports, so
it withholds the client extremes of a window that holds one, and says why.
"""
from __future__ import annotations

import json
import pickle
import struct

import numpy as np

from ldp_marginals.ldp.aggregate import REPORTS, accumulator_from_bytes, accumulator_to_bytes, checked_accumulator
from ldp_marginals.transforms.publication.engine import PENDING, Entry, WindowStatus

VERSION = 3   # 3: entries carry their atom number; 2: a released flag; 1: Beam's pickles
_WINDOWS, _ENTRY = b"LDPS", b"LDPE"
_HEAD = struct.Struct("<4sBI")   # magic, version, length of the JSON header


def _pack(magic: bytes, header: dict, tail: bytes = b"") -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    return _HEAD.pack(magic, VERSION, len(text)) + text + tail


def _unpack(magic: bytes, data: bytes) -> tuple:
    """``(header, tail)``, or None for a version-1 pickle."""
    if data[:4] != magic:
        return None
    _, version, size = _HEAD.unpack_from(data)
    if version > VERSION:
        raise ValueError(f"state version must be <= {VERSION} (this code), got version={version}: the state was "
                         "written by a newer release")
    start = _HEAD.size
    return json.loads(data[start:start + size]), data[start + size:]


def windows_to_bytes(windows: dict) -> bytes:
    """``{(start_ms, end_ms): WindowStatus}`` -> bytes."""
    return _pack(_WINDOWS, {"windows": [[w[0], w[1], s.panes, s.on_time, s.dirty, s.published]
                                        for w, s in sorted(windows.items())]})


def windows_from_bytes(data: bytes) -> dict:
    data = bytes(data)
    parsed = _unpack(_WINDOWS, data)
    if parsed is None:   # version 1: {window: [panes, on time, dirty, reports published]}
        return {tuple(w): WindowStatus(int(v[0]), bool(v[1]), bool(v[2]), int(v[3]))
                for w, v in pickle.loads(data).items()}
    header, _ = parsed
    return {(w0, w1): WindowStatus(panes, on_time, dirty, published)
            for w0, w1, panes, on_time, dirty, published in header["windows"]}


def entry_to_bytes(entry: Entry, aggregator) -> bytes:
    return _pack(_ENTRY, {"start": entry.start, "dims": [list(kv) for kv in entry.dims], "atom": entry.atom},
                 accumulator_to_bytes(entry.acc, aggregator))


def entry_from_bytes(data: bytes, aggregator) -> Entry:
    """An entry for ``aggregator``'s collection; ``ValueError`` when it was written for another shape."""
    data = bytes(data)
    parsed = _unpack(_ENTRY, data)
    if parsed is None:   # version 1: (slice start, dims, released, WindowAccumulator)
        start, dims, released, acc = pickle.loads(data)
        return _flagged(int(start), tuple(dims), bool(released), checked_accumulator(acc, aggregator))
    header, tail = parsed
    start, dims = int(header["start"]), tuple(tuple(kv) for kv in header["dims"])
    acc = accumulator_from_bytes(tail, aggregator)
    if "atom" not in header:   # version 2
        return _flagged(start, dims, bool(header["released"]), acc)
    return Entry(start, dims, int(header["atom"]), acc)


def _flagged(start: int, dims: tuple, released: bool, acc) -> Entry:
    """An entry of version 1 or 2: a released one may hold several increments merged, so it is atom 0
    with its clients' report counts unknown (the client rule withholds such a window's client rows)."""
    if not released:
        return Entry(start, dims, PENDING, acc)
    acc.client_states[:, :, REPORTS] = np.nan
    return Entry(start, dims, 0, acc)
