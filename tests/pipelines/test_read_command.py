"""``ldp-marginals read OUT KIND`` (issue 49, item 5) on a real ``ldp-marginals run`` output: rows as CSV,
JSON lines or Parquet, selected by collection, windows and dimensions, final rows by default; and
``ldp_marginals.to_pandas`` (the ``pandas`` extra), whose ``dimensions`` are dicts, not lists of pairs."""
import csv
import io
import json

import pyarrow.parquet as pq
import pytest
import yaml

import ldp_marginals
from ldp_marginals.pipelines.cli import EXIT_USAGE, main
from ldp_marginals.pipelines.simulate import simulate_population, write_population
from ldp_marginals.pipelines.stopping import record_stop
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.sinks import write_file_set
from tests.outputs import write_streaming_run

CONFIG = {"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(2)],
          "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 1, "min_reports": 50,
          "window": {"type": "fixed", "size_seconds": 3600},
          "dimensions": {"region": {"max_values": 4}, "version": {"max_values": 4}}, "rollups": [["region"]]}
KEYS = {("eu", "1.0"): 80, ("eu", "2.0"): 70, ("us", "1.0"): 90}
START = 1_767_225_600_000   # 2026-01-01T00:00Z, the simulation's default start


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("read-command")
    cfg = parse_config(CONFIG)
    (tmp / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    for i, ((region, version), n) in enumerate(KEYS.items()):   # two hourly windows
        pop = simulate_population(cfg, 2 * n, seed=50 + i, span_seconds=7199)
        write_population(cfg, pop, str(tmp / f"in-{i}.avro"), dimensions={"region": region, "version": version})
    assert main(["run", "--config", str(tmp / "c.yaml"), "--input", str(tmp / "in-*.avro"), "--output",
                 str(tmp / "out"), "--progress-seconds", "0"]) == 0
    return str(tmp / "out")


def read_cli(capsys, *args) -> tuple:
    code = main(["read", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_csv_by_default_with_every_row_saying_its_pane(out, capsys):
    code, text, _ = read_cli(capsys, out, "marginals")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(text)))
    expected = ldp_marginals.read_rows(out, "marginals", final_only=True)
    assert len(rows) == len(expected) > 0
    assert {(r["pane_index"], r["pane_timing"], r["final"], r["window_state"]) for r in rows} == \
        {("0", "ON_TIME", "true", "closed")}
    assert {r["window_start"] for r in rows} == {"2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"}
    dims = [json.loads(r["dimensions"]) for r in rows]
    assert all(isinstance(d, dict) for d in dims)
    assert {r["rollup"] for r, d in zip(rows, dims) if d.get("version") == "__all__"} == {"true"}
    assert {r["rollup"] for r, d in zip(rows, dims) if d.get("version") != "__all__"} == {"false"}
    # the key rows alone count each report once: f0's n_reports over keys and windows are the reports sent,
    # less those withheld (rollup rows, summed too, would count them twice)
    keys = [r for r in rows if r["rollup"] == "false" and r["columns"] == "[0]"]
    held = sum(r["n_reports"] for r in ldp_marginals.read_rows(out, "withheld") if not r["rollup"])
    assert sum(int(r["n_reports"]) for r in keys) == sum(2 * n for n in KEYS.values()) - held


def test_json_lines_of_one_rollup_and_one_window(out, capsys):
    code, text, _ = read_cli(capsys, out, "marginals", "--dimension", "region=eu", "--windows",
                             "2026-01-01T01:00", "--format", "json")
    assert code == 0
    rows = [json.loads(line) for line in text.splitlines()]
    assert rows and {json.dumps(r["dimensions"], sort_keys=True) for r in rows} == \
        {json.dumps({"region": "eu", "version": "__all__"}, sort_keys=True)}
    assert {r["window_start"] for r in rows} == {"2026-01-01T01:00:00Z"} and all(r["rollup"] for r in rows)
    expected = ldp_marginals.read_rows(out, "marginals", dimensions={"region": "eu"}, windows=START + 3_600_000)
    assert sorted(r["estimate"] for r in rows) == sorted(r["estimate"] for r in expected)


def test_parquet_to_a_file_holds_what_read_returns(out, capsys, tmp_path):
    target = tmp_path / "m.parquet"
    code, text, err = read_cli(capsys, out, "marginals", "--collection", "app", "--dimension", "region=us",
                               "--dimension", "version=1.0", "--exact", "--output", str(target))
    assert code == 0 and text == "" and "rows of marginals" in err
    got = pq.read_table(target)
    expected = ldp_marginals.read(out, "marginals", collection="app", dimensions={"region": "us", "version": "1.0"},
                                  exact=True, final_only=True)
    assert got.num_rows == expected.num_rows > 0
    assert got.to_pylist() == expected.to_pylist()


@pytest.mark.parametrize("args, message", [
    (["--windows", "2026-01-01T00:00", "2026-01-01T01:00", "2026-01-01T02:00"], "--windows takes one start"),
    (["--format", "parquet"], "--format parquet needs --output"),
    (["--dimension", "region"], "--dimension must be NAME=VALUE"),
    (["--dimension", "region=asia"], "matches no key"),
])
def test_a_bad_selection_is_a_usage_error_that_says_why(out, capsys, args, message):
    code, _, err = read_cli(capsys, out, "marginals", *args)
    assert code == EXIT_USAGE and message in err


def test_to_pandas_gives_dimensions_as_dicts(out):
    df = ldp_marginals.to_pandas(ldp_marginals.read(out, "marginals", dimensions={"region": "us"}))
    assert len(df) > 0
    assert all(isinstance(d, dict) and d["region"] == "us" for d in df["dimensions"])
    assert str(df["window_start"].dt.tz) == "UTC" and df["final"].all()


def test_final_only_leaves_out_a_window_a_stop_cut_short_and_says_so(tmp_path, capsys):
    window = (START, START + 3_600_000)
    row = {"collection": "app", "window_start": window[0], "window_end": window[1], "dimensions": {},
           "n_reports": 70, "columns": [0], "labels": ["f0"], "estimate": 30.0, "frequency": 3 / 7, "variance": 9.0,
           "ci_low": 24.0, "ci_high": 36.0}
    run_id = write_streaming_run(tmp_path, [])
    write_file_set(str(tmp_path), run_id, "marginals", "app", window, 0, [row], (), "EARLY", False)
    record_stop(str(tmp_path), run_id, {"signal": "SIGINT", "how": "cancelled", "resume_from": None})
    code, text, err = read_cli(capsys, str(tmp_path), "marginals")
    assert code == 0 and list(csv.DictReader(io.StringIO(text))) == []
    assert "1 never closed" in err and "--no-final-only" in err
    code, text, err = read_cli(capsys, str(tmp_path), "marginals", "--no-final-only", "--format", "json")
    (got,) = [json.loads(line) for line in text.splitlines()]
    assert (got["pane_timing"], got["final"], got["window_state"], got["n_reports"]) == \
        ("EARLY", False, "never_closed", 70)
