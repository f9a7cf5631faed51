"""The local cluster for the tests marked ``flink`` and ``kafka``: a Kafka broker (KRaft) and Beam's
Flink job server (local Flink, parallelism 2), on free ports, started once per session from the
jars ``make jvm`` resolved and stopped by process id at the end. Never skipped: a missing part fails
the tests with the fix in one line."""
import os

import pytest

from ldp_marginals.pipelines import local_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    try:
        c = local_cluster.start(str(tmp_path_factory.mktemp("cluster")), os.path.join(ROOT, local_cluster.JVM_DIR))
    except local_cluster.ClusterError as err:
        pytest.fail(str(err))
    yield c
    c.stop()
