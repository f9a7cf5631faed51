"""channel: {kind: hadamard} and {kind: subset} in a collection config (schemas/channel_kinds.py): what it builds, and a
ValueError naming the field for everything it refuses."""
import pytest

from ldp_marginals.ldp.hadamard_reports import HadamardAggregator
from ldp_marginals.ldp.subset_reports import SubsetAggregator
from ldp_marginals.ldp.subset_rr import best_width
from ldp_marginals.schemas.config import parse_config


def spec(**changes):
    base = {"collection": "survey", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(7)],
            "channel": {"kind": "hadamard", "epsilon": 2.0}, "max_order": 3,
            "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 1000}
    base.update(changes)
    return base


def test_a_hadamard_collection():
    cfg = parse_config(spec(groups=[["q0", "q1", "q2"]], privacy={"model": "local", "epsilon": 2.0}))
    assert cfg.channel_kind == "hadamard"
    assert (cfg.sampling.n_bits, cfg.sampling.max_order, cfg.sampling.epsilon, cfg.sampling.slots,
            cfg.sampling.weights) == (7, 3, 2.0, 1, "sqrt")
    assert (cfg.wire.n_bits, cfg.wire.n_bytes) == (7, 1)
    assert isinstance(cfg.aggregator, HadamardAggregator)
    assert len(cfg.published_sets) == 63
    d = cfg.describe()
    assert d["channel"] == {"kind": "hadamard", "epsilon": 2.0, "slots": 1, "weights": "sqrt", "coefficients": 63,
                            "report_bits": 7, "memoize": False}
    assert d["local_epsilon"] == 2.0 and d["mechanisms"] == ["hadamard"] * 7
    inpht = parse_config(spec(channel={"kind": "hadamard", "epsilon": 8, "slots": 1, "weights": "uniform"}))
    assert (inpht.sampling.slots, inpht.sampling.weights, inpht.wire.n_bytes) == (1, "uniform", 1)
    assert parse_config(spec(channel={"kind": "hadamard", "epsilon": 8})).sampling.slots == 4
    per_bit = parse_config(spec(channel={"mechanism": "symmetric", "epsilon": 1.0}))
    assert per_bit.channel_kind == "per_bit" and per_bit.wire is per_bit.layout and "channel" not in per_bit.describe()


@pytest.mark.parametrize("changes,message", [
    ({"channel": {"kind": "walsh", "epsilon": 1}}, r"channel.kind must be one of \['hadamard', 'subset'\], got kind='walsh'"),
    ({"channel": {"kind": "hadamard"}}, "channel of kind 'hadamard' must have 'epsilon'"),
    ({"channel": {"kind": "hadamard", "epsilon": 0}}, "channel.epsilon"),
    ({"channel": {"kind": "hadamard", "epsilon": 1, "p": 0.1}}, r"channel has unknown keys \['p'\]"),
    ({"channel": {"kind": "hadamard", "epsilon": 1, "slots": 0}}, "channel.slots"),
    ({"channel": {"kind": "hadamard", "epsilon": 1, "weights": "cube"}}, "channel.weights must be one of"),
    ({"privacy": {"model": "sufficient", "epsilon": 1}}, "privacy.model must be 'local' with channel kind"),
    # a day's promise is enforced from the device bounds (24 hourly slices x M = 1 x epsilon 2 = 48)
    ({"privacy": {"unit": "device", "model": "local", "epsilon_per_day": 47}},
     r"privacy promises epsilon_per_day=47, but the job publishes up to 24 reports of one device a day .*"
     r"epsilon_per_day=48 with these channels \(epsilon_1=2, epsilon_infinity=infinite\)"),
    ({"privacy": {"model": "local", "epsilon": 1.5}}, "promises local DP at epsilon=1.5, but the channel gives"),
])
def test_refusals_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        parse_config(spec(**changes))


def test_a_hadamard_collection_holds_at_most_2_18_coefficients():
    """62 bits at max_order 4 sample among 597,618 coefficients: every window would keep 2 counts of each
    and every client would enumerate them, so the config is refused naming max_order; 3 (39,773) is kept."""
    wide = [{"name": f"q{i}", "type": "boolean"} for i in range(62)]
    with pytest.raises(ValueError, match=r"597,618 coefficients .* got max_order=4"):
        parse_config(spec(features=wide, max_order=4))
    assert parse_config(spec(features=wide, max_order=3)).sampling.n_coefficients == 39773


