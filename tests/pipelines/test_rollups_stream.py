"""Rollups in streaming (issue 37, item 2), on the DirectRunner with TestStream: a window's rollup rows
are published once, at its close (never in an early or on-time pane), hold the late reports its keys
accepted within the allowed lateness, and equal the rows the batch job publishes from the same reports
when the windows close cleanly."""
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_stream
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from ldp_marginals.pipelines.job import JobOptions, build
from tests.collect import Collected
from tests.pipelines.test_streaming import START, config, record, run_stream

ALL = "__all__"
DIMENSIONS = {"region": {"max_values": 4}, "version": {"max_values": 8}}


def rollup_config(**changes):
    return config(min_reports=3, dimensions=DIMENSIONS, rollups=[["region"], []], early_firing_seconds=10, **changes)


def records(cfg, second, n, region, version):
    return [record(cfg, second, bytes([i % 2]), region=region, version=version) for i in range(n)]


def window_one(cfg):
    """[0, 60): eu 1.0 (4) and us 1.0 (3) released; eu 2.0 (1) and eu 3.0 (2) withheld, 3 together, so
    eu's rollup is published; us 2.0 (1) withheld alone: us's rollup, and the total (whose part outside
    eu's is us 2.0), are not."""
    return (records(cfg, 10, 4, "eu", "1.0") + records(cfg, 11, 1, "eu", "2.0") + records(cfg, 12, 2, "eu", "3.0")
            + records(cfg, 13, 3, "us", "1.0") + records(cfg, 14, 1, "us", "2.0"))


def window_two(cfg):
    """[60, 120), on time: eu 1.0 (1) and us 1.0 (2), both withheld; the late report below makes us 1.0
    three, released in a late pane: us's rollup (its keys all published) is published; eu's and the
    total, whose withheld part is eu 1.0's one report, are not."""
    return records(cfg, 70, 1, "eu", "1.0") + records(cfg, 75, 2, "us", "1.0")


LATE = ("us", "1.0", 100)   # a report of [60, 120) after its on-time pane, within the lateness (30 s)


def rollup_rows(rows):
    return sorted(((r["window_start"], tuple(sorted(r["dimensions"].items())), tuple(r["columns"])),
                   r["n_reports"], round(r["estimate"], 9), round(r["variance"], 9))
                  for r in rows if ALL in r["dimensions"].values())


def run_batch(cfg, inputs):
    got = Collected()
    p = BeamTestPipeline(options=PipelineOptions())
    outs = build(p, beam.Create(inputs), None, JobOptions({cfg.name: cfg}))
    outs["marginals"] | got.into("marginals")
    p.run().wait_until_finish()
    return got


def test_rollups_are_published_once_at_the_close_and_equal_batch():
    cfg = rollup_config()
    late = record(cfg, LATE[2], b"\x01", region=LATE[0], version=LATE[1])
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements(window_one(cfg))
              .advance_processing_time(20)          # early panes of [0, 60): eu 1.0 and us 1.0
              .add_elements(window_two(cfg))
              .advance_watermark_to(START + 120)    # on time: both windows (they close 30 s later)
              .add_elements([late])                 # late within the lateness: a late pane of us 1.0
              .advance_watermark_to_infinity())
    got, _ = run_stream(stream, cfg)
    panes = {(f.window[0] // 1000 - START, f.key, f.pane, f.timing) for f in got["panes"] if f.kind == "marginals"}
    rolled = sorted(p for p in panes if ALL in dict(p[1]).values())
    assert rolled == [(0, (("region", "eu"), ("version", ALL)), 0, "closed"),
                      (60, (("region", "us"), ("version", ALL)), 0, "closed")]
    assert {p[3] for p in panes if ALL not in dict(p[1]).values()} >= {"early", "on_time", "late"}
    n = {(r["window_start"] // 1000 - START, r["dimensions"]["region"]): r["n_reports"]
         for r in got["marginals"] if ALL in r["dimensions"].values() and r["columns"] == [0]}
    assert n == {(0, "eu"): 7, (60, "us"): 3}   # the late report is in us's rollup
    batch = run_batch(cfg, window_one(cfg) + window_two(cfg) + [late])
    assert rollup_rows(got["marginals"]) == rollup_rows(batch["marginals"])
