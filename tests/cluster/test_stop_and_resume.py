"""Ctrl-C and SIGTERM stop the job ``ldp-marginals run`` started, and a stopped job resumes where it
stopped (issue 36, items 3 and 4).

The command runs as a user runs it, a process of its own, and is sent the signal:

- on a Flink session cluster as deployed (``--flink_master`` its REST address, checkpoints every
  second): Ctrl-C cancels the job in Flink, and the one line the command prints names the command
  that resumes it from its last retained checkpoint. Reports are produced while it is down; a new run
  into the same ``--output`` is refused with that command; the command, given ``--savepoint-on-stop``,
  resumes the job, and SIGTERM then stops it with a savepoint, which its line names. More reports
  are produced while it is down, and the job resumes from the savepoint. Each time Flink's REST API
  shows no job running or restarting once the command has ended. At the end the outputs equal the
  batch path's on every report: none skipped, none counted twice.
- on Flink inside Beam's job server (the local cluster's default), given its REST ports
  (``--flink-rest``): Ctrl-C cancels the job there, and Flink's REST API shows it ended.

(SIGTERM on the DirectRunner: ``tests/pipelines/test_stopping.py``.)

The reports are stamped an hour in the past (``streams``): the first part, produced before the job
is submitted, moves the watermark by data, and the first window's on-time pane comes once the job
has read it, however slowly. The windows allow a day of lateness and the guard is off
(``min_reports`` 0), so that the reports produced while the job is down are counted in late panes
whenever it comes back (the test runs for less than a day), and the latest panes can be compared with
the batch rows without waiting for the windows to close. (Stamped 30 s ahead with 15 minutes of
lateness, the first window's pane waited for the clock, and a slow submission made reports late.)"""
import contextlib
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request

import grpc
import pytest
from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import DEAD_LETTERS, MARGINALS
from tests.cluster import streams
from tests.cluster.test_flink_batch import RAW
from tests.cluster.test_flink_recovery import DAMAGED, window_of
from tests.cluster.test_kafka_streaming import WINDOW_S
from tests.pipelines.test_same_answers import container, reports

pytestmark = [pytest.mark.flink, pytest.mark.kafka, streams.CANCELLED_WORKER_THREADS]

# no conditionals and no conditional means: their presence test may withhold in a late pane what an
# earlier pane published, and the reader's latest pane of that kind is then the earlier one
STOPS = dict(RAW, extremes=[e for e in RAW["extremes"] if e.get("over") != "client"], min_reports=0,
             conditionals=[], means=[], window={"type": "fixed", "size_seconds": WINDOW_S},
             allowed_lateness_seconds=streams.LONG_LATENESS_S)


@contextlib.contextmanager
def command(argv, log):
    """``ldp-marginals run argv`` as a process of its own, its output to the file ``log`` -> the
    process, killed on leaving if it still runs."""
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "ldp_marginals.pipelines.cli", "run", *argv],
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stopped(proc: subprocess.Popen, sig, log_path, timeout_s: float = streams.PATIENCE_S) -> tuple:
    """Send ``sig``, wait for the process's end -> ``(exit code, its one stop line)``; no traceback."""
    proc.send_signal(sig)
    proc.wait(timeout_s)
    with open(log_path) as fh:
        out = fh.read()
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if line.startswith("ldp-marginals run: stopped by")]
    assert len(lines) == 1, out
    return proc.returncode, lines[0]


