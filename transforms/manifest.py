"""A run's manifest: started before the job runs, finished after it, on any Beam filesystem (local or
gs://). The layout and the readers' side are :mod:`ldp_marginals.schemas.outputs`.

- :func:`start_run` (streaming): a manifest that says the run is streaming, whose files are the
  entries the writers add as they go; (batch): nothing, since the run writes under its staging folder
  (:func:`write_dir`) and the previous run stays what readers read until this one has finished.
- :func:`finish_run` (batch) publishes the run in steps, each leaving a readable directory if the
  process dies right after it: the summary into the staging folder; a manifest naming the staged
  files (readers switch to the new run in one rename); ``summary.json``, ``collections.json`` and
  ``state_shape.json`` moved into place; the files linked (copied on a filesystem without links)
  to their places, which no manifest names at that moment; a manifest naming them; then the staging
  folder and, on a local directory, the files of earlier runs that this one did not write, removed;
  except the files of each window and key that an earlier run published and whose rows this run's
  release ledger withholds whole (:func:`kept_releases`): those stay, carried into the new manifest.
- :func:`abandon_run` (batch): what a run that failed before it published leaves: its staging folder
  goes, the previous run is untouched.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from ldp_marginals.schemas.outputs import (
    COLLECTIONS_FILE,
    ESTIMATE_KINDS,
    FROM_RUN,
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    MARGINALS,
    PARQUET_DIR,
    PARQUET_SUBFOLDERS,
    RUNS_DIR,
    STAGING_DIR,
    STATE_SHAPE_FILE,
    SUMMARY_FILE,
    KINDS,
    WITHHELD,
    key_id,
    split_pane,
    staging_path,
)
from ldp_marginals.transforms.publication.releases import LEDGER_REASON


def _now_ms() -> int:
    return int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)


def write_json_atomic(path: str, obj) -> str:
    """``obj`` as JSON to ``path`` under a temporary name, then renamed: never seen half-written."""
    tmp = path + ".tmp"
    with FileSystems.create(tmp) as fh:
        fh.write(json.dumps(obj, indent=1, sort_keys=True).encode())
    FileSystems.rename([tmp], [path])
    return path


def _delete_if_present(path: str) -> None:
    if FileSystems.exists(path):
        FileSystems.delete([path])


def write_dir(output_dir: str, run_id: str, streaming: bool) -> str:
    """Where a run's writers write: the output directory itself (streaming, whose manifest names its
    entries as they land) or the batch run's staging folder, published by :func:`finish_run`."""
    if streaming:
        return output_dir
    return FileSystems.join(output_dir, *staging_path(run_id).split("/"))


def start_run(output_dir: str, run_id: str, streaming: bool) -> None:
    """Before the job runs (module docstring). A streaming run resumed from a savepoint keeps its id,
    so its manifest and entries carry on."""
    if streaming:
        write_json_atomic(FileSystems.join(output_dir, MANIFEST_FILE),
                          {"format": MANIFEST_FORMAT, "run_id": run_id, "mode": "streaming", "complete": False,
                           "started": _now_ms(), "finished": None, "summary": None, "files": None})


def run_entries(output_dir: str, run_id: str) -> list:
    """The entries the run's writers recorded, sorted by path."""
    pattern = FileSystems.join(output_dir, RUNS_DIR, run_id, "*", "*.json")
    paths = sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    entries = []
    for path in paths:
        with FileSystems.open(path) as fh:
            entries.append(json.loads(fh.read()))
    return entries


def _staged(entry: dict, prefix: str) -> dict:
    return dict(entry, files={k: f"{prefix}/{p}" for k, p in entry["files"].items()})


def _place(source: str, target: str, local: bool) -> None:
    """``target`` becomes a copy of ``source`` (a hard link on a local directory): no manifest names
    ``target`` while this runs, so it need not be atomic."""
    if not local:
        FileSystems.copy([source], [target])
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.lexists(target):
        os.remove(target)
    try:
        os.link(source, target)
    except OSError:   # a filesystem without hard links
        shutil.copyfile(source, target)


def _window_key(entry: dict) -> tuple:
    return entry["group"], entry["window_start"], entry["window_end"], key_id(entry.get("key") or {})


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _previous_manifest(output_dir: str) -> dict | None:
    """The finished batch manifest ``output_dir`` holds before this run publishes, or None."""
    path = FileSystems.join(output_dir, MANIFEST_FILE)
    try:
        with FileSystems.open(path) as fh:
            manifest = json.loads(fh.read())
    except Exception:  # noqa: BLE001 - none, or not one: nothing was published there to keep
        return None
    if not isinstance(manifest, dict) or manifest.get("mode") != "batch" or not manifest.get("files"):
        return None
    return manifest


