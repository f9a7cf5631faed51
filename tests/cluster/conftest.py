"""The local cluster for the tests marked ``flink`` and ``kafka``: a Kafka broker (KRaft) and Beam's
Flink job server (local Flink, parallelism 2), on free ports, started from the jars ``make jvm``
resolved and stopped by process id at the end. Never skipped: a missing part fails the tests with
the fix in one line.

``cluster`` is shared by the session (a streaming test's job is cancelled in the job server's Flink
through its REST API, ``streams.running_job``, so its in-process SDK worker threads end with it: no
module needs a cluster of its own; Beam's cancel alone left the job running, and those threads with
it, until the job server went).
``session_cluster`` is a Flink session cluster as deployed (deploy/flink), shared by the session: a
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


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    c = _started(tmp_path_factory, "cluster")
    yield c
    c.stop()


@pytest.fixture(scope="session")
def session_cluster(tmp_path_factory):
    c = _started(tmp_path_factory, "session_cluster", flink="session", taskmanagers=2, workers=True)
    yield c
    c.stop()
