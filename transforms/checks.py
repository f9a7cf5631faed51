"""The checks a report of a known collection passes before it is counted: one ordered table, run by
every reader on a *view* of its reports (Beam-free).

Two views implement the same few columns: :class:`BlockView`, the rows of one collection in a
decoded Avro block (vectorized, the batch and message paths), and :class:`RecordView`, one record
dict that already has the contract's types (the per-record path; a record of the wrong shape is a
``bad_field`` or ``bad_timestamp`` dead letter before it gets here, see
:func:`~ldp_marginals.transforms.screening.record_view`). :func:`screen` runs :data:`CHECKS` in order on
the rows still passing, so a report's first fault, its reason and its detail are the same whichever
reader found it.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ldp_marginals import schemas
from ldp_marginals.ldp._kernels import span_hashes
from ldp_marginals.ldp.encoding import padding_mask
from ldp_marginals.ldp.windows import MAX_EVENT_MS, MIN_EVENT_MS
from ldp_marginals.schemas.collection import NAME_PATTERN
from ldp_marginals.schemas.dead_letters import (
    BAD_COEFFICIENT, BAD_FIELD, BAD_SUBSET, BAD_TIMESTAMP, NO_DEVICE_TOKEN, PADDING_BITS, WRONG_LENGTH,
)
from ldp_marginals.transforms.avro_kernels import (
    BITS_LEN,
    BITS_OFF,
    CLIENT_LEN,
    CLIENT_OFF,
    EVENT_MS,
    RECORD_END,
    RECORD_START,
    gather_bytes,
)
from ldp_marginals.transforms.avro_messages import MessageBlock

MAX_CLIENT_LENGTH = 128  # characters of a client token (a pseudonymous id, not a payload)


def time_detail(event) -> str:
    return f"event_time {event} is outside [1970, 2100)"


def length_detail(name: str, got: int, n_bits: int, n_bytes: int) -> str:
    return f"{got} bytes, the layout of {name!r} has {n_bits} bits = {n_bytes} bytes"


def padding_detail(n_bits: int) -> str:
    return f"a bit past bit {n_bits - 1} is set"


def coefficient_detail(cfg) -> str:
    return (f"a slot names no coefficient of collection {cfg.name!r} (channel kind hadamard: indices 1.."
            f"{cfg.sampling.n_coefficients})")


def subset_detail(cfg) -> str:
    return (f"the subset mask does not hold {cfg.sampling.width} of the {cfg.sampling.n_bits} bits of collection "
            f"{cfg.name!r} (channel kind subset)")


def collection_detail(name) -> str:
    """Never names the collection: a name no config has is the report's string, not the config's (it
    reaches the collector's answers and the dead letters)."""
    return f"no config for a collection name of {len(name):,} characters" if isinstance(name, str) else \
        "no config for the collection"


def client_detail(length: int) -> str:
    return f"client has {length:,} characters, over {MAX_CLIENT_LENGTH}"


def keeps_clients(cfg) -> bool:
    """Whether the job reads a report's client token for ``cfg``: for extremes over clients, or as the
    device token of a collection that bounds devices (privacy.unit device, or report with a device bound or
    memoized channels; elsewhere it is dropped at the door)."""
    return bool(cfg.client_extremes) or cfg.device is not None


NO_TOKEN_DETAIL = ("the collection bounds devices (privacy.unit 'device', or 'report' with a device bound or memoized "
                   "channels) and the report has no device token (client)")


class Check(NamedTuple):
    """One check: ``failing(view, alive)`` marks the rows (of those still ``alive``) that fail it;
    ``reason(view, i)`` and ``detail(view, i)`` say why for row i."""

    failing: Callable
    reason: Callable
    detail: Callable


def _fixed(reason: str) -> Callable:
    return lambda view, i: reason


CHECKS = (
    Check(lambda v, alive: (v.event_ms < MIN_EVENT_MS) | (v.event_ms >= MAX_EVENT_MS),
          _fixed(BAD_TIMESTAMP), lambda v, i: time_detail(int(v.event_ms[i]))),
    Check(lambda v, alive: v.bits_len != v.cfg.wire.n_bytes, _fixed(WRONG_LENGTH),
          lambda v, i: length_detail(v.cfg.name, int(v.bits_len[i]), v.cfg.wire.n_bits, v.cfg.wire.n_bytes)),
    Check(lambda v, alive: v.padded(alive), _fixed(PADDING_BITS), lambda v, i: padding_detail(v.cfg.wire.n_bits)),
    Check(lambda v, alive: v.bad_coefficient(alive), _fixed(BAD_COEFFICIENT),
          lambda v, i: coefficient_detail(v.cfg)),
    Check(lambda v, alive: v.bad_subset(alive), _fixed(BAD_SUBSET), lambda v, i: subset_detail(v.cfg)),
    Check(lambda v, alive: v.dimension_faulty(alive), lambda v, i: v.dimension_fault(i)[0],
          lambda v, i: v.dimension_fault(i)[1]),
    Check(lambda v, alive: v.client_too_long(alive), _fixed(BAD_FIELD), lambda v, i: client_detail(v.client_chars(i))),
    Check(lambda v, alive: v.no_device_token(alive), _fixed(NO_DEVICE_TOKEN), lambda v, i: NO_TOKEN_DETAIL),
)


def screen(view) -> tuple:
    """``(passed, faults)``: a mask of the view's rows that pass every check, and ``(row, reason,
    detail)`` of the first failed check of every other row, checks in :data:`CHECKS` order."""
    alive = np.ones(view.n, dtype=bool)
    faults = []
    for check in CHECKS:
        if not alive.any():
            break
        bad = np.asarray(check.failing(view, alive), dtype=bool) & alive
        faults += [(int(i), check.reason(view, i), check.detail(view, i)) for i in np.flatnonzero(bad)]
        alive &= ~bad
    return alive, faults


class BlockView:
    """The rows ``rows`` of one collection (config ``cfg``) in a decoded block. ``dims_ids`` gives each
    block row's distinct dimension map and ``dims_of`` the maps, decoded once each."""

    def __init__(self, block, rows: np.ndarray, cfg, dims_ids: np.ndarray, dims_of: list):
        f = block.fields
        self.block, self.rows, self.cfg = block, rows, cfg
        self.n = rows.size
        self.event_ms = f[rows, EVENT_MS]
        self.bits_len = f[rows, BITS_LEN]
        self._dims_ids, self._dims_of = dims_ids[rows], dims_of
        self._faults = {}

    def packed(self, mask: np.ndarray) -> np.ndarray:
        """The bits of the masked rows (all of the layout's length) as a contiguous (n, n_bytes) array."""
        return gather_bytes(self.block.buf, self.block.fields[self.rows[mask], BITS_OFF], self.cfg.wire.n_bytes)

    def padded(self, alive: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        out[alive] = padding_mask(self.packed(alive), self.cfg.wire.n_bits)
        return out

    def bad_coefficient(self, alive: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        if self.cfg.channel_kind == "hadamard":
            out[alive] = self.cfg.wire.bad_index(self.packed(alive))
        return out

    def bad_subset(self, alive: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        if self.cfg.channel_kind == "subset":
            out[alive] = self.cfg.wire.bad_subset(self.packed(alive))
        return out

    def dimension_faulty(self, alive: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        for did in np.unique(self._dims_ids[alive]):   # each distinct dimension map is checked once
            fault = self.cfg.dimension_fault(self._dims_of[did])
            if fault:
                self._faults[int(did)] = fault
                out |= alive & (self._dims_ids == did)
        return out

    def dimension_fault(self, i: int) -> tuple:
        return self._faults[int(self._dims_ids[i])]

    def client_too_long(self, alive: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        if not keeps_clients(self.cfg):   # elsewhere a client token is dropped at the door
            return out
        f = self.block.fields
        # only tokens of more bytes than the limit can have more characters: only those are decoded
        for j in np.flatnonzero(alive & (f[self.rows, CLIENT_LEN] > MAX_CLIENT_LENGTH)):
            out[j] = self.client_chars(j) > MAX_CLIENT_LENGTH
        return out

    def no_device_token(self, alive: np.ndarray) -> np.ndarray:
        """Under the device unit, rows without a token (null or empty)."""
        if self.cfg.device is None:
            return np.zeros(self.n, dtype=bool)
        return self.block.fields[self.rows, CLIENT_LEN] <= 0

    def client_chars(self, i: int) -> int:
        f = self.block.fields[self.rows[i]]
        return len(self.block.text(f[CLIENT_OFF], f[CLIENT_LEN]))

    def clients(self, mask: np.ndarray) -> tuple:
        """``(keys, named)`` of the masked rows: each client key
        (:func:`~ldp_marginals.ldp.aggregate.client_key`, hashed by the compiled pass over the token's
        bytes) and whether the row names a client."""
        f = self.block.fields
        rows = self.rows[mask]
        keys = span_hashes(self.block.buf, np.ascontiguousarray(f[rows, CLIENT_OFF]),
                           np.ascontiguousarray(np.maximum(f[rows, CLIENT_LEN], 0)))
        return keys, f[rows, CLIENT_LEN] >= 0

    def dims_ids(self, mask: np.ndarray) -> np.ndarray:
        return self._dims_ids[mask]


class RecordView:
    """One record dict of the contract's types (collection known, ``cfg`` its config)."""

    n = 1

    def __init__(self, record: dict, event_ms: int, cfg):
        self.record, self.cfg = record, cfg
        self.event_ms = np.array([event_ms], dtype=np.int64)
        self.bits_len = np.array([len(record["bits"])], dtype=np.int64)
        self._fault = None

    def _bits(self) -> np.ndarray:
        return np.frombuffer(bytes(self.record["bits"]), dtype=np.uint8).reshape(1, -1)

    def padded(self, alive: np.ndarray) -> np.ndarray:
        return padding_mask(self._bits(), self.cfg.wire.n_bits)

    def bad_coefficient(self, alive: np.ndarray) -> np.ndarray:
        if self.cfg.channel_kind != "hadamard":
            return np.zeros(1, dtype=bool)
        return self.cfg.wire.bad_index(self._bits())

    def bad_subset(self, alive: np.ndarray) -> np.ndarray:
        if self.cfg.channel_kind != "subset":
            return np.zeros(1, dtype=bool)
        return self.cfg.wire.bad_subset(self._bits())

    def dimension_faulty(self, alive: np.ndarray) -> np.ndarray:
        self._fault = self.cfg.dimension_fault(self.record.get("dimensions") or {})
        return np.array([self._fault is not None])

    def dimension_fault(self, i: int) -> tuple:
        return self._fault

    def client_too_long(self, alive: np.ndarray) -> np.ndarray:
        client = self.record.get("client")
        return np.array([bool(keeps_clients(self.cfg) and client is not None and len(client) > MAX_CLIENT_LENGTH)])

    def no_device_token(self, alive: np.ndarray) -> np.ndarray:
        return np.array([self.cfg.device is not None and not self.record.get("client")])

    def client_chars(self, i: int) -> int:
        return len(self.record["client"])


def block_meta(block, i: int, configs: dict) -> dict:
    """:func:`report_meta` of row i of a decoded block, from its decoded fields where they decode (no
    bits, no token); the record's length when it is a single-report message."""
    if block.fields is None:   # another writer schema's record that does not decode: nothing else is known
        return {}
    f = block.fields[i]
    length = int(f[RECORD_END] - f[RECORD_START]) if isinstance(block, MessageBlock) else None
    try:
        return report_meta(block.record(i), configs, length)
    except (UnicodeDecodeError, ValueError):   # strings that do not decode: the numbers only
        meta = {"record_length": length, "bits_length": int(f[BITS_LEN])}
        if MIN_EVENT_MS <= f[EVENT_MS] < MAX_EVENT_MS:
            meta["event_time"] = int(f[EVENT_MS])
        if f[CLIENT_LEN] >= 0:
            meta["client_length"] = int(f[CLIENT_LEN])
        return meta


def report_meta(record, configs: dict | None = None, record_length: int | None = None) -> dict:
    """What a dead letter may say of a report (a dict as decoded, possibly malformed): the collection
    if a config has that name (with ``configs`` None: if it has the allowed form), the event time if it is an in-range int, the dimensions that
    its collection declares (within their ``max_length``), and the lengths of its bits, client token
    and raw record. Never the bits, the token or an undeclared dimension."""
    meta = {"record_length": record_length}
    if not isinstance(record, dict):
        return meta
    name = record.get("collection")
    if isinstance(name, str) and NAME_PATTERN.match(name) and (configs is None or name in configs):
        meta["collection"] = name   # a name no config has is the report's string: never written
    event = schemas._to_millis(record.get("event_time"))
    if isinstance(event, int) and not isinstance(event, bool) and MIN_EVENT_MS <= event < MAX_EVENT_MS:
        meta["event_time"] = event
    bits, client = record.get("bits"), record.get("client")
    if isinstance(bits, (bytes, bytearray)):
        meta["bits_length"] = len(bits)
    if isinstance(client, str):
        meta["client_length"] = len(client)
    cfg = (configs or {}).get(meta.get("collection"))
    dims = record.get("dimensions")
    if cfg is not None and isinstance(dims, dict):
        limits = cfg.dimension_limits
        meta["dimensions"] = {k: v for k, v in dims.items() if k in limits and isinstance(v, str)
                              and len(v) <= limits[k].max_length}
    return meta
