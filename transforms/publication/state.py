"""The publication engine's state and messages as versioned records (:mod:`ldp_marginals.ldp.versioned`:
one header, one version number), so that the state of a running job survives an upgrade of the code (a
Flink savepoint, a Dataflow ``--update``) and what crosses a shuffle is never a positional pickle.

Records by magic: ``LDPE`` an entry (an atom or pending part of one slice and key, with its
accumulator), and the streaming engines' messages (``LDPW`` weight, ``LDPR``
arrival, ``LDPD`` drop, ``LDPC`` command, ``LDPX`` expectation, ``LDPN`` contribution) and states
(``LDPK`` the clock's status, ``LDPB`` its book, ``LDPY`` a key's status, ``LDPQ`` a capped key's
status); under a bound on keys also the slice step's (:mod:`.slices`: ``LDPU`` device keys, ``LDPJ``
accept, ``LDPT`` kept; ``LDPS`` its status, ``LDPG`` its key table), a step only such collections have,
so the layout of every other job is unchanged. Scalars go in the JSON header, accumulators in the tail (:func:`~ldp_marginals.ldp.versioned.join`).

Every function that reads an accumulator takes the collection's aggregator, optional: given, a state
written for another shape (counted sets, extremes) is refused naming what changed; omitted (a Beam
coder, which knows no config), the accumulator is built from the shape its header records.

Entries of earlier versions still load: version 1 was Beam's pickle of a positional tuple, version 2
kept a released flag and merged a slice's released increments into one entry. Such an entry is read as
atom 0 with its clients' report counts unknown (NaN): the client rule cannot tell how the merged
increments split each client's reports, so it withholds the client extremes of a window that holds
one, and says why.
"""
from __future__ import annotations

import pickle

import numpy as np

from ldp_marginals.ldp.aggregate import REPORTS
from ldp_marginals.ldp.versioned import (
    accumulator_from_bytes,
    accumulator_to_bytes,
    checked_accumulator,
    join,
    pack,
    split,
    unpack,
)
from ldp_marginals.transforms.publication import slices
from ldp_marginals.transforms.publication.atoms import KeyStatus
from ldp_marginals.transforms.publication.clock import Book, ClockStatus, KeyBook, WindowBook
from ldp_marginals.transforms.publication.engine import PENDING, Entry
from ldp_marginals.transforms.publication.messages import Arrival, Command, Contribution, Drop, Expect, Weight
from ldp_marginals.transforms.publication.panes import PaneState, PanesStatus

# The layout of a streaming job's state: which steps hold it, under which keys and cells. A savepoint
# restores only into the layout that wrote it (``run --savepoint_path`` refuses another, before submitting).
STATE_LAYOUT = 2
LAYOUTS = {1: "one panes step per collection: entries and window statuses of every key",
           2: "a clock per collection, atoms per key, panes per capped key"}

ENTRY = b"LDPE"
WEIGHT, ARRIVAL, DROP, COMMAND, EXPECT, CONTRIBUTION = b"LDPW", b"LDPR", b"LDPD", b"LDPC", b"LDPX", b"LDPN"
CLOCK, BOOK, KEY, PANES = b"LDPK", b"LDPB", b"LDPY", b"LDPQ"


def _dims(pairs) -> tuple:
    return tuple(tuple(kv) for kv in pairs)


def _window(w) -> tuple:
    return int(w[0]), int(w[1])


def _parsed(magic: bytes, data) -> tuple:
    parsed = unpack(magic, bytes(data))
    if parsed is None:
        raise ValueError(f"state must be a record {magic.decode()}, got one starting {bytes(data[:4])!r}")
    return parsed


# -- entries ------------------------------------------------------------------------------

def entry_to_bytes(entry: Entry, aggregator=None) -> bytes:
    return pack(ENTRY, {"start": entry.start, "dims": [list(kv) for kv in entry.dims], "atom": entry.atom},
                accumulator_to_bytes(entry.acc, aggregator))


