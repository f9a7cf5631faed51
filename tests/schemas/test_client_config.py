"""``ldp-marginals client-config`` (issue 49 item 1): the JSON the devices read, written from the collection
config, for every kind. The Python reference client reads it unchanged; the channel it makes (the composition
of a memoized bit's two stages) is the channel the job inverts; reports carry the device token exactly when
the job needs it; and the collector's screen (the job's checks) accepts every report made from it.
tests/clients/test_client_config_clients.py gives the same JSON to the JVM and TypeScript clients."""
import hashlib
import json

import pytest
import yaml

from ldp_marginals.ldp.client import ClientSpec, DeviceClient
from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.ldp.device import device_token
from ldp_marginals.ldp.hadamard_client import HadamardClientSpec, HadamardDeviceClient
from ldp_marginals.ldp.subset_client import SubsetClientSpec, SubsetDeviceClient
from ldp_marginals.pipelines import cli
from ldp_marginals.pipelines.admission import screen_body, screen_singles
from ldp_marginals.schemas import encode_message
from ldp_marginals.schemas.config import parse_config
from tests.client_configs import CONFIGS, values_of

T0 = 1_767_225_600_000   # 2026-01-01T00:00Z
DEVICES = 24
CLIENTS = {"channels": (ClientSpec, DeviceClient), "hadamard": (HadamardClientSpec, HadamardDeviceClient),
           "subset": (SubsetClientSpec, SubsetDeviceClient)}


def written(tmp_path, capsys, name: str) -> dict:
    """The client config ``ldp-marginals client-config`` prints for collection ``name`` of a YAML file
    holding every collection of CONFIGS."""
    path = tmp_path / "collections.yaml"
    path.write_text(yaml.safe_dump(list(CONFIGS.values())))
    capsys.readouterr()
    assert cli.main(["client-config", "--config", str(path), "--collection", name]) == 0
    return json.loads(capsys.readouterr().out)


def kind_of(config: dict) -> str:
    return next(k for k in CLIENTS if k in config)


def reports(config: dict, name: str, devices: int = DEVICES) -> list:
    """The Avro bytes of one report per device, made by the Python reference client from ``config``."""
    spec_cls, client_cls = CLIENTS[kind_of(config)]
    spec = spec_cls.from_json(config)
    out = []
    for i in range(devices):
        secret = hashlib.sha256(f"secret-{i}".encode()).digest()
        client = client_cls(spec, secret, HmacDrbg(hashlib.sha256(f"coins-{i}".encode()).digest()))
        record = client.report(values_of(name, i), T0 + 97_003 * i, {})
        out.append(encode_message("noisy_report", record))
    return out


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_reference_client_reads_it_and_its_channel_is_the_jobs(name, tmp_path, capsys):
    config = written(tmp_path, capsys, name)
    cfg = parse_config(CONFIGS[name])
    kind = kind_of(config)
    assert kind == ("channels" if cfg.sampling is None else cfg.channel_kind)
    spec = CLIENTS[kind][0].from_json(config)   # the client's own reader: unknown keys or bad values refused
    assert spec.collection == name and spec.window == cfg.window
    if kind == "channels":
        # what the device's two stages compose to, bit by bit, is what the job inverts
        effective = spec.channels.effective
        assert len(effective) == cfg.layout.n_bits
        for got, want in zip(effective.channels, cfg.channels.channels):
            assert got.p == pytest.approx(want.p, abs=1e-12) and got.q == pytest.approx(want.q, abs=1e-12)
        assert [c is not None for c in spec.channels.permanent] == [c is not None for c in cfg.permanent or
                                                                    [None] * cfg.layout.n_bits]
        assert spec.layout == cfg.layout
    else:
        mech = cfg.sampling
        assert [f["name"] for f in config["features"]] == [f.name for f in cfg.layout.features]
        memo = cfg.kind_memo
        stages = (memo.instantaneous, memo.permanent) if memo is not None else (mech, None)
        keep_of = (lambda m: float(m.keep)) if kind == "hadamard" else (lambda m: float(m.p))
        assert spec.max_order == cfg.max_order and spec.keep == pytest.approx(keep_of(stages[0]), abs=1e-15)
        # memoized: the permanent stage's keep, which the job's composed channel inverts
        assert spec.permanent_keep == (None if stages[1] is None else pytest.approx(keep_of(stages[1]), abs=1e-15))
    # the token exactly when the job needs it: the device unit (else no_device_token) or client extremes
    assert spec.token == (cfg.device is not None or bool(cfg.client_extremes))
    assert spec.reports_per_day == (cfg.device.reports_per_day if cfg.device is not None else None)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_collector_accepts_every_report_made_from_it(name, tmp_path, capsys):
    config = written(tmp_path, capsys, name)
    configs = {n: parse_config(c) for n, c in CONFIGS.items()}
    bodies = reports(config, name)
    screened = screen_singles(bodies, configs)
    assert [len(got) for got, _ in screened] == [1] * DEVICES
    assert [refused for _, refused in screened] == [[]] * DEVICES
    if configs[name].device is not None:   # the device unit: every report names its device
        assert all(got[0].client for got, _ in screened)


def test_a_batch_made_from_it_is_accepted_whole(tmp_path, capsys):
    import io

    import fastavro

    from ldp_marginals.schemas import load_schema
    config = written(tmp_path, capsys, "rappor")
    schema = load_schema("noisy_report")
    records = [fastavro.schemaless_reader(io.BytesIO(b), schema) for b in reports(config, "rappor")]
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records)
    got, refused = screen_body(buf.getvalue(), {"rappor": parse_config(CONFIGS["rappor"])})
    assert len(got) == DEVICES and refused == []


def test_output_file_and_the_collections_it_refuses(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(list(CONFIGS.values())))
    # several collections: one must be named
    assert cli.main(["client-config", "--config", str(path)]) == 2
    assert "name one with --collection" in capsys.readouterr().err
    assert cli.main(["client-config", "--config", str(path), "--collection", "nope"]) == 2
    assert "--collection 'nope' is not in" in capsys.readouterr().err
    # one collection: no --collection needed; --output writes the file
    one = tmp_path / "one.json"
    one.write_text(json.dumps(CONFIGS["pq"]))
    out = tmp_path / "client.json"
    assert cli.main(["client-config", "--config", str(one), "--output", str(out)]) == 0
    assert ClientSpec.from_json(json.loads(out.read_text())).collection == "pq"
    # a whole-report kind under the device unit (refused before issue 48 item 2: its clients sent no token):
    # the config tells the devices to send it, and the client does
    device_kind = dict(CONFIGS["hadamard"], privacy={"unit": "device", "max_reports_per_device": 1})
    one.write_text(json.dumps(device_kind))
    assert cli.main(["client-config", "--config", str(one), "--output", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["token"] is True and "reports_per_day" not in written
    spec = HadamardClientSpec.from_json(written)
    record = HadamardDeviceClient(spec, bytes(32), HmacDrbg(bytes(32))).report(values_of("hadamard", 3), T0)
    assert record["client"] == device_token(bytes(32), "hadamard", T0)   # the slice (the hour) starts at T0
