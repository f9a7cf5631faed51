"""Issue 48 items 5 and 6: ``plan`` recommends a channel whose rows publish at the population it is given
(pipelines/plan_kinds.py ``publishing_advice``, pipelines/plan_outlook.py: the job's own publication step on
seeded simulated windows), and its prediction agrees with what ``ldp-marginals run`` publishes on reports
simulated apart (benchmarks/team_month.py's memoized devices, another seed).

A memoized Hadamard collection of 4 booleans (11 coefficients) under the device unit, 24 reports a device
a day, three regions, min_reports 20: at 60 devices a region about 5 devices draw each coefficient for good
(every marginal and table rests on fewer than 20: withheld); at 600, about 55 (the chance that one of the 11
falls under 20 is below 1e-5 a region). On main plan printed no outlook (KeyError 'publishing') and
recommended Hadamard sampling whatever the population."""
import argparse

import yaml

from benchmarks.team_month import month_findings, month_reports, run_month

SPEC = {"collection": "small", "features": [{"name": f"b{i}", "type": "boolean"} for i in range(4)],
        "channel": {"kind": "hadamard", "epsilon": 2.0, "memoize": True, "epsilon_1": 1.0}, "max_order": 2,
        "window": {"type": "fixed", "size_seconds": 86_400}, "min_reports": 20,
        "dimensions": {"region": {"max_values": 10}}, "groups": [["b0", "b1"]],
        "privacy": {"unit": "device", "max_reports_per_device": 24, "reports_per_day": 24, "model": "local",
                    "epsilon": 2.0}}
THIN, THICK = 60, 600   # devices a region


def plan_at(tmp_path, devices: int) -> dict:
    from ldp_marginals.pipelines.plan import plan
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(SPEC))
    args = argparse.Namespace(config=str(tmp_path / "c.yaml"), reports_per_window=None, frequency=[],
                              target_half_width=None, target_mean_half_width=[], json=True,
                              devices_per_key=devices, reports_per_device=None, keys=3, outlook_windows=3)
    (coll,) = plan(args)["collections"]
    return coll["mechanism"]["publishing"]


def job_at(tmp_path, channel: dict, devices: int) -> dict:
    """What ``ldp-marginals run`` publishes of one day of ``devices`` devices a region under ``channel``:
    ``(rows per kind, {cause/statistic of each withheld row})``."""
    config = dict(SPEC, channel=channel)
    out = run_month(str(tmp_path), config, month_reports(config, devices, 1, seed=11))
    rows = month_findings(out, config)["rows"]
    withheld = {f"{r['cause']}/{r['statistic']}" for per in rows["withheld"].values() for r in per}
    return {kind: sum(len(v) for v in per.values()) for kind, per in rows.items()}, withheld


def test_plan_predicts_the_withheld_rows_of_a_thin_population_and_the_job_withholds_them(tmp_path):
    adv = plan_at(tmp_path / "plan", THIN)
    assert adv["population"] == {"devices": THIN, "reports": 24, "keys": 3, "windows": 3}
    (had,) = [c for c in adv["tried"] if c["label"] == "Hadamard sampling (m=1)"]
    assert adv["tried"][0] is had   # the lowest variance, tried first
    assert not had["outlook"]["publishes"]
    predicted = set(had["outlook"]["withheld"])
    assert {"privacy/marginal", "privacy/table"} <= predicted
    counts, withheld = job_at(tmp_path / "job", had["channel"], THIN)
    assert withheld == predicted, (withheld, predicted)
    assert counts["tables"] < 3 * 4   # 3 regions x 4 cells: not all published
    # what plan recommends instead publishes every kind of row there (the job's run agrees)
    rec = adv["recommended"]
    assert rec is not None and rec["outlook"]["publishes"] and rec["label"] != had["label"]
    counts, withheld = job_at(tmp_path / "job-rec", rec["channel"], THIN)
    assert withheld == set() and counts["marginals"] == 3 * 10 and counts["tables"] == 3 * 4
    # and the population the best candidate needs is found (doubling 60 devices a region)
    assert adv["needed"]["candidate"] == had["label"] and THIN < adv["needed"]["devices_per_key"] <= 8 * THIN