def test_a_subset_collection():
    cfg = parse_config(spec(channel={"kind": "subset", "epsilon": 4.0}, groups=[["q0", "q1", "q2"]],
                            privacy={"model": "local", "epsilon": 4.0}))
    assert cfg.channel_kind == "subset"
    assert (cfg.sampling.n_bits, cfg.sampling.max_order, cfg.sampling.epsilon, cfg.sampling.width) == (7, 3, 4.0, 6)
    assert cfg.sampling.width == best_width(7, 3, 4.0)
    assert (cfg.wire.n_bits, cfg.wire.n_bytes) == (13, 2)
    assert isinstance(cfg.aggregator, SubsetAggregator)
    assert len(cfg.published_sets) == 63
    d = cfg.describe()
    # cells: 7 * 2 + 21 * 4 + 35 * 8 = 378
    assert d["channel"] == {"kind": "subset", "epsilon": 4.0, "width": 6, "keep": cfg.sampling.p, "cells": 378,
                            "report_bits": 13, "memoize": False}
    assert d["local_epsilon"] == 4.0 and d["mechanisms"] == ["subset"] * 7
    margps = parse_config(spec(channel={"kind": "subset", "epsilon": 1, "width": 3}))
    assert (margps.sampling.width, margps.wire.n_bytes) == (3, 2)


@pytest.mark.parametrize("changes,message", [
    ({"channel": {"kind": "subset"}}, "channel of kind 'subset' must have 'epsilon'"),
    ({"channel": {"kind": "subset", "epsilon": -1}}, "channel.epsilon"),
    ({"channel": {"kind": "subset", "epsilon": 1, "slots": 2}}, r"channel has unknown keys \['slots'\]; known keys for kind 'subset'"),
    ({"channel": {"kind": "subset", "epsilon": 1, "width": 2}}, r"channel.width must be in \[max_order=3, 7 bits\], got width=2"),
    ({"channel": {"kind": "subset", "epsilon": 1, "width": 8}}, r"channel.width must be in \[max_order=3, 7 bits\], got width=8"),
    ({"channel": {"kind": "subset", "epsilon": 1, "width": 4.5}}, "channel.width"),
    ({"channel": {"kind": "subset", "epsilon": 1}, "privacy": {"model": "sufficient", "epsilon": 1}},
     "privacy.model must be 'local' with channel kind 'subset'"),
    ({"channel": {"kind": "subset", "epsilon": 1}, "privacy": {"unit": "device", "model": "local",
                                                               "epsilon_per_month": 700}},
     r"privacy promises epsilon_per_month=700, but the job publishes up to 720 reports .*epsilon_per_month=720"),
    ({"channel": {"kind": "subset", "epsilon": 2}, "privacy": {"model": "local", "epsilon": 1.5}},
     "promises local DP at epsilon=1.5, but the channel gives"),
    ({"channel": {"kind": "subset", "epsilon": 1, "width": 3}, "groups": [["q0", "q1", "q2", "q3"]]},
     r"channel kind 'subset' at width=3 cannot estimate the table of \['q0', 'q1', 'q2', 'q3'\] \(4 bits.*"
     r"\[limit of the privacy math.*rule kind-subset-width\]; instead: raise channel.width"),
    ({"channel": {"kind": "subset", "epsilon": 1, "width": 3},
      "extremes": [{"name": "any", "op": "or", "bits": ["q0", "q1", "q2", "q3"]}]}, r"rule kind-subset-width"),
])
def test_subset_refusals_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        parse_config(spec(**changes))


