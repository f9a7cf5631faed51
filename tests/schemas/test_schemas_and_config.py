import json

import fastavro
import pytest
import yaml

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
    (dict(channel=[{"p": 0.1, "q": 0.9}]), r"channel list must have one entry per bit \(6\), got len=1"),
    (dict(level=1.2), r"level must be in \(0, 1\), got level=1.2"),
    (dict(sets=[["dark", "os=bsd"]]), r"label must be one of the layout's bit labels, got label='os=bsd'"),
    (dict(groups=[["os", "colour"]]), r"feature must be one of .* got feature='colour'"),
    (dict(extremes=[{"name": "x", "op": "xor", "bits": [0]}]), r"extremes.x.op must be 'or' or 'and', got op='xor'"),
    (dict(early_firing_seconds=2.5), r"early_firing_seconds must be an integer, got early_firing_seconds=2.5"),
    (dict(colour="blue"), r"config has unknown keys \['colour'\]"),
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
