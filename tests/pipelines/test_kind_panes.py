"""Whole-report kinds (``subset``, ``hadamard``) with early panes, late panes and sliding windows (issue 48
items 5-6, task q-3): the rule for rows resting on few reports holds per *atom*, the released increment of
one slice and key that panes and overlapping windows difference into (transforms/publication/
hadamard_rows.py: atom_thin_sets; docs/design.md, "Rows of whole-report kinds that rest on few reports").

The attack: a window's early pane publishes the pair (b0, b1) on 10 reports; the next increment adds 29
reports of other pairs and ONE whose subset is (b0, b1). Counted per window, the final pane's pair rests on
11 reports and is published: final minus early is that one report's answer. Per atom, the final pane's
pair rests on 1 report of the second atom and is withheld.
"""
import apache_beam as beam
from apache_beam.testing import test_stream

from ldp_marginals import schemas
from ldp_marginals.schemas.config import parse_config
from tests.pipelines.test_attacks_issue47 import (HOUR, PAIR, PAIR_MASK, SLIDING, T0, _differences_isolate_nothing,
                                                  _subset_records)
from tests.pipelines.test_same_answers import latest_panes, run_batch, run_streaming
from tests.pipelines.test_streaming import run_stream

EARLY = dict(SLIDING, window={"type": "fixed", "size_seconds": 2 * HOUR // 1000}, early_firing_seconds=60)


def _early_attack(pattern: int):
    cfg = parse_config(EARLY)
    records = _subset_records(cfg, pattern)   # hour 0: 30 reports (10 of the pair); hour 1: 30 (1 of the pair)
    first = [schemas.encode_message("noisy_report", r) for r in records if r["event_time"] < T0 + HOUR]
    second = [schemas.encode_message("noisy_report", r) for r in records if r["event_time"] >= T0 + HOUR]
    stream = (test_stream.TestStream().advance_watermark_to(0)
              .add_elements(first)
              .advance_watermark_to(T0 / 1000 + 60)
              .advance_processing_time(120)          # an early pane of the window: the first 30 reports
              .add_elements(second)
              .advance_watermark_to_infinity())      # the on-time (final) pane: all 60
    return cfg, run_stream(stream, cfg)[0]


def test_streaming_early_pane_and_final_pane_do_not_difference_a_thin_pair():
    for pattern in (PAIR_MASK, 0):
        cfg, got = _early_attack(pattern)
        marginal_panes = [f for f in got["panes"] if f.kind == "marginals"]
        timings = sorted({f.timing for f in marginal_panes})
        assert "early" in timings and len(marginal_panes) >= 2, timings   # the attack needs two panes
        rows = [r for f in marginal_panes for r in f.rows]
        # every set's rows over both panes: differences of 0 or >= min_reports reports, never fewer
        assert _differences_isolate_nothing(cfg, rows, SLIDING["min_reports"]) >= 10
        pair_rows = [r for r in rows if tuple(r["columns"]) == PAIR]
        assert [r["n_reports"] for r in pair_rows] == [30], pair_rows   # the early pane's, on 10 of 30
        withheld = [r for f in got["panes"] if f.kind == "withheld" for r in f.rows if "b0,b1" in r["reason"]]
        assert withheld and all("released increment" in r["reason"] for r in withheld), withheld


def test_sliding_streaming_equals_batch_when_every_report_is_on_time():
    """The sliding config in streaming (every report on time, no early firing) publishes what batch does:
    each slice is one atom in both."""
    cfg = parse_config(SLIDING)
    records = _subset_records(parse_config(dict(SLIDING, window={"type": "fixed", "size_seconds": 3600})), PAIR_MASK)
    messages = [schemas.encode_message("noisy_report", r) for r in records]
    batch = run_batch(beam.Create(messages), cfg)
    stream = run_streaming(test_stream.TestStream().advance_watermark_to(0).add_elements(messages)
                           .advance_watermark_to_infinity(), cfg)
    latest = latest_panes(stream)

    def key(r):
        return (r["window_start"], tuple(r.get("columns") or ()), r.get("reason", ""))
    for kind in ("marginals", "withheld"):
        b = sorted(batch[kind], key=key)
        s = sorted(latest[kind], key=key)
        assert [key(r) for r in b] == [key(r) for r in s], kind
        for rb, rs in zip(b, s):
            if kind == "marginals":
                assert abs(rb["estimate"] - rs["estimate"]) < 1e-9 and rb["n_reports"] == rs["n_reports"]
    assert any(tuple(r["columns"]) == PAIR for r in batch["marginals"])
    assert any("b0,b1" in r["reason"] for r in batch["withheld"])
