"""``ldp_marginals.read``'s ``dimensions`` over keys of two dimensions (issue 37, item 2): a filter on
some of a key's dimensions selects every key that holds them, ``{}`` is the key without dimensions, and
a filter that matches no key is a ValueError naming the keys there are (never a silent empty table)."""
import pytest

import ldp_marginals
from tests.batch_runs import keyed_records, run_command

CONFIG = {"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(3)],
          "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 1, "min_reports": 50,
          "window": {"type": "fixed", "size_seconds": 3600},
          "dimensions": {"region": {"max_values": 4}, "version": {"max_values": 4}}}
# reports per key: (eu, 3.0) is below min_reports, so it exists but is withheld
KEYS = {("eu", "1.0"): 120, ("eu", "2.0"): 90, ("us", "1.0"): 100, ("eu", "3.0"): 20}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("read-dimensions")
    run_command(tmp, CONFIG, keyed_records(CONFIG, KEYS, seed=70), ())
    return str(tmp / "out")


def keys_of(rows) -> set:
    return {tuple(sorted(r["dimensions"].items())) for r in rows}


def test_a_filter_on_one_of_two_dimensions_selects_every_key_holding_it(out):
    eu = ldp_marginals.read_rows(out, "marginals", dimensions={"region": "eu"})
    assert keys_of(eu) == {(("region", "eu"), ("version", "1.0")), (("region", "eu"), ("version", "2.0"))}
    # the released keys' reports, each key's rows once per set (max_order 1: three sets of one bit)
    assert sum(r["n_reports"] for r in eu if r["columns"] == [0]) == 120 + 90
    v1 = ldp_marginals.read_rows(out, "marginals", dimensions={"version": "1.0"})
    assert keys_of(v1) == {(("region", "eu"), ("version", "1.0")), (("region", "us"), ("version", "1.0"))}
    whole = ldp_marginals.read_rows(out, "marginals", dimensions={"region": "eu", "version": "2.0"})
    assert keys_of(whole) == {(("region", "eu"), ("version", "2.0"))}
    assert len(ldp_marginals.read_rows(out, "marginals")) == len(eu) + len(
        ldp_marginals.read_rows(out, "marginals", dimensions={"region": "us"}))


def test_a_key_that_exists_but_is_withheld_gives_no_rows_and_withheld_says_so(out):
    small = {"region": "eu", "version": "3.0"}
    assert ldp_marginals.read(out, "marginals", dimensions=small).num_rows == 0
    withheld = ldp_marginals.read_rows(out, "withheld", dimensions=small)
    assert withheld and keys_of(withheld) == {(("region", "eu"), ("version", "3.0"))}


@pytest.mark.parametrize("dimensions", [{"region": "asia"}, {"regoin": "eu"}, {"region": "us", "version": "2.0"}, {}])
def test_a_filter_that_matches_no_key_is_an_error_naming_the_keys(out, dimensions):
    with pytest.raises(ValueError) as err:
        ldp_marginals.read(out, "marginals", dimensions=dimensions)
    message = str(err.value)
    assert f"dimensions={dimensions!r} matches no key" in message
    for region, version in KEYS:
        assert f"{{region={region}, version={version}}}" in message


def test_a_selection_without_rows_is_empty_not_an_error(out):
    # no key to name: another collection, or windows the run has none of
    assert ldp_marginals.read(out, "marginals", collection="other", dimensions={"region": "eu"}).num_rows == 0
    assert ldp_marginals.read(out, "marginals", windows="2030-01-01T00:00", dimensions={"region": "eu"}).num_rows == 0
