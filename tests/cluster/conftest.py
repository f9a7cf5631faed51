"""The local cluster for the tests marked ``flink`` and ``kafka``: a Kafka broker (KRaft) and Beam's
Flink job server (local Flink, parallelism 2), on free ports, started from the jars ``make jvm``
resolved and stopped by process id at the end. Never skipped: a missing part fails the tests with
the fix in one line.

``cluster`` is shared by the session (under pytest-xdist, by one worker's session: each worker
that runs a test of it starts its own, on free ports in its own temporary folder): its jobs' Python
work runs in a pool of worker processes (``workers=True``), as deployed. (It ran in the test process
once, LOOPBACK: a cancelled streaming job's SDK harness threads, read_state, run_worker_* and
read_grpc_client_inputs, lived on in pytest and failed when the job server closed their streams,
during whichever test ran then.) ``session_cluster`` is a Flink session cluster as deployed
(deploy/flink), shared by the session: a JobManager and two TaskManagers of one slot each, of their
own processes, and the worker pool; the crash and upgrade tests kill a TaskManager (and start
another) and take savepoints, the stop tests send signals to the command. After every test here no
SDK harness thread is left in the test process (:func:`no_sdk_harness_threads`)."""
import os
import re
import threading

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
    c = _started(tmp_path_factory, "cluster", workers=True)
    yield c
    c.stop()


@pytest.fixture(scope="session")
def session_cluster(tmp_path_factory):
    c = _started(tmp_path_factory, "session_cluster", flink="session", taskmanagers=2, workers=True)
    yield c
    c.stop()


# Beam's names for an SDK harness's threads (worker_pool_main, sdk_worker, data_plane): a harness
# running in this process (LOOPBACK) would have them
SDK_HARNESS_THREADS = re.compile(r"read_state|run_worker_|read_grpc_client_inputs")


@pytest.fixture(autouse=True)
def no_sdk_harness_threads():
    """Fails a test that leaves an SDK harness's threads alive in the test process."""
    yield
    left = sorted(t.name for t in threading.enumerate() if t.is_alive() and SDK_HARNESS_THREADS.match(t.name))
    assert not left, f"Beam SDK harness threads left in the test process: {left}"
