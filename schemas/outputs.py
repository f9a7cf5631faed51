"""The layout of a job's output directory, owned here and nowhere else (Beam-free: the sinks and the
dashboard both use it).

::

    DIR/collections.json                  each collection's bits, channels, epsilon, min_reports
    DIR/state_shape.json                  each collection's counted sets, extremes and window: what a
                                          streaming job resumed from a savepoint must match
    DIR/summary.json                      reports counted and dead-lettered, by reason (batch runs)
    DIR/<kind>/<stem>.avro and .jsonl     the rows of one window, collection (or file group) and pane

A stem is ``<window start>_<window end>_<collection>_pane<NNN>`` with UTC times such as
``20260101T000000000Z`` (fixed width, so names sort by window), or ``global_<collection>_pane<NNN>``
for the global window. Panes of one window accumulate in streaming: a reader takes the latest.
"""
from __future__ import annotations

import datetime as dt
import json
import os

MARGINALS, TABLES, EXTREMES, WITHHELD, DEAD_LETTERS = "marginals", "tables", "extremes", "withheld", "dead_letters"
CONDITIONALS, MEANS = "conditionals", "means"
ESTIMATE_KINDS = (MARGINALS, TABLES, EXTREMES, CONDITIONALS, MEANS, WITHHELD)   # rows per window and key
KINDS = ESTIMATE_KINDS + (DEAD_LETTERS,)
# each kind's Avro schema (schemas/<name>.avsc)
SCHEMA_OF = {MARGINALS: "marginal_estimate", TABLES: "table_cell", EXTREMES: "extreme_estimate",
             CONDITIONALS: "conditional_estimate", MEANS: "mean_estimate", WITHHELD: "withheld_window",
             DEAD_LETTERS: "dead_letter"}
COLLECTIONS_FILE = "collections.json"
STATE_SHAPE_FILE = "state_shape.json"   # what a job resumed from a savepoint must match (pipelines.run)
SUMMARY_FILE = "summary.json"
AVRO, JSON_LINES = ".avro", ".jsonl"
DEAD_LETTER_GROUP = "all"  # the file group of the job's own dead letters (they have no collection)

def check_kind(kind: str) -> str:
    if kind not in SCHEMA_OF:
        raise ValueError(f"kind must be one of {sorted(SCHEMA_OF)}, got kind={kind!r}")
    return kind


def stamp(ms: int) -> str:
    """UTC ``YYYYMMDDTHHMMSSmmmZ``: fixed width, so names sort by time."""
    t = dt.datetime.fromtimestamp(ms // 1000, tz=dt.timezone.utc)
    return f"{t:%Y%m%dT%H%M%S}{ms % 1000:03d}Z"


def file_stem(window: tuple | None, group: str, pane: int) -> str:
    """The stem of one window's files: ``window`` is ``(start_ms, end_ms)``, or None for the global
    window; ``group`` is the collection (or a dead-letter file group)."""
    if window is None:
        return f"global_{group}_pane{pane:03d}"
    start, end = window
    return f"{stamp(start)}_{stamp(end)}_{group}_pane{pane:03d}"


def kind_dir(output_dir: str, kind: str) -> str:
    """``DIR/<kind>`` (local paths; the sinks join with Beam's FileSystems for gs:// and others)."""
    return os.path.join(output_dir, check_kind(kind))


def split_pane(file_name: str) -> tuple | None:
    """``(stem without the pane, pane index)`` of an output file's name, or None if it is not one."""
    base = os.path.basename(file_name)
    for ext in (AVRO, JSON_LINES):
        if base.endswith(ext):
            base = base[:-len(ext)]
            break
    else:
        return None
    stem, sep, pane = base.rpartition("_pane")
    if not sep or not pane.isdigit():
        return None
    return stem, int(pane)


def latest_panes(folder: str, ext: str = JSON_LINES) -> list:
    """The files of a kind's folder with extension ``ext``, only the latest pane of each window and
    collection (each pane holds the window's full estimate so far), sorted by name."""
    best = {}
    if not os.path.isdir(folder):
        return []
    for name in os.listdir(folder):
        if not name.endswith(ext):
            continue
        parts = split_pane(name)
        if parts is None:
            continue
        stem, pane = parts
        if stem not in best or pane > best[stem][0]:
            best[stem] = (pane, os.path.join(folder, name))
    return sorted(path for _, path in best.values())


def read_rows(output_dir: str, kind: str) -> list:
    """The rows of ``kind`` as a reader of the outputs sees them, from the JSON-lines files: for the
    estimates, the latest pane of each window and collection (:func:`latest_panes`: a pane holds the
    window's estimate so far); for the dead letters, every pane (a streaming job writes the letters
    gathered since its last pane)."""
    folder = kind_dir(output_dir, kind)
    if kind == DEAD_LETTERS:
        paths = sorted(os.path.join(folder, n) for n in os.listdir(folder)
                       if n.endswith(JSON_LINES)) if os.path.isdir(folder) else []
    else:
        paths = latest_panes(folder)
    rows = []
    for path in paths:
        with open(path) as fh:
            rows += [json.loads(line) for line in fh if line.strip()]
    return rows
