"""The layout of a job's output directory, owned here and nowhere else (Beam-free: the sinks, the
readers and the dashboard all use it).

::

    DIR/manifest.json                      the run that owns the directory (written last, atomically):
                                           its id, mode, summary and every file set it wrote
    DIR/summary.json                       reports counted and dead-lettered, by reason (batch runs)
    DIR/collections.json                   each collection's bits, channels, epsilon, min_reports
    DIR/state_shape.json                   each collection's counted sets, extremes and window: what a
                                           streaming job resumed from a savepoint must match
    DIR/<kind>/<stem>.avro                 the rows of one window, collection (or file group), capped key
                                           and pane: the contract (Avro schemas in this folder)
    DIR/parquet/<kind>/<group>/<stem>.parquet   the same rows as Parquet, one folder per collection: the
                                           final rows of its keys only (a plain glob of the folder sums
                                           right), beside
    DIR/parquet/<kind>/<group>/panes/      a streaming window's panes before its final one
    DIR/parquet/<kind>/<group>/rollups/    rollup rows (totals over dimensions; rollups/panes/ likewise)
    DIR/_runs/<run id>/<kind>/<stem>.json  one entry per file set written: its files and row count
    DIR/_staging/<run id>/                 a batch run's own outputs (the same layout) while it runs
    DIR/_ledger/releases.json              the release ledger: what each batch run into DIR published, per
                                           collection, slice and key (counts only; pipelines/release_ledger.py)

A stem is ``<window start>_<window end>_<collection>_<key>_pane<NNN>`` with UTC times such as
``20260101T000000000Z`` (fixed width, so names sort by window), or ``global_<collection>_<key>_pane<NNN>``
for the global window. ``<key>`` names the capped key (the rows' dimensions): ``k`` and 12 hex digits
of a hash of it (:func:`key_id`); a collection without dimensions has one key and no ``_<key>`` part.
Each window and capped key is published apart (its own files), so no writer holds a collection's
every key. Panes of one window and key accumulate in streaming: a reader takes the latest.

**Every row says its pane** (schema version 2, :func:`pane_fields`): ``pane_index``, ``pane_timing``
(``EARLY``, ``ON_TIME``, ``LATE``, as Beam names them), ``final`` (the window's last pane: its answer) and
``rollup`` (a total over dimensions, not a key's row). A query over every file filters on the columns
(BigQuery's tables hold every pane); the Parquet folders do it for a plain glob: a collection's folder
holds only final key rows, each window and key once, so ``read_parquet('DIR/parquet/marginals/app/*.parquet')``
neither counts a window twice (early and on time) nor a key twice (in itself and in a rollup).

**A run owns its outputs.** Every file is written under a temporary name and renamed, and then its
entry is written the same way, so an entry names only whole files. A batch run writes everything
under ``_staging/<run id>/`` and leaves the previous run's manifest and files alone; when it has
finished it publishes (:func:`ldp_marginals.transforms.manifest.finish_run`): a manifest naming its
staged files, then its files copied to their places, then a manifest naming those, then the files of
earlier runs removed, except the files of a window and key that an earlier run published and this
run's release ledger withholds whole: those stay, their entries carried into the new manifest with
``from_run`` naming the run that wrote them (a rerun never unpublishes; docs/design.md, "The release
ledger", *What stays published*). A manifest is replaced atomically and names only files that no later step
overwrites, so a run killed at any point leaves the previous run, or itself, readable whole. A
streaming run writes, when it starts, a manifest that says so (``complete`` false) and whose files
are its entries as they land. Readers (:func:`load_manifest`) read the files of the manifest and
nothing else: files of another run never mix in, and a file whose rows disagree with its entry is an
error that names it.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os

from ldp_marginals.schemas import schema_version
from ldp_marginals.schemas.collection import ROLLED_UP

MARGINALS, TABLES, EXTREMES, WITHHELD, DEAD_LETTERS = "marginals", "tables", "extremes", "withheld", "dead_letters"
CONDITIONALS, MEANS = "conditionals", "means"
CONSISTENT_TABLES = "consistent_tables"   # beside each window's tables: non-negative, consistent, summing to one
ESTIMATE_KINDS = (MARGINALS, TABLES, CONSISTENT_TABLES, EXTREMES, CONDITIONALS, MEANS, WITHHELD)   # rows per window and key
KINDS = ESTIMATE_KINDS + (DEAD_LETTERS,)
# each kind's Avro schema (schemas/<name>.avsc)
SCHEMA_OF = {MARGINALS: "marginal_estimate", TABLES: "table_cell", CONSISTENT_TABLES: "consistent_table_cell",
             EXTREMES: "extreme_estimate",
             CONDITIONALS: "conditional_estimate", MEANS: "mean_estimate", WITHHELD: "withheld_window",
             DEAD_LETTERS: "dead_letter"}
COLLECTIONS_FILE = "collections.json"
MANIFEST_FILE = "manifest.json"
RUNS_DIR = "_runs"        # DIR/_runs/<run id>/<kind>/<stem>.json: the entries of a run's file sets
STAGING_DIR = "_staging"  # DIR/_staging/<run id>/: a batch run's outputs until it publishes them
PARQUET_DIR = "parquet"   # DIR/parquet/<kind>/<group>/<stem>.parquet
MANIFEST_FORMAT = 1
STATE_SHAPE_FILE = "state_shape.json"   # what a job resumed from a savepoint must match (pipelines.run)
SUMMARY_FILE = "summary.json"
LEDGER_DIR = "_ledger"             # DIR/_ledger/: the release ledger (and a batch run's staged releases)
LEDGER_FILE = "releases.json"      # DIR/_ledger/releases.json
AVRO, PARQUET, ENTRY = ".avro", ".parquet", ".json"
PANES_FOLDER = "panes"       # DIR/parquet/<kind>/<group>/panes/: panes before a window's final one
ROLLUPS_FOLDER = "rollups"   # DIR/parquet/<kind>/<group>/rollups/: rollup rows (and rollups/panes/)
PANE_INDEX, PANE_TIMING, FINAL, ROLLUP, N_COUNTS = "pane_index", "pane_timing", "final", "rollup", "n_counts"
EARLY_PANE, ON_TIME_PANE, LATE_PANE = "EARLY", "ON_TIME", "LATE"   # a pane's timing, as Beam's PaneInfoTiming names it
PANE_TIMINGS = (EARLY_PANE, ON_TIME_PANE, LATE_PANE)
N_REPORTS, N_CLIENTS, N_DEVICES = "reports", "clients", "devices"   # what an extremes row's n counts
FROM_RUN = "from_run"      # a manifest entry kept from an earlier run (its id), and the column readers add for it
DEAD_LETTER_GROUP = "all"  # the file group of the job's own dead letters (they have no collection)

def check_kind(kind: str) -> str:
    if kind not in SCHEMA_OF:
        raise ValueError(f"kind must be one of {sorted(SCHEMA_OF)}, got kind={kind!r}")
    return kind


def is_rollup(key) -> bool:
    """Whether a capped key (sorted ``(name, value)`` pairs, or a dict) is a rollup row's: a dimension's
    value is ``__all__``."""
    return any(v == ROLLED_UP for _, v in dict(key).items())


def pane_fields(pane: int, timing: str, final: bool, key=()) -> dict:
    """The fields that say which pane a row of an estimate kind is of (module docstring), the same for
    every row of one file set: ``pane`` its index, ``timing`` one of :data:`PANE_TIMINGS`, ``final``
    whether it is the window's last, ``key`` the capped key (a rollup row's has ``__all__`` values)."""
    if timing not in PANE_TIMINGS:
        raise ValueError(f"timing must be one of {list(PANE_TIMINGS)}, got timing={timing!r}")
    if isinstance(pane, bool) or not isinstance(pane, int) or pane < 0:
        raise ValueError(f"pane must be an int >= 0, got pane={pane!r}")
    return {PANE_INDEX: pane, PANE_TIMING: timing, FINAL: bool(final), ROLLUP: is_rollup(key)}


def entry_final(manifest: dict, entry: dict) -> bool:
    """Whether a manifest entry holds a window's final pane: its ``final``, or for an entry written before
    entries said (schema version 1), true in a batch run (one pane per window, final) and false in a
    streaming one (a reader cannot tell)."""
    if FINAL in entry:
        return bool(entry[FINAL])
    return manifest.get("mode") == "batch"


def stamp(ms: int) -> str:
    """UTC ``YYYYMMDDTHHMMSSmmmZ``: fixed width, so names sort by time."""
    t = dt.datetime.fromtimestamp(ms // 1000, tz=dt.timezone.utc)
    return f"{t:%Y%m%dT%H%M%S}{ms % 1000:03d}Z"


def key_id(key) -> str:
    """The file-name part of a capped key (sorted ``(name, value)`` pairs, or a dict): ``""`` for the
    key without dimensions, else ``k`` and 12 hex digits of the SHA-256 of its canonical JSON."""
    pairs = sorted(dict(key).items())
    if not pairs:
        return ""
    return "k" + hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode()).hexdigest()[:12]


def file_stem(window: tuple | None, group: str, pane: int, key=()) -> str:
    """The stem of one window's files: ``window`` is ``(start_ms, end_ms)``, or None for the global
    window; ``group`` is the collection (or a dead-letter file group); ``key`` the capped key."""
    part = key_id(key)
    group = f"{group}_{part}" if part else group
    if window is None:
        return f"global_{group}_pane{pane:03d}"
    start, end = window
    return f"{stamp(start)}_{stamp(end)}_{group}_pane{pane:03d}"


def kind_dir(output_dir: str, kind: str) -> str:
    """``DIR/<kind>``, the folder of a kind's Avro files (local paths; the sinks join with Beam's
    FileSystems for gs:// and others)."""
    return os.path.join(output_dir, check_kind(kind))


