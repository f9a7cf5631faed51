"""Screening reports with the job's one table of checks, without Beam: what every reader of the job
and the collector (:mod:`ldp_marginals.pipelines.collect`) run on the same reports, so that a report
the collector accepts is one the job counts and a report it refuses carries the reason the job's dead
letter would.

:func:`screen_rows` screens a decoded block (a file's, a container's, or single-report messages
decoded together): strings that are not UTF-8, an unknown collection, then the checks of
:data:`~ldp_marginals.transforms.checks.CHECKS`, vectorized per collection. :func:`record_view` is the
per-record path's shape check (a record of another writer schema, or one that the compiled decoder
handed back), before the same table.
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from ldp_marginals import schemas
from ldp_marginals.schemas.dead_letters import BAD_FIELD, BAD_TIMESTAMP, UNDECODABLE, UNKNOWN_COLLECTION
from ldp_marginals.transforms.avro_blocks import distinct_ids
from ldp_marginals.transforms.avro_kernels import COLLECTION_LEN, COLLECTION_OFF, DIMS_END, DIMS_OFF
from ldp_marginals.transforms.checks import BlockView, RecordView, collection_detail, keeps_clients, screen


class Fault(NamedTuple):
    """Row ``row`` of a block fails: its first fault's reason and detail."""

    row: int
    reason: str
    detail: str


class Passed(NamedTuple):
    """The rows of one collection: ``rows`` (block rows), ``passed`` (a mask over them: the rows
    that pass every check), ``view`` (their :class:`~ldp_marginals.transforms.checks.BlockView`)
    and ``dims_of`` (each distinct dimension map of the block, decoded once)."""

    name: str
    cfg: object
    view: BlockView
    rows: np.ndarray
    passed: np.ndarray
    dims_of: list


def _undecodable(block, coll_ids, coll_first, dims_ids, dims_first):
    """Rows whose strings are not UTF-8 (collection, dimension map or client), as the per-record
    path finds them when it builds each record; and each distinct dimension map, decoded once
    (None where it is not UTF-8)."""
    bad = ~block.client_utf8_ok()
    f = block.fields
    for cid, first in enumerate(coll_first):
        try:
            block.text(f[first, COLLECTION_OFF], f[first, COLLECTION_LEN])
        except UnicodeDecodeError:
            bad |= coll_ids == cid
    dims_of = []
    for did, first in enumerate(dims_first):
        try:
            dims_of.append(block.dimensions(int(first)))
        except (UnicodeDecodeError, ValueError):
            dims_of.append(None)
            bad |= dims_ids == did
    return np.flatnonzero(bad), dims_of


def screen_rows(block, configs: dict):
    """The reports of a decoded block (contract writer schema) -> a :class:`Fault` per report that
    fails (strings that are not UTF-8, an unknown collection, then the table's checks in order) and
    a :class:`Passed` per collection with rows that pass, in the block's collection order."""
    f = block.fields
    coll_ids, coll_first = distinct_ids(block, COLLECTION_OFF, length_col=COLLECTION_LEN)
    dims_ids, dims_first = distinct_ids(block, DIMS_OFF, end_col=DIMS_END)
    bad, dims_of = _undecodable(block, coll_ids, coll_first, dims_ids, dims_first)
    if bad.size:
        for i in bad:
            yield Fault(int(i), UNDECODABLE, block.fault(i))
        coll_ids = coll_ids.copy()
        coll_ids[bad] = -1  # screened out of every collection below
    for cid, first in enumerate(coll_first):
        rows = np.flatnonzero(coll_ids == cid)
        if not rows.size:
            continue
        name = block.text(f[first, COLLECTION_OFF], f[first, COLLECTION_LEN])
        cfg = configs.get(name)
        if cfg is None:
            for i in rows:
                yield Fault(int(i), UNKNOWN_COLLECTION, collection_detail(name))
            continue
        view = BlockView(block, rows, cfg, dims_ids, dims_of)
        passed, faults = screen(view)
        for j, reason, detail in faults:
            yield Fault(int(rows[j]), reason, detail)
        if passed.any():
            yield Passed(name, cfg, view, rows, passed, dims_of)


def record_view(record, configs: dict) -> tuple:
    """``(view, reason, detail)``: a :class:`~ldp_marginals.transforms.checks.RecordView` of a record
    of the contract's types and a known collection, or the fault of its shape. Values are checked by
    the shared table afterwards; a detail names types, never a field's value."""
    if not isinstance(record, dict):
        return None, UNDECODABLE, f"expected a record, got {type(record).__name__}"
    name = record.get("collection")
    if not isinstance(name, str):
        return None, BAD_FIELD, f"collection must be a string, got {type(name).__name__}"
    if name not in configs:
        return None, UNKNOWN_COLLECTION, collection_detail(name)
    event = schemas._to_millis(record.get("event_time"))
    if event is None:
        return None, BAD_TIMESTAMP, "event_time is missing"
    if isinstance(event, bool) or not isinstance(event, numbers.Integral):
        return None, BAD_TIMESTAMP, f"event_time must be int millis, got {type(event).__name__}"
    if not isinstance(record.get("bits"), (bytes, bytearray)):
        return None, BAD_FIELD, f"bits must be bytes, got {type(record.get('bits')).__name__}"
    dims = record.get("dimensions") or {}
    if not isinstance(dims, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in dims.items()):
        return None, BAD_FIELD, "dimensions must map strings to strings"
    client = record.get("client")
    if keeps_clients(configs[name]) and client is not None and not isinstance(client, str):
        return None, BAD_FIELD, f"client must be a string or null, got {type(client).__name__}"
    return RecordView(record, int(event), configs[name]), None, None


def screen_record(record, configs: dict) -> tuple:
    """``(view, reason, detail)`` of one record on the per-record path: its view when it passes
    every check (reason None), else its first fault."""
    view, reason, detail = record_view(record, configs)
    if view is not None:
        _, faults = screen(view)
        if faults:
            return None, faults[0][1], faults[0][2]
    return view, reason, detail
