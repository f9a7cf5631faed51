"""The publication engine's shared parts: entries and atoms, the release of pending increments, the rows
of one window and capped key, and the batch path. The streaming path is three engines keyed apart
(:mod:`.clock` per collection, :mod:`.atoms` per key, :mod:`.panes` per capped key), which publish
through :func:`key_rows` as batch does.

Keys. A report's *key* is ``(collection, dimensions)``; its *capped key* replaces each dimension value
the window does not keep by ``__other__`` (:mod:`.cap`). Publication is keyed by (collection, capped
key): each capped key of a window is estimated and written apart (its own pane files), so no worker
holds a collection's every key. The cap itself is decided per window from the values' weights alone.

Atoms. Per slice and key the engine keeps *entries*, ``(slice start, dimensions, atom, accumulator)``:
its released *atoms*, each kept apart under its number (0, 1, ... in the order they were released),
and what is pending (atom ``PENDING``). A pending increment is released, for good, once it holds
``min_reports`` reports (:func:`compact`, :func:`~.release.releasable`); every published row except
the extremes over clients is a function of sums of whole atoms (docs/design.md, section 7).

Batch: a window's slices arrive complete and each slice is one increment, released or held whole
(:func:`batch_route`); the released slices of a capped key are merged (a combine, spread over workers)
and its one pane, on time and final, is :func:`batch_key`'s. A collection's rollup rows (batch only)
sum their capped keys' released and held content, where complementary suppression allows
(:mod:`.rollups`, :func:`batch_rollups`).
"""
from __future__ import annotations

from typing import NamedTuple

from ldp_marginals.ldp.aggregate import kept_devices
from ldp_marginals.ldp.devices import key_id, keys_over_bound
from ldp_marginals.schemas.arrow import TableRows
from ldp_marginals.schemas.outputs import EARLY_PANE, ESTIMATE_KINDS, LATE_PANE, ON_TIME_PANE, WITHHELD
from ldp_marginals.transforms.publication.cap import capped, decide, value_weights
from ldp_marginals.transforms.publication.hadamard_rows import atom_thin_sets, merge_thin
from ldp_marginals.transforms.publication.release import releasable
from ldp_marginals.transforms.publication.releases import ledger_part, ledger_slice, verdict
from ldp_marginals.transforms.publication.kind_rollups import kind_part, rollup_thin
from ldp_marginals.transforms.publication.rollups import marked, rollup_plan
from ldp_marginals.transforms.publication.rows import base_row, held_row, window_blocks, withheld_row

EARLY, ON_TIME, LATE, CLOSED = "early", "on_time", "late", "closed"
# the engine's timings as Beam names a pane's (PaneInfoTiming): a window's close, after its on-time pane
# and the allowed lateness, is a late pane, its last (Beam's is_last)
BEAM_TIMING = {EARLY: EARLY_PANE, ON_TIME: ON_TIME_PANE, LATE: LATE_PANE, CLOSED: LATE_PANE}
NEVER = -(1 << 62)                      # a watermark before every event
END_OF_TIME_US = 9_223_371_950_454_774_999   # Beam's GlobalWindow().max_timestamp() in microseconds
PENDING = -1   # the atom number of an entry not yet released


class Entry(NamedTuple):
    """One atom (a released increment) of one slice and key, or its pending part."""

    start: int          # slice start, ms
    dims: tuple         # sorted (name, value) pairs: the key, not capped
    atom: int           # the atom's number among its slice and key's atoms (0, 1, ...), or PENDING
    acc: object         # ldp_marginals.ldp.aggregate.WindowAccumulator

    @property
    def released(self) -> bool:
        return self.atom != PENDING


class PaneFile(NamedTuple):
    """The rows of one kind, collection, window, capped key and pane: what one output file holds."""

    kind: str
    group: str             # the collection
    window: tuple | None   # (start_ms, end_ms), None for the global window
    pane: int              # 0, 1, ... per window and capped key
    timing: str            # early, on_time, late, or closed (a window's final pane at its close)
    rows: list
    key: tuple = ()        # the capped key (sorted (name, value) pairs); () without dimensions
    final: bool = False    # the window's last pane (it closed): its answer

    @property
    def beam_timing(self) -> str:
        """The pane's timing as Beam names it (what its rows say, ``pane_timing``): :data:`BEAM_TIMING`."""
        return BEAM_TIMING[self.timing]


