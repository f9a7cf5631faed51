"""The deployed streaming logic end to end with TestStream in place of Pub/Sub: Avro messages as
the Pub/Sub source delivers them -> the job -> rows that the BigQuery tables' schemas accept, and
the same rows in the window files."""
import base64
import datetime as dt
import glob
import json
import math

import apache_beam as beam
import fastavro
import pytest
from apache_beam.io.gcp import bigquery_tools
from apache_beam.testing import test_stream

from ldp_marginals import schemas
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.schemas.bigquery import table_schema, to_row
from ldp_marginals.schemas.outputs import SCHEMA_OF
from ldp_marginals.transforms.sinks import FileSink
from tests.collect import Collected
from tests.pipelines.test_streaming import START, config, streaming_pipeline

SUBSCRIPTION = "projects/my-project/subscriptions/noisy-reports"
RFC3339 = "%Y-%m-%dT%H:%M:%S.%fZ"


def check_value(field: dict, value, where: str) -> None:
    """Raise if ``value`` is not what BigQuery takes in a JSON row for ``field``."""
    if value is None:
        assert field["mode"] == "NULLABLE", f"{where} is null but {field['mode']}"
        return
    if field["mode"] == "REPEATED":
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            check_value({**field, "mode": "REQUIRED"}, item, f"{where}[{i}]")
        return
    kind = field["type"]
    if kind == "RECORD":
        assert isinstance(value, dict) and set(value) == {f["name"] for f in field["fields"]}, where
        for f in field["fields"]:
            check_value(f, value[f["name"]], f"{where}.{f['name']}")
    elif kind == "STRING":
        assert isinstance(value, str), where
    elif kind == "BOOLEAN":
        assert isinstance(value, bool), where
    elif kind == "INTEGER":
        assert isinstance(value, int) and not isinstance(value, bool), where
    elif kind == "FLOAT":
        assert isinstance(value, float) and math.isfinite(value) or value in ("NaN", "Infinity", "-Infinity"), where
    elif kind == "TIMESTAMP":
        dt.datetime.strptime(value, RFC3339)
    elif kind == "BYTES":
        base64.b64decode(value, validate=True)
    else:
        raise AssertionError(f"{where}: unexpected type {kind}")


def check_row(schema_name: str, row: dict) -> dict:
    fields = table_schema(schema_name)["fields"]
    assert set(row) == {f["name"] for f in fields}
    for f in fields:
        check_value(f, row[f["name"]], f["name"])
    return row


def test_table_schemas_follow_the_avro_schemas_and_beam_parses_them():
    for kind, name in SCHEMA_OF.items():
        schema = table_schema(name)
        assert [f["name"] for f in schema["fields"]] == [f["name"] for f in schemas.raw_schema(name)["fields"]]
        parsed = bigquery_tools.parse_table_schema_from_json(json.dumps(schema))
        assert bigquery_tools.get_dict_table_schema(parsed) == schema, kind
    fields = {f["name"]: f for f in table_schema("marginal_estimate")["fields"]}
    assert fields["window_start"] == {"name": "window_start", "type": "TIMESTAMP", "mode": "REQUIRED"}
    assert fields["columns"] == {"name": "columns", "type": "INTEGER", "mode": "REPEATED"}
    assert [f["name"] for f in fields["dimensions"]["fields"]] == ["key", "value"]
    dead = {f["name"]: f for f in table_schema("dead_letter")["fields"]}
    assert dead["event_time"] == {"name": "event_time", "type": "TIMESTAMP", "mode": "NULLABLE"}
    assert not {"payload", "record_json", "bits", "client"} & set(dead)   # no report content in dead letters
    assert {f["name"]: f["type"] for f in table_schema("marginal_estimate")["fields"]}["out_of_range"] == "BOOLEAN"


def test_rows_convert_exactly():
    row = to_row("marginal_estimate", {
        "collection": "app", "window_start": 1_767_225_600_123, "window_end": 1_767_229_200_000,
        "dimensions": {"region": "eu", "os": "mac"}, "n_reports": 7, "columns": [0, 3], "labels": ["a", "b"],
        "estimate": 1.5, "frequency": float("nan"), "variance": float("inf"), "ci_low": -0.5, "ci_high": 2})
    assert row["window_start"] == "2026-01-01T00:00:00.123Z" and row["window_end"] == "2026-01-01T01:00:00.000Z"
    assert row["dimensions"] == [{"key": "os", "value": "mac"}, {"key": "region", "value": "eu"}]
    assert (row["frequency"], row["variance"], row["ci_high"]) == ("NaN", "Infinity", 2.0)
    dead = to_row("dead_letter", {"reason": "r", "detail": "d", "source": "s", "event_time": 1_767_225_600_000,
                                  "dimensions": {"region": "eu"}, "bits_length": 2})
    assert (dead["event_time"], dead["dimensions"], dead["bits_length"], dead["client_length"]) == (
        "2026-01-01T00:00:00.000Z", [{"key": "region", "value": "eu"}], 2, None)


