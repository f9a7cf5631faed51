"""Ctrl-C and resume on the cluster ``make cluster-up`` starts by default (issue 49 item 2).

The cluster is started as ``make cluster-up`` starts it, ``python -m deploy.local.cluster up`` with no
``--flink`` (the Makefile passes one only when FLINK= is given), on free ports (``--ports free``) under a
folder of the test's; the job is the README's command, ``ldp-marginals run ... --runner=PortableRunner
--job_endpoint=... --environment_type=LOOPBACK --parallelism=2``, with nothing of Flink's named: ``run``
takes what it needs from the cluster's record (``LDP_MARGINALS_CLUSTER`` names it, as ``.jvm/run/cluster.json``
would be found from the repository's root). Ctrl-C must print the command that resumes the job; reports
are produced while it is down; the printed command, run as printed, resumes it; at the end the latest
panes are the batch rows on every report: none lost, none counted twice.

On the job server's embedded Flink (the default before: ``FLINK=local``) the Ctrl-C line said the job
"cannot be resumed" (Beam 2.62 applies ``--savepoint_path`` only to a remote Flink), and this test
failed there. Its reports are stamped an hour in the past (``streams``): nothing waits on the clock."""
import os
import re
import shlex
import signal
import subprocess
import sys

import pytest

from deploy.local import cluster as local_cluster
from ldp_marginals.pipelines.local_services import CLUSTER_FILE, ENV
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.outputs import DEAD_LETTERS, MARGINALS
from tests.cluster import streams
from tests.cluster.test_flink_recovery import window_of
from tests.cluster.test_stop_and_resume import assert_dead_letters, command, stream_in_three, stopped

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def cluster_up(tmp_path, monkeypatch):
    """``make cluster-up``'s cluster (its default Flink) on free ports, its record named by the environment
    -> the recorded :class:`~deploy.local.cluster.Cluster`; stopped by process id at the end."""
    run_dir = str(tmp_path / "run")
    up = subprocess.run([sys.executable, "-m", "deploy.local.cluster", "up", "--run-dir", run_dir,
                         "--jvm-dir", os.path.join(ROOT, local_cluster.JVM_DIR), "--ports", "free"],
                        cwd=ROOT, capture_output=True, text=True, timeout=streams.PATIENCE_S)
    c = local_cluster.load(run_dir)
    try:
        assert up.returncode == 0, up.stderr
        monkeypatch.setenv(ENV, os.path.join(run_dir, CLUSTER_FILE))
        yield c
    finally:
        if c is not None:
            c.stop()


def test_ctrl_c_on_the_default_cluster_up_prints_a_command_that_resumes_the_job_without_a_loss(cluster_up, tmp_path):
    cluster = cluster_up
    t0, records, while_down, rest, _, out = stream_in_three(cluster, tmp_path, "reports")
    # the README's command: no Flink option, no Kafka service named (the record gives them)
    argv = ["--config", str(tmp_path / "c.json"), "--streaming", "--kafka-topic", "reports",
            "--kafka-consumer-config", "auto.offset.reset=earliest", "--dead-letter-seconds", "1",
            "--watermark-delay-seconds", "0", "--progress-seconds", "0", "--output", out,
            "--runner=PortableRunner", f"--job_endpoint={cluster.job_endpoint}", "--environment_type=LOOPBACK",
            "--parallelism=2"]
    log = tmp_path / "first.log"
    with command(argv, log) as proc:
        # with checkpoints, a pane's file is written once the checkpoint after its input has completed
        streams.wait_until("the first window's on-time pane",
                           lambda: streams.panes_of(out, MARGINALS, "app", window_of(0, t0)))
        code, line = stopped(proc, signal.SIGINT, log)
    assert code == 128 + signal.SIGINT
    assert re.search(r"stopped by SIGINT: Flink job [0-9a-f]{32} cancelled; resume it with: ldp-marginals run ",
                     line), line
    assert cluster.running_jobs() == []
    resume = shlex.split(line.split("resume it with: ", 1)[1])
    assert resume[:2] == ["ldp-marginals", "run"] and resume[-1].startswith("--savepoint_path=")

    streams.produce(cluster.bootstrap, "reports", streams.singles(while_down + rest), create=False)
    batch, expected = streams.batch_of(tmp_path, records)
    log = tmp_path / "resumed.log"
    with command(resume[2:], log) as proc:   # the printed command, as printed
        job = streams.wait_until("the resumed job", cluster.running_jobs)[0]
        restored = streams.wait_until("its restore", lambda: cluster.restored_checkpoint(job))
        assert restored["external_path"].endswith(resume[-1].rsplit("/", 1)[1])
        streams.wait_until("every report in the latest panes",
                           lambda: streams.reports_in_latest_panes(out) >= expected["reports_counted"])
        streams.wait_until("the damaged message's dead letter", lambda: any(
            d["reason"] == "undecodable" for d in read_rows(out, DEAD_LETTERS)))
        code, line = stopped(proc, signal.SIGINT, log)
    assert code == 128 + signal.SIGINT and "resume it with: ldp-marginals run " in line, line
    assert cluster.running_jobs() == []
    # every report counted once across the stop: the latest panes are the batch rows on all of them
    assert streams.reports_in_latest_panes(out) == expected["reports_counted"]
    streams.assert_same_estimates(out, batch, every_kind=False)
    assert_dead_letters(out, expected)
