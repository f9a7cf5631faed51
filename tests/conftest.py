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
