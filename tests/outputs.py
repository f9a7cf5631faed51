"""Output directories made by hand for the readers' tests, written as a run writes them: each file
set through the sink's own writer, then the manifest."""
from __future__ import annotations

from ldp_marginals.pipelines.read import read_file
from ldp_marginals.schemas.arrow import to_rows
from ldp_marginals.schemas.outputs import load_manifest, new_run_id
from ldp_marginals.transforms.manifest import finish_run, start_run, write_dir
from ldp_marginals.transforms.sinks import write_file_set


def write_run(output_dir, file_sets) -> dict:
    """``file_sets``: ``(kind, group, window or None, pane, rows[, capped key])``; written as one
    finished batch run under ``output_dir``; returns its manifest."""
    run_id = new_run_id()
    for kind, group, window, pane, rows, *key in file_sets:
        write_file_set(write_dir(str(output_dir), run_id, False), run_id, kind, group, window, pane, rows, *key)
    return finish_run(str(output_dir), run_id)


def file_sets(output_dir) -> list:
    """The file sets of the run that owns ``output_dir``, as :func:`write_run` takes them (each with its
    capped key: a window's keys are files of their own)."""
    out = []
    for e in load_manifest(str(output_dir))["files"]:
        window = None if e["window_start"] is None else (e["window_start"], e["window_end"])
        out.append((e["kind"], e["group"], window, e["pane"], to_rows(read_file(str(output_dir), e)),
                    tuple(sorted(e.get("key", {}).items()))))
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
    for kind, group, window, pane, rows, *key in file_sets:
        write_file_set(str(output_dir), run_id, kind, group, window, pane, rows, *key)


HOUR_MS = 3_600_000


def write_month(output_dir, windows: int = 720, bits: int = 32, keys=None, start_ms: int = 1_767_225_600_000,
                seed: int = 0) -> dict:
    """A finished batch run of ``windows`` hourly windows of one collection ``month`` with ``bits``
    boolean bits published at order 2 for each key (default: region x platform, four keys), and its
    ``collections.json``, written through the sink's writer: the size a dashboard meets after a
    month. The estimates are random (a reader's test, not a statistical one); returns the manifest."""
    import itertools
    import json
    import os

    import numpy as np

    keys = keys or [{"platform": p, "region": r} for r in ("eu", "us") for p in ("android", "ios")]
    rng = np.random.default_rng(seed)
    labels = [f"b{i:02d}" for i in range(bits)]
    sets = [[i] for i in range(bits)] + [list(c) for c in itertools.combinations(range(bits), 2)]
    p = 0.25
    info = [{"collection": "month", "labels": labels, "p": [p] * bits, "q": [1 - p] * bits,
             "mechanisms": ["symmetric"] * bits, "conditionals": 0, "local_epsilon": 35.2,
             "window": {"type": "fixed", "size_seconds": 3600, "period_seconds": 0.0}, "min_reports": 1000,
             "max_order": 2, "level": 0.95, "groups": [], "group_intervals": [], "marginal_interval": "per_cell",
             "numeric": {}, "dimensions": {"platform": {"max_values": 4, "max_length": 16},
                                           "region": {"max_values": 4, "max_length": 16}},
             "extremes": [], "privacy": {"model": "local", "epsilon": 35.2, "eta": None, "flip": None,
                                         "smallest_crowd": None}}]
    os.makedirs(str(output_dir), exist_ok=True)
    with open(os.path.join(str(output_dir), "collections.json"), "w") as fh:
        json.dump(info, fh)
    run_id = new_run_id()
    for w in range(windows):
        window = (start_ms + w * HOUR_MS, start_ms + (w + 1) * HOUR_MS)
        rows = []
        for dims in keys:
            n = int(rng.integers(4000, 8000))
            freq = rng.random(len(sets))
            half = 1.96 * np.sqrt(n * 0.5) / n
            for cols, f in zip(sets, freq.tolist()):
                rows.append({"collection": "month", "window_start": window[0], "window_end": window[1],
                             "dimensions": dims, "n_reports": n, "columns": cols, "labels": [labels[c] for c in cols],
                             "estimate": f * n, "frequency": f, "variance": (half * n / 1.96) ** 2,
                             "ci_low": (f - half) * n, "ci_high": (f + half) * n, "interval": "per_cell",
                             "frequency_low": f - half, "frequency_high": f + half, "display_frequency": f,
                             "display_low": max(f - half, 0.0), "display_high": min(f + half, 1.0),
                             "out_of_range": False})
        write_file_set(write_dir(str(output_dir), run_id, False), run_id, "marginals", "month", window, 0, rows)
    return finish_run(str(output_dir), run_id)
