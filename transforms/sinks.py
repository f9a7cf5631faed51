"""Sinks: PTransforms from the job's outputs (a dict of row PCollections by kind) to where they are
read. :class:`FileSink` writes Avro and Parquet files, one file set per window, collection and
pane, and an entry for each in its run's folder, in the layout of
:mod:`ldp_marginals.schemas.outputs`; :class:`Sinks` feeds several sinks.

Crashes: a file's name says what it holds (window, collection, pane), and each file is written to a
temporary name and renamed, its entry last, so a write repeated with the same rows leaves the same
files and an entry never names a partial file. On a runner
that replays from checkpoints (Flink) that is not enough: rows computed after the last checkpoint are
computed again after a restore, and the second timeline need not cut its panes where the first did,
so a file of the lost timeline could stay beside the new ones. With ``stable_input`` the writers
declare that they need stable input (Beam's ``@RequiresStableInput``): Flink then hands them only
rows whose checkpoint has completed, so a file is written only from a timeline that can never be
rolled back, and a write repeated after a restore rewrites the same file with the same rows."""
from __future__ import annotations

import json
import os

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.portability import common_urns
from apache_beam.transforms import trigger
from apache_beam.utils.windowed_value import PaneInfoTiming

from ldp_marginals.schemas.arrow import table_of, with_columns
from ldp_marginals.schemas.avro_columns import write_container
from ldp_marginals.schemas.dead_letters import FILES_PLANNED, FILES_WRITTEN, ROWS_WRITTEN
from ldp_marginals.schemas.outputs import (
    DEAD_LETTER_GROUP,
    DEAD_LETTERS,
    EARLY_PANE,
    KINDS,
    LATE_PANE,
    ON_TIME_PANE,
    SCHEMA_OF,
    check_kind,
    entry_path,
    file_stem,
    make_entry,
    new_run_id,
    pane_fields,
)
from ldp_marginals.transforms.dead_letters import count
from ldp_marginals.transforms.estimate import window_bounds_ms
from ldp_marginals.transforms.panes import PANES, PaneFile


