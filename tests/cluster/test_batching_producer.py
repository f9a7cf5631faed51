"""Collectors that batch lose nothing to the watermark at the command's defaults (issue 36, item 2),
on the local Kafka and Flink.

Devices stamp their reports with clocks up to 5 s behind the wall clock; collectors (the project's
``KafkaReportProducer``) hold them until a container has waited its batching delay, 10 s for four of
them and 1 s for two, and send it with its earliest event time as the record's timestamp. Kafka IO's
watermark follows the wall clock once the reader has caught up, so without the job's watermark delay
about half of such reports were dead-lettered as late (benchmarks/lateness.py, README). The subject is
real time (devices and collectors stamp and send as the clock runs), but what the test asserts is of
event time only, never of how fast the job runs (issue 49, item 8): when every window has closed (its
final pane: the watermark passed its end plus the delay), each window's final rows count every report
stamped in it, the job's counters (scraped from Flink's Prometheus endpoint) say every report was
counted and none was late, and the latest panes are the batch path's rows on the reports sent. The one
dead letter, an undecodable record, names its topic, partition and offset. (The test asserted before
that the early panes held every report before the first on-time pane could fire, a wait bounded by the
clock: on a busy machine the early panes come later, and nothing is lost.) About three minutes."""
import json
import time
from collections import Counter

import pytest

from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import DEAD_LETTERS, MARGINALS
from tests.cluster import streams
from tests.cluster.test_flink_batch import RAW
from tests.pipelines.test_same_answers import reports

pytestmark = [pytest.mark.flink, pytest.mark.kafka, streams.CANCELLED_WORKER_THREADS]

WINDOW_S = 10
# every report published in early panes; no presence-tested rows (a late pane can withhold what an
# earlier one published, and the reader's latest pane of that kind is then the earlier one)
CONFIG = dict(RAW, extremes=[e for e in RAW["extremes"] if e.get("over") != "client"], min_reports=0,
              conditionals=[], means=[], early_firing_seconds=2, window={"type": "fixed", "size_seconds": WINDOW_S})


def send_one(bootstrap: str, topic: str, value: bytes, timestamp_ms: int) -> tuple:
    """One record -> ``(partition, offset)`` the broker gave it."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    meta = producer.send(topic, value=value, timestamp_ms=timestamp_ms).get(timeout=30)
    producer.close()
    return meta.partition, meta.offset


def window_start(event_ms: int) -> int:
    return event_ms // (WINDOW_S * 1000) * WINDOW_S * 1000


def final_reports(out: str) -> Counter:
    """``{window start: reports}`` in the final marginals rows (the windows that closed) under ``out``: each
    key's reports (every row of a key, one a counted set, says them) summed over the window's keys."""
    per_key = {(m["window_start"], json.dumps(m["dimensions"], sort_keys=True)): m["n_reports"]
               for m in read_rows(out, MARGINALS, final_only=True) if not m["rollup"]}
    got = Counter()
    for (window, _), n in per_key.items():
        got[window] += n
    return got


def test_collectors_that_batch_lose_nothing_to_the_watermark_at_the_defaults(cluster, tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(CONFIG))
    population = reports(parse_config(CONFIG))[:-6]   # the faults at its end are other tests' business
    streams.produce(cluster.bootstrap, "collected", [])   # the topic, two partitions
    out = str(tmp_path / "stream")
    argv = ["--config", str(tmp_path / "c.json"), "--streaming", "--kafka-topic", "collected",
            "--kafka-bootstrap", cluster.bootstrap, "--kafka-consumer-config", "auto.offset.reset=earliest",
            "--kafka-expansion-service", cluster.expansion_service, "--dead-letter-seconds", "2",
            "--output", out] + cluster.pipeline_args()
    with streams.running_job(argv, cluster) as job:
        # the job is reading before the collectors start: its dead letter for an undecodable record
        # (was: a fixed 15 s)
        where = send_one(cluster.bootstrap, "collected", b"\x00\x01not avro", int(time.time() * 1000))
        streams.wait_until("the job reading (the undecodable record's dead letter)",
                           lambda: read_rows(out, DEAD_LETTERS))
        sent = streams.collect(cluster.bootstrap, "collected", population, rate_per_s=56,
                               max_seconds=[10, 10, 10, 10, 1, 1])
        # every window closes (the watermark passes its end plus the delay, whatever the job's pace)
        stamped = Counter(window_start(r["event_time"]) for r in sent)
        final = streams.wait_until("every window's final pane", lambda: (lambda got: got if set(got) >= set(
            stamped) else None)(final_reports(out)))
        dead = streams.wait_until("the undecodable record's dead letter", lambda: read_rows(out, DEAD_LETTERS))
        metrics = streams.wait_until("the counters on Prometheus", lambda: (lambda m: m if m.get(
            "reports_valid", 0) + m.get("dead_letter_late", 0) >= len(sent) and m.get("dead_letter_undecodable")
            else None)(streams.job_metrics(cluster, job.job_name)))

    # each window's final pane holds every report stamped in it: none came after the watermark had passed it
    assert final == stamped
    # nothing late: every report the collectors sent is counted, once
    assert metrics["reports_valid"] == len(sent) and metrics.get("dead_letter_late", 0) == 0
    assert streams.reports_in_latest_panes(out) == len(sent)
    batch, expected = streams.batch_of(tmp_path, sent)
    assert expected["reports_counted"] == len(sent) and not expected["dead_letters_by_reason"]
    streams.assert_same_estimates(out, batch, every_kind=False)
    # the one dead letter names the record where Kafka keeps it
    assert [(d["reason"], d["source"]) for d in dead] == [
        ("undecodable", "kafka:collected/partition/{}/offset/{}".format(*where))]
    assert metrics["dead_letter_undecodable"] == 1
