"""A window's rollup rows in streaming (issue 37, item 2): the fourth engine, keyed by (collection,
window), beside the clock, the atoms and the panes (:mod:`.messages`)::

    clock ──RollupExpect (the close: how many keys)──────────────▶ rollups (per collection and window)
    atoms ──RollupPart (the close: the key's content and held count)──▶ rollups

A rollup row sums its capped keys' released and held content (:mod:`.rollups`), and which rows a
window publishes depends on every capped key's held count (complementary suppression across rollups,
:func:`~.rollups.published_rollups`): so the rows are made where every key of the window meets, once,
at the window's close (:func:`rolls_up`), from the keys' final content and the final decisions. At the
close each key's atoms send its whole content in the window (its released atoms and its pending part,
merged) with its capped key and the count still held (under ``privacy.unit: device`` also the devices
still held, which the rule counts, each once per capped key; under a whole-report kind the thin-row counts
of its released and held content, :mod:`.kind_rollups`); the clock says how many keys the close
commands. When all have come, the step decides the published rows exactly as batch does and publishes
each in one pane (its pane 0, with the close's timing); the window's state goes. Late partials after
the close are dead letters (the clock), so a published rollup never changes. Why never earlier: a
rollup in an early or on-time pane and again at the close would differ by what the keys' held parts
gained in between, which need not hold ``min_reports`` reports (docs/design.md, section 7, "Rollups").

State per window: the parts (a bag, read once at the close and folded into one sum per rollup row, so
the step never holds every key's accumulator at once) and a small :class:`RollupStatus`. Messages and
state are versioned records (:func:`message_to_bytes`, :func:`status_to_bytes`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ldp_marginals.ldp.versioned import accumulator_from_bytes, accumulator_to_bytes, pack, unpack
from ldp_marginals.transforms.publication import engine
from ldp_marginals.transforms.publication.engine import PaneFile
from ldp_marginals.transforms.publication.kind_rollups import KindPart, merge_kind_parts
from ldp_marginals.transforms.publication.rollups import marked


def rolls_up(timing: str, final: bool) -> bool:
    """Whether an event of a window publishes its rollup rows (the clock expects them, the atoms send
    their parts): the window's final event only, its close (docs/design.md, section 7)."""
    return final


class RollupPart(NamedTuple):
    """A key's atoms -> its window's rollups, at event ``event``: the key's content in the window (its
    released atoms and pending part merged), its capped key and the reports still held; under a
    whole-report kind also ``kind``, the thin-row counts of its released and held content and the sets
    thin in one released atom (:class:`~.kind_rollups.KindPart`: a ``kind`` field in the record's header,
    absent from a per-bit part and from every part written before)."""

    event: int
    dims: tuple
    route: tuple        # the capped key
    acc: object         # ldp_marginals.ldp.aggregate.WindowAccumulator
    held: int
    devices = ()        # the devices of the reports still held: none counted (privacy.unit report)
    kind = None         # a per-bit channel's part: no thin-row counts (:class:`KindRollupPart`)


class DeviceRollupPart(NamedTuple):
    """A :class:`RollupPart` under ``privacy.unit: device``: also ``devices``, the device keys (sorted) of
    the reports the key still holds, which the rule counts (each device once per withheld part). Its own
    type, so a part of the report unit (and every record written before) stays what it was."""

    event: int
    dims: tuple
    route: tuple
    acc: object
    held: int
    devices: tuple
    kind: object = None


class KindRollupPart(NamedTuple):
    """A :class:`RollupPart` of a whole-report kind (``hadamard``, ``subset``) under ``privacy.unit: report``:
    also ``kind``, the key's :class:`~.kind_rollups.KindPart` (the thin-row counts of its released and held
    content, and the sets thin in one released atom), which the kinds' rule reads. Its own type, as
    :class:`DeviceRollupPart` (which carries ``kind`` too under the device unit)."""

    event: int
    dims: tuple
    route: tuple
    acc: object
    held: int
    kind: object
    devices = ()


PARTS = (RollupPart, DeviceRollupPart, KindRollupPart)


class RollupExpect(NamedTuple):
    """The clock -> a window's rollups: event ``event`` brings a part from each of ``members`` keys."""

    event: int
    window: tuple
    timing: str
    final: bool
    members: int


@dataclass
class RollupStatus:
    panes: int = 0                                  # rollup panes published in the window
    expects: dict = field(default_factory=dict)     # event -> RollupExpect not applied yet
    arrived: dict = field(default_factory=dict)     # event -> parts arrived


@dataclass
class RollupStep:
    panes: list = field(default_factory=list)       # PaneFile
    append_part: object = None                      # a part to keep
    parts: list | None = None                       # the bag's new contents (None: unchanged)
    done: bool = False                              # the window closed: its state goes


