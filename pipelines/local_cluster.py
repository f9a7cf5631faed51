"""A local cluster for running the job as its users deploy it: a Kafka broker (KRaft mode, no
ZooKeeper) on 127.0.0.1:9092, Beam's Flink job server (a local Flink of parallelism 2, checkpoints
on disk) on localhost:8099, and the Java expansion service that expands Kafka IO for Python's
``ReadFromKafka`` on localhost:8097, with an EMBEDDED environment (the Kafka reader runs inside the
Flink task manager: no Docker).

The JVM parts come from Maven (``make jvm``, poms in ``deploy/flink/jvm/``) into ``.jvm/``; this
module only starts and stops them. ``make cluster-up`` / ``make cluster-down`` call
``python -m ldp_marginals.pipelines.local_cluster up|down``; tests start their own on free ports
(:func:`start`) and stop them by process id (:meth:`Cluster.stop`).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
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
STATE_FILE = "cluster.json"
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

    def pipeline_args(self, checkpoint_ms: int | None = None) -> list:
        """The Beam options of a job on this cluster (the Python side runs in the submitting process)."""
        args = ["--runner=PortableRunner", f"--job_endpoint={self.job_endpoint}", "--environment_type=LOOPBACK",
                f"--parallelism={self.parallelism}"]
        if checkpoint_ms:
            args.append(f"--checkpointing_interval={checkpoint_ms}")
        return args

    def stop(self) -> None:
        """Stop every part this cluster started, by process id (TERM, then KILL after 15 s)."""
        for part in ("expansion", "job_server", "kafka"):
            pid = self.pids.pop(part, None)
            if pid is not None:
                _terminate(pid)
        state = os.path.join(self.run_dir, STATE_FILE)
        if os.path.exists(state):
            os.remove(state)

    def kill(self, part: str) -> None:
        """Kill one part at once (SIGKILL): a crash, for the tests."""
        pid = self.pids.pop(part)
        proc = _CHILDREN.pop(pid, None)
        if proc is not None:
            proc.kill()
            proc.wait()


def _terminate(pid: int, grace: float = 15.0) -> None:
    proc = _CHILDREN.pop(pid, None)
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def _spawn(cmd: list, log: str, env: dict | None = None) -> subprocess.Popen:
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    _CHILDREN[proc.pid] = proc
    return proc


def _start_kafka(cluster: Cluster, jvm_dir: str) -> None:
    lib = lib_dir(jvm_dir, "kafka")
    folder = os.path.join(cluster.run_dir, "kafka")
    shutil.rmtree(folder, ignore_errors=True)   # a fresh log each start: the controller's port is new
    os.makedirs(folder, exist_ok=True)
    controller = free_port()
    props = os.path.join(folder, "server.properties")
    with open(props, "w") as fh:
        fh.write("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{cluster.kafka_port},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{cluster.kafka_port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            f"log.dirs={os.path.join(folder, 'data')}", "num.partitions=2",
            "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1", "group.initial.rebalance.delay.ms=0", ""]))
    cp = os.path.join(lib, "*")
    log = os.path.join(cluster.run_dir, "kafka.log")
    fmt = subprocess.run([_java(), "-cp", cp, STORAGE_MAIN, "format", "--standalone", "-t", uuid_for_kafka(),
                          "-c", props], capture_output=True, text=True)
    if fmt.returncode != 0:
        lines = [line for line in (fmt.stderr + fmt.stdout).splitlines() if line.strip() and not line[:1].isspace()]
        raise ClusterError(f"formatting Kafka's log directory failed: {lines[-1] if lines else fmt.returncode}")
    proc = _spawn([_java(), "-Xmx512m", "-cp", cp, BROKER_MAIN, props], log)
    cluster.pids["kafka"] = proc.pid
    _wait_port(cluster.kafka_port, proc, "the Kafka broker", log)


def uuid_for_kafka() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (what random-uuid prints)."""
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _start_job_server(cluster: Cluster, jvm_dir: str) -> None:
    lib = lib_dir(jvm_dir, "job-server")
    conf = os.path.join(cluster.run_dir, "flink-conf")
    os.makedirs(conf, exist_ok=True)
    with open(os.path.join(conf, "flink-conf.yaml"), "w") as fh:
        fh.write("\n".join([
            f"parallelism.default: {cluster.parallelism}",
            f"taskmanager.numberOfTaskSlots: {cluster.parallelism}",
            "state.backend.type: hashmap",
            f"state.checkpoints.dir: file://{cluster.checkpoints}",
            f"state.savepoints.dir: file://{cluster.savepoints}",
            "execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION", ""]))
    jamm = [os.path.join(lib, n) for n in os.listdir(lib) if n.startswith("jamm-")]
    log = os.path.join(cluster.run_dir, "job-server.log")
    proc = _spawn([_java(), "-Xmx3g", *(f"-javaagent:{j}" for j in jamm), *JAVA_OPENS, *JAVA_LOGGING,
                   "-cp", os.path.join(lib, "*"), JOB_SERVER_MAIN, "--flink-master=[local]", f"--flink-conf-dir={conf}",
                   f"--job-port={cluster.job_port}", "--artifact-port=0", "--expansion-port=-1",
                   f"--artifacts-dir={os.path.join(cluster.run_dir, 'artifacts')}"], log)
    cluster.pids["job_server"] = proc.pid
    _wait_port(cluster.job_port, proc, "the Flink job server", log)