class WriteWindowFilesFn(beam.DoFn):
    """``((kind, group), rows)`` of one window and pane -> its Avro and Parquet files and then, when
    the sink belongs to a run, the run's entry for them (the layout of
    :mod:`ldp_marginals.schemas.outputs`). Yields the entry. With ``plan``, each file set is also
    counted as planned when it arrives (file sets that no step before planned: a batch job's dead
    letters), so that the file sets written never outnumber the planned ones."""

    def __init__(self, output_dir: str, run_id: str | None = None, plan: bool = False):
        self.output_dir = output_dir
        self.run_id = run_id
        self.plan = plan

    def process(self, element, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        if isinstance(element, PaneFile):  # the publication step says where it belongs
            kind, group, window, index, rows, key = (element.kind, element.group, element.window, element.pane,
                                                     element.rows, element.key)
            timing, final = element.beam_timing, element.final
        else:   # rows regrouped per file (dead letters; a job without pane files): Beam's pane of the group
            (kind, group), rows = element
            index, key = pane.index if pane is not None else 0, ()
            timing, final = beam_pane(pane)
            window = None if isinstance(w, beam.window.GlobalWindow) else window_bounds_ms(w)
        if self.plan:
            count(FILES_PLANNED)
        entry = write_file_set(self.output_dir, self.run_id, kind, group, window, index, rows, key, timing, final)
        count(FILES_WRITTEN)
        count(ROWS_WRITTEN, entry["rows"])
        yield entry


def beam_pane(pane) -> tuple:
    """``(timing, final)`` of Beam's ``PaneInfo`` (None: a batch group's one pane, on time and last)."""
    if pane is None:
        return ON_TIME_PANE, True
    timing = {PaneInfoTiming.EARLY: EARLY_PANE, PaneInfoTiming.LATE: LATE_PANE}.get(pane.timing, ON_TIME_PANE)
    return timing, bool(pane.is_last)


def write_file_set(output_dir: str, run_id: str | None, kind: str, group: str, window: tuple | None, pane: int,
                   rows, key=(), timing: str = ON_TIME_PANE, final: bool = True) -> dict:
    """One window's (or the global window's) rows of ``kind`` for ``group``, capped ``key`` and ``pane`` -> their Avro
    and Parquet files and then, when ``run_id`` is given, the run's entry for them; returns the entry.
    Rows of an estimate kind are written with their pane's fields (``timing``, as Beam names it, and
    ``final``: :func:`~ldp_marginals.schemas.outputs.pane_fields`), whatever they held, and a final pane's
    Parquet file lands apart from earlier panes', a rollup row's apart from keys'
    (:func:`~ldp_marginals.schemas.outputs.parquet_folder`).
    The rows are written column by column (an Arrow table, then Avro and Parquet from its columns,
    :mod:`ldp_marginals.schemas.avro_columns`), both files in the order of the rows' Avro encodings:
    the files' contents depend only on the rows, not on the order they came in."""
    table = table_of(SCHEMA_OF[kind], rows)
    if kind != DEAD_LETTERS:
        table = with_columns(table, pane_fields(pane, timing, final, key))
    avro, order = write_container(SCHEMA_OF[kind], table)
    entry = make_entry(kind, group, window, pane, table.num_rows, key, timing, final)
    _write_atomic(output_dir, entry["files"]["avro"], avro)
    buf = pa.BufferOutputStream()
    pq.write_table(table.take(order), buf, compression="zstd")
    _write_atomic(output_dir, entry["files"]["parquet"], buf.getvalue().to_pybytes())
    if run_id is not None:
        _write_atomic(output_dir, entry_path(run_id, kind, file_stem(window, group, pane, key)),
                      json.dumps(entry, sort_keys=True).encode())
    return entry


def _write_atomic(output_dir: str, relative: str, data: bytes) -> str:
    """``data`` to ``output_dir/relative`` (any Beam filesystem) under a temporary name, then renamed:
    a reader never sees part of it, and a repeated write leaves the same file."""
    path = FileSystems.join(output_dir, *relative.split("/"))
    folder = path.rsplit("/", 1)[0]
    if not FileSystems.exists(folder):
        try:
            FileSystems.mkdirs(folder)
        except IOError:  # another worker made it first
            pass
    tmp = path + ".tmp"
    with FileSystems.create(tmp) as fh:
        fh.write(data)
    FileSystems.rename([tmp], [path])
    return path


class StableParDo(beam.ParDo):
    """A ParDo that requires stable input: the runner gives it only elements it will never replay
    differently (on Flink, elements buffered until the checkpoint that holds them completes; Flink
    refuses it without checkpointing). Python's SDK has no annotation for it, so the flag is set on
    the transform's payload and the requirement declared on the pipeline."""

    def to_runner_api_parameter(self, context, **extra_kwargs):
        urn, payload = super().to_runner_api_parameter(context, **extra_kwargs)
        payload.requires_stable_input = True
        context.add_requirement(common_urns.requirements.REQUIRES_STABLE_INPUT.urn)
        return urn, payload


def _writer(output_dir: str, stable: bool, run_id: str | None = None, plan: bool = False) -> beam.ParDo:
    return (StableParDo if stable else beam.ParDo)(WriteWindowFilesFn(output_dir, run_id, plan))


def processing_time_panes(seconds: float) -> beam.WindowInto:
    """Rows in the global window (dead letters) -> a pane every ``seconds`` of processing time: in
    streaming, a global window's default trigger never fires."""
    return beam.WindowInto(beam.window.GlobalWindows(),
                           trigger=trigger.Repeatedly(trigger.AfterProcessingTime(seconds)),
                           accumulation_mode=trigger.AccumulationMode.DISCARDING)


class WriteRows(beam.PTransform):
    """Rows of one output kind -> files per (window, pane, group) under ``output_dir/kind``.

    The group names the files: the rows' collection, or ``group`` when given (dead letters, which
    have no collection, are ``all`` unless a group is given). ``plan``: count each file set as planned
    (batch; the progress line's "of N", :data:`~ldp_marginals.schemas.dead_letters.FILES_PLANNED`)."""

    def __init__(self, kind: str, output_dir: str, group: str | None = None, stable_input: bool = False,
                 run_id: str | None = None, plan: bool = False):
        super().__init__()
        self.kind = check_kind(kind)
        self.output_dir = output_dir
        self.group = group
        self.stable_input = stable_input
        self.run_id = run_id
        self.plan = plan

    def expand(self, rows):
        kind = self.kind
        group = self.group or (DEAD_LETTER_GROUP if kind == DEAD_LETTERS else None)
        group_of = (lambda r: group) if group else (lambda r: r["collection"])
        return (rows
                | "KeyByFile" >> beam.Map(lambda r: ((kind, group_of(r)), r))
                | "GroupByFile" >> beam.GroupByKey()
                | "WriteFiles" >> _writer(self.output_dir, self.stable_input, self.run_id, self.plan))


class FileSink(beam.PTransform):
    """The job's default sink: every output kind to Avro and Parquet files under one directory, each
    file set recorded in the run ``run_id``'s folder (a new id by default: :attr:`run_id`), from which
    :func:`ldp_marginals.transforms.manifest.finish_run` makes the manifest readers read.

    The estimates are written from the pane files (``outputs["panes"]``: one per kind, window and
    pane, made by the batch publication step or the streaming panes state machine; without them, from
    the rows, regrouped per file), and in streaming mode the dead letters, which live in the global window, in panes every
    ``dead_letter_seconds`` of processing time (a global window's default trigger never fires there).
    ``stable_input`` (streaming on Flink with checkpoints) makes the writers wait for checkpointed
    input (module docstring), behind a reshuffle so that only the writers wait, not the panes step.
    Input: ``{kind: rows}``; output: ``{kind: paths of the Avro files written}``.
    """

    def __init__(self, output_dir: str, streaming: bool = False, dead_letter_seconds: int = 60,
                 stable_input: bool = False, run_id: str | None = None):
        super().__init__(label="WriteFiles")
        if stable_input and not streaming:
            raise ValueError("stable_input is for streaming jobs (a batch runner replays nothing), got "
                             "stable_input=True with streaming=False")
        self.output_dir = output_dir
        self.streaming = streaming
        self.dead_letter_seconds = dead_letter_seconds
        self.stable_input = stable_input
        self.run_id = run_id or new_run_id()
        if "://" not in output_dir:
            os.makedirs(output_dir, exist_ok=True)

    def expand(self, outputs: dict):
        written = {}
        for kind in KINDS:
            rows = outputs[kind]
            if self.streaming and kind == DEAD_LETTERS:
                rows = rows | "PaneDeadLetters" >> processing_time_panes(self.dead_letter_seconds)
            elif PANES in outputs and kind != DEAD_LETTERS:  # the panes' own files: one per kind, window and pane, no regrouping
                files = outputs[PANES] | f"Panes[{kind}]" >> beam.Filter(lambda f, k=kind: f.kind == k)
                if self.stable_input:
                    files = files | f"Stage[{kind}]" >> beam.Reshuffle()
                written[kind] = files | f"Write[{kind}]" >> _writer(self.output_dir, self.stable_input, self.run_id)
                continue
            written[kind] = rows | f"Write[{kind}]" >> WriteRows(kind, self.output_dir, stable_input=self.stable_input,
                                                                  run_id=self.run_id, plan=not self.streaming)
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
