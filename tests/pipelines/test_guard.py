"""The min_reports guard across panes and overlapping windows (issue 14): every published aggregate
is a sum of atoms (a slice's reports released together) of 0 or at least min_reports reports, and
every report is published, withheld or dead-lettered."""
import random
from collections import defaultdict

import apache_beam as beam
import numpy as np
from apache_beam.testing import test_stream
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.schemas.config import parse_config
from tests.collect import Collected
from tests.pipelines.test_streaming import START, config, record, run_stream


def ten_then_late_one_at_a_time(cfg, n_late):
    """10 reports on time in [0, 60); then, after the watermark passed 60, ``n_late`` late reports
    of that window, each alone in its own bundle (the watermark moves between them)."""
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([record(cfg, s) for s in range(10)])
              .advance_watermark_to(START + 61))
    for i in range(n_late):
        stream = stream.add_elements([record(cfg, 20 + i)]).advance_watermark_to(START + 62 + i)
    return stream.advance_watermark_to_infinity()


def test_late_reports_one_at_a_time_are_held_not_published():
    """The issue's reproduction: 10 on time, then late reports one at a time with min_reports 5:
    before, panes of 10, 11 and 12 were published (11 - 10 isolates one report)."""
    cfg = config(min_reports=5, allowed_lateness_seconds=300)
    got, _ = run_stream(ten_then_late_one_at_a_time(cfg, 2), cfg)
    published = [(f.pane, f.timing, f.rows[0]["n_reports"]) for f in got["panes"] if f.kind == "marginals"]
    assert published == [(0, "on_time", 10), (1, "closed", 10)]   # the close repeats it: the final pane
    (held,) = got["withheld"]
    assert held["n_reports"] == 2 and "held back" in held["reason"]


def test_late_reports_are_released_once_they_reach_min_reports():
    cfg = config(min_reports=5, allowed_lateness_seconds=300)
    got, _ = run_stream(ten_then_late_one_at_a_time(cfg, 6), cfg)  # released together at the fifth
    published = [(f.timing, f.rows[0]["n_reports"]) for f in got["panes"] if f.kind == "marginals"]
    assert published == [("on_time", 10), ("late", 15), ("closed", 15)]
    (held,) = got["withheld"]
    assert held["n_reports"] == 1


def test_without_a_guard_every_late_report_is_a_pane():
    cfg = config(min_reports=0, allowed_lateness_seconds=300)
    got, _ = run_stream(ten_then_late_one_at_a_time(cfg, 2), cfg)
    assert [f.rows[0]["n_reports"] for f in got["panes"] if f.kind == "marginals"] == [10, 11, 12, 12]   # 12: final
    assert got["withheld"] == []


def test_client_extremes_need_every_group_of_the_windows_atoms_at_min_reports():
    """Increments are released at min_reports reports, whoever sent them; the extremes over clients
    are published once, in the window's final pane, and only when every group the rows treat alike
    holds min_reports members: per released increment (atom), the reports without a client; and the
    clients of each composition (how many reports each sent in each atom). Streaming keeps each atom
    apart; batch, whose window is published once, has one atom."""
    from tests.configs import SMALL_CONFIG
    cfg = config(min_reports=3, allowed_lateness_seconds=300, extremes=SMALL_CONFIG["extremes"][2:])

    def by(second, client):
        return dict(record(cfg, second), client=client)

    def reports(on_time, late):
        return [by(s, c) for s, c in enumerate(on_time)], [by(20 + s, c) for s, c in enumerate(late)]

    def streamed(on_time, late):
        first, then = reports(on_time, late)
        stream = (test_stream.TestStream().advance_watermark_to(START).add_elements(first)
                  .advance_watermark_to(START + 61).add_elements(then).advance_watermark_to_infinity())
        got, _ = run_stream(stream, cfg)
        panes = [(f.timing, f.rows[0]["n_reports"]) for f in got["panes"] if f.kind == "marginals"]
        extremes = [(f.timing, [r["n"] for r in f.rows]) for f in got["panes"] if f.kind == "extremes"]
        return panes, extremes, sorted((r["statistic"], r["n_reports"]) for r in got["withheld"])

    six = [f"c{i}" for i in range(6)]
    # c0, c1 and c2 send again late: three clients of one report in each atom, three of one on time
    panes, extremes, withheld = streamed(six, ["c0", "c1", "c2"])
    assert panes == [("on_time", 6), ("late", 9), ("closed", 9)] and extremes == [("closed", [6])] and withheld == []
    # and y too: y is alone in its group, one report in the late atom only (the rule before this one
    # counted three clients of two reports, and published)
    panes, extremes, withheld = streamed(six, ["c0", "c1", "c2", "y"])
    assert panes == [("on_time", 6), ("late", 10), ("closed", 10)] and extremes == []
    assert withheld == [("client_extremes", 10)]
    # c0, c1 and c2 send two reports on time, with one report without a client, and three such reports
    # come late: four in all, but one in the on-time atom, which the on-time pane minus the client rows
    # would single out
    on_time = six + ["c0", "c1", "c2", None]
    panes, extremes, withheld = streamed(on_time, [None] * 3)
    assert panes == [("on_time", 10), ("late", 13), ("closed", 13)] and extremes == []
    assert withheld == [("client_extremes", 13)]
    # the same reports in batch: one atom, four reports without a client, two groups of three clients
    got = Collected()
    with BeamTestPipeline() as p:
        outs = build(p, beam.Create(sum(reports(on_time, [None] * 3), [])), None, JobOptions({cfg.name: cfg}))
        outs["extremes"] | got.into("extremes")
        outs["withheld"] | got.into("withheld")
    assert [r["n"] for r in got["extremes"] if r["name"] == "active_client"] == [6] and got["withheld"] == []