def _rows_of(root: str, entry: dict) -> list:
    """The rows of one file set (its Parquet file under ``root``) as dicts."""
    with FileSystems.open(FileSystems.join(root, *entry["files"]["parquet"].split("/"))) as fh:
        return pq.read_table(fh).to_pylist()


def kept_releases(output_dir: str, run_id: str, files: list, previous: dict | None) -> tuple:
    """``(carried entries, kept)``: what a batch run ``run_id`` (its staged entries ``files``) keeps of the
    run that published ``previous`` (its manifest, or None). A window and key (collection, window, capped
    key) is kept when the new run publishes no estimate of it, only ``withheld`` rows, among them the
    release ledger's (reason ``ledger:``, statistic ``all``), and the previous manifest has estimates of
    it: those entries (every estimate kind but ``withheld``, whose file the new run's own withheld row
    replaces) are carried, each with ``from_run`` (the run that wrote it, kept across reruns). Where the
    new run publishes anything of a window and key its rows replace the earlier ones, never beside them
    (docs/design.md, "The release ledger", *What stays published*). ``kept``: one record per window and
    key kept, with the new run's reports it leaves out (counted and named in the summary)."""
    if previous is None:
        return [], []
    staged = write_dir(output_dir, run_id, streaming=False)
    new_kinds = {}
    for e in files:
        if e["kind"] in ESTIMATE_KINDS:
            new_kinds.setdefault(_window_key(e), set()).add(e["kind"])
    only_withheld = {wk for wk, kinds in new_kinds.items() if kinds == {WITHHELD}}
    earlier = {}
    for e in previous["files"]:
        if e["kind"] in ESTIMATE_KINDS and e["kind"] != WITHHELD and e["window_start"] is not None \
                and _window_key(e) in only_withheld:
            earlier.setdefault(_window_key(e), []).append(e)
    carried, kept = [], []
    for e in sorted((e for e in files if e["kind"] == WITHHELD and _window_key(e) in earlier), key=_window_key):
        ledgered = [r for r in _rows_of(staged, e)
                    if r["statistic"] == "all" and r["reason"].startswith(LEDGER_REASON)]
        if not ledgered:   # withheld by the guard alone (fewer reports than min_reports): not the ledger's
            continue
        olds = earlier[_window_key(e)]
        from_run = olds[0].get(FROM_RUN) or previous["run_id"]
        carried += [dict(o, **{FROM_RUN: o.get(FROM_RUN) or previous["run_id"]}) for o in olds]
        marginals = [o for o in olds if o["kind"] == MARGINALS]
        before = None
        if marginals:
            rows = _rows_of(output_dir, marginals[0])
            before = int(rows[0]["n_reports"]) if rows else None
        left_out = sum(int(r["n_reports"]) for r in ledgered)
        key = ", ".join(f"{k}={v}" for k, v in sorted((e.get("key") or {}).items())) or "(no dimensions)"
        kept.append({"collection": e["group"], "window_start": e["window_start"], "window_end": e["window_end"],
                     "key": dict(e.get("key") or {}), FROM_RUN: from_run, "earlier_reports": before,
                     "reports_not_published": left_out, "kinds": sorted({o["kind"] for o in olds}),
                     "note": f"{e['group']} window {_iso(e['window_start'])} key {key}: the earlier release "
                             f"(run {from_run}{f', {before:,} reports' if before is not None else ''}) kept; "
                             f"{left_out:,} reports of this run not published (the release ledger withheld them)"})
    return carried, kept


def _unstaged(entry: dict) -> dict:
    """A carried entry whose files are still under an earlier run's staging folder (that run was killed
    between its two manifests) -> the entry at the files' own places."""
    prefix = STAGING_DIR + "/"
    return dict(entry, files={k: p.split("/", 2)[2] if p.startswith(prefix) else p for k, p in entry["files"].items()})


