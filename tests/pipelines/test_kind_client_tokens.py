"""A device-unit collection of a whole-report kind, end to end as a team runs it (issue 48 item 2, issue 49
item 1): ``ldp-marginals client-config`` writes what the devices read, the Python reference client makes
each device's reports from it (the device token of the event's slice in ``client``), the collector's screen
accepts every one, and ``ldp-marginals run`` (batch) publishes the window: no report is dead-lettered
``no_device_token``, a device adds at most ``max_reports_per_device`` reports, ``min_reports`` counts
devices. Before this change ``client-config`` refused the device unit for the kinds (their clients sent
``client: null``, so every report would have been dead-lettered)."""
import hashlib
import io
import json
from datetime import datetime, timedelta, timezone

import fastavro
import numpy as np
import pytest
import yaml

from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.ldp.hadamard_client import HadamardClientSpec, HadamardDeviceClient
from ldp_marginals.ldp.hadamard_reports import HadamardAggregator
from ldp_marginals.pipelines.admission import screen_singles
from ldp_marginals.pipelines.client_config import client_config_text
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas import encode_message, load_schema
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import SUMMARY_FILE
from tests.batch_runs import run_args
from tests.pipelines.test_device_unit import HOUR, T0, _kept

DEVICES = 1000     # enough that every coefficient a row rests on holds min_reports x M reports: no row is thin
REPORTS = 3          # each device's reports in the hour, one more than the bound
BOUND = 2
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
CHANNELS = {"plain": {"kind": "hadamard", "epsilon": 2.0},
            "memoized": {"kind": "hadamard", "epsilon": 4.0, "memoize": True, "epsilon_1": 2.0}}


def config(channel: str) -> dict:
    return {"collection": "dev", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(5)],
            "channel": CHANNELS[channel], "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600},
            "min_reports": 20, "privacy": {"unit": "device", "max_reports_per_device": BOUND, "reports_per_day": 24}}


def device_bodies(client_config: dict) -> list:
    """What the devices send: ``REPORTS`` single-report bodies a device in the hour, made by the reference
    client from ``client_config`` (each device its own secret; its answers fixed, drawn once)."""
    rng = np.random.default_rng(7)
    spec = HadamardClientSpec.from_json(client_config)
    bodies = []
    for d in range(DEVICES):
        secret = hashlib.sha256(f"device-{d}".encode()).digest()
        client = HadamardDeviceClient(spec, secret, HmacDrbg(hashlib.sha256(f"coins-{d}".encode()).digest()))
        answers = {f"q{i}": bool(b) for i, b in enumerate(rng.random(5) < 0.3 + 0.1 * np.arange(5))}
        for t in sorted(rng.integers(HOUR, size=REPORTS)):
            bodies.append(encode_message("noisy_report", client.report(answers, T0 + int(t), {})))
    return bodies


@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_a_device_unit_hadamard_collection_fed_by_the_client_publishes(tmp_path, channel):
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(config(channel)))
    written = json.loads(client_config_text(str(path)))   # what `ldp-marginals client-config` writes
    assert written["token"] is True and written["reports_per_day"] == 24
    assert ("permanent_keep" in written["hadamard"]) == (channel == "memoized")
    bodies = device_bodies(written)
    cfg = parse_config(config(channel))
    screened = screen_singles(bodies, {"dev": cfg})
    assert [refused for _, refused in screened] == [[]] * len(bodies)   # the collector accepts every report
    schema = load_schema("noisy_report")
    records = [fastavro.schemaless_reader(io.BytesIO(b), schema) for b in bodies]
    for r in records:   # the schema's timestamp-millis, read as a datetime, back to ms
        r["event_time"] = (r["event_time"] - EPOCH) // timedelta(milliseconds=1)
    assert len({r["client"] for r in records}) == DEVICES   # one token a device in the hour's slice
    out = tmp_path / "out"
    run(run_args(tmp_path, config(channel), records, "dev", out))
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["dead_letters_by_reason"] == {}   # no no_device_token
    assert summary["reports_over_device_bound"] == DEVICES * (REPORTS - BOUND)
    rows = read_rows(str(out), "marginals", collection="dev")
    assert {r["window_start"] for r in rows} == {T0}
    assert sorted(tuple(r["columns"]) for r in rows) == sorted(tuple(s) for s in cfg.published_sets)
    assert {r["n_reports"] for r in rows} == {DEVICES * BOUND}
    assert read_rows(str(out), "withheld", collection="dev") == []
    if channel == "plain":   # the rows are the kind's estimator on exactly the reports the device bound keeps
        kept = _kept(records, BOUND)[0]
        agg = HadamardAggregator(cfg.sampling)
        packed = np.frombuffer(b"".join(kept), dtype=np.uint8).reshape(len(kept), cfg.wire.n_bytes)
        want = agg.marginals(agg.add_packed(agg.create(), packed))
        for r in rows:
            assert r["estimate"] == pytest.approx(want.means[want.family.index(tuple(r["columns"]))], abs=1e-9)