class Rollups:
    """The rollup rows of one window of one collection (module docstring)."""

    def __init__(self, config):
        self.config = config

    def on_message(self, status: RollupStatus, message, read: callable) -> RollupStep:
        """A part or an expectation; ``read()`` iterates over the parts kept."""
        if isinstance(message, PARTS):
            status.arrived[message.event] = status.arrived.get(message.event, 0) + 1
            event = message.event
        else:
            status.expects[message.event] = message
            event = message.event
        exp = status.expects.get(event)
        if exp is None or status.arrived.get(event, 0) < exp.members:
            return RollupStep(append_part=message if isinstance(message, PARTS) else None)
        parts = (p for source in (read(), [message] if isinstance(message, PARTS) else []) for p in source)
        step = RollupStep()
        keep = self._publish(step, status, exp, parts)
        del status.expects[event], status.arrived[event]
        step.done = exp.final
        step.parts = [] if exp.final else keep
        return step

    def _publish(self, step: RollupStep, status: RollupStatus, exp: RollupExpect, parts) -> list:
        """Fold the event's parts into one sum per rollup row and each capped key's held count, decide
        which rows the window publishes (as batch: :func:`~.rollups.published_rollups`) and publish
        them; returns the parts of other events."""
        cfg, aggregator = self.config, self.config.aggregator
        sums, held, keep, kinds = {}, {}, [], {}
        for p in parts:
            if p.event != exp.event:
                keep.append(p)
                continue
            if cfg.sampling is not None:   # a whole-report kind: the capped key's thin-row counts
                kinds.setdefault(p.route, []).append(p.kind or KindPart((), (), ()))
            if cfg.counts_devices:   # each device once in its capped key's withheld part
                held[p.route] = held.get(p.route, frozenset()) | frozenset(p.devices)
            else:
                held[p.route] = held.get(p.route, 0) + p.held
            if p.acc.n:
                for over in cfg.rollups:
                    row = marked(cfg, p.route, over)
                    sums[row] = aggregator.merge([sums.get(row) or aggregator.create(), p.acc], False)
        published, thin = engine.rollup_decision(cfg, held, {route: merge_kind_parts(ps) for route, ps in kinds.items()}
                                                 if cfg.sampling is not None else None)
        window = None if cfg.window.is_global else exp.window
        for row in sorted(published & set(sums)):
            rows = engine.rollup_rows(cfg, exp.window, row, sums[row], thin.get(row))
            step.panes += [PaneFile(kind, cfg.name, window, status.panes, exp.timing, kind_rows, row, exp.final)
                           for kind, kind_rows in rows.items() if len(kind_rows)]
        if step.panes:
            status.panes += 1
        return keep


# -- versioned records ------------------------------------------------------------------------------------

PART, EXPECT, STATUS = b"LDPO", b"LDPV", b"LDPZ"


def _pairs(dims) -> list:
    return [list(kv) for kv in dims]


def _dims(pairs) -> tuple:
    return tuple(tuple(kv) for kv in pairs)


def message_to_bytes(message, aggregator=None) -> bytes:
    if isinstance(message, PARTS):
        header = {"event": message.event, "dims": _pairs(message.dims), "route": _pairs(message.route),
                  "held": message.held}
        if isinstance(message, DeviceRollupPart):   # a part without it (every part before) counts no device
            header["devices"] = [int(d) for d in message.devices]
        if message.kind is not None:   # a whole-report kind's part; a part without it (every part before) has none
            header["kind"] = {"released": list(message.kind.released), "held": list(message.kind.held),
                              "atom_thin": [list(t) for t in message.kind.atom_thin]}
        return pack(PART, header, accumulator_to_bytes(message.acc, aggregator))
    if isinstance(message, RollupExpect):
        return pack(EXPECT, {"event": message.event, "window": list(message.window), "timing": message.timing,
                             "final": message.final, "members": message.members})
    raise ValueError(f"message must be a RollupPart or a RollupExpect, got {type(message).__name__}")


def message_from_bytes(data, aggregator=None):
    data = bytes(data)
    parsed = unpack(PART, data) or unpack(EXPECT, data)
    if parsed is None:
        raise ValueError(f"a rollup message must be a record {PART.decode()} or {EXPECT.decode()}, "
                         f"got one starting {data[:4]!r}")
    _, h, tail = parsed
    if data[:4] == PART:
        fields = (int(h["event"]), _dims(h["dims"]), _dims(h["route"]), accumulator_from_bytes(tail, aggregator),
                  int(h["held"]))
        kind = h.get("kind")
        kind = None if kind is None else KindPart(tuple(int(c) for c in kind["released"]),
                                                  tuple(int(c) for c in kind["held"]),
                                                  tuple(tuple(int(b) for b in t) for t in kind["atom_thin"]))
        if "devices" in h:
            return DeviceRollupPart(*fields, tuple(int(d) for d in h["devices"]), kind)
        return RollupPart(*fields) if kind is None else KindRollupPart(*fields, kind)
    return RollupExpect(int(h["event"]), (int(h["window"][0]), int(h["window"][1])), h["timing"], bool(h["final"]),
                        int(h["members"]))


def status_to_bytes(status: RollupStatus) -> bytes:
    return pack(STATUS, {"panes": status.panes,
                         "expects": [[e.event, list(e.window), e.timing, e.final, e.members]
                                     for _, e in sorted(status.expects.items())],
                         "arrived": sorted([e, n] for e, n in status.arrived.items())})


def status_from_bytes(data) -> RollupStatus:
    parsed = unpack(STATUS, bytes(data))
    if parsed is None:
        raise ValueError(f"state must be a record {STATUS.decode()}, got one starting {bytes(data[:4])!r}")
    _, h, _ = parsed
    return RollupStatus(int(h["panes"]),
                        {int(e): RollupExpect(int(e), (int(w[0]), int(w[1])), t, bool(f), int(m))
                         for e, w, t, f, m in h["expects"]},
                        {int(e): int(n) for e, n in h["arrived"]})
