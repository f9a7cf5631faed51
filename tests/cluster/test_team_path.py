"""The team's path with real parts (issue 49, item 10): a team's config (the device as the unit, a region
dimension, three booleans) -> ``ldp-marginals client-config`` -> the TypeScript client in Node making each
device's reports from that JSON and POSTing them -> ``ldp-marginals collect`` -> Kafka -> ``ldp-marginals run``
streaming on the Flink session cluster -> ``ldp-marginals dashboard --serve`` answering its data endpoint ->
Ctrl-C -> the resume command the job printed -> more reports -> ``ldp-marginals read``. Every command runs as
a user runs it, a process of its own.

What must hold: every window closes and ``read`` gives its final rows; the reports they count are the reports
the collector accepted, each once (none lost across the stop, none twice), and the rows equal the batch job's
on the same reports (read back from the topic); the dashboard serves the same windows and counts; nothing is
dead-lettered.

Time (``streams``' docstring): the first reports are stamped an hour in the past and posted before the job is
submitted, so their windows close by data once the job has read them (before the Ctrl-C: their final rows
come from the first run). The reports posted while the job is down and after the resume are stamped by the
devices' clocks as they make them, as real devices do; their windows close once the clock passes their end
plus the lateness (``LATENESS_S``) and the job has read all. A report can be late only if more than
``LATENESS_S`` passes between the device stamping it and Kafka acknowledging it (the job lagging behind does
not make it late: the watermark follows what it has read until it has read all); the devices give up long
before that (their retries), so a late report fails the test on the collector, not on the job's pace. Waits
have liveness bounds only."""
import json
import os
import shlex
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from deploy.local.cluster import free_port
from ldp_marginals import schemas
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.outputs import DEAD_LETTERS, MARGINALS
from tests.clients.test_client_config_clients import ts_dist  # noqa: F401 - the fixture: the client's dist/
from tests.cluster import collectors, streams
from tests.cluster.test_stop_and_resume import command, no_job_runs_on, stopped

pytestmark = [pytest.mark.flink, pytest.mark.kafka, pytest.mark.clients, streams.CANCELLED_WORKER_THREADS]

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ldp_marginals.pipelines.cli"]
WINDOW_S = 10
# longer than a device retries (team_devices.mjs: about 64 s of pauses) and than a resume takes on a busy
# machine before it reads what came while it was down (it reads that before its watermark moves on)
LATENESS_S = 180
REGIONS = ("eu", "us", "apac")
DEVICES = 45   # each of one region (max_keys_per_device 1)
PAST_WINDOWS = 3   # windows an hour ago: one report per device each, posted before the job starts
TEAM = {"collection": "team",
        "features": [{"name": "dark_mode", "type": "boolean"}, {"name": "beta_search", "type": "boolean"},
                     {"name": "beta_sync", "type": "boolean"}],
        "channel": {"mechanism": "symmetric", "epsilon": 1.0}, "max_order": 2,
        "window": {"type": "fixed", "size_seconds": WINDOW_S}, "allowed_lateness_seconds": LATENESS_S,
        # the guard off: a late pane's increment of a few reports publishes, so the final rows are batch's
        "min_reports": 0,
        "dimensions": {"region": {"max_values": 10}},
        # a device's report while the job is down and its report after the resume may share a window
        "privacy": {"unit": "device", "max_reports_per_device": 2, "max_keys_per_device": 1}}


DEVICES_JS = ROOT / "clients" / "typescript" / "examples" / "devices.mjs"   # the README's simulated devices


def post(tmp_path, client_json, url: str, *args: str) -> int:
    """``DEVICES`` devices of the team (one population: the same secrets and values each time) make their
    reports with the TypeScript client and POST them to the collector at ``url`` -> the reports accepted."""
    sent = subprocess.run(["node", str(DEVICES_JS), "--config", str(client_json), "--collector", url, "--key-file",
                           str(tmp_path / "collector.keys"), "--devices", str(DEVICES), "--population", "team",
                           "--dimension", "region=" + ",".join(REGIONS), *args],
                          capture_output=True, text=True, timeout=streams.PATIENCE_S)
    assert sent.returncode == 0, sent.stderr[-2000:]
    return int(sent.stdout.split()[1])


def alive(proc: subprocess.Popen, log) -> bool:
    """True while ``ldp-marginals run`` runs; a command that ended fails the test with its output (a wait on
    its job would otherwise last its whole bound)."""
    if proc.poll() is not None:
        pytest.fail(f"ldp-marginals run ended ({proc.returncode}): {Path(log).read_text()[-3000:]}")
    return True


def final_counts(out: str) -> dict:
    """``{(window start, region): n_reports}`` of the final marginals rows (closed windows) under ``out``."""
    counts = {}
    for r in read_rows(out, MARGINALS, final_only=True):
        counts[(r["window_start"], r["dimensions"]["region"])] = r["n_reports"]
    return counts