def no_job_runs_on(cluster, seconds: float = 5.0) -> None:
    """Flink's REST API shows no job running or restarting, now and ``seconds`` later."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert cluster.running_jobs() == []
        time.sleep(0.5)


def stream_in_three(cluster, tmp_path, topic: str) -> tuple:
    """The reports of a few 10 s windows from an hour ago, shuffled; all but two slices of them
    produced to ``topic`` with a damaged message (before the job is submitted: ``streams``), the slices
    returned to be produced while the job is down. -> ``(t0, records, first slice held back, second, argv, output)``."""
    (tmp_path / "c.json").write_text(json.dumps(STOPS))
    t0 = streams.past_start_ms(WINDOW_S)
    records = streams.rescale(reports(parse_config(STOPS)), DEFAULT_START_MS, t0, WINDOW_S)
    random.Random(11).shuffle(records)
    valid = [i for i, r in enumerate(records) if r["event_time"] >= 0]
    held = set(valid[:400])
    now = [r for i, r in enumerate(records) if i not in held]
    later = [records[i] for i in sorted(held)]
    first = streams.singles(now[:500], default_ms=t0) + [
        (container(now[i:i + 300]), max(t0, min(r["event_time"] for r in now[i:i + 300])))
        for i in range(500, len(now), 300)] + [(value, t0) for value, _ in DAMAGED]
    streams.produce(cluster.bootstrap, topic, first)
    out = str(tmp_path / "stream")
    argv = ["--config", str(tmp_path / "c.json"), "--streaming", "--kafka-topic", topic,
            "--kafka-bootstrap", cluster.bootstrap, "--kafka-consumer-config", "auto.offset.reset=earliest",
            "--kafka-expansion-service", cluster.expansion_service, "--dead-letter-seconds", "1",
            "--watermark-delay-seconds", "0", "--progress-seconds", "0", "--output", out,
            ] + cluster.pipeline_args(checkpoint_ms=1000)
    return t0, records, later[:200], later[200:], argv, out


def test_ctrl_c_and_sigterm_stop_the_flink_job_and_it_resumes_without_a_loss(session_cluster, tmp_path):
    cluster = session_cluster
    t0, records, while_cancelled, while_saved, argv, out = stream_in_three(cluster, tmp_path, "stops")
    argv += [f"--flink_master=localhost:{cluster.rest_port}"]
    log = tmp_path / "first.log"
    with command(argv, log) as proc:
        job = streams.wait_until("the job on the session cluster", cluster.running_jobs)[0]
        streams.wait_until("the first window's on-time pane",
                           lambda: streams.panes_of(out, MARGINALS, "app", window_of(0, t0)))
        done = cluster.completed_checkpoints(job)
        streams.wait_until("a checkpoint after the pane", lambda: cluster.completed_checkpoints(job) > done)
        code, line = stopped(proc, signal.SIGINT, log)
    assert code == 128 + signal.SIGINT
    assert f"stopped by SIGINT: Flink job {job} cancelled; resume it with: ldp-marginals run " in line
    no_job_runs_on(cluster)
    resume = shlex.split(line.split("resume it with: ", 1)[1])
    checkpoint = resume[-1].split("=", 1)[1]
    assert resume[-1].startswith("--savepoint_path=") and "/chk-" in checkpoint
    assert os.path.isdir(checkpoint.removeprefix("file:"))

    # produced while the job is down
    streams.produce(cluster.bootstrap, "stops", streams.singles(while_cancelled), create=False)
    # a new run into the same --output would hide the stopped one: refused, naming the command
    with pytest.raises(ValueError, match=r"resume it with: ldp-marginals run .*--savepoint_path=" + re.escape(checkpoint)):
        with streams.running_job(argv, cluster):
            pass
    assert cluster.running_jobs() == []

    # the command resumes it; this time SIGTERM stops it with a savepoint
    log = tmp_path / "second.log"
    with command(resume[2:] + ["--savepoint-on-stop"], log) as proc:
        job = streams.wait_until("the resumed job", cluster.running_jobs)[0]
        restored = streams.wait_until("its restore", lambda: cluster.restored_checkpoint(job))
        assert restored["external_path"].endswith(checkpoint.rsplit("/", 1)[1])   # the retained checkpoint
        streams.wait_until("a checkpoint of the resumed job", lambda: cluster.completed_checkpoints(job) > 0)
        code, line = stopped(proc, signal.SIGTERM, log)
    assert code == 128 + signal.SIGTERM
    assert f"stopped by SIGTERM: Flink job {job} stopped with a savepoint; resume it with: " in line
    savepoint = line.rsplit("--savepoint_path=", 1)[1]
    assert savepoint.startswith(f"file:{cluster.savepoints}") and os.path.isdir(savepoint.removeprefix("file:"))
    assert cluster.rest_call(f"/jobs/{job}")["state"] == "CANCELED"   # after its savepoint
    no_job_runs_on(cluster)

    streams.produce(cluster.bootstrap, "stops", streams.singles(while_saved), create=False)
    resume = shlex.split(line.split("resume it with: ", 1)[1])
    batch, expected = streams.batch_of(tmp_path, records)
    with streams.running_job(resume[2:], cluster):
        job = streams.wait_until("the job resumed from the savepoint", cluster.running_jobs)[0]
        assert streams.wait_until("its restore", lambda: cluster.restored_checkpoint(job))["is_savepoint"]
        streams.wait_until("every report in the latest panes",
                           lambda: streams.reports_in_latest_panes(out) >= expected["reports_counted"])
        streams.wait_until("the damaged message's dead letter", lambda: any(
            d["reason"] == "undecodable" for d in read_rows(out, DEAD_LETTERS)))
    # every report counted once, whatever the stops: the latest panes are the batch rows on all of them
    assert streams.reports_in_latest_panes(out) == expected["reports_counted"]
    streams.assert_same_estimates(out, batch, every_kind=False)
    assert_dead_letters(out, expected)


def jobs_on(job_server: str) -> list:
    """``(job id, state name)`` of every job Beam's job server knows."""
    with grpc.insecure_channel(job_server) as channel:
        stub = beam_job_api_pb2_grpc.JobServiceStub(channel)
        infos = stub.GetJobs(beam_job_api_pb2.GetJobsRequest(), timeout=10).job_info
    return [(i.job_id, beam_job_api_pb2.JobState.Enum.Name(i.state)) for i in infos]


