"""``ldp-marginals simulate --devices`` (issue 49 item 6): a population of devices with stable ids (the
tokens of their slices, as the clients derive them), each with its values and region for the run and a
rate that follows the day. A device-unit config loses nothing to its bounds (before, simulate drew a
region per report and named no device: a config with ``max_keys_per_device: 1`` lost reports past the
bound, silently); chatty devices make the job leave reports out, exactly as many as the simulation says,
by bound."""
import json

import numpy as np
import pytest
import yaml
from scipy.stats import norm

import ldp_marginals
from ldp_marginals.ldp.client import DeviceClient
from ldp_marginals.ldp.coins import SystemCoins
from ldp_marginals.pipelines import cli
from ldp_marginals.pipelines.simulate_devices import device_secret, simulate_devices
from ldp_marginals.schemas.client_config import client_spec
from ldp_marginals.schemas.config import parse_config
from tests.stats import ALPHA

HOUR, DAY = 3_600_000, 86_400_000
REGIONS = "region=eu:0.5,us:0.3,asia:0.2"
# the device unit, one memoized report a device and hour, one region a device and hour
CONFIG = {"collection": "dk", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
          "channel": {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True}, "max_order": 2,
          "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 5, "dimensions": {"region": {}},
          "privacy": {"unit": "device", "max_reports_per_device": 1, "max_keys_per_device": 1, "reports_per_day": 24}}


