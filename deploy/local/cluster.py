"""A local cluster for running the job as its users deploy it: a Kafka broker (KRaft mode, no
ZooKeeper) on 127.0.0.1:9092, Beam's Flink job server (a local Flink of parallelism 2, checkpoints
on disk) on localhost:8099, and the Java expansion service that expands Kafka IO for Python's
``ReadFromKafka`` on localhost:8097, with an EMBEDDED environment (the Kafka reader runs inside the
Flink task manager: no Docker).

Two kinds of Flink (``flink=``):

- ``"session"`` (``make cluster-up``'s default, :data:`DEFAULT_FLINK`): a Flink session cluster of its own processes, a
  JobManager (``StandaloneSessionClusterEntrypoint``) and one or more TaskManagers
  (``TaskManagerRunner``, ``taskmanagers=``, the slots shared among them), started from the same Maven
  classpath as the job server, which submits to it over REST. A TaskManager can be killed and another
  started (a crash the JobManager recovers from the last checkpoint), and a job stopped (Ctrl-C on
  ``ldp-marginals run``, which finds its REST address in the cluster's record) resumes from its last
  retained checkpoint or a savepoint. Jobs start in ~20 s (REST submission).
- ``"local"`` (``make cluster-up FLINK=local``; :func:`start`'s default, for the tests and benchmarks that
  need a quick Flink and no resume): the job server runs Flink in its own JVM
  (``--flink-master=[local]``). Quick (a job starts in ~3 s), but nothing survives the process, and
  Beam 2.62's job server applies ``--savepoint_path`` only with a remote master: a stopped job cannot
  be resumed. Each job gets a Flink of its own, which serves its REST API on the first free port of
  :attr:`Cluster.embedded_rest` (``run --flink-rest`` cancels the job there on Ctrl-C: Beam's cancel
  only ends the job server's wait).

With a pool of Python workers (``workers=True``) each TaskManager asks the pool for one worker per
slot (``--sdk_worker_parallelism``) and binds each task's Python stage to one of them in the order
the tasks open, which varies: with two slots on one TaskManager, both reading tasks of a streaming
job sometimes landed on one worker (one core busy, the other idle for the whole job). One slot per
TaskManager (``taskmanagers=parallelism``) gives every task a worker of its own.

The JVM parts come from Maven (``make jvm``, poms in ``deploy/flink/jvm/``) into ``.jvm/``; this
module only starts and stops them. It is a development tool of the repository, not part of the
installed package: ``make cluster-up`` / ``make cluster-down`` call ``python -m
deploy.local.cluster up|down`` from the repository's root; the tests (``tests/cluster``) and the
Flink bench (``benchmarks/flink.py``) start their own on free ports (:func:`start`) and stop them by
process id (:meth:`Cluster.stop`).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from dataclasses import asdict, dataclass, field

BEAM_VERSION = "2.62.0"      # the Python SDK's; deploy/flink/jvm/job-server/pom.xml resolves the same
FLINK_VERSION = "1.19"
JVM_DIR = ".jvm"
JAVA_OPENS = ["--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.nio=ALL-UNNAMED",
              "--add-opens=java.base/java.util=ALL-UNNAMED"]
# slf4j-simple's settings: Flink's and Beam's log lines, with times, into the part's log file
JAVA_LOGGING = ["-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS"]
JOB_SERVER_MAIN = "org.apache.beam.runners.flink.FlinkJobServerDriver"
EXPANSION_MAIN = "org.apache.beam.sdk.expansion.service.ExpansionService"
BROKER_MAIN, STORAGE_MAIN = "kafka.Kafka", "kafka.tools.StorageTool"
JOBMANAGER_MAIN = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
TASKMANAGER_MAIN = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
FLINK_KINDS = ("local", "session")
# what `make cluster-up` starts without FLINK=: the Flink a stopped job resumes on (the job server's embedded
# one cannot: Beam 2.62 applies --savepoint_path only to a remote Flink; issue 49 item 2)
DEFAULT_FLINK = "session"
REST_CALL_TIMEOUT_S = 30.0   # one call to the session cluster's REST API
REST_PATIENCE_S = 300.0      # how long a read of it is asked again while the JobManager does not answer
# A TaskManager started without Flink's scripts must be given every memory component (the scripts
# derive them with BashJavaUtils); these add up to a 1.9 GB process with a 1 GB task heap.
TASKMANAGER_MEMORY = {
    "taskmanager.memory.framework.heap.size": "128m", "taskmanager.memory.framework.off-heap.size": "128m",
    "taskmanager.memory.task.heap.size": "1024m", "taskmanager.memory.task.off-heap.size": "0m",
    "taskmanager.memory.network.min": "64m", "taskmanager.memory.network.max": "64m",
    "taskmanager.memory.managed.size": "128m", "taskmanager.memory.jvm-metaspace.size": "256m",
    "taskmanager.memory.jvm-overhead.min": "192m", "taskmanager.memory.jvm-overhead.max": "192m"}
# A TaskManager's Java work here is moving messages between Kafka, Flink and the Python workers; its
# optimizing (C2) JIT compiler spent 5-13 s of CPU in every 30M-report streaming job, not only the
# first, on the cores the Python workers need. The quick compiler alone (C1) cut a TaskManager's CPU
# per job from 9-10 s to 6-8 s and the job's time with it (README, goal 8).
TASKMANAGER_JIT = ["-XX:TieredStopAtLevel=1"]
# the record `ldp-marginals run` reads (pipelines/local_services.py owns its name and place)
from ldp_marginals.pipelines.local_services import CLUSTER_DIR, CLUSTER_FILE as STATE_FILE  # noqa: E402
_CHILDREN = {}   # pid -> Popen of the parts this process started (kept, so none is reaped unseen)


class ClusterError(RuntimeError):
    """A part of the local cluster is missing or did not start; the message names the fix."""


@dataclass
class Cluster:
    """What :func:`start` started: ports, process ids and the folder that holds logs and data."""

    run_dir: str
    kafka_port: int
    job_port: int
    expansion_port: int
    parallelism: int
    flink: str = "local"
    taskmanagers: int = 1        # the session cluster's (flink="session"), the slots shared among them
    detached: bool = False       # outlives the process that started it (`make cluster-up`), else ends with it
    rest_port: int = 0           # the session cluster's REST port (flink="session")
    # flink="local": the ports the job server's embedded Flink serves its REST API on (each job gets a
    # Flink of its own, on the first free one), "HOST:FIRST-LAST", for `ldp-marginals run --flink-rest`
    embedded_rest: str = ""
    workers_port: int = 0        # the Python SDK worker pool's port (workers=True), else LOOPBACK
    staged_jar: str = ""         # flink="session": the one small jar a job stages (`run` reads it from the record)
    metrics_ports: dict = field(default_factory=dict)   # Flink process -> its Prometheus reporter's port
    jvm_dir: str = JVM_DIR
    pids: dict = field(default_factory=dict)   # part -> process id

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def job_endpoint(self) -> str:
        return f"localhost:{self.job_port}"

    @property
    def expansion_service(self) -> str:
        return f"localhost:{self.expansion_port}"

    @property
    def checkpoints(self) -> str:
        return os.path.join(self.run_dir, "checkpoints")

    @property
    def savepoints(self) -> str:
        return os.path.join(self.run_dir, "savepoints")

    @property
    def slots(self) -> int:
        """Task slots per TaskManager."""
        return self.parallelism // self.taskmanagers

    @property
    def taskmanager_parts(self) -> list:
        """The TaskManagers' names in :attr:`pids`: ``taskmanager``, ``taskmanager2``, ..."""
        return ["taskmanager" + (str(i + 1) if i else "") for i in range(self.taskmanagers)]

    def pipeline_args(self, checkpoint_ms: int | None = None) -> list:
        """The Beam options of a job on this cluster, at the cluster's parallelism (its slots). The
        Python side runs in the submitting process (LOOPBACK: its threads share one interpreter), or,
        with a worker pool (``workers=True``), in one worker process per task slot of each
        TaskManager, as deployed (deploy/flink's worker pool). A lower ``--parallelism`` is not
        offered: on the job server's embedded Flink a batch job asking for 1 on a cluster of 2 slots
        ran every task at 2 (its task names in the log), so a job at p runs on a cluster of p slots."""
        p = self.parallelism
        args = ["--runner=PortableRunner", f"--job_endpoint={self.job_endpoint}", f"--parallelism={p}"]
        if self.workers_port:
            args += ["--environment_type=EXTERNAL", f"--environment_config=localhost:{self.workers_port}",
                     f"--sdk_worker_parallelism={self.slots}"]
        else:
            args.append("--environment_type=LOOPBACK")
        if checkpoint_ms:
            args.append(f"--checkpointing_interval={checkpoint_ms}")
        if self.flink == "session":
            # the job's classes are on the TaskManager's classpath: stage one small jar instead of
            # the job server's ~190 (which it would upload with every job otherwise)
            args.append(f"--files_to_stage={_placeholder_jar(self.run_dir)}")
        return args

    def scrape(self) -> dict:
        """Every Flink process's Prometheus endpoint -> ``{part: the text it serves}``."""
        out = {}
        for part, port in sorted(self.metrics_ports.items()):
            if part in self.pids:
                with urllib.request.urlopen(f"http://localhost:{port}/metrics", timeout=10) as resp:
                    out[part] = resp.read().decode()
        return out

    @property
    def rest(self) -> str:
        return f"http://localhost:{self.rest_port}"

    def rest_call(self, path: str, body: dict | None = None, method: str | None = None) -> dict:
        """A call to the session cluster's REST API (GET, or POST with ``body``) -> its JSON."""
        if self.flink != "session":
            raise ValueError(f"the REST API is the session cluster's, got flink={self.flink!r}")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.rest + path, data=data, headers={"Content-Type": "application/json"},
                                     method=method)
        # a busy machine can keep the JobManager from answering within a call's timeout: a read (GET) is
        # asked again until REST_PATIENCE_S has passed (a liveness bound, not a pace); a write is not repeated
        deadline = time.monotonic() + (REST_PATIENCE_S if data is None and method in (None, "GET") else 0)
        while True:
            try:
                with urllib.request.urlopen(req, timeout=REST_CALL_TIMEOUT_S) as resp:
                    return json.loads(resp.read() or b"{}")
            except (TimeoutError, ConnectionError, urllib.error.URLError) as err:
                if isinstance(err, urllib.error.HTTPError) or time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    def running_jobs(self) -> list:
        return [j["id"] for j in self.rest_call("/jobs")["jobs"] if j["status"] in ("RUNNING", "RESTARTING")]

    def cancel_jobs(self, timeout_s: float = 60.0) -> None:
        """Cancel every running job through Flink's REST API and wait until none runs. (Beam's job
        server, submitting to a remote Flink, cancels only its own wait for the job, not the job.)"""
        for job in self.running_jobs():
            self.rest_call(f"/jobs/{job}?mode=cancel", method="PATCH")
        deadline = time.monotonic() + timeout_s
        while self.running_jobs():
            if time.monotonic() > deadline:
                raise ClusterError(f"jobs {self.running_jobs()} still run {timeout_s:.0f} s after their cancellation")
            time.sleep(0.3)

    def restored_checkpoint(self, job_id: str) -> dict | None:
        """The checkpoint the JobManager last restored ``job_id`` from (after a failure, or the savepoint
        it was submitted with): Flink's record of it (``id``, ``is_savepoint``, ``external_path``), or None."""
        return self.rest_call(f"/jobs/{job_id}/checkpoints")["latest"]["restored"]

    def completed_checkpoints(self, job_id: str) -> int:
        return int(self.rest_call(f"/jobs/{job_id}/checkpoints")["counts"]["completed"])

    def stop_with_savepoint(self, job_id: str, timeout_s: float = 120.0) -> str:
        """Stop ``job_id`` with a savepoint, as ``ldp-marginals run --savepoint-on-stop`` does (a
        savepoint, then a cancel: :func:`ldp_marginals.pipelines.stopping.savepoint_stop` says why not
        ``flink stop``) -> the savepoint's path."""
        from ldp_marginals.pipelines.stopping import savepoint_stop
        try:
            return savepoint_stop(self.rest, job_id, timeout_s, target=f"file://{self.savepoints}")
        except (RuntimeError, TimeoutError) as err:
            raise ClusterError(str(err)) from None

    def start_taskmanager(self, part: str = "taskmanager") -> None:
        """Start TaskManager ``part`` again (after :meth:`kill`) and wait until it has registered."""
        if self.flink != "session" or part not in self.taskmanager_parts or part in self.pids:
            raise ValueError(f"start_taskmanager needs a stopped TaskManager of a session cluster, got "
                             f"flink={self.flink!r}, part={part!r}, parts={sorted(self.pids)}")
        _start_taskmanager(self, part)

    def stop(self) -> None:
        """Stop every part this cluster started, by process id (TERM, then KILL after 15 s)."""
        for part in ("workers", "expansion", "job_server", *self.taskmanager_parts, "jobmanager", "kafka"):
            pid = self.pids.pop(part, None)
            if pid is not None:
                _terminate(pid)
        state = os.path.join(self.run_dir, STATE_FILE)
        if os.path.exists(state):
            os.remove(state)

    def start_kafka(self) -> None:
        """Start the broker again (after :meth:`kill`) on its port and log directory: what it had
        acknowledged is there. Like every part, the broker ends with the thread that starts it (unless
        ``detached``): call this from a thread that outlives its use."""
        if "kafka" in self.pids:
            raise ValueError("start_kafka needs a stopped broker (kill('kafka') first)")
        _start_kafka(self, fresh=False)

    def kill(self, part: str) -> None:
        """Kill one part at once (SIGKILL): a crash, for the tests."""
        if part not in self.pids:
            raise ValueError(f"part must be a running one of {sorted(self.pids)}, got part={part!r}")
        pid = self.pids.pop(part)
        proc = _CHILDREN.pop(pid, None)
        if proc is not None:
            proc.kill()
            proc.wait()
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _placeholder_jar(run_dir: str) -> str:
    """An empty jar (a manifest only) for ``--files_to_stage``: Flink needs a user jar to submit."""
    path = os.path.join(run_dir, "staged.jar")
    if not os.path.exists(path):
        with zipfile.ZipFile(path, "w") as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    return path


