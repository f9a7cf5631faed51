import json
import math
import re

import fastavro
import pytest
import yaml

from ldp_marginals.ldp.channels import Channel

from ldp_marginals import schemas
from ldp_marginals.schemas.config import load_configs, parse_config
from tests.configs import SMALL_CONFIG


def test_every_schema_parses_and_report_round_trips(tmp_path):
    for name in schemas.NAMES:
        assert schemas.load_schema(name)["type"] == "record"
    report = {"collection": "app", "event_time": 1_767_225_600_123, "bits": b"\x05", "dimensions": {"v": "1.2"},
              "client": None}
    assert schemas.validate("noisy_report", report)
    path = tmp_path / "r.avro"
    schemas.write_avro(path, "noisy_report", [report])
    assert schemas.read_avro(path, "noisy_report") == [report]
    assert schemas.decode_message("noisy_report", schemas.encode_message("noisy_report", report)) == report
    with pytest.raises(ValueError, match="1 trailing bytes"):
        schemas.decode_message("noisy_report", schemas.encode_message("noisy_report", report) + b"\x00")
    # defaults of the contract: dimensions {} and client null
    minimal = {"collection": "app", "event_time": 1, "bits": b"\x00"}
    with open(tmp_path / "w.avro", "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema({"type": "record", "name": "NoisyReport", "namespace": "ldp_marginals",
                                                  "fields": [{"name": "collection", "type": "string"},
                                                             {"name": "event_time", "type": "long"},
                                                             {"name": "bits", "type": "bytes"}]}), [minimal])
    with open(tmp_path / "w.avro", "rb") as fh:
        evolved = list(fastavro.reader(fh, reader_schema=schemas.load_schema("noisy_report")))
    assert evolved[0]["dimensions"] == {} and evolved[0]["client"] is None
    with pytest.raises(ValueError, match=r"name must be one of"):
        schemas.load_schema("nope")


def test_channels_by_feature_name_do_not_shift_when_a_feature_is_added():
    by_name = {"os": {"mechanism": "optimized_unary", "epsilon": 2.0}, "default": {"p": 0.2, "q": 0.8}}
    cfg = parse_config(dict(SMALL_CONFIG, channel=by_name))
    oue = Channel.optimized_unary(2.0)
    assert [(c.p, c.q) for c in cfg.channels.channels] == [(0.2, 0.8)] + [(oue.p, oue.q)] * 3 + [(0.2, 0.8)] * 2
    grown = parse_config(dict(SMALL_CONFIG, features=[{"name": "new", "type": "boolean"}] + SMALL_CONFIG["features"],
                              channel=by_name))
    assert [(c.p, c.q) for c in grown.channels.channels][1:] == [(c.p, c.q) for c in cfg.channels.channels]


def test_config_loads_from_yaml_and_json(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump([SMALL_CONFIG, dict(SMALL_CONFIG, collection="other")]))
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CONFIG))
    both = load_configs(tmp_path / "c.yaml")
    assert sorted(both) == ["app", "other"]
    cfg = load_configs(tmp_path / "c.json")["app"]
    assert cfg.layout.labels == ("dark", "os=mac", "os=win", "os=linux", "beta", "sync")
    assert cfg.channels[0].p == 0.1 and cfg.channels[5].q == 0.75
    assert (0, 4, 5) in cfg.family and (1, 0) in cfg.family
    assert [e.name for e in cfg.report_extremes] == ["any_flag", "all_flags"]
    assert [e.bits for e in cfg.client_extremes] == [(0,)]