def test_plan_recommends_the_best_kind_where_its_rows_publish_and_the_job_publishes_them(tmp_path):
    adv = plan_at(tmp_path / "plan", THICK)
    rec = adv["recommended"]
    assert rec["label"] == "Hadamard sampling (m=1)" and adv["tried"] == [rec] and adv["needed"] is None
    assert rec["paste"] == ("channel: {kind: 'hadamard', epsilon: 2.0, slots: 1, memoize: True, "
                            "epsilon_1: 1.0}")
    pasted = dict(SPEC, **yaml.safe_load(rec["paste"]))
    counts, withheld = job_at(tmp_path / "job", pasted["channel"], THICK)
    assert withheld == set() and counts["marginals"] == 3 * 10 and counts["tables"] == 3 * 4


def test_plan_prints_the_outlook_and_the_line_to_paste(tmp_path, capsys):
    from ldp_marginals.pipelines import cli
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(SPEC))
    assert cli.main(["plan", "--config", str(tmp_path / "c.yaml"), "--devices-per-key", str(THICK), "--keys", "3",
                     "--outlook-windows", "1"]) == 0
    text = capsys.readouterr().out
    assert "which rows publish at 600 devices a key x 24 reports a device, 3 key(s)" in text
    assert "recommended: Hadamard sampling (m=1)" in text
    assert "    channel: {kind: 'hadamard', epsilon: 2.0, slots: 1, memoize: True, epsilon_1: 1.0}" in text
    assert cli.main(["plan", "--config", str(tmp_path / "c.yaml"), "--devices-per-key", "0"]) != 0
    assert "--devices-per-key must be an integer >= 1, got --devices-per-key=0" in capsys.readouterr().err


def test_calibrate_recommends_what_publishes_as_plan_does(tmp_path, capsys):
    """Item 4: ``calibrate --config --devices-per-key`` gives plan's outlook: at 60 devices a region the
    Hadamard kind's rows are withheld, and it recommends the same channel as plan, with the line to paste.
    On main: 'unrecognized arguments: --devices-per-key'."""
    import json

    from ldp_marginals.pipelines import cli
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(SPEC))
    assert cli.main(["calibrate", "--config", str(tmp_path / "c.yaml"), "--devices-per-key", str(THIN), "--keys", "3",
                     "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    adv = row["mechanism"]["publishing"]
    planned = plan_at(tmp_path / "plan", THIN)
    assert not adv["tried"][0]["outlook"]["publishes"]
    assert adv["recommended"]["paste"] == planned["recommended"]["paste"]
    assert cli.main(["calibrate", "--config", str(tmp_path / "c.yaml"), "--devices-per-key", str(THIN),
                     "--keys", "3"]) == 0
    assert f"    {adv['recommended']['paste']}" in capsys.readouterr().out


def test_plan_does_not_call_best_what_it_then_finds_withheld(tmp_path, capsys):
    # before: the mechanism section (one report at the whole-report epsilon, not memoized) marked subset s=3
    # "<- best the job accepts" and told the Hadamard collection to paste it, just above the outlook (memoized,
    # at one report's epsilon) that found it withheld, recommended subset s=4 and called Hadamard the best
    from ldp_marginals.pipelines import cli
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(SPEC))
    assert cli.main(["plan", "--config", str(tmp_path / "c.yaml"), "--devices-per-key", str(THIN), "--keys", "3",
                     "--outlook-windows", "1"]) == 0
    text = capsys.readouterr().out
    assert "this collection uses the best kind" not in text
    assert "<- lowest variance the job accepts (before withholding: the pick is below)" in text
    assert "which channel to use at this population, with the rows each withholds there, is below" in text
    recommended = [line for line in text.splitlines() if line.strip().startswith("recommended: ")]
    assert len(recommended) == 1 and "Hadamard" not in recommended[0]
