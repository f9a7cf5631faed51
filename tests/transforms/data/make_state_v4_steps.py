"""Writes state_v4_steps.bin and state_v4_steps.json: the records of the two streaming steps that came
after state_v4.bin was written, still state version 4: the slice step of the bound on keys
(transforms/publication/slices.py: ``LDPU`` device keys, ``LDPJ`` accept, ``LDPT`` kept, ``LDPS`` a
slice's status, ``LDPG`` its key table; and the clock's book under ``privacy.unit: device`` with
dimensions, a ``KeyBook``, ``LDPB`` with its slices) and the rollups step
(transforms/publication/rollup_panes.py: ``LDPO`` part, ``LDPV`` expect, ``LDPZ`` status), one of each,
and what each holds. Kept in the repository; later releases must read the .bin to what the .json says
(tests/transforms/test_engine_state.py). Not to be run again once committed:

    python -m tests.transforms.data.make_state_v4_steps
"""
from __future__ import annotations

import json
import pathlib

import numpy as np

from ldp_marginals.ldp.devices import key_id
from ldp_marginals.ldp.key_table import KeyTable, key_table, merge_key_tables
from ldp_marginals.ldp.versioned import join
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication import rollup_panes, slices, state
from ldp_marginals.transforms.publication.clock import KeyBook, WindowBook
from tests.configs import SMALL_CONFIG
from tests.transforms.data import make_state_v4
from tests.transforms.data.make_state_v4 import EU, OTHER, W

HERE = pathlib.Path(__file__).parent
US = (("region", "us"),)
DEVICES = np.array([11, 29, 2**63 + 5, 2**64 - 1], dtype=np.uint64)   # high words too: the bytes are unsigned


def table() -> KeyTable:
    """The key table of a slice whose devices were seen in two keys, bound 1 (each keeps the smaller rank)."""
    return merge_key_tables([key_table(7, key_id(EU), DEVICES, 1), key_table(7, key_id(US), DEVICES[1:], 1)], 1)


def records(cfg) -> list:
    """``[(what, record bytes)]``, one of each kind."""
    acc = make_state_v4.accumulator(cfg)
    book = KeyBook(7, {W: WindowBook({"region": {"eu": 6, "us": 2}}, {"region": {"eu": True, "us": False}},
                                     {EU: EU, US: OTHER}, {US})},
                   {EU: ["p9"]}, {EU: 7, US: 6}, {EU: 7, OTHER: 6}, {W[0]: 3, W[1]: 1})
    status = slices.SliceStatus(2, 5, {EU, US}, {slices.id_hash("p4")}, {slices.id_hash("p5"), slices.id_hash("p6")})
    expect = rollup_panes.RollupExpect(8, W, "on_time", False, 2)
    return [
        ("device_keys", slices.message_to_bytes(slices.DeviceKeys("p1", EU, W[0], DEVICES))),
        ("accept", slices.message_to_bytes(slices.Accept(W[0], ("p1", "p2"), True, 5))),
        ("kept", slices.message_to_bytes(slices.Kept(W[0], DEVICES[[0, 2]]))),
        ("slice", slices.status_to_bytes(status)),
        ("table", slices.table_record(table())),
        ("key_book", state.book_to_bytes(book)),
        ("rollup_part", rollup_panes.message_to_bytes(rollup_panes.RollupPart(7, EU, OTHER, acc, 3), cfg.aggregator)),
        ("rollup_expect", rollup_panes.message_to_bytes(expect)),
        ("rollup_status", rollup_panes.status_to_bytes(rollup_panes.RollupStatus(1, {8: expect}, {8: 1, 9: 2}))),
    ]


READERS = {"slice": slices.status_from_bytes, "table": slices.table_of_record, "key_book": state.book_from_bytes,
           "rollup_status": rollup_panes.status_from_bytes}
WRITERS = {"slice": slices.status_to_bytes, "table": slices.table_record, "key_book": state.book_to_bytes,
           "rollup_status": rollup_panes.status_to_bytes}


def read(what: str, data: bytes, cfg):
    """A record of ``what`` decoded by this release's readers (the test calls the same)."""
    if what.startswith("rollup_") and what != "rollup_status":
        return rollup_panes.message_from_bytes(data, cfg.aggregator)
    return READERS.get(what, slices.message_from_bytes)(data)


def write(what: str, value, cfg) -> bytes:
    """``value`` as this release's writers record it."""
    if what.startswith("rollup_") and what != "rollup_status":
        return rollup_panes.message_to_bytes(value, cfg.aggregator)
    return WRITERS.get(what, slices.message_to_bytes)(value)


def main():
    cfg = parse_config(SMALL_CONFIG)
    made = records(cfg)
    (HERE / "state_v4_steps.bin").write_bytes(join(data for _, data in made))
    decoded = [(what, make_state_v4.describe(read(what, data, cfg))) for what, data in made]
    (HERE / "state_v4_steps.json").write_text(json.dumps({"records": [what for what, _ in made],
                                                          "decoded": dict(decoded)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
