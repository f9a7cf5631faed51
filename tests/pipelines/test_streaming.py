"""Streaming behaviour with TestStream (the only way to drive watermarks on this machine)."""
import json

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing import test_stream
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to, equal_to_per_window
from apache_beam.transforms.window import IntervalWindow

from ldp_marginals import schemas
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.schemas.config import parse_config
from tests.configs import SMALL_CONFIG

START = 1_767_225_600  # seconds; an hour boundary


def config(**changes):
    spec = dict(SMALL_CONFIG, window={"type": "fixed", "size_seconds": 60}, min_reports=1, extremes=[],
                allowed_lateness_seconds=30, **changes)
    return parse_config(spec)


def record(cfg, second, bits=b"\x01"):
    return {"collection": cfg.name, "event_time": (START + second) * 1000, "bits": bits, "dimensions": {},
            "client": None}


def streaming_pipeline():
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    return BeamTestPipeline(options=options)


def n_per_pane(outs):
    """(window start second, n_reports) of each marginal pane of bit 0."""
    return (outs["marginals"] | beam.Filter(lambda r: r["columns"] == [0])
            | beam.Map(lambda r: (r["window_start"] // 1000 - START, r["n_reports"])))


def test_per_window_outputs_late_panes_and_data_past_lateness():
    cfg = config()
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([record(cfg, 1), record(cfg, 2), record(cfg, 61)])
              .advance_watermark_to(START + 60)          # window [0, 60) fires on time with 2 reports
              .add_elements([record(cfg, 5)])            # late but within 30 s of lateness: a late pane with 3
              .advance_watermark_to(START + 95)          # past 60 + 30: window [0, 60) expires
              .add_elements([record(cfg, 7), record(cfg, 62)])  # 7: dropped and counted; 62: late pane of [60, 120)
              .advance_watermark_to_infinity())
    with streaming_pipeline() as p:
        outs = build(p, stream, None, JobOptions({cfg.name: cfg}, streaming=True))
        assert_that(n_per_pane(outs), equal_to([(0, 2), (0, 3), (60, 2)]), label="panes")
        late = outs["dead_letters"] | beam.Map(lambda d: (d["reason"], d["record_json"] is not None))
        assert_that(late, equal_to([("late", True)]), label="late dead letter")


def test_each_window_gets_its_own_rows():
    cfg = config()
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([record(cfg, s) for s in (1, 2, 3, 65, 70, 130)])
              .advance_watermark_to_infinity())
    with streaming_pipeline() as p:
        outs = build(p, stream, None, JobOptions({cfg.name: cfg}, streaming=True))
        windows = {IntervalWindow(START + a, START + a + 60): [n] for a, n in ((0, 3), (60, 2), (120, 1))}
        assert_that(outs["marginals"] | beam.Filter(lambda r: r["columns"] == [0]) | beam.Map(lambda r: r["n_reports"]),
                    equal_to_per_window(windows), label="per window")


def test_early_panes_fire_before_the_watermark():
    cfg = config(early_firing_seconds=10)
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([record(cfg, 1)])
              .advance_processing_time(20)               # early pane with 1 report
              .add_elements([record(cfg, 2)])
              .advance_watermark_to_infinity())          # on-time pane with 2
    with streaming_pipeline() as p:
        outs = build(p, stream, None, JobOptions({cfg.name: cfg}, streaming=True))
        assert_that(n_per_pane(outs), equal_to([(0, 1), (0, 2)]), label="early then on time")


def test_streaming_file_sink_writes_windows_and_dead_letters(tmp_path):
    from ldp_marginals.transforms.sinks import FileSink
    cfg = config()
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([record(cfg, 1), record(cfg, 2), dict(record(cfg, 3), bits=b"\x01\x02")])
              .advance_processing_time(61)
              .advance_watermark_to(START + 100)
              .add_elements([record(cfg, 70)])
              .advance_watermark_to_infinity())
    with streaming_pipeline() as p:
        build(p, stream, FileSink(str(tmp_path), streaming=True), JobOptions({cfg.name: cfg}, streaming=True))
    marginals = sorted(f.name for f in (tmp_path / "marginals").glob("*.avro"))
    assert marginals == ["20260101T000000000Z_20260101T000100000Z_app_pane000.avro",
                         "20260101T000100000Z_20260101T000200000Z_app_pane000.avro"]
    dead = [r for f in (tmp_path / "dead_letters").glob("*.avro") for r in schemas.read_avro(f, "dead_letter")]
    assert [d["reason"] for d in dead] == ["wrong_length"]


def test_streaming_panes_cap_dimension_values_and_the_latest_pane_holds_every_key(tmp_path):
    from ldp_marginals.schemas.outputs import kind_dir, latest_panes
    from ldp_marginals.transforms.sinks import FileSink
    cfg = config(dimensions={"region": {"max_values": 2}})

    def at(second, region):
        return dict(record(cfg, second), dimensions={"region": region})

    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([at(1, "a"), at(2, "a"), at(3, "a"), at(4, "b"), at(5, "b"), at(6, "c")])
              .advance_watermark_to(START + 60)                 # on time: a 3, b 2, c 1 -> c under __other__
              .add_elements([at(7, "d"), at(8, "e")])           # late, within the lateness: d, e -> __other__
              .advance_watermark_to_infinity())
    with streaming_pipeline() as p:
        build(p, stream, FileSink(str(tmp_path), streaming=True), JobOptions({cfg.name: cfg}, streaming=True))
    panes = sorted((tmp_path / "marginals").glob("*.jsonl"))
    for path in panes:  # no pane ever lists more than max_values values (+ __other__)
        regions = {json.loads(line)["dimensions"]["region"] for line in path.read_text().splitlines()}
        assert len(regions) <= 3 and regions <= {"a", "b", "c", "d", "e", "__other__"}, path.name
    (latest,) = latest_panes(kind_dir(str(tmp_path), "marginals"))
    with open(latest) as fh:
        rows = [json.loads(line) for line in fh]
    n = {r["dimensions"]["region"]: r["n_reports"] for r in rows if r["columns"] == [0]}
    assert n == {"a": 3, "b": 2, "__other__": 3}  # every report counted once, in the latest pane
