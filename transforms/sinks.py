"""Sinks: rows to Avro and JSON-lines files, one file set per window (and pane), names sorting by window."""
from __future__ import annotations

import datetime as dt
import io
import os

import apache_beam as beam
import fastavro
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import trigger

from ldp_marginals import schemas
from ldp_marginals.transforms.estimate import EXTREMES, MARGINALS, TABLES, WITHHELD, window_bounds_ms

SCHEMA_OF = {MARGINALS: "marginal_estimate", TABLES: "table_cell", EXTREMES: "extreme_estimate",
             WITHHELD: "withheld_window", "dead_letters": "dead_letter"}


def _stamp(ms: int) -> str:
    """UTC ``YYYYMMDDTHHMMSSmmmZ``: fixed width, so names sort by time."""
    t = dt.datetime.fromtimestamp(ms // 1000, tz=dt.timezone.utc)
    return f"{t:%Y%m%dT%H%M%S}{ms % 1000:03d}Z"


def window_file_stem(w, collection: str, pane_index: int) -> str:
    """``<start>_<end>_<collection>_pane<NNN>``: sorts by window start, then end; ``global`` for the global window."""
    if isinstance(w, beam.window.GlobalWindow):
        return f"global_{collection}_pane{pane_index:03d}"
    start, end = window_bounds_ms(w)
    return f"{_stamp(start)}_{_stamp(end)}_{collection}_pane{pane_index:03d}"


class WriteWindowFilesFn(beam.DoFn):
    """``((kind, collection), rows)`` of one window and pane -> ``<dir>/<kind>/<stem>.avro`` and ``.jsonl``."""

    def __init__(self, output_dir: str):
        self.output_dir = output_dir

    def process(self, element, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        (kind, collection), rows = element
        rows = list(rows)
        # each row serialized once: the sort key (deterministic file contents) and the JSON line
        keyed = sorted((schemas.to_json_line(r), i) for i, r in enumerate(rows))
        rows = [rows[i] for _, i in keyed]
        index = pane.index if pane is not None else 0
        stem = window_file_stem(w, collection, index)
        folder = FileSystems.join(self.output_dir, kind)
        if not FileSystems.exists(folder):
            try:
                FileSystems.mkdirs(folder)
            except IOError:  # another worker made it first
                pass
        avro_path = FileSystems.join(folder, stem + ".avro")
        json_path = FileSystems.join(folder, stem + ".jsonl")
        buf = io.BytesIO()
        fastavro.writer(buf, schemas.load_schema(SCHEMA_OF[kind]), rows, codec="deflate")
        for path, data in ((avro_path, buf.getvalue()),
                           (json_path, "".join(line + "\n" for line, _ in keyed).encode())):
            tmp = path + ".tmp"
            with FileSystems.create(tmp) as fh:
                fh.write(data)
            FileSystems.rename([tmp], [path])
        yield avro_path


def check_kind(kind: str) -> None:
    if kind not in SCHEMA_OF:
        raise ValueError(f"kind must be one of {sorted(SCHEMA_OF)}, got kind={kind!r}")


def processing_time_panes(seconds: float) -> beam.WindowInto:
    """Rows in the global window (dead letters) -> a pane every ``seconds`` of processing time: in
    streaming, a global window's default trigger never fires."""
    return beam.WindowInto(beam.window.GlobalWindows(),
                           trigger=trigger.Repeatedly(trigger.AfterProcessingTime(seconds)),
                           accumulation_mode=trigger.AccumulationMode.DISCARDING)


class WriteRows(beam.PTransform):
    """Rows of one output kind -> files per (window, pane, collection) under ``output_dir/kind``.

    ``group`` names the files instead of the rows' collection (dead letters, which have none, are
    ``all`` unless a group is given)."""

    def __init__(self, kind: str, output_dir: str, group: str | None = None):
        super().__init__()
        check_kind(kind)
        self.kind = kind
        self.output_dir = output_dir
        self.group = group

    def expand(self, rows):
        kind = self.kind
        group = self.group or ("all" if kind == "dead_letters" else None)
        collection_of = (lambda r: group) if group else (lambda r: r["collection"])
        return (rows
                | "KeyByFile" >> beam.Map(lambda r: ((kind, collection_of(r)), r))
                | "GroupByFile" >> beam.GroupByKey()
                | "WriteFiles" >> beam.ParDo(WriteWindowFilesFn(self.output_dir)))


class FileSink:
    """The job's default sink: every output kind to Avro + JSON-lines files under one directory.

    In streaming mode the dead letters, which live in the global window, are written in panes every
    ``dead_letter_seconds`` of processing time (a global window's default trigger never fires there).
    """

    def __init__(self, output_dir: str, streaming: bool = False, dead_letter_seconds: int = 60):
        self.output_dir = output_dir
        self.streaming = streaming
        self.dead_letter_seconds = dead_letter_seconds
        if "://" not in output_dir:
            os.makedirs(output_dir, exist_ok=True)

    def write(self, kind: str, rows):
        if self.streaming and kind == "dead_letters":
            rows = rows | "PaneDeadLetters" >> processing_time_panes(self.dead_letter_seconds)
        return rows | f"Write[{kind}]" >> WriteRows(kind, self.output_dir)


class Sinks:
    """Several sinks fed the same outputs (files and BigQuery, say); stage labels stay each sink's own."""

    def __init__(self, *sinks):
        if not sinks:
            raise ValueError("sinks must name at least one sink, got none")
        self.sinks = sinks

    def write(self, kind: str, rows):
        return [sink.write(kind, rows) for sink in self.sinks]
