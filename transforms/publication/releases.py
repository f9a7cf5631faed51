"""The release ledger's rule: what a batch run may publish, given what earlier runs into the same output
published (docs/design.md, section 7, "The release ledger"). Beam-free; the file handling is
:mod:`ldp_marginals.pipelines.release_ledger`.

A run's *release* of a collection (:class:`Release`) is what the ledger keeps of it: every slice and
key the run saw (the key as a digest of its dimensions, the slice's bounds, its reports and devices,
and whether the run published it) and every window and capped key whose extremes over clients it may
have published (the digests of the keys whose released slices the capped key held, and their
reports). Counts only: no report content, no dimension value in clear.

Each run's published rows are functions of sums over whole atoms (a released slice and key, in batch)
and of client rows grouped per window and capped key. Two runs over the same time publish sums over
different sets of reports, and a combination of both runs' rows is a function of the *common
refinement*: the reports grouped by which published sets hold them. The ledger cannot recognise
reports (it keeps no content), so it reasons on counts, under one stated assumption: within a
slice and key, a later run's reports are an earlier run's plus or minus whole reports (a backfill adds
some, a retention removes some), never others in their place. :func:`verdict` withholds every slice
of the new run whose cells against any earlier release could hold between 1 and ``min_reports - 1``
reports, and every client row whose clients an earlier run grouped otherwise:

- per earlier release and key, the slices of both runs form *blocks* (connected by overlapping time);
  a block where a new slice cuts an earlier slice (neither holds the other) has cells of unknown size:
  withheld (:data:`CUT`);
- a block whose reports differ in number between the runs: the difference is a cell; it is published
  only when the block is one slice of each run and the difference is at least ``min_reports``, else
  withheld (:data:`CHANGED`);
- a block with the same reports is one slice of one run holding slices of the other; the cell left
  over (the big slice minus the small slices the other run published) must be empty or hold at least
  ``min_reports`` reports, else the new slices are withheld (:data:`CHANGED`);
- client rows (:data:`GROUPED`): a window and capped key publishes them only when every earlier client
  row over any of its keys and time is the same window, keys and reports (an idempotent rerun), or
  there is none and no earlier run published its keys in slices that cut the window or in reports
  that changed; and a new slice inside an earlier client row's window is published only when the new
  run holds that window and capped key exactly as the earlier one did.

Under ``privacy.unit: device`` a difference or a remainder must be empty (counts of reports do not
bound devices). An equal release (the same input and config again) adds no cell and is republished.
"""
from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

from ldp_marginals.transforms.publication.cap import capped

LEDGER_FORMAT = 1
CUT, CHANGED, GROUPED = "cut", "changed", "grouped"
REASONS = {
    CUT: "its slice cuts a slice an earlier run into this output published (the ledger counts reports per "
         "slice, so the parts are unknown and could be single reports)",
    CHANGED: "its reports differ from what an earlier run published over the same time and key by fewer than "
             "min_reports, or in slices the ledger cannot tell apart",
    GROUPED: "an earlier run into this output published extremes over clients that grouped these reports "
             "otherwise (another window, capped key or reports)",
}


class SliceRecord(NamedTuple):
    key: str          # digest of the slice's dimensions (:func:`key_digest`)
    start: int        # ms
    end: int          # ms
    n: int            # reports
    devices: int      # distinct devices (0 when not counted)
    released: bool    # published by its run


class ClientRecord(NamedTuple):
    start: int        # the window, ms
    end: int
    keys: tuple       # sorted digests of the keys whose released slices the capped key held
    n: int            # their reports


class Release(NamedTuple):
    run_id: str
    min_reports: int
    unit: str         # report or device
    slices: tuple     # SliceRecord, sorted
    clients: tuple    # ClientRecord, sorted
    rollups: bool = False   # the collection published rollup rows (which the ledger does not cover yet)


class Verdict(NamedTuple):
    withheld: dict    # {(slice start, dims): reason code}: released slices the ledger withholds
    clients: dict     # {(window, capped key): reason code}: client rows the ledger withholds
    release: Release  # what the run publishes, for the ledger
    held: dict        # {(window, capped key): (reports, reason codes)} of the withheld slices


def key_digest(dims: tuple) -> str:
    """16 hex digits of SHA-256 over the dimensions (sorted ``(name, value)`` pairs): the ledger
    matches keys without listing values (the cap keeps values past ``max_values`` out of outputs)."""
    return hashlib.sha256(json.dumps([list(p) for p in dims]).encode()).hexdigest()[:16]


