"""Saved state as versioned bytes: the one header and the one version number of everything the job
keeps across a process (a streaming job's state, a Flink savepoint, a Dataflow ``--update``) or sends
across a shuffle (partials, accumulators, the publication engine's messages), and the accumulator's
own record.

A record is ``magic (4 bytes) | version (1 byte) | header length (uint32, little-endian) | header
(JSON) | tail`` (:func:`pack`, :func:`unpack`). The magic names what the record holds (``LDPA`` an
accumulator; the publication engine's records are in
:mod:`ldp_marginals.transforms.publication.state`), the version is :data:`VERSION` for every record a
release writes, and the tail holds arrays, little-endian, or nested records, each prefixed by its
length. Readers accept every earlier version:

- 1: Beam's pickles of positional tuples (no magic; an accumulator's client states had 6 columns);
- 2: accumulators ``LDPA`` with named parts and the shape they were written for; entries ``LDPE``
  with a released flag; window statuses ``LDPS``;
- 3: entries numbered by atom (accumulators still wrote version 2);
- 4: one version for every record; the keyed publication's records (partials, the clock's book, a
  key's atoms, a capped key's panes, their messages). Accumulators are laid out as in version 2;
  since issue 47 a settled accumulator under a device bound may also carry ``kept`` in its header's
  ``devices`` (the digest of its kept (device, rank) pairs, two integers); a record without it (written
  before) reads as the empty digest, 0. Only a batch run's release ledger reads the digest, from
  accumulators the same run settled, never from restored state. Since issue 48 an open accumulator of a
  channel kind (hadamard, subset) under a device bound names ``wire_bytes`` in its ``devices`` header,
  the width of its kept reports (the kind's wire format, not its virtual bits'); a record without it
  (every record before, all per bit) keeps the counted bits' width. Since issue 48 item 7 a client
  sample's states may be written as a table of its distinct states and an index (``sample_table`` in the
  header: the table's rows; the index uint16 per sampled report): a report's state is a function of its
  bits on the extreme's columns, so a sample holds few distinct states, and this is most of a settled
  accumulator's bytes otherwise. It decodes to the same states, bit for bit; a record without it (every
  record before) holds the states in full.

Under ``privacy.unit: device`` an accumulator's ``devices`` header names its ``rank_rule``
(:data:`~ldp_marginals.ldp.devices.RANK_RULE`) and an open one's tail holds each device's ceiling:
a state without them ranked reports by their bits, and is refused (``ValueError`` naming the change)
rather than merged with ranks of event times; so is its shape (``rank_rule`` in
:func:`~ldp_marginals.ldp.aggregate.accumulator_shape`) where a resumed job compares it.

An accumulator's header holds the shape it was written for (counted sets, extremes), so it decodes
on its own (:func:`accumulator_from_bytes` without an aggregator, as a Beam coder must) or against a
configuration, which refuses another shape naming what changed.
"""
from __future__ import annotations

import json
import pickle
import struct

import numpy as np

from ldp_marginals.ldp import _compiled
from ldp_marginals.ldp.aggregate import STATE_WIDTH, WindowAccumulator, accumulator_shape
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.devices import RANK_RULE, RANK_RULE_CHANGED, DeviceTable
from ldp_marginals.ldp.sets import family_from_spec

VERSION = 4
FIRST_RECORD_VERSION = 2   # the first version that wrote records (magic, version, header)
HEAD = struct.Struct("<4sBI")   # magic, version, length of the JSON header
LENGTH = struct.Struct("<I")    # the length prefix of a nested record
ACCUMULATOR = b"LDPA"


def pack(magic: bytes, header: dict, tail=b"") -> bytes:
    """A record of this release: ``magic``, :data:`VERSION`, the JSON ``header``, then ``tail`` (bytes,
    or a list of bytes-like parts written one after the other)."""
    text = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([HEAD.pack(magic, VERSION, len(text)), text, *(tail if isinstance(tail, list) else [tail])])


def packed_size(header: dict, tail_size: int) -> int:
    """The length of :func:`pack`'s record of ``header`` and a tail of ``tail_size`` bytes."""
    return HEAD.size + len(json.dumps(header, separators=(",", ":")).encode()) + tail_size