def _terminate(pid: int, grace: float = 15.0) -> None:
    """Stop a part and whatever it started (each part leads its own process group: the worker
    pool's SDK workers go with it)."""
    proc = _CHILDREN.pop(pid, None)
    if proc is not None:
        _signal_group(pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _signal_group(pid, signal.SIGKILL)   # children that outlived their parent
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return
        except ChildProcessError:   # not our child (cluster-down from another shell): poll for it
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _signal_group(pid: int, sig) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


EMBEDDED_REST_PORTS = 4   # jobs at once on the job server's embedded Flink that `run --flink-rest` can reach


def _ephemeral_range() -> tuple:
    """The kernel's range for ports bound to 0 (Linux: /proc/sys/net/ipv4/ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            low, high = (int(v) for v in fh.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return low, high


def _free_range(n: int = 1) -> int:
    """The first of ``n`` consecutive ports free now and outside the kernel's ephemeral range. The job
    server's Flink binds its Prometheus port and REST port only while a job runs (each job has a Flink
    of its own): a port from the ephemeral range could be taken in between by any socket bound to port
    0 (an SDK worker's gRPC server, the job server's artifact service), and a fresh-clone run once
    scraped a gRPC server on the metrics port ("Unexpected HTTP/1.x request: GET /metrics")."""
    low, high = _ephemeral_range()
    spans = [(lo, hi) for lo, hi in ((10000, low - n), (high + 1, 65535 - n)) if hi > lo]
    pick = random.Random()
    for _ in range(200):
        lo, hi = pick.choice(spans) if spans else (1024, 65535 - n)
        first = pick.randint(lo, hi)
        if all(_bindable(first + i) for i in range(n)):
            return first
    raise ClusterError(f"found no {n} consecutive free ports outside the ephemeral range {low}-{high}")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port free now, outside the kernel's ephemeral range (:func:`_free_range`): the cluster's parts
    start together and bind their ports seconds after they are chosen, while the others bind sockets
    to port 0 (a broker once exited at start-up, its port or its controller's presumably taken)."""
    return _free_range(1)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_port(port: int, proc: subprocess.Popen, name: str, log: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"{name} exited with code {proc.returncode} before listening on {port}; see {log}")
        if _port_open(port):
            return
        time.sleep(0.3)
    raise ClusterError(f"{name} did not listen on {port} within {timeout:.0f} s; see {log}")