def _cuts(a, b) -> bool:
    """``a`` and ``b`` (intervals) overlap and neither holds the other."""
    overlap = a.start < b.end and b.start < a.end
    return overlap and not (a.start <= b.start and b.end <= a.end) and not (b.start <= a.start and a.end <= b.end)


def _blocks(olds: list, news: list) -> list:
    """``[(olds, news)]``: the slices of both runs grouped by overlapping time (each run's are disjoint)."""
    tagged = sorted([(s.start, s.end, 0, i) for i, s in enumerate(olds)] + [(s.start, s.end, 1, i) for i, s in enumerate(news)])
    out, end = [], None
    for start, stop, side, i in tagged:
        if end is None or start >= end:
            out.append(([], []))
            end = stop
        end = max(end, stop)
        out[-1][side].append((olds if side == 0 else news)[i])
    return out


def _block(olds: list, news: list, published: set, m: int, device: bool) -> tuple:
    """``(reason or None, changed)`` of one block: why its new published slices must be withheld, and
    whether its reports differ in number between the runs."""
    if not any(o.released for o in olds) or not any((a.start, a.key) in published for a in news):
        return None, False
    if any(_cuts(o, a) for o in olds for a in news):
        return CUT, False
    if sum(o.n for o in olds) != sum(a.n for a in news) or (device and sum(o.devices for o in olds) != sum(a.devices for a in news)):
        if not device and len(olds) == 1 and len(news) == 1 and abs(olds[0].n - news[0].n) >= m:
            return None, True
        return CHANGED, True
    big = max(olds + news, key=lambda s: (s.end - s.start, s in news))
    if any(_cuts(big, s) or not (big.start <= s.start and s.end <= big.end) for s in olds + news):
        return CUT, False
    if big in olds:
        rest = sum(a.n for a in news if (a.start, a.key) not in published)
    else:
        rest = sum(o.n for o in olds if not o.released)
    return (None if rest == 0 or (not device and rest >= m) else CHANGED), False


def verdict(config, earlier, slices, caps: dict, run_id: str = "") -> Verdict:
    """What the ledger withholds of a batch run of ``config``'s collection, and the run's release.

    ``earlier``: the :class:`Release` s of earlier runs (the ledger's, oldest first); ``slices``: every
    slice and key of this run, ``(slice start, dims, reports, devices, releasable)`` (releasable by the
    release rule alone); ``caps``: ``{window: decided}`` of every window of the run (:mod:`.cap`)."""
    window = config.window
    m, device = config.min_reports, config.device is not None
    news = {}
    for start, dims, n, devices, ok in slices:
        news[(int(start), dims)] = SliceRecord(key_digest(dims), int(start), window.slice_end(int(start)), int(n),
                                               int(devices), bool(ok))
    dims_of = {(s.start, s.key): dims for (_, dims), s in news.items()}
    published = {(s.start, s.key) for s in news.values() if s.released}
    withheld, changed = {}, set()
    guarded = m > 1 and earlier
    by_key = {}
    for s in news.values():
        by_key.setdefault(s.key, []).append(s)
    while guarded:
        before = len(withheld)
        for release in earlier:
            olds_by_key = {}
            for o in release.slices:
                olds_by_key.setdefault(o.key, []).append(o)
            for key, olds in olds_by_key.items():
                for old_block, new_block in _blocks(olds, by_key.get(key, [])):
                    reason, differs = _block(old_block, new_block, published, m, device)
                    if differs:
                        changed.update((a.start, a.key) for a in new_block)
                    for a in new_block if reason else ():
                        if (a.start, a.key) in published:
                            published.discard((a.start, a.key))
                            withheld[(a.start, dims_of[(a.start, a.key)])] = reason
            for start, key in _regrouped(release, _contents(config, news, published, caps), published, news, dims_of):
                published.discard((start, key))
                withheld[(start, dims_of[(start, key)])] = GROUPED
        if len(withheld) == before:
            break
    contents = _contents(config, news, published, caps)
    clients = {}
    if config.client_extremes:
        for (w, key), c in contents.items():
            reason = _client_reason(c, earlier, changed, news, dims_of) if guarded else None
            if reason is not None:
                clients[(w, key)] = reason
    release = Release(run_id, m, "device" if device else "report",
                      tuple(sorted(s._replace(released=(s.start, s.key) in published) for s in news.values())),
                      tuple(sorted({c for wk, c in contents.items() if wk not in clients and config.client_extremes})),
                      bool(getattr(config, "rollups", ())))
    held = {}
    for (start, dims), code in withheld.items():
        for w in window.windows_of_slice(start):
            if w in caps:
                n, codes = held.get((w, capped(dims, caps[w])), (0, frozenset()))
                held[(w, capped(dims, caps[w]))] = (n + news[(start, dims)].n, codes | {code})
    return Verdict(withheld, clients, release, held)