@pytest.mark.parametrize("change, match", [
    (dict(max_order=0), r"max_order must be >= 1, got max_order=0"),
    (dict(max_order=9), r"max_order must be <= the 6 bits of the layout, got max_order=9"),
    (dict(min_reports=-1), r"min_reports must be >= 0, got min_reports=-1"),
    (dict(window={"type": "tumbling"}), r"window.type must be one of \['fixed', 'sliding', 'global'\], got type='tumbling'"),
    (dict(window={"type": "fixed", "size_seconds": 0}), r"window.size_seconds must be > 0, got window.size_seconds=0"),
    (dict(window={"type": "sliding", "size_seconds": 60, "period_seconds": 90}),
     r"window.period_seconds must be in \(0, size_seconds\], got period_seconds=90"),
    (dict(channel={"p": 0.6, "q": 0.4}), r"channel: q must be in \(p, 1\], got p=0.6, q=0.4"),
    (dict(channel={"mechanism": "laplace"}), r"channel.mechanism must be one of .* got mechanism='laplace'"),
    (dict(channel=[{"p": 0.1, "q": 0.9}]), r"channel list must have one entry per bit \(6: .*\), got len=1; channels by "
                                           r"feature name"),
    (dict(level=1.2), r"level must be in \(0, 1\), got level=1.2"),
    (dict(sets=[["dark", "os=bsd"]]), r"label must be one of the layout's bit labels, got label='os=bsd'"),
    # the field and the closest labels are named (issue 23)
    (dict(sets=[["dark", "os=Linux"]]), r"sets\[0\]: label must be .* got label='os=Linux' \(did you mean 'os=linux'\?\)"),
    (dict(conditionals=[{"of": ["beta"], "given": ["os=macc"]}]), r"conditionals\[0\].given: .*did you mean 'os=mac'"),
    (dict(conditionals=[{"of": ["beta"], "given": ["beta"]}]),
     r"conditionals\[0\]: of and given share \['beta'\]: a bit given is 1 for certain"),
    (dict(channel={"os": {"p": 0.1, "q": 0.9}}), r"channel names no channel for features \['dark', 'beta', 'sync'\]"),
    (dict(channel={"oss": {"p": 0.1, "q": 0.9}, "default": {"p": 0.2, "q": 0.8}}),
     r"channel.oss: not a feature of the collection; .* \(did you mean 'os'\?\)"),
    (dict(channel={"os": {"p": 0.9, "q": 0.1}, "default": {"p": 0.2, "q": 0.8}}), r"channel.os: q must be in \(p, 1\]"),
    (dict(groups=[["os", "colour"]]), r"feature must be one of .* got feature='colour'"),
    (dict(extremes=[{"name": "x", "op": "xor", "bits": [0]}]), r"extremes.x.op must be 'or' or 'and', got op='xor'"),
    (dict(early_firing_seconds=2.5), r"early_firing_seconds must be an integer, got early_firing_seconds=2.5"),
    (dict(colour="blue"), r"config has unknown keys \['colour'\]"),
    # typos and wrong types anywhere are errors, never ignored (issue 12)
    (dict(channel={"mechanism": "symmetric", "epsilom": 3}), r"channel has unknown keys \['epsilom'\]"),
    (dict(channel={"epsilom": 3}), r"channel has unknown keys \['epsilom'\]; known keys are \['p', 'q'\]"),
    (dict(channel={"mechanism": "symmetric", "flip": 0.1, "epsilon": 1}), r"channel: give one of flip or epsilon"),
    (dict(groups=["a"]), r"groups\[0\] must be a list, got groups\[0\]='a'"),
    (dict(groups="os"), r"groups must be a list, got groups='os'"),
    (dict(sets=[[0, 1.5]]), r"sets\[0\] must list bit labels or indices, got 1.5"),
    (dict(window={"type": "fixed", "size_seconds": 0.0001}),
     r"window.size_seconds must be >= 1 second, got window.size_seconds=0.0001"),
    (dict(window={"type": "fixed", "size": 60}), r"window has unknown keys \['size'\]"),
    (dict(window={"type": "sliding", "size_seconds": 60}), r"window must have 'period_seconds'"),
    (dict(features=[{"name": "a", "type": "boolean", "vales": ["x"]}]), r"features\[0\] has unknown keys \['vales'\]"),
    (dict(extremes=[{"name": "x", "op": "or", "bits": [0], "ovr": "client"}]),
     r"extremes\[0\] has unknown keys \['ovr'\]"),
    (dict(extremes=[{"name": "x", "op": "or"}]), r"extremes\[0\] must give one of features or bits"),
    (dict(dimensions={"region": {"max_value": 5}}), r"dimensions.region has unknown keys \['max_value'\]"),
    (dict(dimensions={"region": {"max_values": 0}}), r"dimensions.region.max_values must be >= 1"),
    (dict(dimensions={"re gion": {}}), r"dimensions keys must match .* got dimension='re gion'"),
    (dict(collection="x/../../../escaped"), r"collection must be 1-64 letters, .* got collection='x/../../../escaped'"),
    (dict(collection=".."), r"got collection='..'"),
    (dict(window={"type": "sliding", "size_seconds": 90, "period_seconds": 60}),
     r"window.size_seconds must be a whole multiple of period_seconds \(60\), got size_seconds=90"),
    (dict(sets=[["dark", "os=mac", "os=win"]]),
     r"sets\[0\] holds \['os=mac', 'os=win'\], values of one categorical feature: its count is 0 by construction"),
    (dict(privacy={"model": "central"}), r"privacy.model must be one of \['local', 'sufficient'\], got model='central'"),
    (dict(privacy={"model": "sufficient"}), r"privacy.epsilon is required for model 'sufficient'"),
    (dict(privacy={"model": "local", "eta": 0.1}), r"privacy.eta is only for model 'sufficient', got eta=0.1"),
    (dict(privacy={"model": "local", "epsilon": 2}),
     r"privacy promises local DP at epsilon=2, but the channels give a whole report epsilon=8.15"),
    (dict(privacy={"model": "sufficient", "epsilon": 1, "epsilom": 1}), r"privacy has unknown keys \['epsilom'\]"),
    # numeric features (issue 15, part 3)
    (dict(features=[{"name": "m", "type": "numeric", "low": 5, "high": 5}]),
     r"features\[0\]: numeric feature 'm' needs low < high, got low=5, high=5"),
    (dict(features=[{"name": "m", "type": "numeric", "high": 5}]), r"features\[0\] must have 'low'"),
    (dict(features=[{"name": "m", "type": "boolean", "low": 0}]),
     r"features\[0\].low and .high are only for numeric features, got type='boolean'"),
    # the field a person wrote is `type` (the feature's attribute is `kind`: not the config's word)
    (dict(features=[{"name": "m", "type": "bool"}]),
     r"^features\[0\].type must be one of \['boolean', 'categorical', 'numeric'\], got type='bool'$"),
    (dict(features=SMALL_CONFIG["features"] + [{"name": "m", "type": "numeric", "low": 0, "high": 1}],
          channel={"p": 0.2, "q": 0.8}, groups=[["os", "m"]]),
     r"groups\[0\] holds numeric feature 'm': numeric features publish means"),
    (dict(features=SMALL_CONFIG["features"] + [{"name": "m", "type": "numeric", "low": 0, "high": 1}],
          channel={"p": 0.2, "q": 0.8}, extremes=[{"name": "x", "op": "or", "bits": ["m", "dark"]}]),
     r"extremes\[0\] holds numeric features \['m'\]"),
    (dict(features=SMALL_CONFIG["features"] + [{"name": "m", "type": "numeric", "low": 0, "high": 1}],
          channel={"p": 0.2, "q": 0.8}, conditionals=[{"of": ["m"], "given": ["dark"]}]),
     r"conditionals\[0\] names numeric features \['m'\]: ask for their \(conditional\) means under means"),
    (dict(means=[{"of": "dark", "by": ["os"]}]), r"means\[0\].of must name a numeric feature, got of='dark'"),
    (dict(features=SMALL_CONFIG["features"] + [{"name": "m", "type": "numeric", "low": 0, "high": 1}],
          channel={"p": 0.2, "q": 0.8}, means=[{"of": "m"}]), r"means\[0\] must give one of given or by"),
    (dict(features=SMALL_CONFIG["features"] + [{"name": "m", "type": "numeric", "low": 0, "high": 1}],
          channel={"p": 0.2, "q": 0.8}, means=[{"of": "m", "given": ["dark", "beta"]}]),
     r"means\[0\] needs the count of \['dark', 'beta', 'm'\], which is not counted: raise max_order to 3"),
    (dict(conditionals="all"), r"conditionals must be a list of \{of, given\} or 'all_pairs', got conditionals='all'"),
    (dict(conditionals="all_pairs", max_order=1, sets=[], groups=[]),
     r"conditionals: all_pairs needs the pairs counted, got max_order=1"),
    (dict(marginal_interval="joint"), r"marginal_interval must be one of \['per_cell', 'simultaneous'\]"),
])
def test_config_errors_name_the_field_and_value(change, match):
    with pytest.raises(ValueError, match=match):
        parse_config(dict(SMALL_CONFIG, **change))


