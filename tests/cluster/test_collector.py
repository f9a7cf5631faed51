"""The collector on the local broker, started as an operator starts it (``ldp-marginals collect``, its
keys in a file): devices post batches and single reports and retry as docs/collector.md says; the
broker is killed and started again while they post, then the collector is stopped (SIGTERM) and
started again and a device retries a request acknowledged before. Read back, the topic holds every
acknowledged report exactly once, and nothing else. About 40 s."""
import concurrent.futures
import json
import time
import uuid

import pytest

from ldp_marginals import schemas
from ldp_marginals.pipelines.ledger import HEADER
from ldp_marginals.pipelines.produce import encode_container
from ldp_marginals.schemas.config import parse_config
from tests.cluster import collectors, streams
from tests.configs import SMALL_CONFIG
from tests.pipelines.test_same_answers import reports

pytestmark = pytest.mark.kafka

TOPIC = "collected-http"


def unique_reports(n: int) -> list:
    """``n`` valid reports, each its own event time (so each can be told apart when read back)."""
    base = reports(parse_config(SMALL_CONFIG))[:-6]
    return [dict(base[i % len(base)], event_time=base[i % len(base)]["event_time"] + i) for i in range(n)]


def test_every_acknowledged_report_is_on_the_topic_once_across_broker_and_collector_restarts(cluster, tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps(SMALL_CONFIG))
    streams.produce(cluster.bootstrap, TOPIC, [])    # the topic, two partitions
    sent = unique_reports(4200)
    bodies = [encode_container(sent[i:i + 100]) for i in range(0, 4000, 100)] + [
        schemas.encode_message("noisy_report", r) for r in sent[4000:]]
    ids = [str(uuid.uuid4()) for _ in bodies]
    # the test's reports reuse a few hundred device tokens, far beyond the default bound per token
    args = ("--ack-seconds", "3", "--read-back-records", "1000", "--token-per-minute", "1e6", "--token-burst", "100000")
    c = collectors.start(str(config), cluster.bootstrap, TOPIC, str(tmp_path), *args)
    answers = {}
    try:
        for i in range(10):   # the broker up
            answers[i] = collectors.post_until_accepted(lambda: c.url, bodies[i], request_id=ids[i])
        with concurrent.futures.ThreadPoolExecutor(8) as pool:   # the broker killed and restarted meanwhile
            def post(i):
                return pool.submit(collectors.post_until_accepted, lambda: c.url, bodies[i], 180, ids[i])
            # some in flight when the broker is killed, the rest posted while it is down: a collector that
            # acknowledges the 4,000 reports within a second would otherwise be done before the kill
            futures = {i: post(i) for i in range(10, 20)}
            cluster.kill("kafka")
            futures.update({i: post(i) for i in range(20, len(bodies))})
            time.sleep(8.0)
            cluster.start_kafka()
            answers.update({i: f.result() for i, f in futures.items()})
        assert collectors.stop(c) == 0
        c = collectors.start(str(config), cluster.bootstrap, TOPIC, str(tmp_path), *args)
        replay = collectors.post(c.url, bodies[3], ids[3])   # acknowledged before the restart, retried
        wrong = collectors.post(c.url, bodies[4], ids[3])    # a key reused for another body
    finally:
        collectors.stop(c)
        if "kafka" not in cluster.pids:
            cluster.start_kafka()

    assert all(a["accepted"] == (100 if i < 40 else 1) for i, (a, _) in answers.items())
    retried = sum(attempts > 1 for _, attempts in answers.values())
    assert retried, "no request saw the broker's outage: the test did not test it"
    assert replay == (200, dict(accepted=100, replayed=True)) and wrong[0] == 409
    records = collectors.read_topic(cluster.bootstrap, TOPIC)
    got = sorted(collectors.identity(r) for rs, _ in records for r in rs)
    assert got == sorted(collectors.identity(r) for r in sent)   # every one, once
    assert all(HEADER in headers for _, headers in records)
    assert collectors.KEY not in c.output()
