"""The local cluster for the tests marked ``flink`` and ``kafka``: a Kafka broker (KRaft) and Beam's
Flink job server (local Flink, parallelism 2), on free ports, started from the jars ``make jvm``
resolved and stopped by process id at the end. Never skipped: a missing part fails the tests with
the fix in one line.

Both are package-scoped: started by the first test of tests/cluster/ that asks for one and stopped
after the package's last test (in a pytest-xdist run, the last of them its process runs:
tests/conftest.py gives each cluster's tests to one process), so that their JVMs do not sit idle,
taking CPU, while the rest of the suite runs.
``cluster`` is shared by the package's modules (a streaming test's job is cancelled in the job
server's Flink through its REST API, ``streams.running_job``, so its in-process SDK worker threads
end with it: no module needs a cluster of its own; Beam's cancel alone left the job running, and
those threads with it, until the job server went).
``session_cluster`` is a Flink session cluster as deployed (deploy/flink), shared by the package: a
JobManager and two TaskManagers of one slot each, of their own processes, the Python work in a pool
of worker processes (one per TaskManager; no worker threads in the test process, so no module needs
its own); the crash and upgrade tests kill a TaskManager (and start another) and take savepoints, the
stop tests send signals to the command."""
import os

import pytest

from deploy.local import cluster as local_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _started(tmp_path_factory, name, **kw):
    try:
        c = local_cluster.start(str(tmp_path_factory.mktemp(name)), os.path.join(ROOT, local_cluster.JVM_DIR), **kw)
    except local_cluster.ClusterError as err:
        pytest.fail(str(err))
    return c


@pytest.fixture(scope="package")
def cluster(tmp_path_factory):
    c = _started(tmp_path_factory, "cluster")
    yield c
    c.stop()


@pytest.fixture(scope="package")
def session_cluster(tmp_path_factory):
    c = _started(tmp_path_factory, "session_cluster", flink="session", taskmanagers=2, workers=True)
    yield c
    c.stop()