def entry_from_bytes(data: bytes, aggregator=None) -> Entry:
    """An entry (any version); with ``aggregator``, ``ValueError`` when it was written for another shape."""
    data = bytes(data)
    parsed = unpack(ENTRY, data)
    if parsed is None:   # version 1: (slice start, dims, released, WindowAccumulator)
        start, dims, released, acc = pickle.loads(data)
        acc = checked_accumulator(acc, aggregator) if aggregator is not None else acc
        return _flagged(int(start), _dims(dims), bool(released), acc)
    _, header, tail = parsed
    start, dims = int(header["start"]), _dims(header["dims"])
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


# -- messages -----------------------------------------------------------------------------------------

def message_to_bytes(message, aggregator=None) -> bytes:
    """Any message of :mod:`.messages` (or of the bound on keys, :mod:`.slices`) as a record."""
    record = slices.message_to_bytes(message)
    if record is not None:
        return record
    if isinstance(message, Weight):
        return pack(WEIGHT, {"id": message.id, "dims": [list(kv) for kv in message.dims], "start": message.start,
                             "n": message.n})
    if isinstance(message, Arrival):
        return pack(ARRIVAL, {"id": message.id, "start": message.start}, accumulator_to_bytes(message.acc, aggregator))
    if isinstance(message, Drop):
        return pack(DROP, {"id": message.id})
    if isinstance(message, Command):
        return pack(COMMAND, {"event": message.event, "prev": message.prev, "window": list(message.window),
                              "timing": message.timing, "final": message.final,
                              "route": [list(kv) for kv in message.route], "ids": list(message.ids)})
    if isinstance(message, Expect):
        return pack(EXPECT, {"event": message.event, "prev": message.prev, "window": list(message.window),
                             "timing": message.timing, "final": message.final,
                             "members": [[list(kv) for kv in d] for d in message.members]})
    if isinstance(message, Contribution):
        return pack(CONTRIBUTION, {"event": message.event, "dims": [list(kv) for kv in message.dims],
                                   "window": list(message.window), "held": message.held,
                                   "atoms": [[start, atom] for start, atom, _ in message.atoms]},
                    join(accumulator_to_bytes(acc, aggregator) for _, _, acc in message.atoms))
    raise ValueError(f"message must be one of the engine's messages, got {type(message).__name__}")


def message_from_bytes(data: bytes, aggregator=None):
    data = bytes(data)
    magic = data[:4]
    message = slices.message_from_bytes(data)
    if message is not None:
        return message
    _, h, tail = _parsed(magic, data)
    if magic == WEIGHT:
        return Weight(h["id"], _dims(h["dims"]), int(h["start"]), int(h["n"]))
    if magic == ARRIVAL:
        return Arrival(h["id"], int(h["start"]), accumulator_from_bytes(tail, aggregator))
    if magic == DROP:
        return Drop(h["id"])
    if magic == COMMAND:
        return Command(h["event"], h["prev"], _window(h["window"]), h["timing"], h["final"], _dims(h["route"]),
                       tuple(h["ids"]))
    if magic == EXPECT:
        return Expect(h["event"], h["prev"], _window(h["window"]), h["timing"], h["final"],
                      tuple(_dims(d) for d in h["members"]))
    if magic == CONTRIBUTION:
        accs = [accumulator_from_bytes(r, aggregator) for r in split(tail)]
        if len(accs) != len(h["atoms"]):
            raise ValueError(f"a contribution must hold one accumulator per atom ({len(h['atoms'])}), got {len(accs)}")
        return Contribution(h["event"], _dims(h["dims"]), _window(h["window"]),
                            tuple((int(s), int(a), acc) for (s, a), acc in zip(h["atoms"], accs)), int(h["held"]))
    raise ValueError(f"message must be a record of the engine's messages, got one starting {magic!r}")


# -- the engines' statuses ----------------------------------------------------------------------------

