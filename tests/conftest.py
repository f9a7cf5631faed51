import pytest

from ldp_marginals.schemas.config import parse_config
from tests.configs import SMALL_CONFIG


@pytest.fixture
def small_config():
    return parse_config(SMALL_CONFIG)