def _waited(wait: bool, port: int, proc: subprocess.Popen, name: str, log: str):
    """:func:`_wait_port` now (``wait``), or the wait as a function to call later (None now)."""
    if wait:
        _wait_port(port, proc, name, log)
        return None
    return lambda: _wait_port(port, proc, name, log)


def lib_dir(jvm_dir: str, part: str) -> str:
    """``.jvm/<part>/lib``, or a ClusterError that says to run ``make jvm``."""
    path = os.path.join(jvm_dir, part, "lib")
    if not os.path.isdir(path) or not any(name.endswith(".jar") for name in os.listdir(path)):
        raise ClusterError(f"the {part} jars are missing under {path}: run `make jvm` (Maven resolves them)")
    return path


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise ClusterError("java is not on PATH: install a JDK 17 (the Flink job server and Kafka run on it)")
    return java


PR_SET_PDEATHSIG = 1   # linux/prctl.h


def _end_with_parent() -> None:
    """In the child before it runs: Linux sends it SIGTERM when the process that started it ends,
    however that ends (a test run or bench killed with SIGKILL leaves no JVM behind). Elsewhere a
    no-op: there :meth:`Cluster.stop` is the only way."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _spawn(cmd: list, log: str, cluster: Cluster, env: dict | None = None) -> subprocess.Popen:
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env,
                                preexec_fn=None if cluster.detached else _end_with_parent)
    _CHILDREN[proc.pid] = proc
    return proc


def _start_kafka(cluster: Cluster, fresh: bool = True, wait: bool = True):
    """Start the broker: ``fresh``, on a new log directory; else again on the one it had (a restart
    that keeps every record). Without ``wait``: returns the wait until it listens, to call later."""
    lib = lib_dir(cluster.jvm_dir, "kafka")
    folder = os.path.join(cluster.run_dir, "kafka")
    props = os.path.join(folder, "server.properties")
    cp = os.path.join(lib, "*")
    log = os.path.join(cluster.run_dir, "kafka.log")
    if fresh:
        _format_kafka(folder, props, cluster.kafka_port, cp)
    proc = _spawn([_java(), "-Xmx512m", "-cp", cp, BROKER_MAIN, props], log, cluster)
    cluster.pids["kafka"] = proc.pid
    return _waited(wait, cluster.kafka_port, proc, "the Kafka broker", log)


def _format_kafka(folder: str, props: str, kafka_port: int, cp: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)   # a fresh log each start: the controller's port is new
    os.makedirs(folder, exist_ok=True)
    controller = free_port()
    with open(props, "w") as fh:
        fh.write("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{kafka_port},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{kafka_port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            f"log.dirs={os.path.join(folder, 'data')}", "num.partitions=2",
            "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1", "group.initial.rebalance.delay.ms=0",
            # keep every message: reports stamped in the past (CreateTime months ago, as the bench's
            # are) would otherwise be deleted by the 7-day retention within minutes, silently
            "log.retention.ms=-1", ""]))
    fmt = subprocess.run([_java(), "-cp", cp, STORAGE_MAIN, "format", "--standalone", "-t", uuid_for_kafka(),
                          "-c", props], capture_output=True, text=True)
    if fmt.returncode != 0:
        lines = [line for line in (fmt.stderr + fmt.stdout).splitlines() if line.strip() and not line[:1].isspace()]
        raise ClusterError(f"formatting Kafka's log directory failed: {lines[-1] if lines else fmt.returncode}")


def uuid_for_kafka() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (what random-uuid prints),
    never starting with ``-`` (Kafka's own ids avoid it too: the storage tool would read such an id as
    an option and refuse to format, as happened here once: 1 start in 64 on average)."""
    import base64
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


