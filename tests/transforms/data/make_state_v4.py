"""Writes state_v4.bin and state_v4.json: every record the job keeps or moves, as written by the release
that introduced state version 4 (one header and one version for every record, the keyed publication's
state and messages), and what each holds. Kept in the repository; later releases must read the .bin to
what the .json says (tests/transforms/test_engine_state.py). Not to be run again once committed:

    python -m tests.transforms.data.make_state_v4
"""
from __future__ import annotations

import json
import math
import pathlib

import numpy as np

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.key_table import KeyTable
from ldp_marginals.ldp.versioned import accumulator_to_bytes, join
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.coders import partial_to_bytes
from ldp_marginals.transforms.publication import state
from ldp_marginals.transforms.publication.atoms import KeyStatus
from ldp_marginals.transforms.publication.clock import Book, ClockStatus, WindowBook
from ldp_marginals.transforms.publication.engine import Entry
from ldp_marginals.transforms.publication.messages import Arrival, Command, Contribution, Drop, Expect, Weight
from ldp_marginals.transforms.publication.panes import PaneState, PanesStatus
from ldp_marginals.transforms.source import Partial
from tests.configs import SMALL_CONFIG

HERE = pathlib.Path(__file__).parent
EU, OTHER = (("region", "eu"),), (("region", "__other__"),)
W = (1767225600000, 1767229200000)


def accumulator(cfg):
    """Six reports of known bits, four of them from clients c0 and c1 (two each)."""
    agg = cfg.aggregator
    packed = np.array([[0b000001], [0b100011], [0b010101], [0b111111], [0b000000], [0b101010]], dtype=np.uint8)
    keys = np.array([client_key(t) for t in ("c0", "c0", "c1", "c1", "x", "x")], dtype=np.uint64)
    return agg.add_packed(agg.create(), packed, keys, np.array([True, True, True, True, False, False]))


def records(cfg) -> list:
    """``[(what, record bytes)]``, one of each kind."""
    agg = cfg.aggregator
    acc = accumulator(cfg)
    book = Book(7, {W: WindowBook({"region": {"eu": 6, "us": 2}}, {"region": {"eu": True, "us": False}},
                                  {EU: EU, (("region", "us"),): OTHER})},
                {EU: ["p9"]}, {EU: 7, (("region", "us"),): 6}, {EU: 7, OTHER: 6})
    return [
        ("accumulator", accumulator_to_bytes(acc, agg)),
        ("entry", state.entry_to_bytes(Entry(W[0], EU, 1, acc), agg)),
        ("partial", partial_to_bytes(Partial("app", EU, acc))),
        ("weight", state.message_to_bytes(Weight("p1", EU, W[0], 6))),
        ("arrival", state.message_to_bytes(Arrival("p1", W[0], acc), agg)),
        ("drop", state.message_to_bytes(Drop("p2"))),
        ("command", state.message_to_bytes(Command(7, 5, W, "on_time", False, EU, ("p1", "p3")))),
        ("expect", state.message_to_bytes(Expect(7, 5, W, "closed", True, (EU, (("region", "us"),))))),
        ("contribution", state.message_to_bytes(Contribution(7, EU, W, ((W[0], 0, acc), (W[0], 1, acc)), 3), agg)),
        ("clock", state.clock_to_bytes(ClockStatus(W[1] * 1000 - 1, {W: [True, False]}, True))),
        ("book", state.book_to_bytes(book)),
        ("key", state.key_to_bytes(KeyStatus(7, {W: EU}, {(EU, W[0], 0), (EU, W[0], 1)}, {"p3"}))),
        ("panes", state.panes_to_bytes(PanesStatus(7, {W: PaneState(2, 6, {EU, (("region", "us"),)}, 3)},
                                                   {(8, EU)}))),
    ]


def describe(value):
    """A JSON rendering of a decoded record: accumulators as their arrays (NaN as null), other arrays as
    lists, key tables by column, named tuples and dataclasses by field, sets sorted."""
    if hasattr(value, "cooc"):
        return {"counts": value.cooc.counts.tolist(), "extreme_sums": value.extreme_sums.tolist(),
                "clients": [int(c) for c in value.clients],
                "client_states": [[[None if math.isnan(x) else x for x in row] for row in c]
                                  for c in value.client_states.tolist()]}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, KeyTable):
        return {f: getattr(value, f).tolist() for f in KeyTable.__slots__}
    if hasattr(value, "_fields"):
        return {f: describe(getattr(value, f)) for f in value._fields}
    if hasattr(value, "__dataclass_fields__"):
        return {f: describe(getattr(value, f)) for f in value.__dataclass_fields__}
    if isinstance(value, dict):
        return sorted([describe(k), describe(v)] for k, v in value.items())
    if isinstance(value, (set, frozenset)):
        return sorted(describe(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    return value


def main():
    cfg = parse_config(SMALL_CONFIG)
    made = records(cfg)
    (HERE / "state_v4.bin").write_bytes(join(data for _, data in made))
    decoded = [(what, describe(read(what, data, cfg))) for what, data in made]
    (HERE / "state_v4.json").write_text(json.dumps({"records": [what for what, _ in made],
                                                    "decoded": dict(decoded)}, indent=1) + "\n")


def read(what: str, data: bytes, cfg):
    """A record of ``what`` decoded by this release's readers (the test calls the same)."""
    from ldp_marginals.ldp.versioned import accumulator_from_bytes
    from ldp_marginals.transforms.coders import partial_from_bytes
    agg = cfg.aggregator
    readers = {"accumulator": lambda d: accumulator_from_bytes(d, agg), "entry": lambda d: state.entry_from_bytes(d, agg),
               "partial": partial_from_bytes, "clock": state.clock_from_bytes, "book": state.book_from_bytes,
               "key": state.key_from_bytes, "panes": state.panes_from_bytes}
    return readers.get(what, lambda d: state.message_from_bytes(d, agg))(data)


if __name__ == "__main__":
    main()
