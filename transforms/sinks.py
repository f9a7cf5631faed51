"""Sinks: PTransforms from the job's outputs (a dict of row PCollections by kind) to where they are
read. :class:`FileSink` writes Avro and JSON-lines files, one file set per window, collection and
pane, in the layout of :mod:`ldp_marginals.schemas.outputs`; :class:`Sinks` feeds several sinks."""
from __future__ import annotations

import io
import os

import apache_beam as beam
import fastavro
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import trigger

from ldp_marginals import schemas
from ldp_marginals.schemas.outputs import (
    AVRO,
    DEAD_LETTER_GROUP,
    DEAD_LETTERS,
    JSON_LINES,
    KINDS,
    SCHEMA_OF,
    check_kind,
    file_stem,
)
from ldp_marginals.transforms.estimate import window_bounds_ms
from ldp_marginals.transforms.panes import PANES, PaneFile


class WriteWindowFilesFn(beam.DoFn):
    """``((kind, group), rows)`` of one window and pane -> ``<dir>/<kind>/<stem>.avro`` and ``.jsonl``."""

    def __init__(self, output_dir: str):
        self.output_dir = output_dir

    def process(self, element, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        if isinstance(element, PaneFile):  # streaming: the panes state machine says where it belongs
            kind, group, window, index, rows = (element.kind, element.group, element.window, element.pane,
                                                element.rows)
        else:
            (kind, group), rows = element
            index = pane.index if pane is not None else 0
            window = None if isinstance(w, beam.window.GlobalWindow) else window_bounds_ms(w)
        rows = list(rows)
        # each row serialized once: the sort key (deterministic file contents) and the JSON line
        keyed = sorted((schemas.to_json_line(r), i) for i, r in enumerate(rows))
        rows = [rows[i] for _, i in keyed]
        stem = file_stem(window, group, index)
        folder = FileSystems.join(self.output_dir, kind)
        if not FileSystems.exists(folder):
            try:
                FileSystems.mkdirs(folder)
            except IOError:  # another worker made it first
                pass
        avro_path = FileSystems.join(folder, stem + AVRO)
        json_path = FileSystems.join(folder, stem + JSON_LINES)
        buf = io.BytesIO()
        fastavro.writer(buf, schemas.load_schema(SCHEMA_OF[kind]), rows, codec="deflate")
        for path, data in ((avro_path, buf.getvalue()),
                           (json_path, "".join(line + "\n" for line, _ in keyed).encode())):
            tmp = path + ".tmp"
            with FileSystems.create(tmp) as fh:
                fh.write(data)
            FileSystems.rename([tmp], [path])
        yield avro_path


def processing_time_panes(seconds: float) -> beam.WindowInto:
    """Rows in the global window (dead letters) -> a pane every ``seconds`` of processing time: in
    streaming, a global window's default trigger never fires."""
    return beam.WindowInto(beam.window.GlobalWindows(),
                           trigger=trigger.Repeatedly(trigger.AfterProcessingTime(seconds)),
                           accumulation_mode=trigger.AccumulationMode.DISCARDING)


class WriteRows(beam.PTransform):
    """Rows of one output kind -> files per (window, pane, group) under ``output_dir/kind``.

    The group names the files: the rows' collection, or ``group`` when given (dead letters, which
    have no collection, are ``all`` unless a group is given)."""

    def __init__(self, kind: str, output_dir: str, group: str | None = None):
        super().__init__()
        self.kind = check_kind(kind)
        self.output_dir = output_dir
        self.group = group

    def expand(self, rows):
        kind = self.kind
        group = self.group or (DEAD_LETTER_GROUP if kind == DEAD_LETTERS else None)
        group_of = (lambda r: group) if group else (lambda r: r["collection"])
        return (rows
                | "KeyByFile" >> beam.Map(lambda r: ((kind, group_of(r)), r))
                | "GroupByFile" >> beam.GroupByKey()
                | "WriteFiles" >> beam.ParDo(WriteWindowFilesFn(self.output_dir)))


class FileSink(beam.PTransform):
    """The job's default sink: every output kind to Avro + JSON-lines files under one directory.

    In streaming mode the estimates are written from the pane files of the panes state machine
    (``outputs["panes"]``), and the dead letters, which live in the global window, in panes every
    ``dead_letter_seconds`` of processing time (a global window's default trigger never fires there).
    Input: ``{kind: rows}``; output: ``{kind: paths of the Avro files written}``.
    """

    def __init__(self, output_dir: str, streaming: bool = False, dead_letter_seconds: int = 60):
        super().__init__(label="WriteFiles")
        self.output_dir = output_dir
        self.streaming = streaming
        self.dead_letter_seconds = dead_letter_seconds
        if "://" not in output_dir:
            os.makedirs(output_dir, exist_ok=True)

    def expand(self, outputs: dict):
        written = {}
        for kind in KINDS:
            rows = outputs[kind]
            if self.streaming and kind == DEAD_LETTERS:
                rows = rows | "PaneDeadLetters" >> processing_time_panes(self.dead_letter_seconds)
            elif self.streaming:  # the panes' own files: one per kind, window and pane, no regrouping
                written[kind] = (outputs[PANES]
                                 | f"Panes[{kind}]" >> beam.Filter(lambda f, k=kind: f.kind == k)
                                 | f"Write[{kind}]" >> beam.ParDo(WriteWindowFilesFn(self.output_dir)))
                continue
            written[kind] = rows | f"Write[{kind}]" >> WriteRows(kind, self.output_dir)
        return written


class Sinks(beam.PTransform):
    """Several sinks fed the same outputs (files and BigQuery, say); each keeps its own stage label."""

    def __init__(self, *sinks):
        super().__init__(label="WriteAll")
        if not sinks:
            raise ValueError("sinks must name at least one sink, got none")
        self.sinks = sinks

    def expand(self, outputs: dict):
        for sink in self.sinks:
            outputs | sink
        return None