# Flink's Prometheus reporter (flink-metrics-prometheus, resolved by `make jvm`): each Flink process
# serves its metrics, the job's counters among them, on http://localhost:<port>/metrics
PROMETHEUS_REPORTER = {"metrics.reporter.prom.factory.class":
                       "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"}
# what the reporter names the job's counter ldp_marginals/<name>: this prefix, then <name> with its
# dots as underscores (deploy/flink/alert-rules.yaml uses these names)
JOB_METRIC_PREFIX = "flink_taskmanager_job_task_operator_ldp_marginals_"


def _flink_conf(cluster: Cluster) -> str:
    """The Flink configuration folder of the job server and, in a session cluster, of the JobManager
    and TaskManager: parallelism, checkpoints and savepoints on disk, checkpoints kept on
    cancellation, the Prometheus reporter (on the port of the job server's Flink; each process of a
    session cluster is given its own); heap state in the job server's mini cluster; in a session
    cluster RocksDB state and an exponential-delay restart strategy with quick heartbeats, so a
    killed TaskManager is noticed within seconds and the job restarted from its last checkpoint."""
    conf = os.path.join(cluster.run_dir, "flink-conf")
    os.makedirs(conf, exist_ok=True)
    cluster.metrics_ports["job_server"] = free_port()
    settings = {
        "parallelism.default": cluster.parallelism, "taskmanager.numberOfTaskSlots": cluster.slots,
        "state.backend.type": "hashmap", "state.checkpoints.dir": f"file://{cluster.checkpoints}",
        "state.savepoints.dir": f"file://{cluster.savepoints}",
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        **PROMETHEUS_REPORTER, "metrics.reporter.prom.port": cluster.metrics_ports["job_server"]}
    if cluster.flink == "session":
        cluster.staged_jar = _placeholder_jar(cluster.run_dir)
    if cluster.flink == "local":
        # each job's Flink serves its REST API on the first free port of a known range (Flink's default
        # there is a random one), so that `run --flink-rest` can cancel the job there: Beam's cancel
        # ends only the job server's wait, and the job ran on, holding the slots
        first = _free_range(EMBEDDED_REST_PORTS)
        settings["rest.bind-port"] = f"{first}-{first + EMBEDDED_REST_PORTS - 1}"
        cluster.embedded_rest = f"localhost:{settings['rest.bind-port']}"
    if cluster.flink == "session":
        settings.update({
            "jobmanager.rpc.address": "localhost", "jobmanager.rpc.port": free_port(),
            "jobmanager.bind-host": "localhost", "jobmanager.memory.process.size": "1g",
            "rest.address": "localhost", "rest.port": cluster.rest_port, "rest.bind-address": "localhost",
            "taskmanager.host": "localhost", "taskmanager.bind-host": "localhost", "taskmanager.cpu.cores": 2,
            # the job's classes come from the classpath, not from the (placeholder) user jar
            "classloader.resolve-order": "parent-first",
            # as deployed (deploy/flink/flink-deployment.yaml): RocksDB, incremental checkpoints,
            # exponential-delay restarts (here from 1 s, for the tests' crash)
            "state.backend.type": "rocksdb", "state.backend.incremental": "true",
            "restart-strategy.type": "exponential-delay",
            "restart-strategy.exponential-delay.initial-backoff": "1 s",
            "restart-strategy.exponential-delay.max-backoff": "10 s",
            "heartbeat.interval": 1000, "heartbeat.timeout": 5000, **TASKMANAGER_MEMORY})
    with open(os.path.join(conf, "flink-conf.yaml"), "w") as fh:
        fh.write("".join(f"{k}: {v}\n" for k, v in settings.items()))
    return conf


