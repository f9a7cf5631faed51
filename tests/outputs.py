"""Output directories made by hand for the readers' tests, written as a run writes them: each file
set through the sink's own writer, then the manifest."""
from __future__ import annotations

from ldp_marginals.pipelines.read import read_file
from ldp_marginals.schemas.arrow import to_rows
from ldp_marginals.schemas.outputs import load_manifest, new_run_id
from ldp_marginals.transforms.manifest import finish_run, start_run
from ldp_marginals.transforms.sinks import write_file_set


def write_run(output_dir, file_sets) -> dict:
    """``file_sets``: ``(kind, group, window or None, pane, rows)``; written as one finished batch run
    under ``output_dir``; returns its manifest."""
    run_id = new_run_id()
    for kind, group, window, pane, rows in file_sets:
        write_file_set(str(output_dir), run_id, kind, group, window, pane, rows)
    return finish_run(str(output_dir), run_id)


def file_sets(output_dir) -> list:
    """The file sets of the run that owns ``output_dir``, as :func:`write_run` takes them."""
    out = []
    for e in load_manifest(str(output_dir))["files"]:
        window = None if e["window_start"] is None else (e["window_start"], e["window_end"])
        out.append((e["kind"], e["group"], window, e["pane"], to_rows(read_file(str(output_dir), e))))
    return out


def write_streaming_run(output_dir, file_sets) -> str:
    """``file_sets`` written as a streaming run that is still going: its manifest, then its entries;
    returns its id (:func:`add_file_sets` writes more)."""
    run_id = new_run_id()
    start_run(str(output_dir), run_id, streaming=True)
    add_file_sets(output_dir, run_id, file_sets)
    return run_id


def add_file_sets(output_dir, run_id: str, file_sets) -> None:
    """More file sets of the streaming run ``run_id``, as its writers add them."""
    for kind, group, window, pane, rows in file_sets:
        write_file_set(str(output_dir), run_id, kind, group, window, pane, rows)