class LateBatch(NamedTuple):
    """Reports that arrived after every window of their slice had closed: one dead letter."""

    collection: str
    dims: tuple
    slice_start: int
    slice_end: int
    reports: int
    lateness_seconds: float


def compact(config, entries, release=None) -> list:
    """Merge entries per (slice, dims, atom) into new accumulators, and release a pending part that
    holds enough (:func:`~ldp_marginals.transforms.publication.release.releasable`): it becomes the
    slice and key's next atom, for good. Atoms are never merged with each other. ``release``: a
    predicate of the slice start, the slices whose pending part may be released now (None: every one)."""
    aggregator = config.aggregator
    parts = {}
    for e in entries:
        parts.setdefault((e.start, e.dims, e.atom), []).append(e.acc)
    # parts are merged into a new accumulator (bag reads may share objects); a lone part, never
    # modified after, is kept as it is
    merged = {key: accs[0] if len(accs) == 1 else aggregator.merge(
              [aggregator.create_open() if key[2] == PENDING else aggregator.create(), *accs])
              for key, accs in parts.items()}   # pending parts stay open under a device bound
    following = {}   # (start, dims) -> the next atom number
    for start, dims, atom in merged:
        following[(start, dims)] = max(following.get((start, dims), 0), atom + 1)
    for (start, dims, atom), acc in list(merged.items()):
        if atom == PENDING and acc is not None:   # under a device bound: what the slice's released atoms leave each device
            acc = merged[(start, dims, atom)] = aggregator.within_slice(acc, [
                a for (s, d, n), a in merged.items() if (s, d) == (start, dims) and n != PENDING and a is not None])
        if atom == PENDING and acc is not None and (release is None or release(start)) and releasable(config, acc):
            number = following[(start, dims)]
            following[(start, dims)] = number + 1
            merged[(start, dims, number)] = aggregator.settle(merged.pop((start, dims, PENDING)))
    return [Entry(start, dims, atom, acc) for (start, dims, atom), acc in sorted(merged.items(),
                                                                                key=lambda kv: kv[0])]


def key_rows(config, window: tuple, key: tuple, released, held: int, *, linear: bool, final: bool,
             atoms: list | None = None, client_reason: str | None = None, atom_thin: dict | None = None) -> dict:
    """``{kind: rows}`` of one pane of ``window`` and capped ``key`` from its released content
    (``released``, an accumulator, or None when nothing is released): its estimates, and in the
    ``final`` pane the extremes over clients and a withheld row for the ``held`` reports the guard
    still holds. The one place rows are made, for batch and streaming.

    ``atoms`` (streaming): the window's released atoms of every key the capped key holds, which panes
    may have published apart; the client rule reads the capped key's clients atom by atom. None
    (batch): the content was never published in parts; it is one atom. ``client_reason``: why the
    release ledger withholds the client rows (batch), or None. ``atom_thin`` (batch, whole-report kinds):
    the rows that rest on too few reports of one of the window's released slices
    (:func:`~.hadamard_rows.atoms_thin_sets`), or None."""
    out = {kind: [] for kind in ESTIMATE_KINDS}
    done = released is not None and released.n > 0
    if done:
        for kind, rows in window_blocks(config, key, released, window, linear=linear, final=final, atoms=atoms,
                                         client_reason=client_reason, atom_thin=atom_thin):
            if isinstance(rows, TableRows):
                out[kind] = rows
            else:
                out[kind].extend(rows)
    if final and held:
        out[WITHHELD].append(held_row(config, base_row(config.name, window, key), held, done))
    return out


# -- batch ----------------------------------------------------------------------------------------------

def batch_route(config, decided: dict, dims: tuple, acc) -> tuple:
    """Batch: ``(capped key, released)`` of one slice and key's complete accumulator under the window's
    cap (``decided``, :func:`~.cap.decide`): the slice is one increment, released by its own content
    alone (so it is published in all its windows or in none)."""
    return capped(dims, decided), releasable(config, acc)


