"""The dimension cap (transforms/publication/cap.py): per window and dimension the heaviest values up to
max_values keep their name, the others count under __other__; decisions are sticky, so a window never
lists more than max_values values of a dimension over all its panes, a value never moves between keys,
and batch (one decision) and streaming without late data decide alike."""
from unittest import mock

import numpy as np

from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication import clock
from ldp_marginals.transforms.publication.cap import OTHER, capped, decide, value_weights
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US
from tests.configs import SMALL_CONFIG
from tests.transforms import publication_model as model
from tests.transforms.local_stream import LocalStream
from tests.transforms.test_engine import accumulator

TWO = parse_config(dict(SMALL_CONFIG, dimensions={"region": {"max_values": 2}, "app": {"max_values": 1}}))


def test_batch_keeps_the_heaviest_values_of_each_dimension_ties_by_value():
    weights = value_weights({(("app", "1"), ("region", "eu")): 5, (("app", "2"), ("region", "us")): 5,
                             (("app", "2"), ("region", "ap")): 4, (("app", "1"), ("region", "sa")): 4})
    decided = decide(TWO, {}, weights)
    assert decided == {"app": {"1": True, "2": False}, "region": {"eu": True, "us": True, "ap": False, "sa": False}}
    # ap and sa weigh 4 each; eu and us 5: kept. app 1 and 2 weigh 9 each: the tie goes to "1"
    assert capped((("app", "2"), ("region", "ap")), decided) == (("app", OTHER), ("region", OTHER))
    assert capped((("app", "1"), ("region", "us")), decided) == (("app", "1"), ("region", "us"))
    # a dimension with no more values than max_values keeps them all
    assert decide(TWO, {}, value_weights({(("region", "eu"),): 1, (("region", "us"),): 9})) == {
        "region": {"eu": True, "us": True}}


def test_decisions_are_sticky_and_later_values_take_only_the_room_left():
    first = decide(TWO, {}, value_weights({(("region", "eu"),): 1}))
    later = decide(TWO, first, value_weights({(("region", "eu"),): 1, (("region", "us"),): 50,
                                              (("region", "ap"),): 90}))
    assert later["region"] == {"eu": True, "ap": True, "us": False}   # eu stays; one place left, for the heaviest
    assert decide(TWO, later, value_weights({(("region", "us"),): 10 ** 6}))["region"]["us"] is False
    assert first == {"region": {"eu": True}}   # not modified


def test_a_late_heavy_value_goes_under_other_and_the_kept_keys_never_change():
    """Streaming: on time eu 30, us 20, ap 10 (max 2: ap under __other__); late, sa 90 reports. sa joins
    __other__ (no room), eu's and us's keys hold the same reports in every pane, and each report is in
    exactly one key's latest pane."""
    cfg = parse_config(dict(SMALL_CONFIG, min_reports=5, window={"type": "fixed", "size_seconds": 60},
                            allowed_lateness_seconds=60, dimensions={"region": {"max_values": 2}}))
    for seed in range(3):
        stream = LocalStream(cfg, np.random.default_rng(seed))
        for i, (region, n) in enumerate([("eu", 30), ("us", 20), ("ap", 10)]):
            stream.partial(0, (("region", region),), accumulator(cfg, n, i), f"p{i}")
        stream.advance(60_000_000 - 1)
        stream.deliver(everything=False)
        stream.partial(0, (("region", "sa"),), accumulator(cfg, 90, 9), "late")
        stream.advance(END_OF_TIME_US)
        stream.deliver()
        latest = {}
        for f in stream.panes:
            if f.kind == "marginals":
                latest.setdefault(dict(f.key)["region"], []).append((f.pane, f.timing, list(f.rows)[0]["n_reports"]))
        # each key's close repeats its last pane's rows (the final answer, docs/design.md)
        assert latest == {"eu": [(0, "on_time", 30), (1, "closed", 30)], "us": [(0, "on_time", 20), (1, "closed", 20)],
                          OTHER: [(0, "on_time", 10), (1, "late", 100), (2, "closed", 100)]}


def _listed(s) -> dict:
    """{window: values of k listed in any pane} of a scenario's streaming run."""
    _, out = model.run(s)
    listed = {}
    for f in out.panes:
        listed.setdefault(f.window, set()).add(dict(f.key)["k"])
    return listed


def _over_cap(rng, n=300) -> str | None:
    for _ in range(n):
        s = model.random_scenario(rng)
        for window, values in _listed(s).items():
            if len(values - {OTHER}) > s.max_values:
                return f"window {window} listed {sorted(values)} with max_values={s.max_values}"
    return None


def test_no_window_lists_more_than_max_values_values_over_all_its_panes():
    assert _over_cap(np.random.default_rng(8)) is None


def test_a_cap_decided_again_at_each_pane_is_caught():
    """The mutation: decisions not sticky (each event decides the window's values afresh). A value that
    outweighs a kept one later then gets a key of its own beside it, past max_values."""
    with mock.patch.object(clock, "decide", lambda config, decided, weights: decide(config, {}, weights)):
        assert _over_cap(np.random.default_rng(8)) is not None
