"""The month a collection promises holds for what the job publishes (issue 47, item 4), through
``ldp-marginals run`` on an Avro file: 20 devices reporting every hour for two days under
``privacy: {model: local, epsilon: 0.1, unit: device, reports_per_day: 1, epsilon_per_month: 3}``.
The declared ``reports_per_day`` is not enforced by the server; device tokens are scoped to a slice,
so with hourly windows the job publishes one report of each device every hour (720 a month: epsilon
72), and the run is refused at start, naming the window that keeps the promise. With daily windows
it publishes at most one report of a device a day (30 a month: epsilon 3.0) and collections.json
states those enforced figures."""
import hashlib
import json

import pytest
import yaml

from ldp_marginals.ldp.device import device_token
from ldp_marginals.pipelines import cli
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.outputs import COLLECTIONS_FILE
from tests.batch_runs import run_args

T0 = 1_767_225_600_000   # 2026-01-01T00:00Z, a day boundary
HOUR = 3_600_000
DEVICES, HOURS = 20, 48
ISSUE_CONFIG = {
    "collection": "month", "features": [{"name": "a", "type": "boolean"}],
    "channel": {"mechanism": "symmetric", "epsilon": 0.1}, "max_order": 1,
    "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": DEVICES,
    "privacy": {"model": "local", "epsilon": 0.1, "unit": "device", "reports_per_day": 1, "epsilon_per_month": 3}}


def _reports(window_ms: int) -> list:
    """Every device reports once an hour for two days, each report under its slice's token (the
    client's rule, docs/client.md section 5: one token per device, collection and slice)."""
    out = []
    for d in range(DEVICES):
        secret = hashlib.sha256(f"device-{d}".encode()).digest()
        for h in range(HOURS):
            t = T0 + h * HOUR + 60_000 * d
            token = device_token(secret, "month", t - (t - 0) % window_ms)
            out.append({"collection": "month", "event_time": t, "bits": bytes([(d + h) % 2]), "dimensions": {},
                        "client": token})
    return out


def _run(tmp_path, config: dict, records: list) -> tuple:
    out = tmp_path / "out"
    return cli.main(["run", *run_args(tmp_path, config, records, "in", out)]), out


def test_hourly_windows_that_break_the_monthly_promise_are_refused_at_start(tmp_path, capsys):
    code, out = _run(tmp_path, ISSUE_CONFIG, _reports(HOUR))
    err = capsys.readouterr().err
    assert code == 2, err          # today's main accepts it and publishes 960 reports, 48 of each device
    assert not out.exists()
    (line,) = err.strip().splitlines()
    assert "privacy promises epsilon_per_month=3" in line
    # the enforced figure and what it comes from: 720 hourly slices a month x 1 report of a device each
    assert "720 reports of one device a month" in line and "epsilon_per_month=72" in line
    # the declared rate is named as what it is, and the window that keeps the promise is named
    assert "declared reports_per_day=1" in line
    assert "fixed windows of 86400 s (1 slice a day, 30 a month) give epsilon_per_month=3 at these bounds" in line


def test_daily_windows_keep_it_and_publish_at_most_one_report_of_a_device_a_day(tmp_path, capsys):
    daily = dict(ISSUE_CONFIG, window={"type": "fixed", "size_seconds": 86400})
    records = _reports(24 * HOUR)
    code, out = _run(tmp_path, daily, records)
    assert code == 0, capsys.readouterr().err
    rows = read_rows(str(out), "marginals", collection="month")
    assert sorted(r["window_start"] for r in rows) == [T0, T0 + 24 * HOUR]
    assert all(r["n_reports"] == DEVICES for r in rows)   # 20 devices, 24 reports each a day: one kept each
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reports_over_device_bound"] == len(records) - 2 * DEVICES
    # collections.json states the enforced figures, named as such (main states only the declared ones)
    (info,) = [c for c in json.loads((out / COLLECTIONS_FILE).read_text()) if c["collection"] == "month"]
    enforced = info["epsilons"]["enforced"]
    assert (enforced["slices_per_day"], enforced["reports_per_day"], enforced["reports_per_month"]) == (1, 1, 30)
    assert enforced["epsilon_per_day"] == pytest.approx(0.1) and enforced["epsilon_per_month"] == pytest.approx(3.0)
    assert info["epsilons"]["declared"]["reports_per_day"] == 1
    assert info["privacy"]["epsilon_per_month"] == 3


def test_a_job_wide_window_override_is_checked_against_the_promise_too(tmp_path):
    from ldp_marginals.pipelines.run import load_all_configs
    path = tmp_path / "daily.yaml"
    path.write_text(yaml.safe_dump(dict(ISSUE_CONFIG, window={"type": "fixed", "size_seconds": 86400})))
    assert load_all_configs([str(path)])["month"].enforced_epsilons().reports_per_month == 30
    with pytest.raises(ValueError, match=r"--window fixed:3600: collection 'month': privacy promises "
                                         r"epsilon_per_month=3, .*epsilon_per_month=72"):
        load_all_configs([str(path)], window="fixed:3600")


def test_plan_and_calibrate_state_the_enforced_figures(tmp_path, capsys):
    daily = tmp_path / "daily.yaml"
    daily.write_text(yaml.safe_dump(dict(ISSUE_CONFIG, window={"type": "fixed", "size_seconds": 86400})))
    hourly = tmp_path / "hourly.yaml"
    hourly.write_text(yaml.safe_dump(ISSUE_CONFIG))
    assert cli.main(["plan", "--config", str(daily), "--reports-per-window", "1000", "--json"]) == 0
    (c,) = json.loads(capsys.readouterr().out)["collections"]
    assert c["privacy"]["epsilons"]["enforced"]["epsilon_per_month"] == pytest.approx(3.0)
    assert cli.main(["plan", "--config", str(daily), "--reports-per-window", "1000"]) == 0
    text = capsys.readouterr().out
    assert ("enforced (at most 1 report of a device per slice, 1 slice a day): per day 0.1 (1 report), "
            "per month 3 (30 reports); at the declared rate of 1 a day (not enforced by the job)") in text
    # plan refuses the hourly config as the job does; calibrate, which says what to change, states why
    assert cli.main(["plan", "--config", str(hourly), "--reports-per-window", "1000"]) == 2
    assert "epsilon_per_month=72" in capsys.readouterr().err
    assert cli.main(["calibrate", "--config", str(hourly)]) == 0
    text = capsys.readouterr().out
    assert "per month 72 (720 reports)" in text
    assert ("promise over time (epsilon_per_month=3): NOT kept: privacy promises epsilon_per_month=3, but the job "
            "publishes up to 720 reports of one device a month") in text
    assert cli.main(["calibrate", "--config", str(daily), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["promise_over_time_fault"] is None and row["epsilons"]["enforced"]["reports_per_month"] == 30