def parquet_folder(kind: str, group: str, final: bool = True, rollup: bool = False) -> str:
    """The Parquet folder of a file set, relative to the output directory: the group's own folder for
    final key rows, ``rollups/`` under it for rollup rows, ``panes/`` under either for earlier panes."""
    folder = f"{PARQUET_DIR}/{check_kind(kind)}/{group}"
    if rollup:
        folder += f"/{ROLLUPS_FOLDER}"
    if not final:
        folder += f"/{PANES_FOLDER}"
    return folder


PARQUET_SUBFOLDERS = ("", PANES_FOLDER, ROLLUPS_FOLDER, f"{ROLLUPS_FOLDER}/{PANES_FOLDER}")   # under a group's folder


def file_paths(kind: str, group: str, stem: str, final: bool = True, rollup: bool = False) -> dict:
    """The paths, relative to the output directory (``/``-separated), of one file set's files. Dead
    letters have no panes to tell apart: their Parquet files are all in the group's folder."""
    check_kind(kind)
    if kind == DEAD_LETTERS:
        final, rollup = True, False
    return {"avro": f"{kind}/{stem}{AVRO}", "parquet": f"{parquet_folder(kind, group, final, rollup)}/{stem}{PARQUET}"}


def entry_path(run_id: str, kind: str, stem: str) -> str:
    """Where a run records one file set, relative to the output directory."""
    return f"{RUNS_DIR}/{run_id}/{check_kind(kind)}/{stem}{ENTRY}"


