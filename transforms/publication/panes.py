"""A capped key's panes (streaming): the released atoms of the keys a window publishes under one capped
key, and the panes of each of its windows, at the clock's events.

An event's expectation (:class:`~.messages.Expect`) names the keys whose contributions it brings; it
is applied after the previous expectation to this capped key and once every contribution has come,
whatever order Beam delivers them in. Then, with the window's released atoms of every key it holds:

- early, on-time and late events publish a pane when it adds released reports to the last one (the
  on-time pane whenever anything is released: repeating the same content reveals nothing), so two
  panes of a window and capped key differ by whole atoms;
- the final event (the window closes) publishes the extremes over clients, under the client rule over
  the atoms (:func:`~.release.client_rule`), and a withheld row for the reports the guard still holds,
  beside the window's estimates, repeated when nothing was released since the last pane (the same
  rows: repeating the same content reveals nothing), so that the final pane holds the window's whole
  answer and its rows alone are what a reader sums (``final``, issue 49).

Pane files are numbered per window and capped key; panes accumulate, so a reader takes each key's
latest. State: the messages not applied yet, the atoms received, and a small :class:`PanesStatus`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ldp_marginals.transforms.publication import engine
from ldp_marginals.transforms.publication.engine import CLOSED, ON_TIME, Entry, PaneFile
from ldp_marginals.transforms.publication.messages import Contribution, Expect


@dataclass
class PaneState:
    panes: int = 0                                  # panes published (the next pane's index)
    published: int = 0                              # reports in the last published pane
    members: set = field(default_factory=set)       # the keys (dims) of the window under this capped key
    held: int = 0                                   # reports held at the close, from the contributions


@dataclass
class PanesStatus:
    last: int = 0                                   # the last expectation applied (its event)
    windows: dict = field(default_factory=dict)     # window -> PaneState
    waiting: set = field(default_factory=set)       # (event, dims) of the contributions the next one lacks


@dataclass
class PanesStep:
    panes: list = field(default_factory=list)       # PaneFile
    append_message: object = None
    inbox: list | None = None
    atoms: list | None = None                       # the atoms' new contents (some were let go), or None
    append_atoms: list = field(default_factory=list)   # atoms to append (when ``atoms`` is None)
    closed: int = 0                                 # reports in the last panes of the windows that closed


class Panes:
    """The panes of one capped key (module docstring)."""

    def __init__(self, config, key: tuple):
        self.config = config
        self.window = config.window
        self.key = key

    def on_message(self, status: PanesStatus, message, read: callable) -> PanesStep:
        """An expectation or a contribution; ``read()`` returns ``(inbox, atoms)``."""
        if isinstance(message, Expect) and message.prev != status.last:
            return PanesStep(append_message=message)   # an earlier expectation has not arrived yet
        if isinstance(message, Contribution) and (message.event, message.dims) not in status.waiting:
            return PanesStep(append_message=message)   # not what the next expectation waits for
        inbox, atoms = read()
        return self._apply(status, list(inbox) + [message], list(atoms))

    def _apply(self, status: PanesStatus, inbox: list, atoms: list) -> PanesStep:
        step = PanesStep()
        stored, pruned = len(atoms), False
        expects = {m.prev: m for m in inbox if isinstance(m, Expect)}
        contributions = {(m.event, m.dims): m for m in inbox if isinstance(m, Contribution)}
        status.waiting = set()
        while status.last in expects:
            exp = expects[status.last]
            status.waiting = {(exp.event, d) for d in exp.members if (exp.event, d) not in contributions}
            if status.waiting:
                break
            del expects[status.last]
            ws = status.windows.setdefault(exp.window, PaneState())
            for d in exp.members:
                c = contributions.pop((exp.event, d))
                atoms += [Entry(start, d, atom, acc) for start, atom, acc in c.atoms]
                ws.members.add(d)
                ws.held += c.held
            step.panes += self._pane(exp, ws, atoms)
            if exp.final:
                step.closed += ws.published
                del status.windows[exp.window]
                live = self._live(atoms, exp.window)
                pruned |= len(live) < len(atoms)
                atoms = live
            status.last = exp.event
        step.inbox = sorted(expects.values()) + sorted(contributions.values())
        if pruned:
            step.atoms = atoms
        else:   # nothing let go: the bag keeps what it holds and takes the new atoms
            step.append_atoms = atoms[stored:]
        return step

    def _live(self, atoms: list, closed: tuple) -> list:
        """The atoms of slices that a window still open can hold (windows close in order)."""
        if self.window.is_global:
            return atoms
        return [e for e in atoms if self.window.windows_of_slice(e.start)[-1][1] > closed[1]]

    def _pane(self, exp: Expect, ws: PaneState, atoms: list) -> list:
        window, timing, final = exp.window, exp.timing, exp.final
        aggregator = self.config.aggregator
        slices = self.window.slices_of(window)
        mine = [e.acc for e in atoms if e.dims in ws.members and (slices is None or e.start in slices)]
        released = aggregator.merge([aggregator.create(), *mine], final) if mine else None
        total = released.n if released is not None else 0
        grew = total > ws.published
        if timing == CLOSED:   # the final pane repeats what is released (nothing new: the same rows, which
            linear = total > 0   # reveals nothing), so that it holds the window's whole answer (final rows)
        elif not final and (total == 0 or not (grew or timing == ON_TIME)):
            return []
        else:
            linear = total > 0 and (grew or timing == ON_TIME)
        # the atoms in release order (number, then slice and key), whatever order the bag holds them in:
        # a client sample takes a client's reports in earlier atoms first (aggregate.sampled_clients)
        ordered = [e.acc for e in sorted((e for e in atoms if e.dims in ws.members
                                          and (slices is None or e.start in slices)),
                                         key=lambda e: (e.atom, e.start, e.dims))]
        rows = engine.key_rows(self.config, window, self.key, released, ws.held, linear=linear, final=final,
                               atoms=ordered)
        ws.published = total
        files = [PaneFile(kind, self.config.name, None if self.window.is_global else window, ws.panes, timing,
                          kind_rows, self.key, final) for kind, kind_rows in rows.items() if len(kind_rows)]
        if files:
            ws.panes += 1
        return files
