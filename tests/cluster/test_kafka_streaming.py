"""Streaming from a real Kafka broker on Flink: a producer writes single-report and container
messages of two collections, out of order, with event times as Kafka CreateTime, and a few damaged
messages; once the windows have closed, reports past the lateness. The job reads the topic on Flink
with --streaming. When every window has closed, the latest panes equal the batch path's rows on the
reports the stream counted, the reports past the lateness are late dead letters, and counted plus
dead-lettered equals produced.

Windows are 10 s long, from an hour ago (``streams``): the reports that count are produced before the
job is submitted, each partition in window order, so that every report is on time however fast the
job reads; the windows close by the job having read every report (the watermark then moves to the
clock, an hour past them), and reports of a closed window produced after are late, however slow the
job. (Stamped 20 s ahead, reports were late and the first window's pane did not come within 90 s with
the machine at load 20.) Reports within the lateness but after the on-time pane (a late pane) are
test_stop_and_resume's: here the job's pace would decide which of them a late pane takes, and with
``min_reports`` a late pane of fewer is withheld. So too the second collection, whose early panes
fire on processing time: its guard is off (``min_reports`` 0, no presence-tested kinds), or how many
reports the last early pane left for the close, under ``min_reports`` withheld, would be the job's
pace (a run at load 13 withheld 53 of one window's reports that the batch path published)."""
import json
import random
import re

import pytest

from ldp_marginals.pipelines.simulate import DEFAULT_START_MS
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.outputs import DEAD_LETTERS, EXTREMES, MARGINALS, WITHHELD
from tests.cluster import streams
from tests.cluster.test_flink_batch import RAW
from tests.pipelines.test_same_answers import container, reports

pytestmark = [pytest.mark.flink, pytest.mark.kafka, streams.CANCELLED_WORKER_THREADS]

WINDOW_S, LATENESS_S = 10, 20
STREAM = dict(RAW, window={"type": "fixed", "size_seconds": WINDOW_S}, allowed_lateness_seconds=LATENESS_S)
# the second collection fires early panes every 2 s of processing time (Flink's processing-time timers);
# no guard (see the module docstring)
SECOND = dict(STREAM, collection="second", early_firing_seconds=2, min_reports=0, conditionals=[], means=[])


CLIENT_EXTREMES = {e["name"] for e in RAW["extremes"] if e.get("over") == "client"}


def closed(output: str, collection: str, window: tuple) -> bool:
    """Whether the window's final pane has been written for every capped key it has written: the only
    pane with the extremes over clients, or with a withheld row for them or for a whole key (a key of
    the window too small)."""
    extremes = streams.panes_of(output, EXTREMES, collection, window)
    withheld = streams.panes_of(output, WITHHELD, collection, window)
    keys = set(streams.panes_of(output, MARGINALS, collection, window)) | set(extremes) | set(withheld)
    return bool(keys) and all(any(
        row["name"] in CLIENT_EXTREMES for pane in extremes.get(stem, ())
        for row in streams.rows_of(output, EXTREMES, stem, pane)) or any(
        row["statistic"] in ("all", "client_extremes") for pane in withheld.get(stem, ())
        for row in streams.rows_of(output, WITHHELD, stem, pane)) for stem in keys)