def staging_path(run_id: str) -> str:
    """Where a batch run writes its outputs until it publishes them, relative to the output directory."""
    return f"{STAGING_DIR}/{run_id}"


def new_run_id(now_ms: int | None = None) -> str:
    """A run's id: its start in UTC (names sort by start) and 8 random hex digits."""
    now_ms = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000) if now_ms is None else now_ms
    return f"{stamp(now_ms)}-{os.urandom(4).hex()}"


def make_entry(kind: str, group: str, window: tuple | None, pane: int, rows: int, key=(),
               timing: str = ON_TIME_PANE, final: bool = True) -> dict:
    """The entry of one file set: what it holds (its capped ``key`` as a dict; its pane's ``timing`` and
    whether it is ``final``; whether it is a ``rollup``), its files, its row count and its schema's version."""
    stem = file_stem(window, group, pane, key)
    rollup = is_rollup(key)
    return {"kind": kind, "group": group, "window_start": None if window is None else window[0],
            "window_end": None if window is None else window[1], "key": dict(key), "pane": pane, "rows": rows,
            "timing": timing, FINAL: bool(final), ROLLUP: rollup, "schema_version": schema_version(SCHEMA_OF[kind]),
            "files": file_paths(kind, group, stem, final, rollup)}


def split_pane(file_name: str) -> tuple | None:
    """``(stem without the pane, pane index)`` of an output file's name, or None if it is not one."""
    base = os.path.basename(file_name)
    for ext in (AVRO, PARQUET, ENTRY):
        if base.endswith(ext):
            base = base[:-len(ext)]
            break
    else:
        return None
    stem, sep, pane = base.rpartition("_pane")
    if not sep or not pane.isdigit():
        return None
    return stem, int(pane)


