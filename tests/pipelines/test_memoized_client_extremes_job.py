"""Memoized ``hadamard`` under the device unit with extremes over clients at ``reports_per_client: 1``, through
``ldp-marginals run`` (docs/design.md, "Extremes over clients and memoized channels"): devices send 24 hourly
memoized reports of one value; each client row is the job's aggregator over each device's one sampled report
(blind to content), published with n = the devices, beside the other rows. On main the config was refused
(rule kind-memoize-client-extremes); ``reports_per_client: 2`` is refused now (memoize-client-extremes). One slot
a report and 3 bits keep the kinds' reads rule satisfied at 300 devices and min_reports 10 (a client's profile
is the coefficient its sampled report drew, each drawn by about 40 or more devices)."""
import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.kind_memoize import randomize_memoized_hadamard
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from tests.batch_runs import run_args
from tests.pipelines.test_device_unit import HOUR, T0

DEVICES, PER_DAY = 300, 24


def config(c=1):
    return {"collection": "memo", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(3)],
            "channel": {"kind": "hadamard", "epsilon": 4.0, "slots": 1, "memoize": True, "epsilon_1": 1.0},
            "max_order": 2,
            "window": {"type": "fixed", "size_seconds": 86400}, "min_reports": 10, "reports_per_client": c,
            "extremes": [{"name": "any", "op": "or", "bits": ["q0", "q1"], "over": "client"},
                         {"name": "all", "op": "and", "bits": ["q2"], "over": "client"}],
            "privacy": {"unit": "device", "max_reports_per_device": PER_DAY, "reports_per_day": PER_DAY}}


def test_memoized_hadamard_publishes_its_client_rows_at_one_report_a_client(tmp_path):
    spec = config()
    cfg = parse_config(spec)
    assert cfg.client_sample == 1 and cfg.kind_memo is not None
    rng = np.random.default_rng(7)
    truth = (rng.random((DEVICES, 3)) < np.array([0.4, 0.6, 0.3])).astype(np.uint8)
    a, b, owner = randomize_memoized_hadamard(truth, np.full(DEVICES, PER_DAY), cfg.kind_memo, rng)
    packed = cfg.wire.pack(a, b)
    times = T0 + np.tile(np.arange(PER_DAY), DEVICES) * HOUR + rng.integers(HOUR, size=owner.size)
    records = [{"collection": "memo", "event_time": int(times[i]), "bits": packed[i].tobytes(), "dimensions": {},
                "client": f"dev-{owner[i]}"} for i in range(owner.size)]
    out = tmp_path / "out"
    run(run_args(tmp_path, spec, records, "memo", out))

    agg = cfg.aggregator
    keys = np.array([client_key(f"dev-{o}") for o in owner], dtype=np.uint64)
    acc = agg.settle(agg.add_devices(agg.create_open(), packed, keys, times.astype(np.int64)))
    sums = agg.client_sums(acc, None, cfg.min_reports)
    rows = {r["name"]: r for r in read_rows(str(out), "extremes", collection="memo")}
    assert set(rows) == {"any", "all"}
    for name, (estimate, variance) in zip(("any", "all"), sums):
        assert rows[name]["n"] == DEVICES
        assert rows[name]["estimate"] == pytest.approx(estimate, rel=1e-9)
        assert rows[name]["variance"] == pytest.approx(variance, rel=1e-9) and variance > 0
    # one term a device: the rows are near the truth of the devices' values (each device holds one value)
    for name, want in (("any", truth[:, :2].any(axis=1).sum()), ("all", truth[:, 2].sum())):
        assert abs(rows[name]["estimate"] - want) <= 4.9 * np.sqrt(rows[name]["variance"]), (name, want)
    assert read_rows(str(out), "marginals", collection="memo")


def test_two_reports_a_client_are_refused():
    with pytest.raises(ValueError, match=r"rule memoize-client-extremes\]; instead: set reports_per_client: 1"):
        parse_config(config(2))
