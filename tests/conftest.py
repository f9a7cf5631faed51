import os

import pytest
from hypothesis import HealthCheck, settings

from ldp_marginals.schemas.config import parse_config
from tests.configs import SMALL_CONFIG

# Hypothesis profiles. `make test`, and so CI (.ci/run runs `make test`), selects "ci" with
# --hypothesis-profile=ci: derandomized (every run tries the same examples, seeded from each test),
# no example database, a failure printed with the blob that reproduces it. A bare `pytest` loads
# "dev": Hypothesis's random exploration. Neither has a deadline or the too-slow health check: a
# test never asserts wall-clock times.
_UNTIMED = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
# "dev" is explicitly random: Hypothesis loads its own derandomized "ci" settings as the default
# when it sees a CI environment (CI, GITHUB_ACTIONS, ...), and a profile inherits the default.
settings.register_profile("dev", derandomize=False, **_UNTIMED)
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, **_UNTIMED)
settings.load_profile("dev")


@pytest.fixture
def small_config():
    return parse_config(SMALL_CONFIG)


# The kinds of slow test (pyproject's markers): they wait on clusters, watermarks, browsers and pip.
SLOW_MARKERS = ("flink", "kafka", "browser", "plain_install")
# The tests of tests/cluster/ (conftest.py there) on its Flink session cluster (node id
# prefixes); the others there run on its local cluster. A pytest-xdist run (`make test`) gives each of
# the two groups to one worker (ClusterScheduling), so that each cluster is started once, as in one
# process. Checked against the tests' fixtures at collection: a test missing here fails the run.
SESSION_CLUSTER_TESTS = ("tests/cluster/test_flink_recovery.py::",
                         "tests/cluster/test_stop_and_resume.py::test_ctrl_c_and_sigterm_stop_the_flink_job_and_it_",
                         "tests/cluster/test_team_path.py::")
CLUSTER_DIR = "tests/cluster/"
# tests/cluster/ modules that start a cluster of their own (as `make cluster-up` does): their own work unit, so
# that they run beside the two groups instead of after them on the local cluster's worker
OWN_CLUSTER_MODULES = ("tests/cluster/test_cluster_up_resume.py",)


def _module(nodeid: str) -> str:
    return nodeid.split("::")[0]


def _work_unit(nodeid: str) -> str:
    """A test's unit of work in a pytest-xdist run: its module, or the cluster group it is in."""
    if nodeid.startswith(SESSION_CLUSTER_TESTS):
        return "the session cluster's tests"
    if nodeid.startswith(CLUSTER_DIR) and _module(nodeid) not in OWN_CLUSTER_MODULES:
        return "the local cluster's tests"
    return _module(nodeid)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the cluster groups of :func:`_work_unit` (xdist's ``loadgroup``, which
    could group tests by a mark, does nothing on pytest 9: it renames items by an attribute pytest 9
    no longer reads). Other ``--dist`` modes are xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ClusterScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    return ClusterScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """The order of the work units of a pytest-xdist run (``make test``: ``--dist loadfile``, a test
    module to one worker, so its module-scoped fixtures, a venv, a month of windows, are built once
    there, and each cluster's tests to one worker, :func:`_work_unit`): the session cluster's tests
    first (the longest), then the local cluster's, then the other modules holding slow tests, so that
    their waiting overlaps the CPU-bound rest instead of ending the run."""
    on_session = {item.nodeid for item in items if "session_cluster" in item.fixturenames}
    listed = {item.nodeid for item in items if item.nodeid.startswith(SESSION_CLUSTER_TESTS)}
    if on_session != listed:
        raise pytest.UsageError("tests/conftest.py: SESSION_CLUSTER_TESTS must name exactly the tests that use the "
                                f"session_cluster fixture; these differ: {sorted(on_session ^ listed)}")
    if not os.environ.get("PYTEST_XDIST_WORKER"):   # a run in one process keeps the collection order
        return
    slow = {_module(item.nodeid) for item in items if any(item.get_closest_marker(m) for m in SLOW_MARKERS)}
    items.sort(key=lambda item: (item.nodeid not in on_session, not item.nodeid.startswith(CLUSTER_DIR),
                                 _module(item.nodeid) not in slow))