def embedded_jobs(cluster) -> list:
    """``(name, state)`` of every job the job server's embedded Flinks show on their REST ports (each
    job runs in a Flink of its own, on the first free port of ``cluster.embedded_rest``'s range)."""
    from ldp_marginals.pipelines.stopping import embedded_rests
    jobs = []
    for rest in embedded_rests(cluster.embedded_rest):
        with contextlib.suppress(OSError):   # no Flink on that port
            jobs += [(j["name"], j["state"]) for j in cluster_rest_overview(rest)]
    return jobs


def cluster_rest_overview(rest: str) -> list:
    with urllib.request.urlopen(rest + "/jobs/overview", timeout=5) as resp:
        return json.load(resp)["jobs"]


def test_ctrl_c_cancels_the_job_in_the_job_servers_flink(cluster, tmp_path):
    """With checkpoints, the job Beam's cancel alone left behind RESTARTING (its LOOPBACK worker gone
    with the command) over and over, holding both slots: here Flink itself must show it ended."""
    _, _, _, _, argv, out = stream_in_three(cluster, tmp_path, "local")
    argv += [f"--flink-rest={cluster.embedded_rest}"]
    log = tmp_path / "run.log"
    with command(argv, log) as proc:
        # the job reads and writes: the damaged message's dead letter (written within a second or two of
        # its read, once a checkpoint has covered it)
        streams.wait_until("the damaged message's dead letter", lambda: os.path.exists(
            os.path.join(out, "manifest.json")) and any(
            d["reason"] == "undecodable" for d in read_rows(out, DEAD_LETTERS)))
        with open(os.path.join(out, "manifest.json")) as fh:
            name = "ldp-marginals-" + json.load(fh)["run_id"].lower()   # the job's name (run.job_name)
        assert (name, "RUNNING") in embedded_jobs(cluster)   # Flink's REST API shows it
        code, line = stopped(proc, signal.SIGINT, log)
    assert code == 128 + signal.SIGINT
    assert re.search(r"stopped by SIGINT: Flink job [0-9a-f]{32} cancelled in the job server's Flink; it cannot "
                     r"be resumed", line), line
    jobs = jobs_on(cluster.job_endpoint)
    assert [state for job, state in jobs if job.startswith(name)] == ["CANCELLED"], jobs
    assert not [job for job, state in jobs if state in ("RUNNING", "STARTING", "STOPPED")], jobs
    # and Flink itself runs it no more, now and later (Beam's CANCELLED alone left it running)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert not [j for j in embedded_jobs(cluster) if j[1] not in ("CANCELED", "FAILED", "FINISHED")]
        time.sleep(0.5)


def assert_dead_letters(out: str, expected: dict) -> None:
    """The run's dead letters are the batch's by reason, and the damaged messages' one each (undecodable)."""
    dead = {}
    for d in read_rows(out, DEAD_LETTERS):
        dead[d["reason"]] = dead.get(d["reason"], 0) + d["reports"]
    assert dead.pop("undecodable") == len(DAMAGED)
    assert dead == expected["dead_letters_by_reason"]
