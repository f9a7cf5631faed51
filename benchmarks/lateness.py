"""Reports lost to the watermark by a batching producer (issue 36, item 2): the streaming job on the
local Flink reading a local Kafka topic that collectors fill as they do in real use (``streams.collect``:
devices whose clocks run 0-5 s behind; ten collectors that send a container when it holds 500 reports
or its oldest report has waited the batching delay, their flushes spread over that delay, each
record's timestamp its container's earliest event time; 60 reports/s in all), 10-second windows, no
allowed lateness and no guard. For each batching delay (1, 10 and 60 s; at least three delays of
traffic) two jobs read the same stream at once: one with the watermark delay 0 (the job before
issue 36) and one at the command's defaults; each line printed is one job's share of the reports
dead-lettered as late. About 15 minutes: ``python -m benchmarks.lateness [--delays 1 10 60]``."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time

from deploy.local import cluster as local_cluster
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.dead_letters import LATE
from ldp_marginals.schemas.outputs import DEAD_LETTERS, MARGINALS
from tests.cluster import streams
from tests.configs import SMALL_CONFIG

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOW_S = 10
CONFIG = dict(SMALL_CONFIG, extremes=[e for e in SMALL_CONFIG["extremes"] if e.get("over") != "client"],
              window={"type": "fixed", "size_seconds": WINDOW_S}, min_reports=0)


def late_shares(cluster, tmp: str, delay_s: float, seconds: float, rate: float, collectors: int,
                variants: dict) -> dict:
    """One stream of ``seconds`` of collectors' traffic at batching delay ``delay_s``, read by one job
    per variant (``{name: the job's extra options}``) at once -> ``{name: outcome}``."""
    cfg = parse_config(CONFIG)
    n = int(seconds * rate)
    records = list(report_records(cfg, simulate_population(cfg, n, seed=int(delay_s * 10))))
    topic = f"batching{int(delay_s * 10)}-{int(time.time())}"
    from ldp_marginals.pipelines.produce import create_topic
    create_topic(cluster.bootstrap, topic, partitions=2)
    with open(os.path.join(tmp, "c.json"), "w") as fh:
        json.dump(CONFIG, fh)
    outs = {name: os.path.join(tmp, f"{topic}-{name}") for name in variants}
    with contextlib.ExitStack() as jobs:
        for name, extra in variants.items():
            argv = ["--config", os.path.join(tmp, "c.json"), "--streaming", "--kafka-topic", topic,
                    "--kafka-bootstrap", cluster.bootstrap, "--kafka-consumer-config", "auto.offset.reset=earliest",
                    "--kafka-expansion-service", cluster.expansion_service, "--output", outs[name],
                    "--progress-seconds", "0", "--dead-letter-seconds", "2"] + extra + cluster.pipeline_args()
            jobs.enter_context(streams.running_job(argv, cluster))
        time.sleep(20)   # the jobs read the topic before the first report is sent
        sent = streams.collect(cluster.bootstrap, topic, records, rate_per_s=rate,
                               max_seconds=[delay_s] * collectors)
        deadline = time.monotonic() + 900
        results = {}
        while len(results) < len(outs) and time.monotonic() < deadline:
            for name, out in outs.items():   # every report counted in a window's latest pane or dead-lettered
                counted, dead = outcome(out)
                if name not in results and counted + sum(dead.values()) >= len(sent):
                    results[name] = {"batching_delay_s": delay_s, "job": name, "produced": len(sent),
                                     "counted": counted, "dead_lettered": dead,
                                     "late_share": round(dead.get(LATE, 0) / len(sent), 4)}
            time.sleep(2)
    return results


def outcome(out: str) -> tuple:
    """``(reports in the windows' latest panes, {reason: dead-lettered reports})`` of the files so far
    (nothing is withheld: min_reports is 0)."""
    latest = {}
    for row in read_rows(out, MARGINALS):
        key = (row["window_start"], json.dumps(row["dimensions"], sort_keys=True))
        latest[key] = row["n_reports"]
    dead = {}
    for d in read_rows(out, DEAD_LETTERS):
        dead[d["reason"]] = dead.get(d["reason"], 0) + d["reports"]
    return sum(latest.values()), dead


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delays", type=float, nargs="+", default=[1, 10, 60])
    parser.add_argument("--seconds", type=float, default=60,
                        help="seconds of production per delay, at least three batching delays")
    parser.add_argument("--rate", type=float, default=60, help="reports per second in all")
    parser.add_argument("--collectors", type=int, default=10)
    args = parser.parse_args(argv)
    variants = {"before": ["--watermark-delay-seconds", "0"], "default": []}
    with tempfile.TemporaryDirectory() as tmp:
        cluster = local_cluster.start(os.path.join(tmp, "cluster"), os.path.join(ROOT, local_cluster.JVM_DIR))
        try:
            for delay in args.delays:
                for result in late_shares(cluster, tmp, delay, max(args.seconds, 3 * delay), args.rate,
                                          args.collectors, variants).values():
                    print(json.dumps(result), flush=True)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