def finish_run(output_dir: str, run_id: str, summary: dict | None = None, started_ms: int | None = None) -> dict:
    """After a batch job has finished: publish the run from its staging folder (module docstring);
    returns its manifest. An error before the first manifest is written leaves the previous run as it
    was (:func:`abandon_run` then removes the staging folder). The earlier releases the run keeps
    (:func:`kept_releases`) are named in ``summary`` (``earlier_releases_kept``,
    ``reports_not_published_where_kept``)."""
    staged = write_dir(output_dir, run_id, streaming=False)
    local = "://" not in output_dir
    files = run_entries(staged, run_id)
    carried, kept = kept_releases(output_dir, run_id, files, _previous_manifest(output_dir))
    if summary is not None:
        summary["earlier_releases_kept"] = kept
        summary["reports_not_published_where_kept"] = sum(k["reports_not_published"] for k in kept)
        write_json_atomic(FileSystems.join(staged, SUMMARY_FILE), summary)
    head = {"format": MANIFEST_FORMAT, "run_id": run_id, "mode": "batch", "complete": True,
            "started": started_ms, "finished": _now_ms(), "summary": summary}
    path = FileSystems.join(output_dir, MANIFEST_FILE)
    write_json_atomic(path, dict(head, files=[_staged(e, staging_path(run_id)) for e in files] + carried))
    # from here on readers read this run, from its staging folder: the previous run's files are free
    for name in (SUMMARY_FILE, COLLECTIONS_FILE, STATE_SHAPE_FILE):
        if FileSystems.exists(FileSystems.join(staged, name)):
            FileSystems.rename([FileSystems.join(staged, name)], [FileSystems.join(output_dir, name)])
    for e in files:
        for relative in e["files"].values():
            parts = relative.split("/")
            _place(FileSystems.join(staged, *parts), FileSystems.join(output_dir, *parts), local)
    for e in carried:   # files an earlier run left in its staging folder go to their places too
        for was, relative in zip(e["files"].values(), _unstaged(e)["files"].values()):
            if was != relative:
                _place(FileSystems.join(output_dir, *was.split("/")), FileSystems.join(output_dir, *relative.split("/")),
                       local)
    manifest = dict(head, files=files + [_unstaged(e) for e in carried])
    write_json_atomic(path, manifest)
    if local:
        remove_other_runs(output_dir, manifest)
    else:
        FileSystems.delete([staged + "/"])
    return manifest


def abandon_run(output_dir: str, run_id: str) -> bool:
    """Remove the staging folder of a batch run that failed before it published (the previous run
    stays what readers read) and return True; return False, removing nothing, for a run whose
    manifest is already the directory's (readers read its staged files)."""
    try:
        with FileSystems.open(FileSystems.join(output_dir, MANIFEST_FILE)) as fh:
            if json.loads(fh.read()).get("run_id") == run_id:
                return False
    except Exception:  # noqa: BLE001 - no manifest, or not one: the run published nothing
        pass
    staged = write_dir(output_dir, run_id, streaming=False)
    if FileSystems.exists(staged):
        FileSystems.delete([staged + "/"])
    return True


def remove_other_runs(output_dir: str, manifest: dict) -> int:
    """Remove, under a local ``output_dir``, the output files (Avro, Parquet, JSON lines of older
    versions) that ``manifest`` does not list, the staging folders, and the entry folders of other runs
    (of a batch run, its own too: its manifest holds them); returns how many output files went. Only names of the
    output layout are touched."""
    keep = {os.path.normpath(os.path.join(output_dir, *p.split("/")))
            for e in manifest["files"] for p in e["files"].values()}
    removed = 0
    folders = [os.path.join(output_dir, kind) for kind in KINDS]
    folders += [os.path.join(output_dir, PARQUET_DIR, kind, group, *sub.split("/"))
                for kind in KINDS if os.path.isdir(os.path.join(output_dir, PARQUET_DIR, kind))
                for group in os.listdir(os.path.join(output_dir, PARQUET_DIR, kind))
                for sub in PARQUET_SUBFOLDERS]
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            path = os.path.normpath(os.path.join(folder, name))
            if path not in keep and (split_pane(name) is not None or name.endswith(".jsonl")):
                os.remove(path)
                removed += 1
    staging = os.path.join(output_dir, STAGING_DIR)
    if os.path.isdir(staging):   # this run's, published, and those of runs killed before they published
        shutil.rmtree(staging)
    runs = os.path.join(output_dir, RUNS_DIR)
    if os.path.isdir(runs):
        for name in os.listdir(runs):
            if name != manifest["run_id"] or manifest["mode"] == "batch":   # a batch manifest holds its entries
                for folder, _, names in os.walk(os.path.join(runs, name), topdown=False):
                    for n in names:
                        os.remove(os.path.join(folder, n))
                    os.rmdir(folder)
        if not os.listdir(runs):
            os.rmdir(runs)
    return removed
