"""A run's manifest: started before the job runs, finished after it, on any Beam filesystem (local or
gs://). The layout and the readers' side are :mod:`ldp_marginals.schemas.outputs`.

- :func:`start_run` (batch): the previous run's ``manifest.json`` and ``summary.json`` are removed,
  so that no reader takes the files this run is rewriting for the previous run's; (streaming): a
  manifest that says the run is streaming, whose files are the entries the writers add as they go.
- :func:`finish_run` (batch): ``summary.json`` and then ``manifest.json``, the run's entries gathered,
  each written to a temporary name and renamed; then, on a local directory, the files of earlier
  runs that this one did not rewrite are removed.
"""
from __future__ import annotations

import datetime as dt
import json
import os

from apache_beam.io.filesystems import FileSystems

from ldp_marginals.schemas.outputs import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    PARQUET_DIR,
    RUNS_DIR,
    SUMMARY_FILE,
    KINDS,
    split_pane,
)


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


def start_run(output_dir: str, run_id: str, streaming: bool) -> None:
    """Before the job runs (module docstring). A streaming run resumed from a savepoint keeps its id,
    so its manifest and entries carry on."""
    if streaming:
        write_json_atomic(FileSystems.join(output_dir, MANIFEST_FILE),
                          {"format": MANIFEST_FORMAT, "run_id": run_id, "mode": "streaming", "complete": False,
                           "started": _now_ms(), "finished": None, "summary": None, "files": None})
        return
    for name in (MANIFEST_FILE, SUMMARY_FILE):
        _delete_if_present(FileSystems.join(output_dir, name))


def run_entries(output_dir: str, run_id: str) -> list:
    """The entries the run's writers recorded, sorted by path."""
    pattern = FileSystems.join(output_dir, RUNS_DIR, run_id, "*", "*.json")
    paths = sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    entries = []
    for path in paths:
        with FileSystems.open(path) as fh:
            entries.append(json.loads(fh.read()))
    return entries


def finish_run(output_dir: str, run_id: str, summary: dict | None = None, started_ms: int | None = None) -> dict:
    """After a batch job has finished: ``summary.json`` (when given), then the manifest; returns it."""
    files = run_entries(output_dir, run_id)
    if summary is not None:
        write_json_atomic(FileSystems.join(output_dir, SUMMARY_FILE), summary)
    manifest = {"format": MANIFEST_FORMAT, "run_id": run_id, "mode": "batch", "complete": True,
                "started": started_ms, "finished": _now_ms(), "summary": summary, "files": files}
    write_json_atomic(FileSystems.join(output_dir, MANIFEST_FILE), manifest)
    if "://" not in output_dir:
        remove_other_runs(output_dir, manifest)
    return manifest


def remove_other_runs(output_dir: str, manifest: dict) -> int:
    """Remove, under a local ``output_dir``, the output files (Avro, Parquet, JSON lines of older
    versions) that ``manifest`` does not list, and the entry folders of other runs (of a batch run,
    its own too: its manifest holds them); returns how many output files went. Only names of the
    output layout are touched."""
    keep = {os.path.normpath(os.path.join(output_dir, *p.split("/")))
            for e in manifest["files"] for p in e["files"].values()}
    removed = 0
    folders = [os.path.join(output_dir, kind) for kind in KINDS]
    folders += [os.path.join(output_dir, PARQUET_DIR, kind, group)
                for kind in KINDS if os.path.isdir(os.path.join(output_dir, PARQUET_DIR, kind))
                for group in os.listdir(os.path.join(output_dir, PARQUET_DIR, kind))]
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            path = os.path.normpath(os.path.join(folder, name))
            if path not in keep and (split_pane(name) is not None or name.endswith(".jsonl")):
                os.remove(path)
                removed += 1
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