def batch_key(config, window: tuple, key: tuple, released, pending, atom_thin: dict | None = None, *,
              ledger=None) -> dict:
    """Batch: ``{kind: rows}`` of one window and capped key from its released slices merged and its
    held slices merged (accumulators, or None): one pane, on time and final. ``ledger``: the run's
    :class:`~.releases.Verdict` (its withheld slices are among the held ones, reported apart with the
    ledger's reason), or None. ``atom_thin``: a whole-report kind's rows resting on too few reports of
    one released slice (:func:`~.hadamard_rows.atoms_thin_sets`; the slices are the atoms sliding
    windows difference into), or None."""
    held = 0 if pending is None else pending.n
    ledgered, reason, client_reason = ledger_part(ledger, window, key)
    out = key_rows(config, window, key, released if released is not None and released.n else None,
                   held - ledgered, linear=True, final=True, client_reason=client_reason, atom_thin=atom_thin)
    if ledgered:
        out[WITHHELD].append(withheld_row(config, base_row(config.name, window, key), ledgered, reason))
    return out


def batch_bound_keys(config, parts: dict) -> tuple:
    """Batch in one process: ``({dims: settled accumulator}, reports)`` of one slice's open accumulators
    ``{dims: accumulator}`` under ``privacy.max_keys_per_device`` (each device in the K keys of smallest
    key rank, :func:`~ldp_marginals.ldp.devices.keys_over_bound`), and the reports to keys past the
    bound (the job spreads the same two steps over two shuffles: ``transforms.device_keys``)."""
    aggregator = config.aggregator
    order = sorted(parts)
    dropped = keys_over_bound(aggregator.collection_key, [(key_id(d), parts[d].devices.devices) for d in order],
                              config.device.max_keys_per_device)
    out, over = {}, 0
    for dims, drop in zip(order, dropped):
        acc, reports = aggregator.without_devices(parts[dims], drop)
        out[dims], over = aggregator.settle(acc), over + reports
    return out, over


def rollup_rows(config, window: tuple, key: tuple, acc, thin: dict | None = None) -> dict:
    """``{kind: rows}`` of one rollup row (``key`` marked, :func:`~.rollups.marked`) of ``window``
    from the sum of its capped keys' released and held content: the linear rows only (no extremes over
    clients, no withheld row: its keys' rows say what they withhold). A whole-report kind's rollup
    withholds, beside its own thin rows, the sets ``thin`` names (:func:`~.kind_rollups.rollup_thin`),
    with a withheld row each."""
    return key_rows(config, window, key, acc if acc is not None and acc.n else None, 0, linear=True, final=False,
                    **({"atom_thin": thin} if thin else {}))


def rollup_parts(config, published: set, key: tuple, parts) -> list:
    """``[(marked key, accumulator)]``: what capped ``key``'s ``parts`` (its released and held
    accumulators, or None) add to each rollup row of the window that is ``published``
    (:func:`~.rollups.published_rollups`). A rollup row publishes the linear rows only
    (:func:`rollup_rows`), so the parts go without their client tables and client samples, which only
    the extremes over clients read (under a client sample they are most of an accumulator's bytes)."""
    out = []
    for over in config.rollups:
        row = marked(config, key, over)
        if row in published:
            out += [(row, _linear_part(config.aggregator, acc)) for acc in parts if acc is not None and acc.n]
    return out


def _linear_part(aggregator, acc):
    """``acc`` as the rows over reports read it: a new accumulator without its clients (``acc`` itself
    when it has none)."""
    if acc.clients.size == 0 and acc.sample_owner.size == 0:
        return acc
    return aggregator.merge([aggregator.create(), acc], clients=False)