def _simulate_and_run(tmp_path, *options, devices=500):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    args = ["simulate", "--config", str(tmp_path / "c.yaml"), "--devices", str(devices), "--out",
            str(tmp_path / "r.avro"), "--dimension", REGIONS, "--seed", "3", *options]
    assert cli.main(args) == 0
    truth = json.loads((tmp_path / "r.avro.truth.json").read_text())
    assert cli.main(["run", "--config", str(tmp_path / "c.yaml"), "--input", str(tmp_path / "r.avro"),
                     "--output", str(tmp_path / "out"), "--progress-seconds", "0"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    return truth, summary


def test_a_device_unit_config_with_one_key_a_device_loses_nothing_over_a_simulated_day(tmp_path, capsys):
    truth, summary = _simulate_and_run(tmp_path)
    devices = truth["devices"]
    assert devices["dropped_by_the_job"] == {"reports_over_device_bound": 0, "reports_over_key_bound": 0}
    assert devices["reports"] == sum(w["n_reports"] for w in truth["windows"]) > 5000
    assert len(truth["windows"]) == 24 * 3
    # nothing left out: every report counted, none past a bound, none dead-lettered
    assert summary["reports_counted"] == devices["reports"]
    assert (summary["reports_over_device_bound"], summary["reports_over_key_bound"]) == (0, 0)
    assert summary["reports_dead_lettered"] == 0
    assert "0 reports past max_reports_per_device" in capsys.readouterr().out
    # every window and key's rows over all of its reports, one a device (M = 1); the estimates within their
    # band of the devices' truth (the job inverts the channel the simulated clients randomized with)
    rows = ldp_marginals.read_rows(str(tmp_path / "out"), "marginals")
    by_key = {(w["window_start"], w["dimensions"]["region"]): w for w in truth["windows"]}
    z = norm.isf(ALPHA / 2 / len(rows))
    assert len({(r["window_start"], r["dimensions"]["region"]) for r in rows}) == len(by_key)
    for r in rows:
        w = by_key[(r["window_start"], r["dimensions"]["region"])]
        assert r["n_reports"] == w["n_reports"] == w["n_devices"]
        true = w["counts"][w["sets"].index(r["columns"])]
        assert abs(r["estimate"] - true) <= z * r["variance"] ** 0.5, (r, true)


def test_with_chatty_devices_the_summary_drops_equal_the_simulations_known_excess(tmp_path, capsys):
    truth, summary = _simulate_and_run(tmp_path, "--chatty-over", "0.1", "--chatty-regions", "0.15")
    devices = truth["devices"]
    dropped = devices["dropped_by_the_job"]
    assert devices["chatty_over_bound"] > 0 and devices["chatty_two_regions"] > 0
    assert dropped["reports_over_device_bound"] > 500 and dropped["reports_over_key_bound"] > 500
    assert summary["reports_counted"] == devices["reports"] and summary["reports_dead_lettered"] == 0
    assert summary["reports_over_device_bound"] == dropped["reports_over_device_bound"]
    assert summary["reports_over_key_bound"] == dropped["reports_over_key_bound"]
    said = capsys.readouterr().out
    assert f"leave out {dropped['reports_over_device_bound']:,} reports past max_reports_per_device" in said
    assert f"{dropped['reports_over_key_bound']:,} past max_keys_per_device" in said
    assert f"{dropped['reports_over_device_bound']} past a device's bound" in said   # the job's line


def _honest(cfg, **kw):
    pop, summary = simulate_devices(cfg, 300, seed=5, dimensions=[("region", [("eu", 1.0), ("us", 1.0)])], **kw)
    return pop, summary


def test_honest_devices_keep_their_region_values_and_bounds_and_follow_the_day():
    # a daily window with room for the day's curve: at most 40 reports a device and day, 30 declared a day
    cfg = parse_config(dict(CONFIG, window={"type": "fixed", "size_seconds": 86400},
                            privacy=dict(CONFIG["privacy"], max_reports_per_device=40, reports_per_day=30)))
    pop, summary = _honest(cfg, span_seconds=3 * 86400)
    d = pop.devices
    assert summary["chatty_over_bound"] == summary["chatty_two_regions"] == 0
    assert summary["not_sent"]["rate_exceeded"] > 0   # the clients hold the devices to 30 a day
    for dev in np.unique(d):
        mine = d == dev
        assert len(set(pop.dimensions["region"][mine])) == 1
        assert len({bytes(row) for row in pop.true_bits[mine]}) == 1
        days = pop.event_ms[mine] // DAY
        assert np.bincount(days - days.min()).max() <= 30
        assert np.unique(pop.event_ms[mine]).size == mine.sum()   # distinct milliseconds
        tokens = {(int(t), c) for t, c in zip(days, pop.clients[mine])}
        assert len(tokens) == len(set(days.tolist())) == len({c for _, c in tokens})   # a token a day, each its own
    assert np.all(np.diff(pop.event_ms) >= 0)
    hours = np.bincount(pop.event_ms // HOUR % 24, minlength=24)
    assert hours[14] > 4 * hours[2]   # the day's curve: 1.8 against 0.2
    assert summary["dropped_by_the_job"] == {"reports_over_device_bound": 0, "reports_over_key_bound": 0}


def test_tokens_and_memoized_responses_are_the_clients():
    # instantaneous channel (0, 1): a report is its device's permanent bits, the same for all its reports
    cfg = parse_config(dict(CONFIG, channel={"mechanism": "rappor", "f": 0.5, "p": 0.0, "q": 1.0, "memoize": True}))
    pop, _ = _honest(cfg)
    spec = client_spec(cfg)
    assert spec.token
    for dev in np.unique(pop.devices)[:20]:
        mine = np.flatnonzero(pop.devices == dev)
        assert len({bytes(pop.noisy[i]) for i in mine}) == 1
        client = DeviceClient(spec, device_secret(5, int(dev)), SystemCoins())
        values = {f: bool(pop.true_bits[mine[0], k]) for k, f in enumerate(("a", "b", "c"))}
        for i in mine[:3]:
            record = client.report(values, int(pop.event_ms[i]), {"region": pop.dimensions["region"][i]})
            assert record["client"] == pop.clients[i]


def test_chatty_options_are_refused_where_no_bound_applies():
    plain = parse_config({k: v for k, v in CONFIG.items() if k != "privacy"} | {"channel": {"p": 0.25, "q": 0.75}})
    with pytest.raises(ValueError, match="nothing they send is over a bound"):
        simulate_devices(plain, 10, reports_per_day=4, chatty_over=0.1)
    with pytest.raises(ValueError, match="need a drawn dimension with two values"):
        simulate_devices(parse_config(CONFIG), 10, chatty_regions=0.1)
    with pytest.raises(ValueError, match="declares no privacy.reports_per_day"):
        simulate_devices(plain, 10)
    with pytest.raises(ValueError, match="chatty_over must be a share in"):
        simulate_devices(parse_config(CONFIG), 10, chatty_over=1.5)


def test_simulate_refuses_reports_alone_for_a_config_that_bounds_devices(tmp_path, capsys):
    # before: 24,000 reports of a day, each drawing its region and one of 1,000 clients, lost 15,959 (66%) to
    # max_keys_per_device 1 in the job, and simulate said nothing of it
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    base = ["simulate", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "r.avro")]
    assert cli.main(base + ["--reports", "100"]) == 2
    assert "its reports name their device, so simulate devices: --devices N" in capsys.readouterr().err
    assert cli.main(base + ["--reports", "100", "--chatty-over", "0.1"]) == 2
    assert "--chatty-over need --devices" in capsys.readouterr().err
    assert cli.main(base + ["--devices", "10", "--reports", "100"]) == 2
    assert "--reports is for reports alone" in capsys.readouterr().err
    assert not (tmp_path / "r.avro").exists()


@pytest.mark.parametrize("memoize", [True, False])
def test_a_whole_report_kind_is_randomized_as_its_clients_do(memoize):
    """Hadamard sampling on the wire: memoized, a device's reports keep the coefficients its permanent
    response drew (only their parities flip afresh); not memoized, each report draws its own."""
    channel = ({"kind": "hadamard", "epsilon": 4.0, "memoize": True, "epsilon_1": 2.0} if memoize
               else {"kind": "hadamard", "epsilon": 2.0})
    cfg = parse_config(dict(CONFIG, channel=channel, privacy=dict(CONFIG["privacy"], max_reports_per_device=2)))
    pop, summary = _honest(cfg)
    indices, _ = cfg.wire.unpack(pop.noisy)
    assert not cfg.wire.bad_index(pop.noisy).any()
    assert summary["dropped_by_the_job"] == {"reports_over_device_bound": 0, "reports_over_key_bound": 0}
    same = [len({tuple(row) for row in indices[pop.devices == d]}) == 1
            for d in np.unique(pop.devices) if (pop.devices == d).sum() >= 10]
    assert len(same) > 200
    # fresh draws: 10 or more reports of a device draw one coefficient (of the 6 of up to 2 of 3 bits,
    # uniform) with probability 6^-9 = 1e-7, so all alike at 200+ devices only when memoized
    assert all(same) if memoize else not any(same)


def test_a_numeric_bit_that_does_not_memoize_is_encoded_afresh_each_report():
    features = CONFIG["features"] + [{"name": "minutes", "type": "numeric", "low": 0, "high": 60}]
    for channel, afresh in (({"p": 0.25, "q": 0.75}, True),
                            ({"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True}, False)):
        cfg = parse_config(dict(CONFIG, features=features, channel=channel,
                                privacy=dict(CONFIG["privacy"], max_reports_per_device=3)))
        pop, _ = _honest(cfg)
        bit = cfg.layout.bit_index("minutes")
        varies = 0
        for d in np.unique(pop.devices):
            mine = pop.devices == d
            assert np.unique(pop.values["minutes"][mine]).size == 1   # the device's value, for the run
            assert np.unique(pop.true_bits[mine][:, :3], axis=0).shape[0] == 1
            varies += np.unique(pop.true_bits[mine, bit]).size > 1
        assert (varies > 30) if afresh else varies == 0


@pytest.mark.parametrize("window", [{"type": "sliding", "size_seconds": 7200, "period_seconds": 1800},
                                    {"type": "global"}, {"type": "fixed", "size_seconds": 600}])
def test_honest_devices_keep_to_the_bound_per_slice_of_any_window(window):
    """A token and at most M reports per device and slice (a sliding window's period, all of time for the
    global window, pieces of an hour for a short fixed window): nothing for the job to drop."""
    privacy = dict(CONFIG["privacy"], max_reports_per_device=2, reports_per_day=30)
    cfg = parse_config(dict(CONFIG, window=window, privacy=privacy, dimensions={"region": {}}))
    pop, summary = _honest(cfg, span_seconds=2 * 86400)
    slices = cfg.window.slice_starts(pop.event_ms)
    per = {}
    for d, s, c in zip(pop.devices.tolist(), slices.tolist(), pop.clients.tolist()):
        per.setdefault((d, s), []).append(c)
    assert max(len(v) for v in per.values()) == 2   # the bound reached, never passed
    assert all(len(set(v)) == 1 for v in per.values())
    assert len({v[0] for v in per.values()}) == len(per)   # a token per device and slice, each its own
    assert summary["dropped_by_the_job"] == {"reports_over_device_bound": 0, "reports_over_key_bound": 0}


def test_simulate_writes_into_a_folder_that_does_not_exist_yet(tmp_path):
    # before: --out new/r.avro ended in a FileNotFoundError traceback (a folder a user had not made)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    out = tmp_path / "new" / "deeper" / "r.avro"
    assert cli.main(["simulate", "--config", str(tmp_path / "c.yaml"), "--devices", "20", "--out", str(out),
                     "--dimension", REGIONS, "--seed", "3"]) == 0
    assert out.stat().st_size > 0 and json.loads(out.with_name("r.avro.truth.json").read_text())["devices"]