def test_config_mechanisms():
    for spec, p in (({"mechanism": "symmetric", "flip": 0.2}, 0.2),
                    ({"mechanism": "optimized_unary", "epsilon": 1.0}, 1 / (2.718281828459045 + 1)),
                    ({"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75}, 0.25 * 0.75 + 0.75 * 0.25),
                    ({"mechanism": "unrelated_question", "coin_probability": 0.5}, 0.25)):
        assert parse_config(dict(SMALL_CONFIG, channel=spec)).channels[0].p == pytest.approx(p)


@pytest.mark.parametrize("max_order", [4, 40])
def test_accumulators_over_the_memory_budget_are_refused_before_anything_is_built(max_order):
    counts = f"{sum(math.comb(64, k) for k in range(max_order + 1)):,}"  # all sets of up to max_order of 64 bits
    spec = dict(SMALL_CONFIG, features=[{"name": f"b{i}", "type": "boolean"} for i in range(64)],
                channel={"mechanism": "symmetric", "epsilon": 1.0}, max_order=max_order, sets=[], groups=[],
                extremes=[])
    with pytest.raises(ValueError, match=rf"collection 'app': max_order={max_order} on 64 bits needs up to {counts} "
                                         r"counts per window and key \(.* MB\), over the budget of 200,000 counts"):
        parse_config(spec)
    assert len(parse_config(dict(spec, max_order=3)).family) == 43_745  # 64 bits to triples fit


def test_dimensions_are_declared_with_limits_and_defaults():
    cfg = parse_config(dict(SMALL_CONFIG, dimensions={"region": {"max_values": 5}, "app_version": None}))
    assert cfg.dimension_limits["region"].max_values == 5 and cfg.dimension_limits["region"].max_length == 64
    assert cfg.dimension_limits["app_version"].max_values == 100
    assert [d.name for d in cfg.dimensions] == ["app_version", "region"]
    assert cfg.describe()["dimensions"]["region"] == {"max_values": 5, "max_length": 64}
    assert parse_config({k: v for k, v in SMALL_CONFIG.items() if k != "dimensions"}).dimensions == ()


def test_errors_from_a_file_name_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(dict(SMALL_CONFIG, channel={"epsilom": 3})))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: channel has unknown keys"):
        load_configs(path)


def test_a_privacy_promise_refuses_a_too_small_guard_and_accepts_an_adequate_one():
    """sufficient DP at epsilon needs a crowd: the job refuses to start when min_reports is below
    the smallest crowd the channels need (the error names both numbers) and accepts it from there."""
    from ldp_marginals.ldp.privacy import smallest_population
    promise = {"model": "sufficient", "epsilon": 3.0, "eta": 0.01}
    channels = [{"p": 0.3, "q": 0.7}] * 6
    crowd = smallest_population(0.3, 6, math.exp(3.0), 0.01, max_ones=4)
    assert crowd > 1
    with pytest.raises(ValueError, match=f"min_reports={crowd - 1} is below the {crowd:,} reports the privacy promise"):
        parse_config(dict(SMALL_CONFIG, channel=channels, min_reports=crowd - 1, privacy=promise))
    cfg = parse_config(dict(SMALL_CONFIG, channel=channels, min_reports=crowd, privacy=promise))
    assert cfg.privacy.smallest_crowd == crowd and cfg.privacy.flip == pytest.approx(0.3)
    described = cfg.describe()["privacy"]
    assert described == {"model": "sufficient", "epsilon": 3.0, "eta": 0.01, "flip": pytest.approx(0.3),
                         "smallest_crowd": crowd, "epsilon_per_day": None, "epsilon_per_month": None}
    # every bit is held to its own epsilon's symmetric flip, and all bits to the least noisy one
    noisier = parse_config(dict(SMALL_CONFIG, channel=[{"p": 0.3, "q": 0.7}] * 5 + [{"p": 0.2, "q": 0.7}],
                                min_reports=10 ** 9, privacy=promise))
    assert noisier.privacy.flip == pytest.approx(1 / (1 + 0.7 / 0.2)) and noisier.privacy.smallest_crowd > crowd
    local = parse_config(dict(SMALL_CONFIG, min_reports=0, privacy={"model": "local"}))
    assert local.describe()["privacy"]["model"] == "local"


def test_numeric_features_means_and_all_pairs():
    cfg = parse_config(dict(SMALL_CONFIG, channel={"p": 0.2, "q": 0.8}, conditionals="all_pairs",
                            features=SMALL_CONFIG["features"] + [{"name": "m", "type": "numeric", "low": 0, "high": 9}],
                            means=[{"of": "m", "by": ["os"]}, {"of": "m", "given": ["dark"]},
                                   {"of": "m", "by": ["dark"]}]))
    labels = cfg.layout.labels
    assert labels[-1] == "m" and cfg.layout.numeric_bits == (6,)
    assert cfg.describe()["numeric"] == {"m": {"low": 0.0, "high": 9.0}}
    # the mean over all reports first, then one per value of os, then dark (once, though asked twice)
    assert [(labels[b], [labels[g] for g in given]) for b, given in cfg.means] == [
        ("m", []), ("m", ["os=mac"]), ("m", ["os=win"]), ("m", ["os=linux"]), ("m", ["dark"])]
    # all pairs: every bit given every bit of another non-numeric feature (6 bits; os's 3 exclude each other)
    pairs = {(labels[a[0]], labels[b[0]]) for a, b in cfg.conditionals}
    assert len(pairs) == len(cfg.conditionals) == 6 * 5 - 3 * 2
    assert ("dark", "os=mac") in pairs and ("os=mac", "dark") in pairs and ("os=mac", "os=win") not in pairs
    assert not any("m" in pair for pair in pairs)


def test_readers_take_an_estimates_latest_pane_and_every_dead_letter_pane():
    from ldp_marginals.schemas.outputs import DEAD_LETTERS, MARGINALS, make_entry, manifest_files
    window = (0, 10)
    files = [make_entry(MARGINALS, "c", window, pane, 3) for pane in (1, 0)]
    files += [make_entry(MARGINALS, "d", window, 0, 3)]
    files += [make_entry(DEAD_LETTERS, "all", None, pane, 1) for pane in (0, 1)]
    manifest = {"files": files}
    # an estimate pane holds the window so far; a streaming dead-letter pane holds what came since the last
    assert [(e["group"], e["pane"]) for e in manifest_files(manifest, MARGINALS)] == [("c", 1), ("d", 0)]
    assert [e["pane"] for e in manifest_files(manifest, DEAD_LETTERS)] == [0, 1]
    assert files[0]["files"] == {"avro": "marginals/19700101T000000000Z_19700101T000000010Z_c_pane001.avro",
                                 "parquet": "parquet/marginals/c/19700101T000000000Z_19700101T000000010Z_c_pane001.parquet"}