def clock_to_bytes(status: ClockStatus) -> bytes:
    return pack(CLOCK, {"through_us": status.through_us, "early_set": status.early_set,
                        "windows": [[w[0], w[1], on_time, dirty] for w, (on_time, dirty) in sorted(status.windows.items())]})


def clock_from_bytes(data: bytes) -> ClockStatus:
    _, h, _ = _parsed(CLOCK, data)
    return ClockStatus(int(h["through_us"]), {(w0, w1): [bool(a), bool(b)] for w0, w1, a, b in h["windows"]},
                       bool(h["early_set"]))


def book_to_bytes(book: Book) -> bytes:
    def routes(wb):
        return [[[list(kv) for kv in d], None if r is None else [list(kv) for kv in r]] for d, r in sorted(
            wb.routes.items(), key=lambda kv: kv[0])]
    return pack(BOOK, {
        "event": book.event,
        "windows": [[w[0], w[1], wb.weights, wb.decided, routes(wb), sorted([list(kv) for kv in d] for d in wb.fresh)]
                    for w, wb in sorted(book.windows.items())],
        "ids": [[[list(kv) for kv in d], list(ids)] for d, ids in sorted(book.ids.items())],
        "prev": [[[list(kv) for kv in d], e] for d, e in sorted(book.prev.items())],
        "prev_capped": [[[list(kv) for kv in k], e] for k, e in sorted(book.prev_capped.items())]}
        | ({"slices": sorted([s, n] for s, n in book.slices.items())} if isinstance(book, KeyBook) else {}))


def book_from_bytes(data: bytes) -> Book:
    _, h, _ = _parsed(BOOK, data)
    windows = {}
    for w0, w1, weights, decided, routes, *fresh in h["windows"]:
        routes = {_dims(d): None if r is None else _dims(r) for d, r in routes}
        # a book written before ``fresh`` was kept: every key of the window is commanded at its next event
        windows[(w0, w1)] = WindowBook(weights, decided, routes, {_dims(d) for d in fresh[0]} if fresh else set(routes))
    parts = (h["event"], windows, {_dims(d): list(ids) for d, ids in h["ids"]}, {_dims(d): e for d, e in h["prev"]},
             {_dims(k): e for k, e in h["prev_capped"]})
    if "slices" in h:   # under a bound on keys
        return KeyBook(*parts, {int(s): int(n) for s, n in h["slices"]})
    return Book(*parts)


def key_to_bytes(status: KeyStatus) -> bytes:
    return pack(KEY, {"last": status.last,
                      "windows": [[w[0], w[1], [list(kv) for kv in r]] for w, r in sorted(status.windows.items())],
                      "sent": [[[list(kv) for kv in r], s, a] for r, s, a in sorted(status.sent)],
                      "waiting": sorted(status.waiting)})


def key_from_bytes(data: bytes) -> KeyStatus:
    _, h, _ = _parsed(KEY, data)
    return KeyStatus(h["last"], {(w0, w1): _dims(r) for w0, w1, r in h["windows"]},
                     {(_dims(r), s, a) for r, s, a in h["sent"]}, set(h["waiting"]))


def panes_to_bytes(status: PanesStatus) -> bytes:
    return pack(PANES, {"last": status.last,
                        "windows": [[w[0], w[1], s.panes, s.published, [[list(kv) for kv in d] for d in sorted(s.members)],
                                     s.held] for w, s in sorted(status.windows.items())],
                        "waiting": [[e, [list(kv) for kv in d]] for e, d in sorted(status.waiting)]})


def panes_from_bytes(data: bytes) -> PanesStatus:
    _, h, _ = _parsed(PANES, data)
    return PanesStatus(h["last"], {(w0, w1): PaneState(panes, published, {_dims(d) for d in members}, held)
                                   for w0, w1, panes, published, members, held in h["windows"]},
                       {(e, _dims(d)) for e, d in h["waiting"]})
