"""The local cluster's layout and lifetime, without starting Flink or Kafka: the TaskManagers and
slots a session cluster is given, the worker options a job gets, and that the parts end with the
process that started them (unless detached)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy.local import cluster as local_cluster

ROOT = Path(__file__).resolve().parents[2]   # the parent below imports deploy.local from there


def _cluster(tmp_path, **kw) -> local_cluster.Cluster:
    kw = {"parallelism": 2, "flink": "session", "workers_port": 5, **kw}
    return local_cluster.Cluster(str(tmp_path), 1, 2, 3, **kw)


def test_one_slot_per_taskmanager_gives_each_task_a_worker_of_its_own(tmp_path):
    c = _cluster(tmp_path, taskmanagers=2)
    assert c.slots == 1
    assert c.taskmanager_parts == ["taskmanager", "taskmanager2"]
    args = c.pipeline_args()
    assert "--parallelism=2" in args and "--sdk_worker_parallelism=1" in args
    with open(os.path.join(local_cluster._flink_conf(c), "flink-conf.yaml")) as fh:
        conf = dict(line.rstrip("\n").split(": ", 1) for line in fh)
    assert conf["taskmanager.numberOfTaskSlots"] == "1" and conf["parallelism.default"] == "2"


def test_one_taskmanager_holds_every_slot_by_default(tmp_path):
    c = _cluster(tmp_path)
    assert (c.slots, c.taskmanager_parts) == (2, ["taskmanager"])
    assert "--sdk_worker_parallelism=2" in c.pipeline_args()


@pytest.mark.parametrize("kw", [dict(parallelism=3, taskmanagers=2, flink="session"),
                                dict(parallelism=2, taskmanagers=0, flink="session"),
                                dict(parallelism=2, taskmanagers=2, flink="local")])
def test_a_layout_that_cannot_be_built_is_refused_before_anything_starts(tmp_path, kw):
    with pytest.raises(ValueError, match=f"taskmanagers={kw['taskmanagers']}"):
        local_cluster.start(str(tmp_path / "run"), str(tmp_path / "jvm"), **kw)
    assert not (tmp_path / "run").exists() or not os.listdir(tmp_path / "run")


def test_a_taskmanager_is_restarted_by_its_own_name(tmp_path):
    c = _cluster(tmp_path, taskmanagers=2, pids={"taskmanager": 1, "taskmanager2": 2})
    with pytest.raises(ValueError, match="part='taskmanager3'"):
        c.start_taskmanager("taskmanager3")
    with pytest.raises(ValueError, match="part='taskmanager2'"):   # still running
        c.start_taskmanager("taskmanager2")


def test_a_taskmanager_runs_with_the_quick_jit_compiler_alone(tmp_path, monkeypatch):
    lib = tmp_path / "jvm" / "job-server" / "lib"
    lib.mkdir(parents=True)
    (lib / "flink.jar").write_bytes(b"")
    c = _cluster(tmp_path, taskmanagers=1, jvm_dir=str(tmp_path / "jvm"))
    started = []

    class Proc:
        pid = 7

        def poll(self):
            return None

    def spawn(cmd, log, cluster, env=None):
        started.append(cmd)
        return Proc()

    monkeypatch.setattr(local_cluster, "_spawn", spawn)
    monkeypatch.setattr(local_cluster.Cluster, "rest_call",   # registered once spawned
                        lambda self, path: {"taskmanagers": [{"id": "tm"}] if started else []})
    local_cluster._start_taskmanager(c)
    (cmd,) = started
    assert set(local_cluster.TASKMANAGER_JIT) <= set(cmd[:cmd.index(local_cluster.TASKMANAGER_MAIN)])
    assert c.pids["taskmanager"] == 7


PARENT = """
import sys, time
from deploy.local import cluster as lc
c = lc.Cluster(sys.argv[1], 1, 2, 3, 1, detached=sys.argv[2] == "detached")
p = lc._spawn([sys.executable, "-c", "import time; time.sleep(120)"], sys.argv[1] + "/child.log", c)
print(p.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:   # a zombie has ended
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _status(pid: int) -> dict:
    """The fields of ``/proc/<pid>/status`` (empty once the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
    except FileNotFoundError:
        return {}


def _kill_parent(tmp_path, mode: str) -> tuple:
    """A part spawned as ``local_cluster`` does, by a parent then killed with SIGKILL and reaped:
    ``(the part's pid, the parent's pid)``. Once the parent is reaped the kernel has reparented the
    part and sent it the parent-death signal, if the part asked for one."""
    with subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), mode], stdout=subprocess.PIPE,
                          text=True, cwd=ROOT) as parent:
        child = int(parent.stdout.readline())
        parent.kill()   # SIGKILL: no cleanup runs in the parent
    return child, parent.pid


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_parts_end_with_a_killed_parent_unless_detached(tmp_path):
    child, _ = _kill_parent(tmp_path, "tied")
    deadline = time.monotonic() + 60   # a safety net for a part that never ends, not a bound on how fast
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    child, parent = _kill_parent(tmp_path, "detached")
    try:
        # `make cluster-up` exits at once; its cluster stays up until cluster-down: the detached part
        # was reparented (its parent's death is done) and no signal is on its way to it
        status = _status(child)
        assert _alive(child) and int(status["PPid"]) != parent
        assert int(status["SigPnd"], 16) == int(status["ShdPnd"], 16) == 0
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_kafka_cluster_id_never_reads_as_an_option(monkeypatch):
    ids = iter([b"\xfb" + bytes(15), bytes(16)])   # the first encodes to "-wAA...", the second to "AAAA..."
    monkeypatch.setattr(local_cluster.uuid, "uuid4", lambda: type("U", (), {"bytes": next(ids)})())
    assert local_cluster.uuid_for_kafka() == "A" * 22


def test_the_flink_ports_bound_only_while_a_job_runs_are_outside_the_ephemeral_range():
    # the job server's Flink binds its metrics and REST ports per job: a socket bound to port 0 between
    # two jobs must not be able to take them (a fresh-clone run scraped a gRPC server there)
    from deploy.local.cluster import _ephemeral_range, _free_range, free_port
    low, high = _ephemeral_range()
    for n in (1, 4):
        first = _free_range(n)
        assert all(not low <= p <= high for p in range(first, first + n)), (first, n, low, high)
    # every port the cluster picks before its part binds it (broker, controller, job server, ...)
    assert not low <= free_port() <= high


def test_the_jobmanager_is_up_when_its_rest_api_answers_not_when_it_listens(tmp_path):
    # Flink's JobManager listens before its dispatcher is up and answers 503 until then: a session
    # cluster started on a busy machine failed reading /taskmanagers at that moment
    import http.server
    import threading
    answers = [503, 503, 200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code = answers.pop(0) if len(answers) > 1 else answers[0]
            self.send_response(code)
            self.end_headers()
            self.wfile.write(b'{"taskmanagers": []}' if code == 200 else b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("localhost", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        c = _cluster(tmp_path, rest_port=server.server_address[1])
        local_cluster._wait_rest(c, proc, "jobmanager.log", timeout=30)
        assert answers == [200]   # it asked until the API answered
        answers[:] = [503]
        with pytest.raises(local_cluster.ClusterError, match="still answered 503 after 1 s"):
            local_cluster._wait_rest(c, proc, "jobmanager.log", timeout=1)
    finally:
        proc.kill()
        proc.wait()
        server.shutdown()
        server.server_close()
