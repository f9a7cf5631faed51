"""From the device to the outputs: devices made by the JVM client (clients/java, the specification's
seeded generator) post their reports to ``ldp-marginals collect`` (600 one by one, the others in
batches of 100), which sends them to Kafka; the streaming job on the local Flink reads the topic and
publishes the window (early panes every 2 s; the reports are stamped an hour ago into a window of a
day's lateness, so none is late however long the devices and the job take: ``streams``; stamped
5 minutes ahead, they were late once the clock passed the window). Every report the collector accepted is counted, and the window's estimates
cover the devices' true counts at their nominal rate. About a minute and a half.

Needs the client's test classes (``make clients-java``, which ``make test`` runs first; built here
when missing)."""
import hashlib
import json
import os
import subprocess

import numpy as np
import pytest
from scipy.stats import binom

from ldp_marginals.pipelines.client_config import client_config_text
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import MARGINALS
from tests.cluster import collectors, streams
from tests.stats import ALPHA, Z

pytestmark = [pytest.mark.flink, pytest.mark.kafka, streams.CANCELLED_WORKER_THREADS]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JAVA = os.path.join(ROOT, "clients", "java")
DEVICES = 3000
SINGLES = 600   # devices that post alone, one after another (about 20 ms each); the others in batches
WINDOW_S = 20
FEATURES = [{"name": "dark", "type": "boolean"}, {"name": "os", "type": "categorical", "values": ["mac", "win", "linux"]},
            {"name": "beta", "type": "boolean"}]
CHANNEL = [{"p": 0.2, "q": 0.8}, {"p": 0.15, "q": 0.85}, {"p": 0.15, "q": 0.85}, {"p": 0.15, "q": 0.85},
           {"p": 0.25, "q": 0.75}]
CONFIG = {"collection": "app", "features": FEATURES, "channel": CHANNEL, "max_order": 2, "min_reports": 0,
          "window": {"type": "fixed", "size_seconds": WINDOW_S}, "early_firing_seconds": 2,
          "allowed_lateness_seconds": streams.LONG_LATENESS_S}


def java_classpath() -> str:
    """The client's classes, its test classes and their test-scope libraries (Apache Avro)."""
    if not os.path.isdir(os.path.join(JAVA, "target", "test-classes")):
        subprocess.run(["mvn", "--batch-mode", "-q", "-f", os.path.join(JAVA, "pom.xml"), "test-compile"], check=True)
    out = os.path.join(JAVA, "target", "test.classpath")
    subprocess.run(["mvn", "--batch-mode", "-q", "-f", os.path.join(JAVA, "pom.xml"), "dependency:build-classpath",
                    "-Dmdep.includeScope=test", f"-Dmdep.outputFile={out}"], check=True)
    with open(out) as fh:
        libs = fh.read().strip()
    return os.pathsep.join([os.path.join(JAVA, "target", "classes"), os.path.join(JAVA, "target", "test-classes"), libs])


def devices(t0_ms: int, seed: int = 39) -> tuple:
    """``DEVICES`` devices' lines for the sender (secret, seed, event time, true values) and their true
    bits (rows: devices; columns: the layout's bits)."""
    rng = np.random.default_rng(seed)
    dark = rng.random(DEVICES) < 0.35
    os_ = rng.choice(3, size=DEVICES, p=[0.5, 0.3, 0.2])
    beta = rng.random(DEVICES) < np.where(dark, 0.6, 0.2)   # correlated with dark
    lines, bits = [], np.zeros((DEVICES, 5), dtype=bool)
    for i in range(DEVICES):
        values = {"dark": bool(dark[i]), "os": ["mac", "win", "linux"][os_[i]], "beta": bool(beta[i])}
        secret = hashlib.sha256(f"device-{seed}-{i}".encode()).hexdigest()
        coins = hashlib.sha256(f"coins-{seed}-{i}".encode()).hexdigest()
        event = t0_ms + int(rng.integers(0, WINDOW_S * 1000 // 2))
        lines.append(f"{secret} {coins} {event} {json.dumps(values)}")
        bits[i] = [dark[i], os_[i] == 0, os_[i] == 1, os_[i] == 2, beta[i]]
    return lines, bits


def test_the_jvm_clients_reports_reach_the_estimates_through_the_collector(cluster, tmp_path):
    classpath = java_classpath()
    (tmp_path / "c.json").write_text(json.dumps(CONFIG))
    # what the devices read, as `ldp-marginals client-config` writes it (no hand-written p and q)
    (tmp_path / "client.json").write_text(client_config_text(str(tmp_path / "c.json")))
    (tmp_path / "app.key").write_text(collectors.KEY)
    streams.produce(cluster.bootstrap, "devices", [])
    out = str(tmp_path / "stream")
    argv = ["--config", str(tmp_path / "c.json"), "--streaming", "--kafka-topic", "devices",
            "--kafka-bootstrap", cluster.bootstrap, "--kafka-consumer-config", "auto.offset.reset=earliest",
            "--kafka-expansion-service", cluster.expansion_service, "--output", out] + cluster.pipeline_args()
    t0 = streams.past_start_ms(WINDOW_S)   # the window's panes count the reports as they come
    lines, truth_bits = devices(t0)
    (tmp_path / "devices.txt").write_text("\n".join(lines) + "\n")
    with collectors.running(str(tmp_path / "c.json"), cluster.bootstrap, "devices", str(tmp_path),
                            "--batch-seconds", "0.01") as c, \
            streams.running_job(argv, cluster):
        sent = subprocess.run(["java", "-cp", classpath, "ldp_marginals.client.CollectorSender", c.url + "/v1/reports",
                               str(tmp_path / "app.key"), str(tmp_path / "client.json"),
                               os.path.join(ROOT, "schemas", "noisy_report.avsc"), str(tmp_path / "devices.txt"),
                               str(SINGLES)],
                              capture_output=True, text=True, timeout=streams.PATIENCE_S)
        assert sent.returncode == 0, sent.stderr[-2000:]
        assert sent.stdout.split() == ["accepted", str(DEVICES)]
        streams.wait_until("every report in the window's latest pane",
                           lambda: streams.reports_in_latest_panes(out) >= DEVICES)
    assert streams.reports_in_latest_panes(out) == DEVICES   # accepted = counted (nothing dead-lettered)
    assert collectors.KEY not in c.output()

    rows = {}
    for r in read_rows(out, MARGINALS):   # the latest pane's row of each set
        rows[tuple(r["labels"])] = r
    cfg = parse_config(CONFIG)
    labels = list(cfg.layout.labels)
    truth = {cols: int(np.all(truth_bits[:, [labels.index(c) for c in cols]], axis=1).sum()) for cols in rows}
    assert len(rows) == 5 + 10 - 3   # sets up to order 2, but the pairs of os's exclusive bits
    assert all(r["n_reports"] == DEVICES for r in rows.values())
    # each estimate within Z standard errors of its truth (Z: the suite's per-assertion rate, over the rows)
    for cols, r in rows.items():
        assert abs(r["estimate"] - truth[cols]) <= Z * np.sqrt(r["variance"]), (cols, r["estimate"], truth[cols])
    # and the intervals cover the truth at their level: a binomial band of false-alarm rate ALPHA
    covered = sum(r["ci_low"] <= truth[cols] <= r["ci_high"] for cols, r in rows.items())
    lo, _ = binom.ppf([ALPHA / 2, 1 - ALPHA / 2], len(rows), 0.95)
    assert covered >= lo, (covered, len(rows))