class OutputError(ValueError):
    """The output directory cannot be read as a run's outputs: no complete manifest, a file that is
    missing, damaged or disagrees with the manifest. The message names the file."""


def _read_json(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise OutputError(f"{path} is missing ({what})") from None
    except (OSError, ValueError) as err:
        raise OutputError(f"{path} cannot be read ({what}): {err}") from None


def _entries(output_dir: str, run_id: str) -> list:
    """The entries a run has written so far (a streaming run's files, as they land)."""
    root = os.path.join(output_dir, RUNS_DIR, run_id)
    out = []
    for kind in KINDS:
        folder = os.path.join(root, kind)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith(ENTRY):
                out.append(_read_json(os.path.join(folder, name), f"an entry of run {run_id}"))
    return out


def load_manifest(output_dir: str) -> dict:
    """The manifest of the run that owns ``output_dir``, its ``files`` filled in (a streaming run's
    from its entries so far). Raises :class:`OutputError` when there is none: a batch run still
    writing, a run that failed, or not a job's output directory."""
    if not os.path.isdir(output_dir):
        raise OutputError(f"{output_dir} is not a directory of a job's outputs")
    path = os.path.join(output_dir, MANIFEST_FILE)
    if not os.path.exists(path):
        raise OutputError(f"{output_dir} holds no complete run: {MANIFEST_FILE} is missing (a batch run writes it "
                          "last: the run is still writing, it failed, or this is not a job's output directory)")
    manifest = _read_json(path, "the run's manifest")
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise OutputError(f"{path} is not a manifest of format {MANIFEST_FORMAT}")
    if manifest.get("files") is None:   # streaming: the entries written so far
        manifest = dict(manifest, files=_entries(output_dir, manifest["run_id"]))
    return manifest


def manifest_files(manifest: dict, kind: str, final_only: bool = False) -> list:
    """The entries of ``kind`` a reader reads, sorted by window, group and key: of the estimates, the
    latest pane of each window, group and capped key (a pane holds the window and key's estimate so
    far; with ``final_only``, its final pane, where the window closed); of the dead letters, every pane
    (a streaming job writes the letters gathered since its last pane). Entries of runs before keys were
    published apart have no ``key``: one per window and group."""
    check_kind(kind)
    entries = [e for e in manifest["files"] if e["kind"] == kind]
    if kind != DEAD_LETTERS:
        if final_only:
            entries = [e for e in entries if entry_final(manifest, e)]
        best = {}
        for e in entries:
            key = (e["window_start"], e["window_end"], e["group"], key_id(e.get("key") or {}))
            if key not in best or e["pane"] > best[key]["pane"]:
                best[key] = e
        entries = list(best.values())
    return sorted(entries, key=lambda e: (e["window_start"] is not None, e["window_start"] or 0, e["group"],
                                          key_id(e.get("key") or {}), e["pane"]))

