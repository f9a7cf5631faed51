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
bound devices), and the assumption is not needed: a backfilled report can *swap* which report a device
keeps (or which key it is kept in) and leave every count unchanged. So each slice and key also records
the digest of its kept (device, rank) pairs (:func:`~ldp_marginals.ldp.devices.kept_digest`, which adds
over slices), and a block whose digests differ between the runs is withheld (:data:`CHANGED`); an earlier
release without digests (a ledger of format 1, or a run under the report unit) cannot rule a swap out,
and its blocks are withheld too (:data:`UNKNOWN`). A release also records, per slice, a few *witnesses*
of its devices (the bottom :data:`WITNESSES` by :func:`~ldp_marginals.ldp.devices.witness_order`, each
as a SHA-256 digest of its device key, never the key): device tokens are scoped to a collection, so
another collection whose release shares a witness was run over the same reports under another name,
which the driver refuses (:func:`shared_devices`). An equal release (the same input and config again)
adds no cell and is republished.
"""
from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

import numpy as np

from ldp_marginals.ldp.devices import witness_order
from ldp_marginals.transforms.publication.cap import capped
from ldp_marginals.transforms.publication.release import releasable

LEDGER_FORMAT = 2          # 2: slices carry the digest of their kept ranks, releases their witnesses
READABLE_FORMATS = (1, 2)  # 1: before issue 47, read as digests unknown and no witnesses
WITNESSES = 4              # witnesses of a slice's devices a release records
CUT, CHANGED, GROUPED, UNKNOWN = "cut", "changed", "grouped", "unknown"
REASONS = {
    CUT: "its slice cuts a slice an earlier run into this output published (the ledger counts reports per "
         "slice, so the parts are unknown and could be single reports)",
    CHANGED: "its reports differ from what an earlier run published over the same time and key by fewer than "
             "min_reports, or in slices the ledger cannot tell apart (under the device unit: its devices keep "
             "other reports than they did, in number or in which)",
    UNKNOWN: "an earlier run into this output recorded no digest of the reports its devices kept (a ledger "
             "written before issue 47, or a run under the report unit), so a swap of kept reports cannot be "
             "ruled out (--new-ledger starts over, and says what that gives up)",
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
    kept: str | None = None   # device unit, published: 32 hex digits, the digest of its kept (device, rank)
                              # pairs (ldp.devices.kept_digest); None: not published, report unit, format 1


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
    witnesses: tuple = ()   # device unit: (slice start, end, (witness digests)) per slice, sorted
    dimensions: tuple | None = None   # the declared dimension names, sorted; None: not recorded (an entry
                                      # written before they were), so a change of them cannot be checked
    shared: tuple = ()      # device unit: witness digests of OTHER collections' releases that this run's devices
                            # hold (any device, not only its own witnesses: added devices cannot hide them)


class Verdict(NamedTuple):
    withheld: dict    # {(slice start, dims): reason code}: released slices the ledger withholds
    clients: dict     # {(window, capped key): reason code}: client rows the ledger withholds
    release: Release  # what the run publishes, for the ledger
    held: dict        # {(window, capped key): (reports, reason codes)} of the withheld slices


def key_digest(dims: tuple) -> str:
    """16 hex digits of SHA-256 over the dimensions (sorted ``(name, value)`` pairs): the ledger
    matches keys without listing values (the cap keeps values past ``max_values`` out of outputs)."""
    return hashlib.sha256(json.dumps([list(p) for p in dims]).encode()).hexdigest()[:16]


def digest_hex(kept) -> str:
    """32 hex digits of a digest of kept pairs (uint64[2], :func:`~ldp_marginals.ldp.devices.kept_digest`)."""
    return "".join(f"{int(x):016x}" for x in kept)


def _digest_sum(records) -> tuple | None:
    """The digest of the kept pairs of ``records`` together (per lane the sum mod 2^64), None when one of
    them has none."""
    total = (0, 0)
    for r in records:
        if r.kept is None:
            return None
        total = tuple((t + int(r.kept[16 * i:16 * (i + 1)], 16)) % 2 ** 64 for i, t in enumerate(total))
    return total


def _witness(device_key: int) -> str:
    """16 hex digits of SHA-256 over a device key: a witness names a device without its key."""
    return hashlib.sha256(b"ldp-marginals/ledger-witness/" + int(device_key).to_bytes(8, "little")).hexdigest()[:16]


def witness_candidates(device_keys) -> tuple:
    """``((order, witness), ...)``: the :data:`WITNESSES` devices of ``device_keys`` of smallest
    :func:`~ldp_marginals.ldp.devices.witness_order`; a slice's witnesses are the smallest of its keys'
    candidates."""
    keys = np.asarray(device_keys, dtype=np.uint64)
    if keys.size == 0:
        return ()
    order = witness_order(keys)
    first = np.argpartition(order, WITNESSES)[:WITNESSES] if keys.size > WITNESSES else np.arange(keys.size)
    return tuple(sorted((int(order[i]), _witness(int(keys[i]))) for i in first))


def ledger_slice(config, start: int, dims: tuple, acc, foreign=frozenset()) -> tuple:
    """What the ledger reads of one settled slice and key of a batch run, for :func:`verdict`: ``(slice
    start, dims, reports, devices, releasable, kept digest, witness candidates, shared)``; the last four
    under the device unit only (0, None, () and ()). ``foreign``: the witness digests of other collections'
    releases; ``shared`` is those of them among the slice's devices (a SHA-256 per device, only when the
    ledger holds another device-unit collection). Comparing every device, not only the slice's own
    witnesses, matters: an attacker's devices whose tokens it ground to the smallest (public) witness
    order took every witness of a renamed run, which then shared none (tests/pipelines/test_attacks_issue47.py)."""
    device = config.device is not None
    shared = ()
    if device and foreign:
        shared = tuple(sorted({w for w in (_witness(int(k)) for k in acc.used_devices) if w in foreign}))
    return (int(start), dims, int(acc.n), int(acc.n_devices) if device else 0, releasable(config, acc),
            digest_hex(acc.kept) if device else None, witness_candidates(acc.used_devices) if device else (),
            shared)


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


def _block(olds: list, news: list, published: set, m: int, device: bool, exact: bool | None = None) -> tuple:
    """``(reason or None, changed)`` of one block: why its new published slices must be withheld, and
    whether its reports differ in number between the runs. ``exact`` (default ``device``): a difference or
    a remainder must be empty, not merely hold ``min_reports`` reports (the device unit: counts of reports do
    not bound devices; whole-report kinds: a row rests on the reports whose subset or coefficient holds its
    set, which a cell of ``min_reports`` reports may hold once: a backfill of ``min_reports`` reports, one of
    them holding a pair, differenced that pair's rows, tests/pipelines/test_attacks_issue47.py)."""
    exact = device if exact is None else exact
    if not any(o.released for o in olds) or not any((a.start, a.key) in published for a in news):
        return None, False
    if any(_cuts(o, a) for o in olds for a in news):
        return CUT, False
    if sum(o.n for o in olds) != sum(a.n for a in news) or (device and sum(o.devices for o in olds) != sum(a.devices for a in news)):
        if not exact and len(olds) == 1 and len(news) == 1 and abs(olds[0].n - news[0].n) >= m:
            return None, True
        return CHANGED, True
    if device:
        reason = _kept_changed(olds, news)
        if reason is not None:
            return reason, True
    big = max(olds + news, key=lambda s: (s.end - s.start, s in news))
    if any(_cuts(big, s) or not (big.start <= s.start and s.end <= big.end) for s in olds + news):
        return CUT, False
    if big in olds:
        rest = sum(a.n for a in news if (a.start, a.key) not in published)
    else:
        rest = sum(o.n for o in olds if not o.released)
    return (None if rest == 0 or (not exact and rest >= m) else CHANGED), False


def _kept_changed(olds: list, news: list) -> str | None:
    """Under the device unit, a block whose counts agree: :data:`UNKNOWN` when an earlier published
    slice has no digest, :data:`CHANGED` when the kept pairs over the block differ between the runs
    (their digests add over slices), else None. An earlier slice its run did not publish has no digest;
    the remainder rule withholds such a block."""
    if any(o.released and o.kept is None for o in olds):
        return UNKNOWN
    if not all(o.released for o in olds):
        return None
    return None if _digest_sum(olds) == _digest_sum(news) else CHANGED


def verdict(config, earlier, slices, caps: dict, run_id: str = "") -> Verdict:
    """What the ledger withholds of a batch run of ``config``'s collection, and the run's release.

    ``earlier``: the :class:`Release` s of earlier runs (the ledger's, oldest first); ``slices``: every
    slice and key of this run, :func:`ledger_slice` (``(slice start, dims, reports, devices, releasable)``
    with the kept digest and witness candidates; releasable by the release rule alone; without the last
    two, the digests are unknown); ``caps``: ``{window: decided}`` of every window of the run (:mod:`.cap`)."""
    window = config.window
    m, device = config.min_reports, config.device is not None
    exact = device or config.channel_kind != "per_bit"   # _block: differences and remainders must be empty
    news, candidates, shared = {}, {}, set()
    for start, dims, n, devices, ok, *more in slices:
        kept, cands, found = (list(more) + [None, (), ()])[:3]
        shared.update(found if device else ())
        news[(int(start), dims)] = SliceRecord(key_digest(dims), int(start), window.slice_end(int(start)), int(n),
                                               int(devices), bool(ok), kept if device else None)
        if device and cands:
            candidates.setdefault(int(start), set()).update(cands)
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
                    reason, differs = _block(old_block, new_block, published, m, device, exact)
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
    release = Release(run_id, m, config.unit,
                      tuple(sorted(s._replace(released=(s.start, s.key) in published,
                                              kept=s.kept if (s.start, s.key) in published else None)
                                   for s in news.values())),
                      tuple(sorted({c for wk, c in contents.items() if wk not in clients and config.client_extremes})),
                      bool(getattr(config, "rollups", ())),
                      tuple(sorted((start, window.slice_end(start), tuple(sorted(w for _, w in sorted(c)[:WITNESSES])))
                                   for start, c in candidates.items())),
                      tuple(sorted(d.name for d in config.dimensions)), tuple(sorted(shared)))
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
    """A release as the ledger of :data:`LEDGER_FORMAT` writes it."""
    return {"run_id": release.run_id, "min_reports": release.min_reports, "unit": release.unit,
            "slices": [list(s) for s in release.slices], "clients": [[c.start, c.end, list(c.keys), c.n]
                                                                     for c in release.clients],
            "rollups": release.rollups, "witnesses": [[a, b, list(ws)] for a, b, ws in release.witnesses],
            "dimensions": None if release.dimensions is None else list(release.dimensions),
            "shared": list(release.shared)}


def release_from_json(obj: dict, ledger_format: int = LEDGER_FORMAT) -> Release:
    """A release a ledger of ``ledger_format`` wrote. Format 1 (before issue 47) has no digests of the
    kept pairs (read as unknown: :data:`UNKNOWN` withholds what they would decide) and no witnesses."""
    try:
        if ledger_format == 1:
            slices = tuple(SliceRecord(str(k), int(a), int(b), int(n), int(d), bool(r), None)
                           for k, a, b, n, d, r in obj["slices"])
            witnesses = ()
        elif ledger_format == 2:
            slices = tuple(SliceRecord(str(k), int(a), int(b), int(n), int(d), bool(r), None if h is None else str(h))
                           for k, a, b, n, d, r, h in obj["slices"])
            witnesses = tuple((int(a), int(b), tuple(str(w) for w in ws)) for a, b, ws in obj["witnesses"])
        else:
            raise ValueError(f"ledger_format must be one of {READABLE_FORMATS}, got ledger_format={ledger_format!r}")
        return Release(str(obj["run_id"]), int(obj["min_reports"]), str(obj["unit"]), slices,
                       tuple(ClientRecord(int(a), int(b), tuple(str(k) for k in keys), int(n))
                             for a, b, keys, n in obj["clients"]),
                       bool(obj.get("rollups", False)), witnesses,
                       None if obj.get("dimensions") is None else tuple(str(d) for d in obj["dimensions"]),
                       tuple(str(w) for w in obj.get("shared", ())))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"a release ledger entry is malformed ({type(err).__name__}: {err})") from None


def merged(earlier: list, release: Release) -> list:
    """The ledger's releases after ``release``: appended unless an earlier one holds the same slices and
    client rows (a rerun over the same input and config adds nothing)."""
    if any((r.slices, r.clients) == (release.slices, release.clients) for r in earlier):
        return list(earlier)
    return list(earlier) + [release]


def shared_devices(earlier: dict, staged: dict) -> tuple | None:
    """``(collection, other)``: a collection whose release of this run (``staged``, ``{name: Release}``)
    shares a witness with a release of another collection, in the ledger (``earlier``, ``{name:
    [Release]}``) or of this run; None when none does. Device tokens are scoped to a collection
    (docs/client.md, section 5), so a shared device is the same reports under another name: the ledger,
    kept per collection, would compare them with nothing."""
    def seen(releases) -> set:
        return {w for r in releases for _, _, ws in r.witnesses for w in ws}

    for name, release in sorted(staged.items()):
        mine = seen([release]) | set(release.shared)
        if not mine:
            continue
        others = {n: list(rs) for n, rs in earlier.items() if n != name}
        for n, r in staged.items():
            if n != name:
                others.setdefault(n, []).append(r)
        for other, releases in sorted(others.items()):
            if mine & seen(releases):
                return name, other
    return None