def _flink_jvm(lib: str, heap: str, *jvm_opts: str) -> list:
    jamm = [os.path.join(lib, n) for n in os.listdir(lib) if n.startswith("jamm-")]
    return [_java(), *jvm_opts, f"-Xmx{heap}", *(f"-javaagent:{j}" for j in jamm), *JAVA_OPENS, *JAVA_LOGGING,
            "-cp", os.path.join(lib, "*")]


def _metrics_port(cluster: Cluster, part: str) -> str:
    """A session cluster's process ``part`` serves its metrics on a port of its own: the dynamic
    property that says which (a TaskManager started again keeps its part's port)."""
    port = cluster.metrics_ports.setdefault(part, free_port())
    return f"-Dmetrics.reporter.prom.port={port}"


def _start_jobmanager(cluster: Cluster) -> None:
    lib = lib_dir(cluster.jvm_dir, "job-server")
    log = os.path.join(cluster.run_dir, "jobmanager.log")
    proc = _spawn(_flink_jvm(lib, "768m") + [JOBMANAGER_MAIN, "--configDir", os.path.join(cluster.run_dir, "flink-conf"),
                                             _metrics_port(cluster, "jobmanager")], log, cluster)
    cluster.pids["jobmanager"] = proc.pid
    _wait_port(cluster.rest_port, proc, "the Flink JobManager", log)
    _wait_rest(cluster, proc, log)