LEDGER_REASON = "ledger:"   # how the reason of every row the ledger withholds starts (readers match on it)


def ledger_part(ledger, window: tuple, key: tuple) -> tuple:
    """``(reports, reason, client reason)`` the ledger withholds of one window and capped key under the
    run's :class:`Verdict` ``ledger`` (None: nothing): its withheld slices' reports and the reason of
    their ``withheld`` row, and why its client rows are withheld (or None)."""
    if ledger is None:
        return 0, None, None
    n, codes = ledger.held.get((tuple(window), key), (0, ()))
    reason = (f"{LEDGER_REASON} {n} reports withheld: " + "; ".join(REASONS[c] for c in sorted(codes))
              + " (docs/design.md, 'The release ledger')") if n else None
    client = ledger.clients.get((tuple(window), key))
    return n, reason, (f"{LEDGER_REASON} client extremes withheld: {REASONS[client]}" if client else None)


def _regrouped(release: Release, contents: dict, published: set, news: dict, dims_of: dict) -> list:
    """The published new slices ``(start, key)`` inside the window of one of ``release``'s client rows
    whose window and capped key the new run does not hold as it did (same keys, same reports): the
    earlier client rows grouped their clients over the window whole, and a part of it published
    apart would split those groups."""
    same = {(c.start, c.end, c.keys, c.n) for c in contents.values()}
    out = []
    for c in release.clients:
        if (c.start, c.end, c.keys, c.n) in same:
            continue   # the same window and capped key, over the same reports: grouped alike
        for start, key in sorted(published):
            s = news[(start, dims_of[(start, key)])]
            if key in c.keys and s.start < c.end and c.start < s.end:
                out.append((start, key))
    return out


def _contents(config, news: dict, published: set, caps: dict) -> dict:
    """``{(window, capped key): ClientRecord}`` of the released slices each window and capped key holds
    (the content its client rows would group)."""
    out = {}
    for (start, dims), s in news.items():
        if (s.start, s.key) not in published:
            continue
        for w in config.window.windows_of_slice(start):
            if w not in caps:
                continue
            key = capped(dims, caps[w])
            keys, n = out.get((w, key), ((), 0))
            out[(w, key)] = (tuple(sorted(set(keys) | {s.key})), n + s.n)
    return {(w, key): ClientRecord(int(w[0]), int(w[1]), keys, n) for (w, key), (keys, n) in out.items()}


def _client_reason(c: ClientRecord, earlier, changed: set, news: dict, dims_of: dict) -> str | None:
    """Why the client rows of a window and capped key (content ``c``) must be withheld, or None."""
    inside = lambda s: s.start < c.end and c.start < s.end   # noqa: E731 - overlaps the window
    for release in earlier:
        for old in release.clients:
            if inside(old) and set(old.keys) & set(c.keys) and (old.start, old.end, old.keys, old.n) != tuple(c):
                return GROUPED
    for release in earlier:
        if any(o.key in c.keys and o.released and inside(o) and not (o.start <= c.start and c.end <= o.end)
               for o in release.slices):
            return GROUPED
    if any(key in c.keys and c.start <= start < c.end for start, key in changed):
        return GROUPED
    return None


# -- the ledger's records ------------------------------------------------------------------------------

def release_to_json(release: Release) -> dict:
    return {"run_id": release.run_id, "min_reports": release.min_reports, "unit": release.unit,
            "slices": [list(s) for s in release.slices], "clients": [[c.start, c.end, list(c.keys), c.n]
                                                                     for c in release.clients],
            "rollups": release.rollups}


def release_from_json(obj: dict) -> Release:
    try:
        return Release(str(obj["run_id"]), int(obj["min_reports"]), str(obj["unit"]),
                       tuple(SliceRecord(str(k), int(a), int(b), int(n), int(d), bool(r))
                             for k, a, b, n, d, r in obj["slices"]),
                       tuple(ClientRecord(int(a), int(b), tuple(str(k) for k in keys), int(n))
                             for a, b, keys, n in obj["clients"]),
                       bool(obj.get("rollups", False)))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"a release ledger entry is malformed ({type(err).__name__}: {err})") from None


def merged(earlier: list, release: Release) -> list:
    """The ledger's releases after ``release``: appended unless an earlier one holds the same slices and
    client rows (a rerun over the same input and config adds nothing)."""
    if any((r.slices, r.clients) == (release.slices, release.clients) for r in earlier):
        return list(earlier)
    return list(earlier) + [release]