def unpack(magic: bytes, data: bytes) -> tuple | None:
    """``(version, header, tail)`` of a record of kind ``magic``, or None when ``data`` does not start
    with it (a version-1 pickle); ``ValueError`` for a record of a newer release."""
    if data[:4] != magic:
        return None
    _, version, size = HEAD.unpack_from(data)
    if version > VERSION:
        raise ValueError(f"state version must be <= {VERSION} (this code), got version={version}: the state was "
                         "written by a newer release")
    if version < FIRST_RECORD_VERSION:
        raise ValueError(f"state version must be >= {FIRST_RECORD_VERSION} for a record {magic.decode()} (version 1 "
                         f"wrote pickles, without a magic), got version={version}: the state is damaged")
    start = HEAD.size
    return version, json.loads(data[start:start + size]), memoryview(data)[start + size:]


def join(records) -> bytes:
    """Records (bytes) one after the other, each prefixed by its length: a record's tail of records."""
    return b"".join(LENGTH.pack(len(r)) + r for r in records)


def split(tail) -> list:
    """The records :func:`join` wrote."""
    out, at, data = [], 0, memoryview(tail)
    while at < len(data):
        (size,) = LENGTH.unpack_from(data, at)
        at += LENGTH.size
        out.append(bytes(data[at:at + size]))
        at += size
    if at != len(data):
        raise ValueError(f"records must fill their tail exactly, got {len(data)} bytes for {at}")
    return out


# -- accumulators ------------------------------------------------------------------------------------

def accumulator_to_bytes(acc: WindowAccumulator, aggregator=None) -> bytes:
    """``acc`` as a record: a JSON header (its shape, array sizes), then the arrays little-endian
    (counts int64, extreme sums float64, client keys uint64, client states float64). The shape is the
    aggregator's when given, else read from ``acc`` (its counted sets and numbers of extremes, with
    the extremes' operations and bits unknown)."""
    header, parts = _accumulator_parts(acc, aggregator)
    return pack(ACCUMULATOR, header, parts)


def accumulator_size(acc: WindowAccumulator) -> int:
    """``len(accumulator_to_bytes(acc))``, without writing the arrays (a coder's size estimate)."""
    header, parts = _accumulator_parts(acc)
    return packed_size(header, sum(p.nbytes for p in parts))


def _accumulator_parts(acc: WindowAccumulator, aggregator=None) -> tuple:
    """``(header, arrays)`` of :func:`accumulator_to_bytes`: the arrays little-endian and contiguous,
    copied only where their type or layout is not already that."""
    shape = accumulator_shape(aggregator) if aggregator is not None else _shape_of(acc)
    header = {"shape": shape, "n_sets": int(acc.cooc.counts.size), "n_clients": acc.n_clients}
    parts = [_le(acc.cooc.counts, "<i8"), _le(acc.extreme_sums, "<f8"), _le(acc.clients, "<u8"),
             _le(acc.client_states, "<f8")]
    if acc.sample_owner.size:
        # a client sample (reports_per_client): each client's c + 1 reports of smallest rank, a state each
        header["n_sample"] = int(acc.sample_owner.size)
    t = acc.devices
    if t is not None or acc.used_devices.size or acc.device_count or acc.over_bound or acc.kept.any():
        # privacy.unit: device: the settled counts, the devices the slice's released atoms used, and
        # (an open accumulator) each device's kept candidates
        header["devices"] = dict(rank_rule=RANK_RULE, device_count=int(acc.device_count),
                                 over_bound=int(acc.over_bound),
                                 open=t is not None, n_devices=0 if t is None else int(t.devices.size),
                                 n_candidates=0 if t is None else int(t.kept), n_used=int(acc.used_devices.size))
        if acc.kept.any():   # written only when not empty: a record of before issue 47 writes the same bytes
            header["devices"]["kept"] = [int(x) for x in acc.kept]
        if t is not None and t.bits.shape[1] != (acc.cooc.family.n_bits + 7) // 8:
            # a channel kind's open table keeps its wire bytes, not its virtual bits' (absent: per bit)
            header["devices"]["wire_bytes"] = int(t.bits.shape[1])
        parts += [_le(acc.used_devices, "<u8"), _le(acc.used_counts, "<i8")]
        if t is not None:
            parts += [_le(t.devices, "<u8"), _le(t.seen, "<i8"), _le(t.ceiling, "<u8"), _le(t.owner, "<u8"),
                      _le(t.rank, "<u8"), _le(t.bits, "u1")]
    if acc.sample_owner.size:
        parts += [_le(acc.sample_owner, "<u8"), _le(acc.sample_rank, "<u8")]
        table, index = state_table(acc.sample_states)
        if table is None or table.nbytes + 2 * index.size >= acc.sample_states.nbytes:   # in full: no smaller
            parts.append(_le(acc.sample_states, "<f8"))
        else:
            header["sample_table"] = int(table.shape[0])
            parts += [_le(table, "<f8"), _le(index, "<u2")]
    return header, parts


