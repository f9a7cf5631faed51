"""The streaming engines of one collection wired in one process, as the Beam adapter
(``transforms/panes.py``) wires them: the clock per collection, the atoms per key, the panes per capped
key (under a bound on keys the slice step per slice, with rollups the rollups per window), each with its
state kept as the adapter keeps it (a status and bags), every message through its
versioned bytes, and the messages between them delivered in an order a seeded ``rng`` picks (Beam
orders nothing): the outputs must not depend on it."""
from __future__ import annotations

from ldp_marginals.transforms.publication import rollup_panes, slices, state
from ldp_marginals.transforms.publication.atoms import Atoms, KeyStatus
from ldp_marginals.transforms.publication.key_atoms import KeyBoundAtoms
from ldp_marginals.transforms.publication.clock import Clock, ClockStatus
from ldp_marginals.transforms.publication.messages import Arrival, Weight
from ldp_marginals.transforms.publication.panes import Panes, PanesStatus


class LocalStream:
    def __init__(self, config, rng=None):
        self.config = config
        self.rng = rng
        self.clock = Clock(config)
        self.status = ClockStatus()
        self.bag, self.book = [], None
        self.keys = {}      # dims -> [KeyStatus, arrived, inbox, entries]
        self.capped = {}    # capped key -> [PanesStatus, inbox, atoms]
        self.rollups = {}   # window -> [RollupStatus, parts]
        self.queue = []     # (to, key, bytes): messages in flight
        self.timer = None
        self.panes, self.late, self.counted = [], [], 0
        self.over_bound = 0   # the reports.over_device_bound the key adapters count
        self.over_key_bound = 0   # and reports.over_key_bound
        self.slices = {}    # slice start -> [SliceStatus, raw device keys, key table record]

    # -- the clock's inputs -------------------------------------------------------------------------
    def partial(self, start: int, dims: tuple, acc, pid: str):
        """A partial: its weight to the clock now, its accumulator in flight to its key. Returns the
        clock's step."""
        self.queue.append(("key", dims, state.message_to_bytes(Arrival(pid, start, acc))))
        if self.config.bounds_keys:
            self.queue.append(("slice", start, state.message_to_bytes(
                slices.DeviceKeys(pid, dims, start, acc.devices.devices))))
        return self._clock(self.clock.on_weight(self.status, Weight(pid, dims, start, acc.received), self._book,
                                                lambda: list(self.bag)))

    def advance(self, to_us: int) -> None:
        """The watermark reaches ``to_us``: every event timer due fires, each at its own time."""
        while self.timer is not None and self.timer <= to_us:
            fired, self.timer = self.timer, None
            self._clock(self.clock.on_watermark(self.status, fired, self._book, lambda: list(self.bag)))

    def early(self) -> None:
        """An early firing, if one is armed (the processing-time timer the clock set)."""
        if self.status.early_set:
            self._clock(self.clock.on_early(self.status, self._book, lambda: list(self.bag)))

    def _book(self):
        return None if self.book is None else state.book_from_bytes(self.book)

    def _clock(self, step):
        self.status = state.clock_from_bytes(state.clock_to_bytes(self.status))
        if step.clear:
            self.bag = []
        self.bag += [state.message_from_bytes(state.message_to_bytes(w)) for w in step.append]
        if step.book is not None:
            self.book = state.book_to_bytes(step.book)
        if step.event_us is not None:
            self.timer = step.event_us
        self.counted += step.counted
        self.late += step.late
        self.queue += [("key", dims, state.message_to_bytes(m)) for dims, m in step.to_keys]
        self.queue += [("capped", key, state.message_to_bytes(m)) for key, m in step.to_capped]
        self.queue += [("slice", start, state.message_to_bytes(m)) for start, m in step.to_slices]
        self.queue += [("rollup", w, rollup_panes.message_to_bytes(m)) for w, m in step.to_rollups]
        return step

    # -- delivery -----------------------------------------------------------------------------------
    def deliver(self, everything: bool = True) -> None:
        """Deliver messages in flight, in the order ``rng`` picks (all of them, or a random share)."""
        while self.queue:
            at = int(self.rng.integers(0, len(self.queue))) if self.rng is not None else 0
            to, key, data = self.queue.pop(at)
            if to == "key":
                self._to_key(key, data)
            elif to == "slice":
                self._to_slice(key, data)
            elif to == "rollup":
                self._to_rollups(key, data)
            else:
                self._to_capped(key, data)
            if not everything and self.rng is not None and self.rng.random() < 0.3:
                return

    def _to_key(self, dims, data) -> None:
        agg = self.config.aggregator
        status, arrived, inbox, entries = self.keys.setdefault(dims, [KeyStatus(), [], [], []])
        message = state.message_from_bytes(data, agg)
        engine = (KeyBoundAtoms if self.config.bounds_keys else Atoms)(self.config, dims)
        read = lambda: (arrived, inbox, entries)   # noqa: E731
        step = (engine.on_arrival if isinstance(message, Arrival) else engine.on_message)(status, message, read)
        status = state.key_from_bytes(state.key_to_bytes(status))
        if step.append_arrival is not None:
            arrived = arrived + [step.append_arrival]
        if step.append_message is not None:
            inbox = inbox + [step.append_message]
        arrived = arrived if step.arrived is None else self._bytes(step.arrived)
        inbox = inbox if step.inbox is None else self._bytes(step.inbox)
        if step.entries is not None:
            entries = [state.entry_from_bytes(state.entry_to_bytes(e, agg), agg) for e in step.entries]
        self.keys[dims] = [status, arrived, inbox, entries]
        self.over_bound += step.over_bound
        self.over_key_bound += step.over_key_bound
        self.queue += [("capped", key, state.message_to_bytes(c)) for key, c in step.contributions]
        self.queue += [("rollup", w, rollup_panes.message_to_bytes(p, agg)) for w, p in step.rollup_parts]

    def _to_slice(self, start, data) -> None:
        status, raw, table = self.slices.setdefault(start, [slices.SliceStatus(), [], slices.table_record(
            slices.KeyTable())])
        step = slices.SliceKeys(self.config, start).on_message(
            status, state.message_from_bytes(data), lambda: (raw, slices.table_of_record(table)))
        status = slices.status_from_bytes(slices.status_to_bytes(status))
        if step.append_raw is not None:
            raw = raw + [step.append_raw]
        raw = raw if step.raw is None else self._bytes(step.raw)
        table = table if step.table is None else slices.table_record(step.table)
        self.slices[start] = [status, raw, table]
        self.queue += [("key", dims, state.message_to_bytes(k)) for dims, k in step.kept]

    def _to_capped(self, key, data) -> None:
        agg = self.config.aggregator
        status, inbox, atoms = self.capped.setdefault(key, [PanesStatus(), [], []])
        step = Panes(self.config, key).on_message(status, state.message_from_bytes(data, agg), lambda: (inbox, atoms))
        status = state.panes_from_bytes(state.panes_to_bytes(status))
        if step.append_message is not None:
            inbox = inbox + [step.append_message]
        inbox = inbox if step.inbox is None else self._bytes(step.inbox)
        if step.atoms is not None:
            atoms = [state.entry_from_bytes(state.entry_to_bytes(e, agg), agg) for e in step.atoms]
        atoms = atoms + [state.entry_from_bytes(state.entry_to_bytes(e, agg), agg) for e in step.append_atoms]
        self.capped[key] = [status, inbox, atoms]
        self.panes += step.panes

    def _to_rollups(self, window, data) -> None:
        agg = self.config.aggregator
        status, parts = self.rollups.setdefault(window, [rollup_panes.RollupStatus(), []])
        step = rollup_panes.Rollups(self.config).on_message(
            status, rollup_panes.message_from_bytes(data, agg), lambda: iter(parts))
        status = rollup_panes.status_from_bytes(rollup_panes.status_to_bytes(status))
        if step.append_part is not None:
            parts = parts + [rollup_panes.message_from_bytes(rollup_panes.message_to_bytes(step.append_part, agg), agg)]
        if step.parts is not None:
            parts = [rollup_panes.message_from_bytes(rollup_panes.message_to_bytes(p, agg), agg) for p in step.parts]
        if step.done:
            del self.rollups[window]
        else:
            self.rollups[window] = [status, parts]
        self.panes += step.panes

    def _bytes(self, messages: list) -> list:
        agg = self.config.aggregator
        return [state.message_from_bytes(state.message_to_bytes(m, agg), agg) for m in messages]

    def idle(self) -> bool:
        """Nothing in flight, no message waiting in any key's or capped key's inbox."""
        return not self.queue and not any(k[2] for k in self.keys.values()) and not any(
            c[1] for c in self.capped.values()) and not any(
            s[1] or s[0].accepted or s[0].dropped or s[0].total is not None for s in self.slices.values()) and not any(
            r[1] or r[0].expects for r in self.rollups.values())
