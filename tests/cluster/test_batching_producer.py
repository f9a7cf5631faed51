"""Collectors that batch lose nothing to the watermark at the command's defaults (issue 36, item 2),
on the local Kafka and Flink.

Devices stamp their reports with clocks up to 5 s behind the wall clock; collectors (the project's
``KafkaReportProducer``) hold them until a container has waited its batching delay, 10 s for four of
them and 1 s for two, and send it with its earliest event time as the record's timestamp. Kafka IO's
watermark follows the wall clock once the reader has caught up, so without the job's watermark delay
about half of such reports were dead-lettered as late (benchmarks/lateness.py, README). Whether a
report is late is decided when it arrives; the collection fires early panes every 2 s and publishes
every report (``min_reports`` 0), so once the collectors are done the early panes hold every report
within a minute, before any window's on-time pane can fire (90 s after its end, at the default
delay). Then each window's on-time pane comes, the job's counters (scraped from Flink's Prometheus
endpoint) say every report was counted and none was late, and the latest panes are the batch path's
rows on the reports sent. The one dead letter, an undecodable record, names its topic, partition and
offset. About three minutes."""
import json
import time

import pytest

from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.pipelines.job import WATERMARK_DELAY_SECONDS
from ldp_marginals.schemas.outputs import DEAD_LETTERS, MARGINALS, load_manifest, manifest_files
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


def latest_panes(out: str) -> dict:
    """``{(window start, capped key): latest pane index}`` of the marginals written under ``out``."""
    files = manifest_files(load_manifest(out), MARGINALS)
    return {(e["window_start"], json.dumps(e["key"], sort_keys=True)): e["pane"] for e in files}


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
                           lambda: read_rows(out, DEAD_LETTERS), 240)
        sent = streams.collect(cluster.bootstrap, "collected", population, rate_per_s=56,
                               max_seconds=[10, 10, 10, 10, 1, 1])
        # every report in the early panes (every 2 s), before any on-time pane can fire: a window's on-time
        # pane waits for the watermark, which follows the records' times (never past the wall clock), to
        # pass the window's end plus the watermark delay
        first_on_time_s = min(r["event_time"] // 1000 // WINDOW_S * WINDOW_S + WINDOW_S for r in sent) + \
            WATERMARK_DELAY_SECONDS
        streams.wait_until("every report in the early panes", lambda: streams.reports_in_latest_panes(out) >= len(sent),
                           min(60, first_on_time_s - time.time() - 5))   # 5 s: the last poll may end past the wait
        early = latest_panes(out)
        # then the on-time panes (the 90 s watermark delay holds them back): a new pane of every window and key
        streams.wait_until("the on-time panes", lambda: (lambda now: now.keys() == early.keys() and all(
            now[k] > early[k] for k in now))(latest_panes(out)), 180)
        dead = streams.wait_until("the undecodable record's dead letter", lambda: read_rows(out, DEAD_LETTERS), 30)
        metrics = streams.wait_until("the counters on Prometheus", lambda: (lambda m: m if m.get(
            "reports_valid", 0) + m.get("dead_letter_late", 0) >= len(sent) and m.get("dead_letter_undecodable")
            else None)(streams.job_metrics(cluster, job.job_name)), 60)

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