_TABLE_MAX = 1 << 16   # an index is uint16


def state_table(states: np.ndarray) -> tuple:
    """``(table, index)`` with ``table[index]`` equal to ``states`` bit for bit (float64 rows, one per
    sampled report; the table's rows distinct, in order of first occurrence, the index uint16), or
    ``(None, None)`` when there are more than 2^16 distinct rows. Rows are equal when their bits are:
    one compiled pass when numba is installed, else a sort of the rows' bytes (the same result)."""
    last = _LAST_TABLE
    if last is not None and last[0] is states:   # a coder sizes a record, then writes it: one table
        return last[1], last[2]
    table, index = _state_table(states)
    globals()["_LAST_TABLE"] = (states, table, index)   # sample states are replaced, never written in place
    return table, index


_LAST_TABLE = None   # (states, table, index) of the last call of state_table


def _state_table(states: np.ndarray) -> tuple:
    n = states.shape[0]
    rows = np.ascontiguousarray(states, dtype=np.float64).reshape(n, -1)
    if n == 0 or rows.shape[1] == 0:
        return None, None
    words = rows.view(np.uint64)
    if _compiled.AVAILABLE:
        first, index = _compiled.distinct_rows(words, _TABLE_MAX)
        if first.size == 0:
            return None, None
    else:
        _, first, index = np.unique(words.view(np.dtype((np.void, words.shape[1] * 8))).reshape(-1),
                                    return_index=True, return_inverse=True)
        if first.size > _TABLE_MAX:
            return None, None
        order = np.argsort(first)   # in order of first occurrence, as the compiled pass
        renumber = np.empty_like(order)
        renumber[order] = np.arange(order.size)
        first, index = first[order], renumber[index.reshape(-1)]
    return rows[first], index.astype(np.uint16)


