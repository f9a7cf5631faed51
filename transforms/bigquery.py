"""The BigQuery sink: each output kind to its table ``<dataset>.<kind>``, with the schema derived
from the kind's Avro schema (:mod:`schemas.bigquery`). Rows BigQuery refuses are not lost: they
become dead-letter files (reason ``bigquery_insert``) under ``<failed_dir>/dead_letters``."""
from __future__ import annotations

import json
import re

import apache_beam as beam
from apache_beam.io.gcp.bigquery import BigQueryDisposition, WriteToBigQuery
from apache_beam.io.gcp.bigquery_tools import RetryStrategy

from ldp_marginals.schemas.bigquery import table_schema, to_row
from ldp_marginals.schemas.dead_letters import BIGQUERY_INSERT
from ldp_marginals.schemas.outputs import DEAD_LETTERS, KINDS, SCHEMA_OF, check_kind
from ldp_marginals.transforms.dead_letters import TAG, dead_letter
from ldp_marginals.transforms.sinks import WriteRows, processing_time_panes

METHODS = ("STREAMING_INSERTS", "FILE_LOADS")
_DATASET = re.compile(r"^([a-z][a-z0-9-]{4,28}[a-z0-9][:.])?[A-Za-z0-9_]{1,1024}$")


def _partitioning(kind: str) -> dict:
    """Tables of windowed rows are partitioned by day of window start and clustered by collection."""
    if kind == DEAD_LETTERS:
        return {"timePartitioning": {"type": "DAY"}}
    return {"timePartitioning": {"type": "DAY", "field": "window_start"}, "clustering": {"fields": ["collection"]}}


class BigQuerySink(beam.PTransform):
    """The job's outputs ``{kind: rows}`` -> one table per kind, ``<dataset>.<kind>`` (created if
    needed, appended).

    ``dataset`` is ``project:dataset`` or ``project.dataset`` (or a bare dataset of the job's project).
    ``method`` is ``STREAMING_INSERTS`` (rows visible within seconds; refused rows come back and are
    written as dead letters under ``failed_dir``) or ``FILE_LOADS`` (load jobs every
    ``load_seconds`` in streaming, one load at the end in batch; a refused load fails the job loudly).
    """

    def __init__(self, dataset: str, failed_dir: str, method: str = "STREAMING_INSERTS",
                 streaming: bool = False, load_seconds: int = 300, dead_letter_seconds: int = 60,
                 run_id: str | None = None):
        super().__init__(label="WriteBigQuery")
        if not isinstance(dataset, str) or not _DATASET.match(dataset):
            raise ValueError(f"dataset must be [project:]dataset, got dataset={dataset!r}")
        if method not in METHODS:
            raise ValueError(f"method must be one of {list(METHODS)}, got method={method!r}")
        if load_seconds <= 0:
            raise ValueError(f"load_seconds must be > 0, got load_seconds={load_seconds!r}")
        self.dataset = dataset
        self.failed_dir = failed_dir
        self.method = method
        self.streaming = streaming
        self.load_seconds = load_seconds
        self.dead_letter_seconds = dead_letter_seconds
        self.run_id = run_id   # the file sink's run: refused rows' files are recorded in it

    def table(self, kind: str) -> str:
        return f"{self.dataset}.{kind}"

    def expand(self, outputs: dict):
        for kind in KINDS:
            outputs[kind] | f"BigQuery[{kind}]" >> _WriteKind(self, kind)
        return None


class _WriteKind(beam.PTransform):
    """One kind's rows -> its table; refused rows (streaming inserts) -> dead-letter files."""

    def __init__(self, sink: BigQuerySink, kind: str):
        super().__init__()
        self.sink = sink
        self.kind = check_kind(kind)

    def expand(self, rows):
        sink, kind = self.sink, self.kind
        schema_name = SCHEMA_OF[kind]
        inserts = sink.method == "STREAMING_INSERTS"
        result = (rows
                  | "ToRows" >> beam.Map(to_row, schema_name)
                  | "Write" >> WriteToBigQuery(
                      table=sink.table(kind), schema=table_schema(schema_name),
                      create_disposition=BigQueryDisposition.CREATE_IF_NEEDED,
                      write_disposition=BigQueryDisposition.WRITE_APPEND,
                      method=sink.method,
                      insert_retry_strategy=RetryStrategy.RETRY_ON_TRANSIENT_ERROR if inserts else None,
                      triggering_frequency=sink.load_seconds if sink.streaming and not inserts else None,
                      additional_bq_parameters=_partitioning(kind)))
        if not inserts:
            return result
        refused = result.failed_rows_with_errors | "Refused" >> beam.FlatMap(_refused).with_outputs(TAG, main="none")
        return (refused[TAG]
                | "PaneRefused" >> processing_time_panes(sink.dead_letter_seconds)
                | "WriteRefused" >> WriteRows(DEAD_LETTERS, sink.failed_dir, group=f"bigquery-{kind}",
                                                run_id=sink.run_id, plan=not sink.streaming))


def _refused(failed):
    """``(table, row, errors)`` from WriteToBigQuery -> a counted dead letter."""
    table, row, errors = failed
    yield dead_letter(BIGQUERY_INSERT, json.dumps(errors, default=str)[:4000], str(table), output_row=row)