def _start_expansion(cluster: Cluster, jvm_dir: str) -> None:
    lib = lib_dir(jvm_dir, "job-server")
    log = os.path.join(cluster.run_dir, "expansion.log")
    proc = _spawn([_java(), "-Xmx1g", *JAVA_OPENS, *JAVA_LOGGING, "-cp", os.path.join(lib, "*"), EXPANSION_MAIN,
                   str(cluster.expansion_port), "--defaultEnvironmentType=EMBEDDED",
                   "--experiments=use_deprecated_read"], log)
    cluster.pids["expansion"] = proc.pid
    _wait_port(cluster.expansion_port, proc, "the Kafka IO expansion service", log)


def start(run_dir: str, jvm_dir: str = JVM_DIR, kafka_port: int | None = None, job_port: int | None = None,
          expansion_port: int | None = None, parallelism: int = 2, kafka: bool = True) -> Cluster:
    """Start the broker (unless ``kafka`` is False), the job server and the expansion service, and wait
    until each answers; ports default to free ones. On any failure what was started is stopped."""
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got parallelism={parallelism}")
    os.makedirs(run_dir, exist_ok=True)
    cluster = Cluster(os.path.abspath(run_dir), kafka_port or free_port(), job_port or free_port(),
                      expansion_port or free_port(), parallelism)
    for port, name in ((cluster.kafka_port, "Kafka"), (cluster.job_port, "the job server"),
                       (cluster.expansion_port, "the expansion service")):
        if _port_open(port):
            raise ClusterError(f"port {port} for {name} is taken (a cluster already up? `make cluster-down`)")
    try:
        if kafka:
            _start_kafka(cluster, jvm_dir)
        _start_job_server(cluster, jvm_dir)
        _start_expansion(cluster, jvm_dir)
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
    parser = argparse.ArgumentParser(prog="python -m ldp_marginals.pipelines.local_cluster",
                                     description="start or stop the local Kafka broker and Flink job server")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--run-dir", default=os.path.join(JVM_DIR, "run"), help="logs, data, process ids")
    parser.add_argument("--jvm-dir", default=JVM_DIR, help="where `make jvm` put the jars")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            c = start(args.run_dir, args.jvm_dir, 9092, 8099, 8097, args.parallelism)
            print(f"Kafka on {c.bootstrap}, Flink job server on {c.job_endpoint} (parallelism {c.parallelism}), "
                  f"Kafka IO expansion service on {c.expansion_service}; logs under {c.run_dir}")
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