def test_means_and_conditionals_rows_fit_their_bigquery_tables():
    """The job's rows of the kinds issue 15 added, as the extraction step makes them."""
    import numpy as np

    from ldp_marginals.pipelines.simulate import simulate_population
    from ldp_marginals.schemas.config import parse_config
    from ldp_marginals.transforms.publication.rows import window_rows
    from tests.configs import SMALL_CONFIG
    cfg = parse_config(dict(SMALL_CONFIG, extremes=[], channel={"p": 0.2, "q": 0.8},
                            features=SMALL_CONFIG["features"] + [{"name": "m", "type": "numeric", "low": 0, "high": 5}],
                            means=[{"of": "m", "by": ["os"]}], conditionals=[{"of": ["beta"], "given": ["dark"]}]))
    pop = simulate_population(cfg, 3000, seed=2)
    acc = cfg.aggregator.create()
    cfg.aggregator.add_packed(acc, pop.noisy, None, None)
    rows = list(window_rows(cfg, (("region", "eu"),), acc, (0, 3_600_000)))
    kinds = {kind for kind, _ in rows}
    assert {"means", "conditionals", "marginals"} <= kinds
    for kind, r in rows:
        check_row(SCHEMA_OF[kind], to_row(SCHEMA_OF[kind], r))
    assert np.isfinite([r["estimate"] for k, r in rows if k == "means"]).all()


def test_unmappable_avro_types_are_refused():
    from ldp_marginals.schemas.bigquery import _field
    with pytest.raises(ValueError, match="only \\['null', T\\] unions"):
        _field("x", ["null", "string", "long"])
    with pytest.raises(ValueError, match="no BigQuery type"):
        _field("x", "fixed16")


def message(cfg, second, bits=b"\x01"):
    record = {"collection": cfg.name, "event_time": (START + second) * 1000, "bits": bits, "dimensions": {"region": "eu"},
              "client": None}
    return schemas.encode_message("noisy_report", record), SUBSCRIPTION


def test_pubsub_messages_to_bigquery_rows_and_window_files(tmp_path):
    cfg = config()
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([message(cfg, 1), message(cfg, 2, b"\x03"), (b"\x00not avro", SUBSCRIPTION),
                             message(cfg, 61)])
              .advance_processing_time(61)
              .advance_watermark_to(START + 200)
              .add_elements([message(cfg, 3)])  # past the window's 30 s of lateness: a dead letter
              .advance_processing_time(61)  # the dead letters' next processing-time pane
              .advance_watermark_to_infinity())
    got = Collected()
    with streaming_pipeline() as p:
        outs = build(p, stream, FileSink(str(tmp_path), streaming=True),
                     JobOptions({cfg.name: cfg}, streaming=True))
        for kind, name in SCHEMA_OF.items():
            outs[kind] | f"ToRows[{kind}]" >> beam.Map(lambda r, n=name: check_row(n, to_row(n, r))) | got.into(kind)
    per_window = sorted((r["window_start"], r["n_reports"], r["dimensions"]) for r in got["marginals"]
                        if r["columns"] == [0] and r["final"])   # the table holds every pane: the final ones
    assert per_window == [("2026-01-01T00:00:00.000Z", 2, [{"key": "region", "value": "eu"}]),
                          ("2026-01-01T00:01:00.000Z", 1, [{"key": "region", "value": "eu"}])]
    reasons = sorted((r["reason"], r["source"], r["record_length"]) for r in got["dead_letters"])
    assert reasons == [("late", "stream", None), ("undecodable", SUBSCRIPTION, 9)]
    files = sorted(glob.glob(str(tmp_path / "marginals" / "*.avro")))
    assert [f.rsplit("/", 1)[1][:18] for f in files] == ["20260101T000000000"] * 2 + ["20260101T000100000"] * 2   # on time, final
    for path in files:
        with open(path, "rb") as fh:
            for record in fastavro.reader(fh):  # as fastavro gives them: timestamps as datetimes
                check_row("marginal_estimate", to_row("marginal_estimate", record))
