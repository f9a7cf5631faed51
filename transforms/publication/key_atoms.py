"""A key's atoms under a bound across a slice's keys (``privacy.unit: device`` with dimensions,
streaming): :class:`~.atoms.Atoms` whose pending parts are released only when their slice is sealed,
and then only after dropping the devices that keep other keys (:mod:`.slices`).

- A slice's pending part is never released before the close of the slice's first window (the seal):
  until then a key seen later could displace a device's contribution to this one, and a released
  atom cannot be taken back. Early panes, and on-time panes before the close, publish only atoms of
  slices sealed before.
- The command of that close waits for the slice's :class:`~.slices.Kept` (its devices that keep this
  key); it drops the others from the pending part (their reports counted as ``reports.over_key_bound``)
  and the release then decides on what is left, as batch does with the same content.

A sealed slice takes no more partials (the clock finds them late), so its pending part, released or
held at the seal, never changes after.
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.transforms.publication.atoms import Atoms, AtomsStep
from ldp_marginals.transforms.publication.engine import PENDING, Entry
from ldp_marginals.transforms.publication.messages import Command
from ldp_marginals.transforms.publication.slices import Kept, sealed_by


class KeyBoundAtoms(Atoms):
    """The atoms of one key under a bound on keys (module docstring)."""

    def _sealing(self, cmd: Command) -> set:
        return sealed_by(self.window, cmd.window) if cmd.final else set()

    def _ready(self, cmd: Command, entries: list, arrivals: list, notes: list) -> bool:
        held = {e.start for e in entries if not e.released} | {a.start for a in arrivals}
        return self._sealing(cmd) & held <= {n.start for n in notes if isinstance(n, Kept)}

    def _bounded(self, step: AtomsStep, cmd: Command, entries: list, notes: list) -> tuple:
        sealing = self._sealing(cmd)
        kept = {n.start: n.devices for n in notes if isinstance(n, Kept) and n.start in sealing}
        if not kept:
            return entries, notes
        aggregator = self.config.aggregator
        out, pending = [], {}
        for e in entries:
            if e.start in kept and not e.released:
                pending.setdefault(e.start, []).append(e.acc)
            else:
                out.append(e)
        for start, accs in sorted(pending.items()):
            acc = aggregator.merge([aggregator.create_open(), *accs])
            acc, reports = aggregator.without_devices(acc, np.setdiff1d(acc.devices.devices, kept[start]))
            step.over_key_bound += reports
            out.append(Entry(start, self.dims, PENDING, acc))
        return out, [n for n in notes if not (isinstance(n, Kept) and n.start in kept)]

    def _releasing(self, cmd: Command):
        if not cmd.final:
            return lambda start: False
        if self.window.is_global:
            return lambda start: True
        return lambda start: self.window.windows_of_slice(start)[0][1] <= cmd.window[1]
