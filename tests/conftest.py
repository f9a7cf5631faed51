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


def pytest_collection_modifyitems(config, items):
    """The order of the work units of a pytest-xdist run (`make test TEST_WORKERS=3`, ``--dist loadfile``: a test
    module to one worker, so its module- and session-scoped fixtures, a venv, a month of windows, a
    cluster, are built once there): the modules holding slow tests first, those of the Flink session
    cluster (the longest) first of all, so that their waiting overlaps the CPU-bound rest instead of
    ending the run. (xdist's ``loadgroup``, which could keep the session cluster's two modules on one
    worker, does nothing on pytest 9: it renames items by an attribute pytest 9 no longer reads.)"""
    def module(item):
        return item.nodeid.split("::")[0]

    if not os.environ.get("PYTEST_XDIST_WORKER"):   # a run in one process keeps the collection order
        return
    session = {module(item) for item in items if "session_cluster" in item.fixturenames}
    slow = {module(item) for item in items if any(item.get_closest_marker(m) for m in SLOW_MARKERS)}
    items.sort(key=lambda item: (module(item) not in session, module(item) not in slow))
