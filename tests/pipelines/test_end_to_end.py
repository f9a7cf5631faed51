"""simulate -> ldp-marginals run -> Avro rows read back; the same job on the other local runners."""
import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import yaml
from scipy.stats import binom

import ldp_marginals

from ldp_marginals import schemas
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from tests.configs import SMALL_CONFIG
from tests.stats import ALPHA


def cli(*args):
    out = subprocess.run([sys.executable, "-m", "ldp_marginals.pipelines.cli", *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    spec = dict(SMALL_CONFIG, min_reports=500)
    (d / "config.yaml").write_text(yaml.safe_dump(spec))
    cli("simulate", "--config", str(d / "config.yaml"), "--reports", "40000", "--out", str(d / "reports.avro"),
        "--seed", "11", "--reports-per-client", "4")
    return d


def read_rows(folder, name):
    return [r for path in sorted(glob.glob(os.path.join(folder, "*.avro"))) for r in schemas.read_avro(path, name)]


def test_cli_run_estimates_cover_the_truth_at_the_level(simulated):
    d = simulated
    stdout = cli("run", "--config", str(d / "config.yaml"), "--input", str(d / "*.avro"), "--output", str(d / "out"))
    assert "counted 40000 reports; dead-lettered 0" in stdout
    assert json.loads((d / "out" / "summary.json").read_text())["reports_counted"] == 40000
    truth = {}
    for w in json.loads((d / "reports.avro.truth.json").read_text())["windows"]:
        for s, c in zip(w["sets"], w["counts"]):
            truth[(w["window_start"], tuple(s))] = c
    rows = read_rows(d / "out" / "marginals", "marginal_estimate")
    cfg = parse_config(yaml.safe_load((d / "config.yaml").read_text()))
    zero = [s for s in cfg.family if any(len(set(s) & set(g)) > 1 for g in cfg.layout.exclusive_groups)]
    assert zero and not any(tuple(r["columns"]) in zero for r in rows)  # zero by construction: not published
    assert len(rows) == 4 * (len([s for s in truth if s[0] == rows[0]["window_start"]]) - 1 - len(zero))
    covered = [r["ci_low"] <= truth[(r["window_start"], tuple(r["columns"]))] <= r["ci_high"] for r in rows]
    n = len(covered)
    # coverage at the 95% level: a binomial band with a tiny false-alarm rate (estimates in one
    # window are correlated, which widens the spread; the band is wide enough for that)
    lo, hi = binom.ppf([ALPHA / 2, 1 - ALPHA / 2], n, 0.95)
    assert lo <= sum(covered) <= hi, (sum(covered), n)
    # the frequencies are the counts over n_reports, and the Parquet files (ldp_marginals.read) hold the Avro rows
    assert all(abs(r["frequency"] * r["n_reports"] - r["estimate"]) < 1e-6 * max(1, abs(r["estimate"])) for r in rows)
    parquet = ldp_marginals.read_rows(str(d / "out"), "marginals")
    assert {r.pop("from_run") for r in parquet} == {None}   # the run's own rows, none kept from an earlier run
    assert {r.pop("window_state") for r in parquet} == {"closed"}   # read's column: a batch run's windows all closed
    assert sorted(map(schemas.to_json_line, parquet)) == sorted(map(schemas.to_json_line, rows))
    # one file set per window, names sorting by window
    names = sorted(os.path.basename(p) for p in glob.glob(str(d / "out" / "marginals" / "*.avro")))
    starts = [schemas.read_avro(d / "out" / "marginals" / name, "marginal_estimate")[0]["window_start"] for name in names]
    assert starts == sorted(starts) and len(set(starts)) == 4
    tables = read_rows(d / "out" / "tables", "table_cell")
    assert {tuple(r["group"]) for r in tables} == {("os", "dark")} and len(tables) == 4 * 3 * 2
    extremes = read_rows(d / "out" / "extremes", "extreme_estimate")
    assert {r["name"] for r in extremes} == {"any_flag", "all_flags"}
    # the simulated clients send 1 to 8 or so reports a window (uniformly drawn): the clients of the rarest
    # counts are fewer than min_reports, so the client rule withholds active_client in every window
    held = [r for r in read_rows(d / "out" / "withheld", "withheld_window") if r["statistic"] == "client_extremes"]
    assert sorted(r["window_start"] for r in held) == sorted(set(starts))
    assert all(r["reason"].startswith("client extremes withheld") for r in held)


@pytest.mark.parametrize("runner_args", [
    ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"],
], ids=["multi_processing", "portable_loopback"])
def test_other_runners_give_the_same_rows(simulated, tmp_path, runner_args):
    d = simulated
    small = tmp_path / "small.avro"
    records = schemas.read_avro(d / "reports.avro", "noisy_report")[:3000]
    schemas.write_avro(small, "noisy_report", records)
    base = ["--config", str(d / "config.yaml"), "--input", str(small)]
    ref = run(base + ["--output", str(tmp_path / "ref")])
    other = run(base + ["--output", str(tmp_path / "other")] + runner_args)
    assert other["reports_counted"] == ref["reports_counted"] == 3000
    # estimates from integer counts are identical whatever the runner's split of the work
    for kind, schema in (("marginals", "marginal_estimate"), ("withheld", "withheld_window"), ("tables", "table_cell")):
        a = sorted(map(schemas.to_json_line, read_rows(tmp_path / "ref" / kind, schema)))
        b = sorted(map(schemas.to_json_line, read_rows(tmp_path / "other" / kind, schema)))
        assert a == b and (a or kind == "withheld"), kind
    # extremes are sums of floats over reports or clients: equal up to the order of the additions
    key = lambda r: (r["window_start"], r["name"])  # noqa: E731
    a = sorted(read_rows(tmp_path / "ref" / "extremes", "extreme_estimate"), key=key)
    b = sorted(read_rows(tmp_path / "other" / "extremes", "extreme_estimate"), key=key)
    assert [key(r) for r in a] == [key(r) for r in b] and a
    for ra, rb in zip(a, b):
        assert ra["n"] == rb["n"]
        for field in ("estimate", "variance", "ci_low", "ci_high"):
            assert ra[field] == pytest.approx(rb[field], rel=1e-9, abs=1e-9)


def test_progress_on_stderr_counts_up_to_the_summary(simulated, capsys):
    d = simulated
    summary = run(["--config", str(d / "config.yaml"), "--input", str(d / "*.avro"), "--output",
                   str(d / "progress"), "--progress-seconds", "0.05"])
    err = capsys.readouterr().err
    counted = [int(m.group(1).replace(",", "")) for m in re.finditer(r"^\[\d\d:\d\d\] counted ([\d,]+) reports; "
                                                                      r"dead-lettered \d+", err, re.M)]
    assert counted, err[-2000:]
    assert counted == sorted(counted) and counted[-1] <= summary["reports_counted"] == 40000
    # once the files are being written the line says so, and how far (counters of the writers)
    writing = [tuple(int(x.replace(",", "")) for x in m.groups()) for m in re.finditer(
        r"; writing outputs: ([\d,]+) of ([\d,]+) file sets \(([\d,]+) rows\)", err)]
    assert writing, err[-2000:]
    assert all(done <= planned for done, planned, _ in writing)
    assert [w[0] for w in writing] == sorted(w[0] for w in writing)


def test_progress_line_while_writing():
    from ldp_marginals.pipelines.progress import progress_line
    line = progress_line({"reports.valid": 3_000_000, "files.planned": 336, "files.written": 120,
                          "rows.written": 1_234_567}, 75)
    assert line == ("[01:15] counted 3,000,000 reports; dead-lettered 0; writing outputs: 120 of 336 file sets "
                    "(1,234,567 rows)")


def test_plan_json_and_its_inverse(tmp_path):
    from ldp_marginals.ldp.planning import half_width, reports_for_half_width
    from ldp_marginals.schemas.config import load_configs
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(SMALL_CONFIG))
    out = json.loads(cli("plan", "--config", str(tmp_path / "c.yaml"), "--reports-per-window", "5000",
                         "--frequency", "0.1", "--target-half-width", "0.02", "--json"))
    cfg = load_configs(tmp_path / "c.yaml")["app"]
    (coll,) = out["collections"]
    published = [s for s in cfg.family
                 if s and not any(len(set(s) & set(g)) > 1 for g in cfg.layout.exclusive_groups)]
    assert [tuple(r["columns"]) for r in coll["sets"]] == published
    for r in coll["sets"]:
        p, q = cfg.channels.p[r["columns"]], cfg.channels.q[r["columns"]]
        assert r["half_width"]["worst"] == pytest.approx(half_width(p, q, 5000, cfg.level))
        assert r["half_width"]["0.1"] <= r["half_width"]["worst"]
        assert r["reports_needed"]["worst"] == reports_for_half_width(p, q, 0.02, cfg.level)
    human = cli("plan", "--config", str(tmp_path / "c.yaml"), "--reports-per-window", "5000")
    assert "dark,beta,sync" in human and "at N=5,000 f=worst" in human
    # table cells (a simultaneous group: Sidak over its 6 cells) and a numeric feature's mean
    from ldp_marginals.ldp.intervals import sidak_level
    from ldp_marginals.ldp.planning import cell_variance, half_width_of, mean_variance
    spec = dict(SMALL_CONFIG, features=SMALL_CONFIG["features"] + [{"name": "m", "type": "numeric", "low": 0,
                                                                     "high": 30}],
                channel={"p": 0.2, "q": 0.8}, groups=[{"features": ["os", "dark"], "interval": "simultaneous"}])
    (tmp_path / "n.yaml").write_text(yaml.safe_dump(spec))
    (coll,) = json.loads(cli("plan", "--config", str(tmp_path / "n.yaml"), "--reports-per-window", "5000",
                             "--json"))["collections"]
    assert not any("m" in r["labels"] for r in coll["sets"])   # the numeric bit publishes a mean, not marginals
    assert [(r["cell"], r["interval"]) for r in coll["cells"]][:2] == [(["mac", "false"], "simultaneous"),
                                                                        (["mac", "true"], "simultaneous")]
    assert len(coll["cells"]) == 6
    (mac_false,) = [r for r in coll["cells"] if r["cell"] == ["mac", "false"]]
    assert mac_false["half_width"]["worst"] == pytest.approx(
        half_width_of(cell_variance([0.2], [0.8], [0.2], [0.8]) / 5000, sidak_level(cfg.level, 6)))
    (mean,) = coll["means"]
    assert mean["feature"] == "m" and mean["half_width"]["worst"] == pytest.approx(
        half_width_of(mean_variance(0.2, 0.8, 0.0, 30.0, 5000), cfg.level))
    assert "mean(m) in [0, 30]" in cli("plan", "--config", str(tmp_path / "n.yaml"), "--reports-per-window", "5000")
    # nothing asked (issue 49 item 7: it was an error): the precision at an assumed N, which it states
    bare = subprocess.run([sys.executable, "-m", "ldp_marginals.pipelines.cli", "plan", "--config",
                           str(tmp_path / "c.yaml")], capture_output=True, text=True)
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.startswith("no --reports-per-window N or --target-half-width H given: assuming N=10,000 "
                                  "reports per window and key")
    assert "at N=10,000 f=worst" in bare.stdout
    (coll,) = json.loads(cli("plan", "--config", str(tmp_path / "c.yaml"), "--json"))["collections"]
    r = coll["sets"][0]
    p, q = cfg.channels.p[r["columns"]], cfg.channels.q[r["columns"]]
    assert r["half_width"]["worst"] == pytest.approx(half_width(p, q, 10_000, cfg.level))


def test_calibrate_json():
    from ldp_marginals.ldp.privacy import local_dp_flip, sufficient_dp_flip
    out = json.loads(cli("calibrate", "--bits", "40", "--population", "10000000", "--epsilon", "2", "--json",
                         "--trials", "4000"))
    assert out["local_dp_flip"] == pytest.approx(local_dp_flip(40, np.exp(2.0)))
    assert out["sufficient_dp_flip"] == pytest.approx(sufficient_dp_flip(40, 10_000_000, np.exp(2.0)))
    assert out["sufficient_dp_flip"] == pytest.approx(0.351, abs=5e-4)
    assert 0 <= out["tail_probability"] <= 1 and out["monte_carlo_flip"] < out["local_dp_flip"]
    human = cli("calibrate", "--bits", "5", "--population", "1000", "--epsilon", "0.693", "--max-ones", "1",
                "--trials", "2000")
    assert "sufficient DP flip" in human and re.search(r"bits L \(effective\)\s+5 \(2\)", human)
    # the inverse question: how many reports does this flip need?
    from ldp_marginals.ldp.privacy import smallest_population
    out = json.loads(cli("calibrate", "--bits", "13", "--epsilon", "1", "--flip", "0.3", "--json", "--trials", "4000"))
    assert out["smallest_population"] == smallest_population(0.3, 13, np.exp(1.0), 0.01, trials=4000)
    assert "population" not in out and "reports needed at flip 0.3" in cli(
        "calibrate", "--bits", "13", "--epsilon", "1", "--flip", "0.3", "--trials", "4000")


def test_cli_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(dict(SMALL_CONFIG, max_order=0)))
    out = subprocess.run([sys.executable, "-m", "ldp_marginals.pipelines.cli", "run", "--config", str(bad), "--input", "x",
                          "--output", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2 and "max_order must be >= 1, got max_order=0" in out.stderr
    out = subprocess.run([sys.executable, "-m", "ldp_marginals.pipelines.cli", "calibrate", "--bits", "5", "--population", "10",
                          "--epsilon", "0.5"], capture_output=True, text=True)
    assert out.returncode == 2 and "population=10 is too small" in out.stderr


def test_demo_writes_real_outputs(tmp_path):
    stdout = cli("demo", "--out", str(tmp_path / "demo"), "--reports", "20000")
    assert "cover the truth" in stdout and "withheld below min_reports" in stdout
    result = json.loads((tmp_path / "demo" / "demo_result.json").read_text())
    # the demo's app collection (20,500 reports), its device-unit collection (1,333 devices) and its
    # collection with rollups (region and app version: per-region totals)
    devices, rollups = result["devices"], result["rollups"]
    assert result["summary"]["reports_counted"] == 20500 + devices["reports"] + rollups["reports"]
    assert result["withheld"] == 1
    assert "per-region totals over every app version" in stdout and rollups["rollup_rows"] >= 1
    assert result["summary"]["reports_over_device_bound"] == devices["over_bound"] == devices["reports"] - 4 * 1333
    assert "epsilon_1 1.009, epsilon_infinity 3.296, epsilon per month at 24 reports a day 3.296" in stdout
    assert result["coverage"] > 0.8
    assert glob.glob(str(tmp_path / "demo" / "estimates" / "marginals" / "*.avro"))


def test_calibrate_reads_a_config_and_gives_the_jobs_numbers(tmp_path):
    """OUE and RAPPOR channels: calibrate --config gives the job's own local epsilon and the crowd
    its sufficient-DP check asks for (no flip worked out by hand)."""
    from ldp_marginals.ldp.privacy import local_dp_epsilon
    from ldp_marginals.schemas.config import parse_config
    spec = dict(SMALL_CONFIG, channel={"os": {"mechanism": "optimized_unary", "epsilon": 1.0},
                                       "default": {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75}},
                privacy={"model": "sufficient", "epsilon": 2.0}, min_reports=100_000)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    cfg = parse_config(spec)   # the job's own check, at load
    (out,) = json.loads(cli("calibrate", "--config", str(tmp_path / "c.yaml"), "--json"))
    assert out["sufficient_crowd"] == cfg.privacy.smallest_crowd and out["symmetric_flip"] == cfg.privacy.flip
    assert out["local_epsilon"] == pytest.approx(local_dp_epsilon(cfg.layout, cfg.channels))
    human = cli("calibrate", "--config", str(tmp_path / "c.yaml"))
    assert (f"promise: sufficient DP at epsilon=2, eta=0.01: at least {cfg.privacy.smallest_crowd:,} reports per "
            "published window; min_reports=100,000: kept") in human
    # a config without a promise: the crowd an epsilon would need, with the same function
    bare = dict(spec, privacy=None)
    del bare["privacy"]
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump(bare))
    (out,) = json.loads(cli("calibrate", "--config", str(tmp_path / "bare.yaml"), "--epsilon", "2", "--json"))
    assert out["sufficient_crowd"] == cfg.privacy.smallest_crowd and out["promise"] is None
    err = subprocess.run([sys.executable, "-m", "ldp_marginals.pipelines.cli", "calibrate", "--config",
                          str(tmp_path / "c.yaml"), "--bits", "6"], capture_output=True, text=True)
    assert err.returncode == 2 and "--config gives the bits and channels: drop --bits" in err.stderr
    err = subprocess.run([sys.executable, "-m", "ldp_marginals.pipelines.cli", "calibrate", "--population", "10"],
                         capture_output=True, text=True)
    assert err.returncode == 2 and "calibrate needs --bits (or --config C.yaml" in err.stderr


def test_calibrate_reports_every_promise_and_what_to_change(tmp_path, capsys):
    """calibrate --config says of each promise whether the config keeps it: a local promise by the
    channels alone (no crowd, no sufficient-DP verdict), a sufficient one by min_reports; a config
    that does not keep its promise prints the report with what to change and exits 0 (the job
    refuses the same config)."""
    from ldp_marginals.ldp.privacy import local_dp_epsilon
    from ldp_marginals.pipelines.cli import main
    cfg = parse_config(SMALL_CONFIG)
    local = local_dp_epsilon(cfg.layout, cfg.channels)

    def calibrate(spec, *extra):
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(spec))
        assert main(["calibrate", "--config", str(path), *extra]) == 0
        human = capsys.readouterr().out
        assert main(["calibrate", "--config", str(path), "--json", *extra]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        return human, row

    # local DP kept by the channels, min_reports 0: no crowd and no sufficient-DP verdict
    human, row = calibrate(dict(SMALL_CONFIG, min_reports=0, privacy={"model": "local", "epsilon": 9}))
    assert f"promise: local DP at epsilon 9: kept (a whole report's epsilon is {local:.4g};" in human
    assert "sufficient" not in human.split("\n", 3)[3] and "NOT kept" not in human
    assert (row["promise_kept"], row["sufficient_crowd"], row["raise_min_reports_to"]) == (True, None, None)
    # local DP the channels do not keep: said, with what to change
    human, row = calibrate(dict(SMALL_CONFIG, privacy={"model": "local", "epsilon": 2}))
    assert f"promise: local DP at epsilon 2: NOT kept: a whole report's epsilon is {local:.4g}; add noise" in human
    assert row["promise_kept"] is False
    # sufficient DP with min_reports below its crowd: the crowd, and min_reports to raise to it
    crowd = parse_config(dict(SMALL_CONFIG, min_reports=10**9, privacy={"model": "sufficient", "epsilon": 3}))\
        .privacy.smallest_crowd
    assert crowd > 1
    spec = dict(SMALL_CONFIG, min_reports=crowd - 1, privacy={"model": "sufficient", "epsilon": 3})
    human, row = calibrate(spec)
    assert (f"promise: sufficient DP at epsilon=3, eta=0.01: at least {crowd:,} reports per published window; "
            f"min_reports={crowd - 1:,}: NOT kept: raise min_reports to {crowd:,}") in human
    assert (row["promise_kept"], row["raise_min_reports_to"], row["sufficient_crowd"]) == (False, crowd, crowd)
    # --epsilon beside the promise: the crowd at that epsilon too, on a line of its own
    human, row = calibrate(spec, "--epsilon", "5")
    assert "min_reports=" + f"{crowd - 1:,}: NOT kept" in human and "sufficient DP at --epsilon 5, eta=0.01" in human
    assert row["epsilon"] == 5 and row["promise_kept"] is False
    assert main(["run", "--config", str(tmp_path / "c.yaml"), "--input", "x", "--output", str(tmp_path / "o")]) == 2
    assert f"min_reports={crowd - 1} is below the {crowd:,} reports the privacy promise needs" in (
        capsys.readouterr().err)


def test_plan_reads_as_a_table(tmp_path):
    """A uniform channel: one line per order of sets with equal figures; a mean's target in its own
    unit (a frequency target gives a mean nothing); columns aligned; the privacy figures beside."""
    from ldp_marginals.ldp.planning import mean_variance, reports_for
    spec = dict(SMALL_CONFIG, features=SMALL_CONFIG["features"] + [{"name": "session_minutes", "type": "numeric",
                                                                     "low": 0, "high": 120}],
                channel={"mechanism": "symmetric", "epsilon": 1.0}, privacy={"model": "sufficient", "epsilon": 2.0},
                min_reports=50_000)
    (tmp_path / "u.yaml").write_text(yaml.safe_dump(spec))
    from ldp_marginals.schemas.config import parse_config
    cfg = parse_config(spec)
    human = cli("plan", "--config", str(tmp_path / "u.yaml"), "--reports-per-window", "5000",
                "--target-half-width", "0.01", "--target-mean-half-width", "session_minutes=2")
    lines = human.splitlines()
    ones = [line for line in lines if line.startswith("6 sets of 1 bit (e.g. dark)")]
    assert len(ones) == 1 and not any(line.startswith("beta ") for line in lines)
    assert f"needs at least {cfg.privacy.smallest_crowd:,} reports per published window" in human
    (mean_line,) = [line for line in lines if line.startswith("mean(session_minutes)")]
    bit = cfg.layout.labels.index("session_minutes")
    needed = reports_for(mean_variance(cfg.channels.p[bit], cfg.channels.q[bit], 0.0, 120.0, 1), 2.0, cfg.level)
    assert mean_line.endswith(f"{needed:,}")
    header = next(line for line in lines if line.startswith("set "))
    assert all(len(line) == len(header) for line in lines if line.startswith(("6 sets", "12 sets", "dark,beta")))
    assert sum(line.startswith(("6 sets", "12 sets", "dark,beta")) for line in lines) == 3
    # a frequency target says what a mean needs instead of a number of reports for minutes
    human = cli("plan", "--config", str(tmp_path / "u.yaml"), "--target-half-width", "0.01")
    assert "(--target-mean-half-width session_minutes=H)" in human


def test_simulate_makes_dimensions_daily_traffic_and_the_truth_of_extremes(tmp_path):
    """simulate --dimension (two) and --diurnal: every key's reports counted as the truth file says,
    traffic highest in the afternoon (UTC), and the job's OR/AND estimates within their z band of the
    true values the truth file now holds (over reports and over clients)."""
    from scipy.stats import norm
    spec = dict(SMALL_CONFIG, dimensions={"region": {}, "platform": {}}, min_reports=1,
                extremes=[{"name": "any_flag", "op": "or", "features": ["dark", "beta", "sync"]},
                          {"name": "client_dark", "op": "or", "bits": ["dark"], "over": "client"}])
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    cli("simulate", "--config", str(tmp_path / "c.yaml"), "--reports", "48000", "--out", str(tmp_path / "r.avro"),
        "--dimension", "region=eu:0.6,us:0.4", "--dimension", "platform=ios,android", "--diurnal",
        "--span-seconds", "86400", "--reports-per-client", "4", "--seed", "5")
    truth = json.loads((tmp_path / "r.avro.truth.json").read_text())["windows"]
    keys = {json.dumps(w["dimensions"], sort_keys=True) for w in truth}
    assert len(keys) == 4 and len(truth) == 24 * 4
    by_hour = {}
    for w in truth:
        by_hour[w["window_start"] // 3_600_000 % 24] = by_hour.get(w["window_start"] // 3_600_000 % 24, 0) + w["n_reports"]
    assert by_hour[14] > 4 * by_hour[2]   # rate 1.8 against 0.2 in expectation
    eu = sum(w["n_reports"] for w in truth if w["dimensions"]["region"] == "eu")
    assert abs(eu / 48000 - 0.6) < 5 * (0.24 / 48000) ** 0.5
    run(["--config", str(tmp_path / "c.yaml"), "--input", str(tmp_path / "r.avro"), "--output", str(tmp_path / "o")])
    rows = ldp_marginals.read_rows(str(tmp_path / "o"), "extremes")
    n_rows = {(r["window_start"], json.dumps(r["dimensions"], sort_keys=True)): r["n_reports"]
              for r in ldp_marginals.read_rows(str(tmp_path / "o"), "marginals")}
    bound = norm.isf(ALPHA / 2 / len(rows))
    checked = 0
    for w in truth:
        key = (w["window_start"], json.dumps(w["dimensions"], sort_keys=True))
        assert n_rows[key] == w["n_reports"]
        for e in w["extremes"]:
            (row,) = [r for r in rows if r["name"] == e["name"] and r["window_start"] == w["window_start"]
                      and r["dimensions"] == w["dimensions"]]
            assert row["n"] == e["n"]
            assert abs(row["estimate"] - e["true"]) <= bound * row["variance"] ** 0.5, (e, row)
            checked += 1
    assert checked == 2 * len(truth)
