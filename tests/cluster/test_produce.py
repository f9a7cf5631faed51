"""Producing to Kafka as the README shows (issue 36, item 8), against a real broker: the README's
producer snippet and ``ldp-marginals produce``, each read back from the topic: every report once, each
record a container whose timestamp is its earliest event time, none over the size limit."""
import re
import subprocess
import sys
from pathlib import Path

import fastavro
import pytest

from ldp_marginals import schemas
from ldp_marginals.pipelines.cli import main
from ldp_marginals.pipelines.produce import DEFAULT_MAX_BYTES, KAFKA_FRAMING, create_topic
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from tests.configs import SMALL_CONFIG

pytestmark = [pytest.mark.flink, pytest.mark.kafka]   # the session's cluster: a broker beside Flink

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def read_back(bootstrap: str, topic: str, expected: int) -> list:
    """Every record of ``topic`` -> ``[(timestamp ms, size, [reports])]``."""
    import io

    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, enable_auto_commit=False)
    out, seen = [], 0
    for record in consumer:
        reports = [schemas.normalize("noisy_report", r) for r in fastavro.reader(io.BytesIO(record.value))]
        out.append((record.timestamp, len(record.value), reports))
        seen += len(reports)
        if seen >= expected:
            break
    consumer.close()
    return out


def test_the_readme_producer_sends_containers_stamped_with_their_earliest_report(cluster, tmp_path):
    code = re.search(r"### Producing to Kafka.*?```py\n(.*?)```", README, re.S).group(1)
    first, rest = code.split("\n", 1)
    assert first.startswith('BOOTSTRAP, TOPIC = "localhost:9092", "reports"')
    code = f'BOOTSTRAP, TOPIC = "{cluster.bootstrap}", "readme"\n' + rest
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    records = read_back(cluster.bootstrap, "readme", 2000)
    assert out.stdout.strip() == f"2000 reports in {len(records)} records"
    assert sum(len(r) for _, _, r in records) == 2000 and all(len(r) <= 500 for _, _, r in records)
    for ts, size, reports in records:
        assert ts == min(r["event_time"] for r in reports) and size <= DEFAULT_MAX_BYTES - KAFKA_FRAMING
        assert {r["collection"] for r in reports} == {"app_usage"}


def test_produce_sends_files_in_containers_under_the_size_limit(cluster, tmp_path, capsys):
    cfg = parse_config(SMALL_CONFIG)
    sent = list(report_records(cfg, simulate_population(cfg, 3000, seed=4)))
    schemas.write_avro(tmp_path / "r.avro", "noisy_report", sent)
    assert main(["produce", "--kafka-bootstrap", cluster.bootstrap, "--kafka-topic", "files", "--create-topic",
                 "--partitions", "2", "--input", str(tmp_path / "*.avro"), "--batch-reports", "2000",
                 "--max-message-bytes", "5000"]) == 0
    records = read_back(cluster.bootstrap, "files", len(sent))
    assert capsys.readouterr().out.strip() == f"sent 3,000 reports in {len(records)} Kafka records to files"
    got = [r for _, _, reports in records for r in reports]
    key = lambda r: (r["event_time"], r["bits"], sorted(r["dimensions"].items()), r["client"])   # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, sent))
    # split before 2,000 reports: each container under the limit, stamped with its earliest report
    assert len(records) > 2 and all(size <= 5000 - KAFKA_FRAMING for _, size, _ in records)
    assert all(ts == min(r["event_time"] for r in reports) for ts, _, reports in records)
    # the topic exists now: creating it again is an error naming it
    with pytest.raises(ValueError, match="--kafka-topic files: the topic exists already"):
        create_topic(cluster.bootstrap, "files")