def expected_counts(reports: list) -> dict:
    counts = {}
    for r in reports:
        key = (r["event_time"] // (WINDOW_S * 1000) * WINDOW_S * 1000, r["dimensions"]["region"])
        counts[key] = counts.get(key, 0) + 1
    return counts


def view(port: int, region: str) -> dict:
    """The dashboard's data endpoint for one region's key (span: a day of windows)."""
    query = urllib.parse.urlencode({"collection": "team", "dims": json.dumps({"region": region}), "span": 720})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/view.json?{query}", timeout=60) as resp:
        return json.load(resp)


def served_counts(port: int) -> dict:
    """``{(window start, region): n_reports}`` as the served dashboard charts them (its ``published`` pairs)."""
    counts = {}
    for region in REGIONS:
        pairs = view(port, region)["published"]
        assert len({start for start, _ in pairs}) == len(pairs), pairs   # one row a window: its latest pane's
        counts.update({(start, region): n for start, n in pairs})
    return counts


def test_the_team_walks_from_its_config_to_the_rows_through_a_ctrl_c(session_cluster, tmp_path, ts_dist):  # noqa: F811
    """``ts_dist``: the TypeScript client's dist/, built when missing."""
    cluster = session_cluster
    config = tmp_path / "c.json"   # the team's config (JSON is YAML); c.json: what streams.batch_of runs on
    config.write_text(json.dumps(TEAM))
    client_json = tmp_path / "team.client.json"
    made = subprocess.run(CLI + ["client-config", "--config", str(config), "--output", str(client_json)],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert json.loads(client_json.read_text())["token"] is True   # the device unit: reports carry the device token

    streams.produce(cluster.bootstrap, "team", [])   # the topic, as `produce --create-topic` makes it
    t0 = streams.past_start_ms(WINDOW_S)
    out = str(tmp_path / "stream")
    argv = ["--config", str(config), "--streaming", "--kafka-topic", "team", "--kafka-bootstrap", cluster.bootstrap,
            "--kafka-consumer-config", "auto.offset.reset=earliest", "--kafka-expansion-service",
            cluster.expansion_service, "--progress-seconds", "0", "--output", out,
            f"--flink_master=localhost:{cluster.rest_port}"] + cluster.pipeline_args(checkpoint_ms=1000)
    accepted = 0
    dashboard_port = free_port()
    with collectors.running(str(config), cluster.bootstrap, "team", str(tmp_path)) as collector:
        # each device one report in each of the past windows (stamped there, in window order), seeded coins
        accepted += post(tmp_path, client_json, collector.url, "--at", str(t0), "--rounds", str(PAST_WINDOWS),
                         "--every", str(WINDOW_S), "--seed", "past")
        assert accepted == DEVICES * PAST_WINDOWS
        log = tmp_path / "first.log"
        with command(argv, log) as proc:
            job = streams.wait_until("the job on the session cluster",
                                     lambda: alive(proc, log) and cluster.running_jobs())[0]
            # the past windows close by data: their final rows, from the first run
            streams.wait_until("the past windows' final rows", lambda: alive(proc, log) and os.path.exists(
                os.path.join(out, "manifest.json")) and len(final_counts(out)) == PAST_WINDOWS * len(REGIONS))
            with open(tmp_path / "dashboard.log", "w") as fh:
                dashboard = subprocess.Popen(CLI + ["dashboard", "--estimates", out, "--serve", str(dashboard_port)],
                                             stdout=fh, stderr=subprocess.STDOUT)
            try:
                before_stop = final_counts(out)
                streams.wait_until("the dashboard", lambda: _answers(dashboard_port), 120)
                assert served_counts(dashboard_port) == before_stop
                done = cluster.completed_checkpoints(job)
                streams.wait_until("a checkpoint after the final rows",
                                   lambda: cluster.completed_checkpoints(job) > done)
                code, line = stopped(proc, signal.SIGINT, log)
                assert code == 128 + signal.SIGINT
                assert f"stopped by SIGINT: Flink job {job} cancelled; resume it with: ldp-marginals run " in line
                no_job_runs_on(cluster)
                resume = shlex.split(line.split("resume it with: ", 1)[1])

                # the devices go on reporting while the job is down: the collector takes their reports into Kafka
                accepted += post(tmp_path, client_json, collector.url, "--seed", "down")   # stamped now
                log = tmp_path / "resumed.log"
                with command(resume[2:], log) as proc:
                    job = streams.wait_until("the resumed job", lambda: alive(proc, log) and cluster.running_jobs())[0]
                    assert streams.wait_until("its restore", lambda: cluster.restored_checkpoint(job))
                    accepted += post(tmp_path, client_json, collector.url, "--seed", "after")
                    sent = [schemas.normalize("noisy_report", r)
                            for reports, _ in collectors.read_topic(cluster.bootstrap, "team") for r in reports]
                    assert len(sent) == accepted == DEVICES * (PAST_WINDOWS + 2)
                    want = expected_counts(sent)
                    # every window closes (the last ones once the clock has passed their end and lateness)
                    streams.wait_until("every window's final rows",
                                       lambda: alive(proc, log) and set(final_counts(out)) >= set(want),
                                       LATENESS_S + streams.PATIENCE_S)
                    assert final_counts(out) == want
                    assert served_counts(dashboard_port) == want   # the dashboard serves the same windows
                    code, _ = stopped(proc, signal.SIGINT, log)
                    assert code == 128 + signal.SIGINT
            finally:
                dashboard.send_signal(signal.SIGINT)
                dashboard.wait(60)
    no_job_runs_on(cluster)

    # `read` gives every window's final rows: each report sent counted once, none lost to the stop
    read = subprocess.run(CLI + ["read", out, "marginals", "--format", "json"], capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    rows = [json.loads(line) for line in read.stdout.splitlines()]
    assert rows and all(r["final"] and r["window_state"] == "closed" for r in rows)
    counted = {}
    for r in rows:
        counted[(r["window_start"], json.dumps(r["dimensions"], sort_keys=True))] = r["n_reports"]
    assert sum(counted.values()) == len(sent)
    assert len(counted) == len(want)
    assert read_rows(out, DEAD_LETTERS) == []   # nothing late, nothing refused
    # and the rows are the batch job's on the same reports
    batch, summary = streams.batch_of(tmp_path, sent)
    assert summary["reports_counted"] == len(sent)
    streams.assert_same_estimates(out, batch, every_kind=False)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10):
            return True
    except OSError:
        return False