def _le(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` as ``dtype`` (little-endian) in C order, whose buffer is its bytes: ``array`` itself
    where it already is that."""
    return np.ascontiguousarray(array, dtype=dtype)


def accumulator_from_bytes(data: bytes, aggregator=None) -> WindowAccumulator:
    """An accumulator written by :func:`accumulator_to_bytes` (any version, including version 1's
    pickle). With ``aggregator``, the state must have been written for its shape (``ValueError``
    naming both otherwise: a config change that alters the state's shape); without, it is built from
    the shape in its header."""
    data = bytes(data)
    parsed = unpack(ACCUMULATOR, data)
    if parsed is None:   # version 1: a pickled WindowAccumulator (positional tuple)
        acc = pickle.loads(data)
        return checked_accumulator(acc, aggregator) if aggregator is not None else acc
    _, header, tail = parsed
    shape = header["shape"]
    if aggregator is not None:
        check_shape(shape, aggregator)
        acc = aggregator.create()
    else:
        family = family_from_spec(shape["n_bits"], shape["max_order"], tuple(tuple(s) for s in shape["extra"]))
        acc = WindowAccumulator(CooccurrenceAccumulator(family), _count(shape, "extremes"),
                                shape.get("client_state_rows", _count(shape, "client_extremes")))
    n_sets, k = header["n_sets"], header["n_clients"]
    n_ext, n_cext = acc.extreme_sums.shape[0], acc.client_states.shape[1]
    layout = [("<i8", n_sets), ("<f8", n_ext * 2), ("<u8", k), ("<f8", k * n_cext * STATE_WIDTH)]
    dev = header.get("devices")
    n_bytes = (acc.cooc.family.n_bits + 7) // 8
    if dev is not None:
        n_bytes = dev.get("wire_bytes", n_bytes)   # a channel kind's wire (absent: per bit, as before)
        if dev["open"] and dev.get("rank_rule") != RANK_RULE:
            raise ValueError(RANK_RULE_CHANGED)
        layout += [("<u8", dev["n_used"]), ("<i8", dev["n_used"])]
        if dev["open"]:
            n_dev, n_cand = dev["n_devices"], dev["n_candidates"]
            layout += [("<u8", n_dev), ("<i8", n_dev), ("<u8", n_dev), ("<u8", n_cand), ("<u8", n_cand),
                       ("u1", n_cand * n_bytes)]
    n_sample = header.get("n_sample", 0)   # absent before client samples (and when empty)
    n_table = header.get("sample_table")    # absent: the sample's states in full
    if n_sample:
        layout += [("<u8", n_sample), ("<u8", n_sample)]
        layout += ([("<f8", n_sample * n_cext * STATE_WIDTH)] if n_table is None
                   else [("<f8", n_table * n_cext * STATE_WIDTH), ("<u2", n_sample)])
    arrays, at = [], 0
    for dtype, count in layout:
        arrays.append(np.frombuffer(tail, dtype=dtype, count=count, offset=at).copy())
        at += count * np.dtype(dtype).itemsize
    if at != len(tail):
        raise ValueError(f"state must be {len(data) - len(tail) + at} bytes for its header, got {len(data)}")
    if arrays[0].size != len(acc.cooc.family):
        raise ValueError(f"state must hold {len(acc.cooc.family)} counts for its shape, got {arrays[0].size}")
    acc.cooc.counts = arrays[0]
    acc.extreme_sums = arrays[1].reshape(n_ext, 2)
    acc.clients = arrays[2].astype(np.uint64)
    acc.client_states = arrays[3].reshape(k, n_cext, STATE_WIDTH)
    if dev is not None:
        acc.device_count, acc.over_bound = dev["device_count"], dev["over_bound"]
        acc.kept = np.array(dev.get("kept", [0, 0]), dtype=np.uint64)   # absent before issue 47: empty
        acc.used_devices, acc.used_counts = arrays[4].astype(np.uint64), arrays[5].astype(np.int64)
        if dev["open"]:
            t = acc.devices = DeviceTable(n_bytes)
            t.devices, t.seen, t.ceiling = (arrays[6].astype(np.uint64), arrays[7].astype(np.int64),
                                            arrays[8].astype(np.uint64))
            t.owner, t.rank = arrays[9].astype(np.uint64), arrays[10].astype(np.uint64)
            t.bits = arrays[11].reshape(dev["n_candidates"], n_bytes)
    if n_sample:
        if n_table is None:
            owner, rank, states = arrays[-3:]
        else:
            owner, rank, table, index = arrays[-4:]
            states = table.reshape(n_table, -1)[index]
        acc.sample_owner, acc.sample_rank = owner.astype(np.uint64), rank.astype(np.uint64)
        acc.sample_states = states.reshape(n_sample, n_cext, STATE_WIDTH)
    return acc


def _count(shape: dict, name: str) -> int:
    """The number of extremes of a shape (a list of them, or version 1's ``n_<name>``)."""
    return len(shape[name]) if name in shape else int(shape[f"n_{name}"])


def checked_accumulator(acc, aggregator) -> WindowAccumulator:
    """``acc`` (unpickled from a state of version 1) if it fits ``aggregator``, else ``ValueError``."""
    if not isinstance(acc, WindowAccumulator):
        raise ValueError(f"state must be a window accumulator, got {type(acc).__name__}")
    check_shape(_shape_of(acc), aggregator)
    return acc


def _shape_of(acc: WindowAccumulator) -> dict:
    fam = acc.cooc.family
    return {"n_bits": fam.n_bits, "max_order": fam.max_order, "extra": [list(s) for s in fam.extra],
            "n_extremes": int(acc.extreme_sums.shape[0]), "n_client_extremes": int(acc.client_states.shape[1])}


def check_shape(shape: dict, aggregator) -> None:
    """``ValueError`` naming what changed unless a state of ``shape`` fits ``aggregator`` (a shape that
    records only the numbers of extremes is compared on those)."""
    want = accumulator_shape(aggregator)
    if "extremes" not in shape:   # version 1, or a shape read from an accumulator: the numbers of extremes
        want = dict({k: want[k] for k in ("n_bits", "max_order", "extra")},
                    n_extremes=len(want["extremes"]),
                    n_client_extremes=want.get("client_state_rows", len(want["client_extremes"])))
    if shape != want and "max_reports_per_device" in want and shape.get("rank_rule") != want.get("rank_rule"):
        raise ValueError(f"{RANK_RULE_CHANGED} (rank_rule changed: saved rank_rule={shape.get('rank_rule')!r}; "
                         f"this release has rank_rule={want['rank_rule']!r})")
    if shape != want:
        raise ValueError(f"the saved state was written for another collection shape ({shape_changes(shape, want)}); "
                         "start without the savepoint, or with the config that wrote it")


def shape_changes(saved: dict, want: dict) -> str:
    """What differs between two shapes (of :func:`~ldp_marginals.ldp.aggregate.accumulator_shape`, or any
    flat dict), for an error: ``"max_order changed: saved max_order=2; this config has max_order=3"``;
    empty if nothing does."""
    changed = sorted(k for k in set(want) | set(saved) if saved.get(k) != want.get(k))
    if not changed:
        return ""
    return (f"{', '.join(changed)} changed: saved {', '.join(f'{k}={saved.get(k)!r}' for k in changed)}; "
            f"this config has {', '.join(f'{k}={want.get(k)!r}' for k in changed)}")
