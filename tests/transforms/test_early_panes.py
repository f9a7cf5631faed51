"""Early panes under keyed publication, on the DirectRunner with TestStream: a report that arrives while
its window is open is in that window's next early pane, whichever other window's event (on time,
early) the same key's partials went with first (a collector that batches sends one key's reports of
several windows together)."""
from apache_beam.testing import test_stream

from tests.pipelines.test_streaming import START, assert_accounted, config, panes_of, record, run_stream


def test_every_early_firing_publishes_the_reports_each_open_window_received():
    cfg = config(early_firing_seconds=10)
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              # one key, windows [0, 60) and [60, 120); [0, 60)'s on-time pane comes first
              .add_elements([record(cfg, 50), record(cfg, 70)])
              .advance_watermark_to(START + 60)            # on time: 1 in [0, 60)
              .advance_processing_time(20)                 # early: 1 in [60, 120)
              # windows [60, 120) and [120, 180): one early firing for both
              .add_elements([record(cfg, 100), record(cfg, 130)])
              .advance_processing_time(20)                 # early: 2 in [60, 120), 1 in [120, 180)
              .advance_watermark_to_infinity())
    got, counters = run_stream(stream, cfg)
    panes = [(start, timing, n) for start, _, timing, n in panes_of(got) if timing != "closed"]
    assert panes == [(0, "on_time", 1), (60, "early", 1), (60, "early", 2), (60, "on_time", 2),
                     (120, "early", 1), (120, "on_time", 1)]
    assert_accounted(got, counters, 4)