def batch_rollups(config, window: tuple, parts: dict, held_devices: dict | None = None) -> dict:
    """Batch: ``{marked key: {kind: rows}}`` of one window's published rollup rows from its capped keys'
    ``{key: (released, held)}`` accumulators; the job makes the same from the same functions over
    workers (``transforms.estimate``). Under ``privacy.unit: device``, ``held_devices``: ``{key: the
    devices of its held slices}`` (:func:`~ldp_marginals.ldp.aggregate.kept_devices` of the slices before
    they merge, since a merge does not keep them)."""
    aggregator = config.aggregator
    if not config.rollups:
        return {}
    if config.counts_devices:
        if held_devices is None:
            raise ValueError(f"collection {config.name!r}: rollups under privacy.unit 'device' count the devices of "
                             "the withheld slices, got held_devices=None")
        held = {key: held_devices.get(key, ()) for key in parts}
    else:
        held = {key: 0 if h is None else h.n for key, (_, h) in parts.items()}
    published, thin = rollup_decision(config, held, {key: kind_part(config, *pair) for key, pair in parts.items()}
                                      if config.sampling is not None else None)
    sums = {}
    for key, pair in sorted(parts.items()):
        for row, acc in rollup_parts(config, published, key, pair):
            sums[row] = aggregator.merge([sums.get(row) or aggregator.create(), acc])
    return {row: rollup_rows(config, window, row, acc, thin.get(row)) for row, acc in sorted(sums.items())}


def rollup_decision(config, held: dict, kinds: dict | None) -> tuple:
    """``(published, {marked key: {set: Thin}})``: the rollup rows a window publishes
    (:func:`~.rollups.rollup_plan` from ``held``) and, under a whole-report kind (``kinds``: ``{capped key:
    KindPart}``), the sets each withholds (:func:`~.kind_rollups.rollup_thin`); None: a per-bit channel."""
    published, members, own = rollup_plan(config, held)
    return published, ({} if kinds is None else rollup_thin(config, members, own, kinds))


def batch_window(config, window: tuple, slices, ledger=None) -> dict:
    """Batch in one process (the job spreads the same steps over workers: ``transforms.estimate``):
    ``{capped key: {kind: rows}}`` of one window from its slices' complete accumulators ``[(slice
    start, dims, accumulator)]``, and ``{marked key: {kind: rows}}`` of its rollup rows; ``ledger``: the
    run's :class:`~.releases.Verdict` over every window, or None (:func:`ledger_verdict`)."""
    aggregator = config.aggregator
    decided = decide(config, {}, window_weights(slices))
    parts, held_slices, thin = {}, {}, {}
    for start, dims, acc in slices:
        key, released = batch_route(config, decided, dims, acc)
        released = released and (ledger is None or (start, dims) not in ledger.withheld)
        parts.setdefault(key, [None, None])
        if released and config.sampling is not None and config.window.overlapping and acc.n:   # rule per slice
            thin[key] = merge_thin(thin.get(key, {}), atom_thin_sets(config, acc))
        if not released:
            held_slices.setdefault(key, []).append(acc)
        at = 0 if released else 1
        parts[key][at] = aggregator.merge([parts[key][at] or aggregator.create(), acc])
    extra = {} if ledger is None else {"ledger": ledger}
    out = {key: batch_key(config, window, key, *pair, **extra, **({"atom_thin": thin[key]} if key in thin else {}))
           for key, pair in sorted(parts.items())}
    if not config.rollups:
        return out
    held_devices = {key: kept_devices(accs) for key, accs in held_slices.items()} if config.counts_devices else None
    return out | batch_rollups(config, window, parts, held_devices)


def ledger_verdict(config, earlier, windows: dict, run_id: str = ""):
    """Batch in one process: the release ledger's :class:`~.releases.Verdict` of a run whose windows are
    ``{window: [(slice start, dims, accumulator)]}`` (every window of the run), given the ``earlier``
    releases (:func:`~.releases.verdict`)."""
    slices = {}
    for parts in windows.values():
        for start, dims, acc in parts:
            slices[(start, dims)] = ledger_slice(config, start, dims, acc)
    caps = {w: decide(config, {}, window_weights(parts)) for w, parts in windows.items()}
    return verdict(config, earlier, sorted(slices.values()), caps, run_id)


def window_weights(slices) -> dict:
    """``{name: {value: reports}}`` of a window's slices: what the cap is decided from."""
    return value_weights((dims, acc.n) for _, dims, acc in slices)