# issue 48 item 1: what both kinds refused before (rules kind-analyses, kind-analyses-over-order,
# kind-groups-over-order: each case was a refusal of test_refusals_name_the_field / test_subset_refusals_name_the_field)
# is counted as an extra set: the wider table is in the kind's family and published
WIDER = [
    ({"conditionals": [{"of": ["q0", "q1"], "given": ["q2", "q3"]}]}, (0, 1, 2, 3)),
    ({"sets": [["q0", "q1", "q2", "q3"]]}, (0, 1, 2, 3)),
    ({"groups": [["q0", "q1", "q2", "q3"]]}, (0, 1, 2, 3)),
    ({"extremes": [{"name": "any", "op": "or", "bits": ["q0", "q1", "q2", "q4"]}]}, (0, 1, 2, 4)),
    ({"extremes": [{"name": "any", "op": "or", "bits": ["q0", "q1", "q2", "q4"], "over": "client"}]}, (0, 1, 2, 4)),
    ({"features": [{"name": "q0", "type": "boolean"}, {"name": "x", "type": "numeric", "low": 0, "high": 1}],
      "max_order": 1, "means": [{"of": "x", "given": ["q0"]}]}, (0, 1)),
]


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
@pytest.mark.parametrize("changes,wide", WIDER)
def test_wider_tables_are_extra_sets_of_the_kind(kind, changes, wide):
    cfg = parse_config(spec(channel={"kind": kind, "epsilon": 1.0}, **changes))
    numeric = bool(set(wide) & set(cfg.layout.numeric_bits))   # a mean's set: counted, published as the mean
    assert cfg.sampling.sets == (wide,) and wide in cfg.family and (wide in cfg.published_sets) != numeric
    assert cfg.sampling.family == cfg.family == cfg.aggregator.mechanism.family
    if kind == "subset":
        assert cfg.sampling.width >= len(wide)
    assert cfg.describe()["channel"]["extra_sets"] == [[cfg.layout.labels[b] for b in wide]]
    plain = parse_config(spec(channel={"kind": kind, "epsilon": 1.0}, max_order=changes.get("max_order", 3),
                              features=changes.get("features", spec()["features"])))
    assert plain.sampling.sets == () and "extra_sets" not in plain.describe()["channel"]


def test_a_hadamard_pool_of_extra_sets_is_capped_for_the_clients():
    """A set of 21 bits has 2^21 subsets, over the 2^20 a client enumerates: refused naming the sets."""
    wide = [{"name": f"q{i}", "type": "boolean"} for i in range(21)]
    with pytest.raises(ValueError, match=r"extra sets wider than max_order=2 hold 2,097,152 subsets"):
        parse_config(spec(features=wide, max_order=2, sets=[[f"q{i}" for i in range(21)]]))


@pytest.mark.parametrize("channel", [{"kind": "hadamard", "epsilon": 1}, {"kind": "subset", "epsilon": 1}])
def test_the_whole_report_kinds_take_rollups(channel):
    """Rule kind-rollups is lifted (issue 48 item 4): a rollup withholds the rows its keys' thin rows would
    give back (transforms/publication/kind_rollups.py, tests/pipelines/test_rollups_kinds.py)."""
    cfg = parse_config(spec(channel=channel, dimensions={"region": {}}, rollups="all"))
    assert cfg.rollups == ((),)


def test_a_subset_collection_holds_at_most_2_19_counts_and_2_12_tables_per_report():
    """62 bits at max_order 4 have 9,235,768 cells (refused, naming max_order); at 3, 310,248 are kept. A width
    of 30 at max_order 3 holds 4,525 tables per report (refused, naming channel.width); 29 holds 4,089."""
    wide = [{"name": f"q{i}", "type": "boolean"} for i in range(62)]
    with pytest.raises(ValueError, match=r"9,235,768 cells .* got max_order=4"):
        parse_config(spec(features=wide, max_order=4, channel={"kind": "subset", "epsilon": 1, "width": 4}))
    cfg = parse_config(spec(features=wide, max_order=3, channel={"kind": "subset", "epsilon": 1, "width": 29}))
    assert cfg.describe()["channel"]["cells"] == 310248
    with pytest.raises(ValueError, match=r"width=30 holds 4,525 tables .* lower channel.width"):
        parse_config(spec(features=wide, max_order=3, channel={"kind": "subset", "epsilon": 1, "width": 30}))


@pytest.mark.parametrize("channel", [{"kind": "hadamard", "epsilon": 2}, {"kind": "subset", "epsilon": 2}])
def test_the_device_unit_is_accepted_and_described(channel):
    """Issue 48 item 2 (refused before: "privacy.unit must be 'report' with channel kind ..."): the kind's
    aggregator bounds each device at max_reports_per_device, keyed by the collection, and describe says so."""
    cfg = parse_config(spec(channel=channel, privacy={"unit": "device", "max_reports_per_device": 3,
                                                      "model": "local", "epsilon": 2}))
    assert cfg.aggregator.device_bound == 3 and cfg.aggregator.collection_key != 0
    d = cfg.describe()
    assert (d["unit"], d["max_reports_per_device"], d["max_keys_per_device"]) == ("device", 3, 1)
