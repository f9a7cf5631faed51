"""A key's atoms (streaming): the accumulators of one key (collection, dimensions), released per slice
into atoms at the clock's events, and sent to the capped key each window publishes the key under.

One owner per (slice, key) releases its pending increments, so a slice that lies in several windows
(sliding) has the same atoms in each, whatever capped key each window publishes it under: a release
depends only on the partials the clock accepted before the event (:func:`~.engine.compact`).

Messages are applied in the clock's order (:mod:`.messages`): a command waits for the previous
command to this key and for the partials it accepts; a drop (a late partial) waits for its partial.
Nothing here depends on the order Beam delivers them in.

State: the partials that arrived and are not accepted (or dropped) yet, the clock's messages not
applied yet, the entries (atoms and pending parts of the key's live slices), and a small
:class:`KeyStatus`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ldp_marginals.ldp.aggregate import kept_devices
from ldp_marginals.transforms.publication import rollup_panes
from ldp_marginals.transforms.publication.engine import PENDING, Entry, compact
from ldp_marginals.transforms.publication.hadamard_rows import panes_difference
from ldp_marginals.transforms.publication.kind_rollups import kind_part
from ldp_marginals.transforms.publication.messages import Arrival, Command, Contribution, Drop


@dataclass
class KeyStatus:
    last: int = 0                                   # the last command applied (its event)
    windows: dict = field(default_factory=dict)     # window -> capped key, for windows commanded and open
    sent: set = field(default_factory=set)          # (capped key, slice start, atom) sent to that capped key
    waiting: set = field(default_factory=set)       # ids of partials a message waits for


@dataclass
class AtomsStep:
    """What one message produced: contributions (``(capped key, Contribution)``) and the new contents
    of the bags (None: unchanged; ``append_arrival``: the arrival to append)."""

    contributions: list = field(default_factory=list)
    rollup_parts: list = field(default_factory=list)   # (window, RollupPart): collections with rollups
    append_arrival: object = None
    append_message: object = None
    arrived: list | None = None
    inbox: list | None = None
    entries: list | None = None
    over_bound: int = 0   # reports past a device's bound in the slices let go (privacy.unit: device)
    over_key_bound: int = 0   # reports of devices to keys past their bound on keys (:mod:`.key_atoms`)


class Atoms:
    """The atoms of one key (module docstring)."""

    def __init__(self, config, dims: tuple):
        self.config = config
        self.window = config.window
        self.dims = dims

    def on_arrival(self, status: KeyStatus, arrival: Arrival, read: callable) -> AtomsStep:
        """A partial's accumulator: kept until the clock accepts or drops it; applies what waited for it.
        ``read()`` returns ``(arrived, inbox, entries)``."""
        if arrival.id not in status.waiting:
            return AtomsStep(append_arrival=arrival)
        arrived, inbox, entries = read()
        return self._apply(status, list(arrived) + [arrival], list(inbox), list(entries))

    def on_message(self, status: KeyStatus, message, read: callable) -> AtomsStep:
        """A command or a drop from the clock."""
        if isinstance(message, Command) and message.prev != status.last:
            return AtomsStep(append_message=message)   # an earlier command has not arrived yet
        arrived, inbox, entries = read()
        return self._apply(status, list(arrived), list(inbox) + [message], list(entries))

    def _apply(self, status: KeyStatus, arrived: list, inbox: list, entries: list) -> AtomsStep:
        step = AtomsStep()
        by_id = {a.id: a for a in arrived}
        drops = [m for m in inbox if isinstance(m, Drop)]
        commands = {m.prev: m for m in inbox if isinstance(m, Command)}
        notes = [m for m in inbox if not isinstance(m, (Drop, Command))]   # what a bound across keys waits for
        kept_drops = []
        for d in drops:
            if by_id.pop(d.id, None) is None:
                kept_drops.append(d)
        missing = []
        while status.last in commands:
            cmd = commands[status.last]
            missing = [i for i in cmd.ids if i not in by_id]
            if missing or not self._ready(cmd, entries, [by_id[i] for i in cmd.ids], notes):
                break
            del commands[status.last]
            entries += [Entry(a.start, self.dims, PENDING, a.acc) for a in (by_id.pop(i) for i in cmd.ids)]
            entries, notes = self._bounded(step, cmd, entries, notes)
            entries = compact(self.config, entries, self._releasing(cmd))
            entries = self._contribute(step, status, cmd, entries)
            status.last = cmd.event
        status.waiting = {d.id for d in kept_drops} | set(missing)
        step.arrived = list(by_id.values())
        step.inbox = kept_drops + notes + sorted(commands.values())
        step.entries = entries
        return step

    # hooks of a bound across a slice's keys (:class:`~.key_atoms.KeyBoundAtoms`); here, none
    def _ready(self, cmd: Command, entries: list, arrivals: list, notes: list) -> bool:
        """Whether ``cmd`` may be applied now (its partials ``arrivals`` have come)."""
        return True

    def _bounded(self, step: AtomsStep, cmd: Command, entries: list, notes: list) -> tuple:
        """``(entries, notes)`` once ``cmd``'s partials are in ``entries``, before any release."""
        return entries, notes

    def _releasing(self, cmd: Command):
        """Which slices' pending parts ``cmd`` may release (a predicate of the slice start), None: all."""
        return None

    def _contribute(self, step: AtomsStep, status: KeyStatus, cmd: Command, entries: list) -> list:
        """The window's released atoms its capped key lacks (and, at its close, the count still held);
        at a close, the entries of slices whose every window has closed are let go."""
        window, route = cmd.window, cmd.route
        slices = self.window.slices_of(window)
        status.windows[window] = route
        inside = [e for e in entries if slices is None or e.start in slices]
        atoms = tuple((e.start, e.atom, e.acc) for e in inside if e.released and (route, e.start, e.atom)
                      not in status.sent)
        status.sent |= {(route, start, atom) for start, atom, _ in atoms}
        held = sum(e.acc.n for e in inside if not e.released) if cmd.final else 0
        step.contributions.append((route, Contribution(cmd.event, self.dims, window, atoms, held)))
        if self.config.rollups and rollup_panes.rolls_up(cmd.timing, cmd.final):   # the key's whole content
            aggregator = self.config.aggregator
            part = (cmd.event, self.dims, route, aggregator.merge([aggregator.create(), *(e.acc for e in inside)], False),
                    sum(e.acc.n for e in inside if not e.released))
            kind = _kind_part_of(self.config, inside) if self.config.sampling is not None else None
            plain = rollup_panes.RollupPart(*part) if kind is None else rollup_panes.KindRollupPart(*part, kind)
            step.rollup_parts.append((window, plain if not self.config.counts_devices else
                                      rollup_panes.DeviceRollupPart(*part, tuple(int(d) for d in kept_devices(
                                          [e.acc for e in inside if not e.released])), kind)))
        if not cmd.final:
            return entries
        del status.windows[window]
        if self.window.is_global:   # its one window's close (the end of the input): counted, kept
            step.over_bound += sum(_over_bound(e.acc) for e in entries)
            return entries
        # windows close in order, so a slice whose last window ends by this one's end is done
        done = {e.start for e in entries if self.window.windows_of_slice(e.start)[-1][1] <= window[1]}
        status.sent = {s for s in status.sent if s[1] not in done}
        # each report of a slice is in one of its entries (an atom or the pending part), and an entry's
        # reports past a device's bound are those it saw and did not keep: counted once, at the let-go
        step.over_bound += sum(_over_bound(e.acc) for e in entries if e.start in done)
        return [e for e in entries if e.start not in done]


def _kind_part_of(config, inside: list):
    """A whole-report kind: the :class:`~.kind_rollups.KindPart` of a key's entries in a window at its
    close (its released atoms and its pending part), with the sets thin in one released atom where rows are
    decided per atom (:func:`~.hadamard_rows.panes_difference`)."""
    aggregator = config.aggregator
    released = [e.acc for e in inside if e.released]
    held = [e.acc for e in inside if not e.released]
    merged = [aggregator.merge([aggregator.create(), *accs], False) if accs else None for accs in (released, held)]
    return kind_part(config, *merged, released if panes_difference(config) else ())


def _over_bound(acc) -> int:
    """Reports of a settled or an open (pending) accumulator past a device's bound."""
    return acc.over_bound if acc.devices is None else acc.devices.over_bound