# Scenarios with a noiseless channel (p = 0, q = 1: every estimate is an exact count) and one bit
# per slice position in a window, so each published row's count of bit j is exactly the reports
# of one slice that the row includes.

def slice_config(window, min_reports, lateness, early):
    k = int(window["size_seconds"] // window["period_seconds"]) if window["type"] == "sliding" else 1
    spec = {"collection": "g", "features": [{"name": f"s{j}", "type": "boolean"} for j in range(k)],
            "channel": {"p": 0.0, "q": 1.0}, "max_order": 1, "window": window, "min_reports": min_reports,
            "allowed_lateness_seconds": lateness}
    if early:
        spec["early_firing_seconds"] = early
    return parse_config(spec), k


def slice_record(cfg, k, period, second):
    position = (second // period) % k
    bits = bytes([1 << position])
    return {"collection": cfg.name, "event_time": (START + second) * 1000, "bits": bits, "dimensions": {},
            "client": None}


def check_atoms(got, cfg, k, period, n_by_slice):
    """Per slice, the counts published of it (across panes and windows) are 0 or >= min_reports and
    differ from each other by 0 or >= min_reports: released increments are atoms. (The global
    window is one slice.)"""
    seen = defaultdict(set)
    if cfg.window.type == "global":
        n_by_slice = {0: sum(n_by_slice.values())}
    for f in got["panes"]:
        if f.kind != "marginals":
            continue
        if f.window is None:
            seen[0].add(f.rows[0]["n_reports"])
            continue
        start = f.window[0] // 1000 - START
        per_bit = {r["columns"][0]: int(round(r["estimate"])) for r in f.rows}
        assert sum(per_bit.values()) == f.rows[0]["n_reports"]
        for j, c in per_bit.items():
            s = start + ((j - (start // period)) % k) * period  # the slice of bit j in this window
            seen[s].add(c)
    for s, counts in seen.items():
        values = sorted(counts)
        assert values[-1] <= n_by_slice[s]
        assert all(v == 0 or v >= cfg.min_reports for v in values), (s, values)
        assert all(b - a >= cfg.min_reports for a, b in zip(values, values[1:])), (s, values)
    return seen


def test_random_streams_publish_only_atoms_and_lose_nothing():
    rng = random.Random(2026)
    for scenario in range(9):
        kind = ("fixed", "sliding", "global")[scenario % 3]
        sliding = kind == "sliding"
        period = 60
        window = {"fixed": {"type": "fixed", "size_seconds": period},
                  "sliding": {"type": "sliding", "size_seconds": 3 * period, "period_seconds": period},
                  "global": {"type": "global"}}[kind]
        early = 10 if kind == "global" else rng.choice([None, 10])  # a global window needs early panes
        cfg, k = slice_config(window, rng.choice([2, 3, 5]), rng.choice([0, 60, 300]), early)
        stream = test_stream.TestStream().advance_watermark_to(START)
        watermark, sent = 0, []
        for _ in range(rng.randint(4, 9)):
            seconds = [max(0, watermark + rng.randint(-400, 200)) for _ in range(rng.randint(1, 8))]
            sent += seconds
            stream = stream.add_elements([slice_record(cfg, k, period, s) for s in seconds])
            if rng.random() < 0.5:
                stream = stream.advance_processing_time(rng.choice([5, 20]))
            watermark += rng.randint(1, 150)
            stream = stream.advance_watermark_to(START + watermark)
        got, _ = run_stream(stream.advance_watermark_to_infinity(), cfg)
        late = sum(d["reports"] for d in got["dead_letters"] if d["reason"] == "late")
        n_by_slice = defaultdict(int)
        for s in sent:
            n_by_slice[s - s % period] += 1
        seen = check_atoms(got, cfg, k, period, n_by_slice)
        if not sliding:  # a report is in one window: published (latest pane), withheld or late
            latest = {}
            for f in got["panes"]:  # (the global window is one window, f.window None)
                if f.kind == "marginals" and (f.window not in latest or f.pane > latest[f.window][0]):
                    latest[f.window] = (f.pane, f.rows[0]["n_reports"])
            withheld = sum(r["n_reports"] for r in got["withheld"])
            assert sum(n for _, n in latest.values()) + withheld + late == len(sent), scenario
        else:  # each slice: its published part, plus what its last window reported held, plus late ones
            assert sum(max(v) for v in seen.values()) + late <= len(sent)


def test_batch_sliding_windows_publish_a_small_slice_in_no_window():
    """Slices of 10, 2 and 10 reports, 2-hour windows sliding by an hour, min_reports 5: the 2-report
    slice is withheld from every window, so no two windows differ by it."""
    cfg, k = slice_config({"type": "sliding", "size_seconds": 7200, "period_seconds": 3600}, 5, 0, None)
    seconds = [10 + i for i in range(10)] + [3700, 3800] + [7300 + i for i in range(10)]
    got = Collected()
    with BeamTestPipeline() as p:
        outs = build(p, beam.Create([slice_record(cfg, k, 3600, s) for s in seconds]), None,
                     JobOptions({cfg.name: cfg}))
        outs["marginals"] | got.into("marginals")
        outs["withheld"] | got.into("withheld")
    n = {}
    for r in got["marginals"]:
        n.setdefault(r["window_start"] // 1000 - START, set()).add(r["n_reports"])
    assert n == {-3600: {10}, 0: {10}, 3600: {10}, 7200: {10}}
    held = sorted((r["window_start"] // 1000 - START, r["n_reports"]) for r in got["withheld"])
    assert held == [(0, 2), (3600, 2)]
    assert all("held back" in r["reason"] for r in got["withheld"])
    assert np.all([r["estimate"] in (0.0, 10.0) for r in got["marginals"]])