def _wait_rest(cluster: Cluster, proc: subprocess.Popen, log: str, timeout: float = 120.0) -> None:
    """Wait until the JobManager's REST API answers: it listens before its dispatcher is up and answers
    503 (Service Unavailable) until then (two session clusters starting at once on a busy machine: the
    TaskManagers' start read /taskmanagers too early, and the cluster failed)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ClusterError(f"the Flink JobManager exited with code {proc.returncode}; see {log}")
        try:
            cluster.rest_call("/taskmanagers")
            return
        except urllib.error.HTTPError as err:
            if err.code != 503:
                raise
            if time.monotonic() > deadline:
                raise ClusterError(f"the Flink JobManager's REST API still answered 503 after {timeout:.0f} s; "
                                   f"see {log}") from None
        time.sleep(0.3)


def _start_taskmanager(cluster: Cluster, *parts: str, timeout: float = 120.0) -> None:
    """Start TaskManagers ``parts`` (default: one, ``taskmanager``) at once and wait until all have
    registered with the JobManager."""
    lib = lib_dir(cluster.jvm_dir, "job-server")
    before = {tm["id"] for tm in cluster.rest_call("/taskmanagers")["taskmanagers"]}
    procs = {}
    for part in parts or ("taskmanager",):
        log = os.path.join(cluster.run_dir, f"{part}.log")
        procs[log] = _spawn(_flink_jvm(lib, "1g", *TASKMANAGER_JIT) + [
            TASKMANAGER_MAIN, "--configDir", os.path.join(cluster.run_dir, "flink-conf"),
            _metrics_port(cluster, part)], log, cluster)
        cluster.pids[part] = procs[log].pid
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log, proc in procs.items():
            if proc.poll() is not None:
                raise ClusterError(f"the Flink TaskManager exited with code {proc.returncode}; see {log}")
        if len({tm["id"] for tm in cluster.rest_call("/taskmanagers")["taskmanagers"]} - before) >= len(procs):
            return
        time.sleep(0.3)
    raise ClusterError(f"the Flink TaskManagers did not register within {timeout:.0f} s; see {', '.join(procs)}")


def _start_job_server(cluster: Cluster) -> None:
    lib = lib_dir(cluster.jvm_dir, "job-server")
    conf = _flink_conf(cluster)
    if cluster.flink == "session":
        _start_jobmanager(cluster)
        _start_taskmanager(cluster, *cluster.taskmanager_parts)
    master = f"localhost:{cluster.rest_port}" if cluster.flink == "session" else "[local]"
    log = os.path.join(cluster.run_dir, "job-server.log")
    proc = _spawn(_flink_jvm(lib, "3g") + [JOB_SERVER_MAIN, f"--flink-master={master}", f"--flink-conf-dir={conf}",
                   f"--job-port={cluster.job_port}", "--artifact-port=0", "--expansion-port=-1",
                   f"--artifacts-dir={os.path.join(cluster.run_dir, 'artifacts')}"], log, cluster)
    cluster.pids["job_server"] = proc.pid
    _wait_port(cluster.job_port, proc, "the Flink job server", log)


def _start_expansion(cluster: Cluster, wait: bool = True):
    lib = lib_dir(cluster.jvm_dir, "job-server")
    log = os.path.join(cluster.run_dir, "expansion.log")
    proc = _spawn([_java(), "-Xmx1g", *JAVA_OPENS, *JAVA_LOGGING, "-cp", os.path.join(lib, "*"), EXPANSION_MAIN,
                   str(cluster.expansion_port), "--defaultEnvironmentType=EMBEDDED",
                   "--experiments=use_deprecated_read"], log, cluster)
    cluster.pids["expansion"] = proc.pid
    return _waited(wait, cluster.expansion_port, proc, "the Kafka IO expansion service", log)


def _start_workers(cluster: Cluster, wait: bool = True):
    """Beam's Python worker pool (``worker_pool_main``), which starts each SDK worker the job asks
    for as a process running this interpreter (it runs ``python``: this environment's comes first
    on the PATH)."""
    log = os.path.join(cluster.run_dir, "workers.log")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    proc = _spawn([sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                   f"--service_port={cluster.workers_port}"], log, cluster, env=env)
    cluster.pids["workers"] = proc.pid
    return _waited(wait, cluster.workers_port, proc, "the Python worker pool", log)


def start(run_dir: str, jvm_dir: str = JVM_DIR, kafka_port: int | None = None, job_port: int | None = None,
          expansion_port: int | None = None, parallelism: int = 2, kafka: bool = True,
          flink: str = "local", workers: bool = False, taskmanagers: int = 1,
          detached: bool = False) -> Cluster:
    """Start the broker (unless ``kafka`` is False), Flink (``flink``: ``"local"`` inside the job
    server, or a ``"session"`` cluster of its own processes: a JobManager and ``taskmanagers``
    TaskManagers sharing the ``parallelism`` slots), the job server, the expansion service and, with
    ``workers``, a pool of Python worker processes; wait until each answers; ports default to free
    ones. On any failure what was started is stopped. The parts end with the calling process (on
    Linux, even if it is killed) unless ``detached``: then only :meth:`Cluster.stop` ends them."""
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got parallelism={parallelism}")
    if flink not in FLINK_KINDS:
        raise ValueError(f"flink must be one of {FLINK_KINDS}, got flink={flink!r}")
    if taskmanagers < 1 or parallelism % taskmanagers or (taskmanagers > 1 and flink != "session"):
        raise ValueError(f"taskmanagers must be >= 1 and divide parallelism={parallelism}, and more than one "
                         f"needs flink='session', got taskmanagers={taskmanagers}, flink={flink!r}")
    os.makedirs(run_dir, exist_ok=True)
    cluster = Cluster(os.path.abspath(run_dir), kafka_port or free_port(), job_port or free_port(),
                      expansion_port or free_port(), parallelism, flink, taskmanagers=taskmanagers,
                      detached=detached, rest_port=free_port() if flink == "session" else 0,
                      workers_port=free_port() if workers else 0, jvm_dir=os.path.abspath(jvm_dir))
    for port, name in ((cluster.kafka_port, "Kafka"), (cluster.job_port, "the job server"),
                       (cluster.expansion_port, "the expansion service")):
        if _port_open(port):
            raise ClusterError(f"port {port} for {name} is taken (a cluster already up? `make cluster-down`)")
    try:
        # the broker, the expansion service and the worker pool start while Flink does (none needs
        # another), then each is waited for
        waits = [_start_kafka(cluster, wait=False)] if kafka else []
        waits.append(_start_expansion(cluster, wait=False))
        if workers:
            waits.append(_start_workers(cluster, wait=False))
        _start_job_server(cluster)
        for wait in waits:
            wait()
    except BaseException:
        cluster.stop()
        raise
    with open(os.path.join(cluster.run_dir, STATE_FILE), "w") as fh:
        json.dump(asdict(cluster), fh)
    return cluster


def load(run_dir: str) -> Cluster | None:
    path = os.path.join(run_dir, STATE_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return Cluster(**json.load(fh))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.local.cluster",
                                     description="start or stop the local Kafka broker and Flink job server")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--run-dir", default=CLUSTER_DIR, help="logs, data, process ids")
    parser.add_argument("--jvm-dir", default=JVM_DIR, help="where `make jvm` put the jars")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--flink", choices=FLINK_KINDS, default=DEFAULT_FLINK,
                        help=f"session (default {DEFAULT_FLINK}): a JobManager and a TaskManager of their own "
                             "(REST on a free port; survives a TaskManager crash; a job stopped with Ctrl-C "
                             "resumes); local: Flink inside the job server (jobs start quicker; a stopped job "
                             "cannot be resumed)")
    parser.add_argument("--ports", choices=("fixed", "free"), default="fixed",
                        help="fixed: Kafka on 9092, the job server on 8099, the expansion service on 8097; "
                             "free: free ones (the record under --run-dir says which)")
    parser.add_argument("--taskmanagers", type=int, default=1,
                        help="session: the TaskManagers, sharing the slots (one slot each: --taskmanagers "
                             "equal to --parallelism)")
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            ports = (9092, 8099, 8097) if args.ports == "fixed" else (None, None, None)
            c = start(args.run_dir, args.jvm_dir, *ports, args.parallelism, flink=args.flink,
                      taskmanagers=args.taskmanagers, detached=True)
            flink = (f"; a Flink session cluster, its REST API on {c.rest} (a streaming job `ldp-marginals run` "
                     "sends there stops on Ctrl-C with the command that resumes it)" if c.flink == "session" else
                     f"; its Flink's REST API on {c.embedded_rest} (run --flink-rest={c.embedded_rest}; a job stopped "
                     "there cannot be resumed: `make cluster-up` without FLINK=local runs a Flink where it can)")
            metrics = ", ".join(f"{part} :{port}" for part, port in sorted(c.metrics_ports.items()))
            print(f"Kafka on {c.bootstrap}, Flink job server on {c.job_endpoint} (parallelism {c.parallelism}), "
                  f"Kafka IO expansion service on {c.expansion_service}{flink}; Prometheus metrics at "
                  f"localhost:<port>/metrics ({metrics}); logs under {c.run_dir}")
        else:
            c = load(args.run_dir)
            if c is None:
                print(f"no cluster recorded under {args.run_dir}: nothing to stop")
            else:
                pids = sorted(c.pids.values())
                c.stop()
                print(f"stopped process ids {pids}")
    except (ClusterError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
