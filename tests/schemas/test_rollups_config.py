"""A collection's ``rollups`` (issue 37, item 2): ``all`` or a list of dimension subsets, none by default;
each mistake a ValueError naming the field; the rollup marker refused as a report's dimension value
where rollups are declared; accepted in streaming, and a resume from a savepoint that adds or drops
them refused naming them."""
import pytest

from ldp_marginals.pipelines.job import JobOptions
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.dead_letters import RESERVED_DIMENSION_VALUE

BASE = {"collection": "app", "features": [{"name": "a", "type": "boolean"}], "channel": {"p": 0.25, "q": 0.75},
        "max_order": 1, "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 50,
        "dimensions": {"region": {}, "version": {}, "os": {}}}


def with_(**more):
    return dict(BASE, **more)


def test_no_rollups_by_default():
    cfg = parse_config(BASE)
    assert cfg.rollups == () and cfg.describe()["rollups"] == []
    assert cfg.dimension_fault({"region": "__all__"}) is None   # without rollups the value means nothing


def test_all_is_every_proper_subset_and_a_list_is_sorted():
    cfg = parse_config(with_(rollups="all"))
    assert cfg.rollups == ((), ("os",), ("region",), ("version",), ("os", "region"), ("os", "version"),
                           ("region", "version"))
    cfg = parse_config(with_(rollups=[["version", "region"], []]))
    assert cfg.rollups == (("region", "version"), ()) and cfg.describe()["rollups"] == [["region", "version"], []]


@pytest.mark.parametrize("rollups, message", [
    ([["regoin"]], r"rollups\[0\] names dimensions \['regoin'\] that are not declared"),
    ([["os", "region", "version"]], r"rollups\[0\] must keep a proper subset"),
    ([["region", "region"]], r"rollups\[0\] must keep a proper subset .* each once"),
    ([["region"], ["region"]], r"rollups must be distinct"),
    (["region"], r"rollups\[0\] must be a list of dimension names"),
    ([[1]], r"rollups\[0\] must list dimension names"),
    ("some", r"rollups must be a list"),
])
def test_each_mistake_is_a_value_error_naming_the_field(rollups, message):
    with pytest.raises(ValueError, match=message):
        parse_config(with_(rollups=rollups))


def test_rollups_need_dimensions_and_fixed_or_global_windows():
    with pytest.raises(ValueError, match="rollups: all needs dimensions"):
        parse_config({k: v for k, v in with_(rollups="all").items() if k != "dimensions"})
    with pytest.raises(ValueError, match="rollups need fixed or global windows"):
        parse_config(with_(rollups="all", window={"type": "sliding", "size_seconds": 7200, "period_seconds": 3600}))
    assert parse_config(with_(rollups="all", window={"type": "global"})).rollups


def test_the_marker_is_a_reserved_value_where_rollups_are_declared():
    cfg = parse_config(with_(rollups=[[]]))
    reason, detail = cfg.dimension_fault({"region": "eu", "version": "__all__"})
    assert reason == RESERVED_DIMENSION_VALUE and "'version'" in detail and "rollup" in detail
    assert cfg.dimension_fault({"region": "eu", "version": "all"}) is None


def test_streaming_accepts_rollups_and_a_resume_that_changes_them_is_refused_naming_them(tmp_path):
    from ldp_marginals.pipelines.run import check_resumable, write_state_shapes
    rolled, plain = parse_config(with_(rollups=[["region"]])), parse_config(BASE)
    assert JobOptions({"app": rolled}, streaming=True).configs
    write_state_shapes(str(tmp_path), {"app": plain})
    with pytest.raises(ValueError, match=r"rollups changed: saved rollups=None; this config has rollups=\[\['region'\]\]"):
        check_resumable(str(tmp_path), {"app": rolled}, "sp")
    check_resumable(str(tmp_path), {"app": plain}, "sp")
