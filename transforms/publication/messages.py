"""What the three streaming engines send each other (Beam-free; the adapters move them as versioned bytes,
:mod:`.state`).

::

    partial ──Weight──▶ clock (per collection) ──Drop, Command──▶ atoms (per key)
       └──────Arrival─────────────────────────────────────────────▶ atoms ──Contribution──▶ panes
                         clock ──Expect─────────────────────────────────────────────────▶ panes (per capped key)

A partial is split in two: its weight (how many reports, of which key and slice) goes to the
collection's clock, its accumulator to its key's atoms, both under one id. The clock decides alone:
whether the partial is late, where each key of a window is published (the cap), and when a window
publishes a pane (an *event*, numbered per collection). Beam does not order elements, so each message
says what must come before it: a command names the partials it accepts and the previous command to
the same key (``prev``), an expectation the previous one to the same capped key and the keys whose
contributions it waits for. A key's atoms and a capped key's panes apply their messages in that
order whatever order they arrive in, so what they publish depends only on the clock's decisions.
"""
from __future__ import annotations

from typing import NamedTuple


class Weight(NamedTuple):
    """A partial's count, to its collection's clock."""

    id: str             # the partial's id (its accumulator travels as an Arrival of the same id)
    dims: tuple         # its key's dimensions
    start: int          # its slice's start, ms
    n: int              # its reports


class Arrival(NamedTuple):
    """A partial's accumulator, to its key's atoms."""

    id: str
    start: int
    acc: object         # ldp_marginals.ldp.aggregate.WindowAccumulator


class Drop(NamedTuple):
    """Clock -> atoms: the partial ``id`` was late (a dead letter); never count it."""

    id: str


class Command(NamedTuple):
    """Clock -> a key's atoms: event ``event`` of ``window``. Accept the partials ``ids`` (pending),
    release what may be released, and send the capped key ``route`` the window's atoms it lacks (and,
    when ``final``, the count of what is still held)."""

    event: int          # the collection's event number
    prev: int           # the previous command to this key (0: its first)
    window: tuple       # (start_ms, end_ms)
    timing: str         # early, on_time, late or closed
    final: bool         # the window closes with this event
    route: tuple        # the window's capped key of this key
    ids: tuple          # partials accepted since the previous command (every slice of the key)


class Expect(NamedTuple):
    """Clock -> a capped key's panes: event ``event`` of ``window`` takes a contribution from each of
    ``members``; then the pane is published (when it adds released reports, or is on time or final)."""

    event: int
    prev: int           # the previous expectation to this capped key (0: its first)
    window: tuple
    timing: str
    final: bool
    members: tuple      # the keys (dims) whose contributions this event brings


class Contribution(NamedTuple):
    """A key's atoms -> its capped key's panes, for one event: the released atoms of the window's
    slices that the capped key lacks, and (``final``) the count of reports still held."""

    event: int
    dims: tuple
    window: tuple
    atoms: tuple        # ((slice start, atom number, accumulator), ...)
    held: int