def test_kafka_stream_on_flink_gives_the_batch_rows(cluster, tmp_path):
    (tmp_path / "c.json").write_text(json.dumps([STREAM, SECOND]))
    out = str(tmp_path / "stream")
    argv = ["--config", str(tmp_path / "c.json"), "--streaming", "--kafka-topic", "reports",
            "--kafka-bootstrap", cluster.bootstrap, "--kafka-timestamp-policy", "CreateTime",
            "--kafka-consumer-config", "auto.offset.reset=earliest",
            "--kafka-expansion-service", cluster.expansion_service, "--dead-letter-seconds", "2",
            # reports produced before the job (streams): no batching delay to wait for
            "--watermark-delay-seconds", "0",
            "--output", out] + cluster.pipeline_args()
    undecodable = b"\x00\x01not avro"
    t0 = streams.past_start_ms(WINDOW_S)
    records, faults = [], 6   # reports() ends with one report of each fault
    for raw in (STREAM, SECOND):
        records += streams.rescale(reports(parse_config(raw)), DEFAULT_START_MS, t0, WINDOW_S)
    w0 = (t0, t0 + WINDOW_S * 1000)
    # held back from the first collection's first window: 80 reports sent after it closed
    first_w0 = [i for i, r in enumerate(records[:len(records) // 2 - faults])
                if streams.window_index(r, t0, WINDOW_S) == 0]
    rng = random.Random(3)
    held = rng.sample(first_w0, 80)
    past = [records[i] for i in held]
    held = set(held)
    on_time = [r for i, r in enumerate(records) if i not in held]
    rng.shuffle(on_time)   # out of order within a window: collections and containers interleaved
    messages = streams.singles(on_time[:1500], default_ms=t0)
    rest = on_time[1500:]
    batches = [rest[i:i + 400] for i in range(0, len(rest), 400)]
    messages += [(container(b), min(max(r["event_time"], t0) for r in b)) for b in batches]
    damaged = [(undecodable, t0), (messages[-1][0][:200], t0)]
    messages += damaged
    rng.shuffle(messages)
    messages = streams.in_window_order(messages, t0, WINDOW_S)
    streams.produce(cluster.bootstrap, "reports", messages)   # before the job: streams' docstring
    windows = sorted({(t0 + streams.window_index(r, t0, WINDOW_S) * WINDOW_S * 1000,
                       t0 + (streams.window_index(r, t0, WINDOW_S) + 1) * WINDOW_S * 1000)
                      for r in on_time if r["event_time"] >= 0})
    with streams.running_job(argv, cluster) as job:
        streams.wait_until("the first window's close", lambda: closed(out, "app", w0))
        streams.produce(cluster.bootstrap, "reports", streams.singles(past), create=False)
        for collection in ("app", "second"):
            for w in windows:
                streams.wait_until(f"the close of {collection} {w}", lambda c=collection, w=w: closed(out, c, w))
        streams.wait_until("the late dead letters", lambda: sum(
            d["reports"] for d in read_rows(out, DEAD_LETTERS) if d["reason"] == "late") >= len(past))
        # every window has closed: the batch rows and the withheld rows say what each counter must reach;
        # the counters reach Prometheus after the files (each as its bundle's metrics are reported), so
        # wait for every one the assertions read (a wait on the late counter alone once saw
        # windows_withheld still 0 of 4)
        batch, expected = streams.batch_of(tmp_path, on_time)
        withheld = [r for r in read_rows(out, WITHHELD) if r["cause"] == "privacy" and r["statistic"] == "all"]
        floor = dict({f"dead_letter_{reason}": n for reason, n in expected["dead_letters_by_reason"].items()},
                     dead_letter_late=len(past), reports_valid=expected["reports_counted"],
                     windows_withheld=len(withheld), reports_withheld=sum(r["n_reports"] for r in withheld))
        metrics = streams.wait_until("every counter on Prometheus", lambda: (lambda m: m if all(
            m.get(name, 0) >= n for name, n in floor.items())
            and m.get("dead_letter_undecodable", 0) + m.get("dead_letter_damaged_block", 0) >= len(damaged)
            and m.get("reports_published", 0) + m.get("reports_withheld", 0) >= expected["reports_counted"]
            else None)(streams.job_metrics(cluster, job.job_name)))

    streams.assert_same_estimates(out, batch)
    # dead letters: the faults as in batch, the reports past the lateness as late, the damaged messages
    dead = read_rows(out, DEAD_LETTERS)
    by_reason = {}
    for d in dead:
        by_reason[d["reason"]] = by_reason.get(d["reason"], 0) + d["reports"]
    assert by_reason.pop("late") == len(past)
    unreadable = [d for d in dead if d["reason"] in ("undecodable", "damaged_block")]
    # each names its record: topic, partition and offset (and the byte offset of a damaged block)
    assert len(unreadable) == len(damaged)
    assert all(re.fullmatch(r"kafka:reports/partition/[01]/offset/\d+(@\d+)?", d["source"]) for d in unreadable)
    for d in unreadable:
        by_reason.pop(d["reason"], None)
    assert by_reason == expected["dead_letters_by_reason"]
    # produced = counted (the stream's rows are the batch's on the same reports) + dead-lettered
    assert expected["reports_counted"] + sum(by_reason.values()) + len(past) == len(records)
    # the job's counters as Flink's Prometheus reporter serves them say the same (issue 36, item 7):
    # counted, dead-lettered by reason, and the guard's work once every window has closed
    assert metrics["reports_valid"] == expected["reports_counted"]
    assert metrics["dead_letter_late"] == len(past)
    for reason, n in expected["dead_letters_by_reason"].items():
        assert metrics[f"dead_letter_{reason}"] == n, reason
    assert metrics["dead_letter_undecodable"] + metrics.get("dead_letter_damaged_block", 0) == len(damaged)
    assert metrics.get("windows_withheld", 0) == len(withheld)
    assert metrics.get("reports_withheld", 0) == sum(r["n_reports"] for r in withheld)
    assert metrics["reports_published"] + metrics.get("reports_withheld", 0) == expected["reports_counted"]
