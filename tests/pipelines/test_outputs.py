"""A run owns its outputs (issue 22): the manifest names every file the run wrote, readers read those
and nothing else, a rerun never mixes with the run before, a changed or damaged file is an error
naming it; the Parquet files hold the Avro rows; ``ldp_marginals.read`` selects."""
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import ldp_marginals
from ldp_marginals import schemas
from ldp_marginals.pipelines.dashboard.view import FileCache, parse_selection, view
from ldp_marginals.pipelines.run import run
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS, simulate_population, write_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import (
    ESTIMATE_KINDS,
    KINDS,
    MANIFEST_FILE,
    SCHEMA_OF,
    SUMMARY_FILE,
    OutputError,
    load_manifest,
)

HOUR = 3_600_000
CONFIG = {"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(4)],
          "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 2, "min_reports": 50,
          "window": {"type": "fixed", "size_seconds": 3600}, "groups": [["f0", "f1"]],
          "dimensions": {"region": {"max_values": 4}},
          "extremes": [{"name": "any", "op": "or", "bits": ["f0", "f1"]}]}


def job(tmp_path, name, hours, seed=1, reports=2000, *more):
    """A batch run over ``hours`` hourly windows into ``tmp_path/out`` (``more``: further options);
    returns its summary."""
    cfg = parse_config(CONFIG)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    for i, region in enumerate(("eu", "us")):
        pop = simulate_population(cfg, reports // 2, seed=seed * 10 + i, span_seconds=hours * 3600)
        write_population(cfg, pop, str(tmp_path / f"{name}-{region}.avro"), dimensions={"region": region})
    return run(["--config", str(tmp_path / "c.yaml"), "--input", str(tmp_path / f"{name}-*.avro"),
                "--output", str(tmp_path / "out"), "--progress-seconds", "0", *more])


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outputs")
    job(tmp, "four", 4)
    return tmp


def test_the_manifest_lists_every_file_with_its_rows_and_parquet_holds_the_avro_rows(first):
    out = first / "out"
    manifest = load_manifest(str(out))
    assert manifest["complete"] and manifest["mode"] == "batch" and manifest["summary"]["reports_counted"] == 2000
    assert json.loads((out / SUMMARY_FILE).read_text()) == manifest["summary"]
    assert not list(out.rglob("*.tmp")) and not list(out.rglob(".ldp-marginals-write-check"))
    assert not (out / "_runs").exists()   # a batch run's manifest holds its entries
    listed = {p for e in manifest["files"] for p in e["files"].values()}
    on_disk = {os.path.relpath(p, out).replace(os.sep, "/") for p in out.rglob("*") if p.suffix in (".avro", ".parquet")}
    assert listed == on_disk
    kinds = {e["kind"] for e in manifest["files"]}
    assert {"marginals", "tables", "extremes"} <= kinds <= set(KINDS)
    for e in manifest["files"]:
        avro = schemas.read_avro(out / e["files"]["avro"], SCHEMA_OF[e["kind"]])
        table = pq.read_table(out / e["files"]["parquet"])
        assert len(avro) == table.num_rows == e["rows"]
        which = {"estimator": "unbiased"} if e["kind"] == "tables" else {}
        read = ldp_marginals.read_rows(str(out), e["kind"], collection=e["group"], windows=e["window_start"],
                                       dimensions=e["key"], **which)
        assert {r["from_run"] for r in read} <= {None}   # every row is the run's own (none kept from an earlier run)
        parquet = [{k: v for k, v in r.items() if k not in ("estimator", "from_run", "window_state")} for r in read]
        assert sorted(map(schemas.to_json_line, parquet)) == sorted(map(schemas.to_json_line, avro))


def test_read_selects_by_collection_window_range_and_dimensions_with_typed_columns(first):
    out = str(first / "out")
    every = ldp_marginals.read(out, "marginals")
    assert every.schema.field("window_start").type == pa.timestamp("ms", tz="UTC")
    assert every.schema.field("dimensions").type == pa.map_(pa.string(), pa.string())
    starts = sorted({r["window_start"] for r in ldp_marginals.read_rows(out, "marginals")})
    assert len(starts) == 4 and starts[0] == DEFAULT_START_MS
    two = ldp_marginals.read_rows(out, "marginals", windows=("2026-01-01T01:00", starts[2]))
    assert sorted({r["window_start"] for r in two}) == starts[1:3]
    eu = ldp_marginals.read_rows(out, "marginals", dimensions={"region": "eu"})
    us = ldp_marginals.read_rows(out, "marginals", dimensions={"region": "us"})
    assert eu and {r["dimensions"]["region"] for r in eu} == {"eu"}
    assert len(eu) + len(us) == every.num_rows   # every key of this job names a region
    with pytest.raises(ValueError, match=r"dimensions=\{\} matches no key .* the keys are \{region=eu\}, \{region=us\}"):
        ldp_marginals.read(out, "marginals", dimensions={})   # no key without dimensions here
    assert ldp_marginals.read(out, "marginals", collection="other").num_rows == 0
    for bad, message in (({"windows": "yesterday"}, "windows must be UTC times"),
                         ({"windows": (starts[2], starts[1])}, "first <= last"),
                         ({"dimensions": "region=eu"}, "dimensions must be a dict")):
        with pytest.raises(ValueError, match=message):
            ldp_marginals.read(out, "marginals", **bad)
    with pytest.raises(ValueError, match="kind must be one of"):
        ldp_marginals.read(out, "marginal")


def test_read_gives_the_consistent_tables_by_default_and_the_unbiased_ones_on_request(first, tmp_path):
    import shutil
    out = str(first / "out")
    default = ldp_marginals.read_rows(out, "tables")
    unbiased = ldp_marginals.read_rows(out, "tables", estimator="unbiased")
    assert default and {r["estimator"] for r in default} == {"consistent"}
    assert {r["estimator"] for r in unbiased} == {"unbiased"} and "variance" in unbiased[0]
    assert default == ldp_marginals.read_rows(out, "consistent_tables")
    assert default == ldp_marginals.read_rows(out, "tables", estimator="consistent")
    assert {r["method"] for r in default} == {"projection"}

    def cell(r):
        return r["window_start"], r["dimensions"]["region"], tuple(r["group"]), tuple(r["cell"])
    assert sorted(map(cell, default)) == sorted(map(cell, unbiased))   # the same cells, every window and key
    assert all(0 <= r["frequency_low"] <= r["frequency"] <= r["frequency_high"] <= 1 for r in default)
    eu = ldp_marginals.read_rows(out, "tables", dimensions={"region": "eu"}, windows=DEFAULT_START_MS)
    assert len(eu) == 4 and sum(r["frequency"] for r in eu) == pytest.approx(1.0, abs=1e-9)
    for bad, message in (({"estimator": "raw"}, "estimator must be one of"),):
        with pytest.raises(ValueError, match=message):
            ldp_marginals.read(out, "tables", **bad)
    with pytest.raises(ValueError, match="estimator applies to kind 'tables' only"):
        ldp_marginals.read(out, "marginals", estimator="unbiased")
    with pytest.raises(ValueError, match="holds the consistent tables"):
        ldp_marginals.read(out, "consistent_tables", estimator="unbiased")
    # a run written before consistent tables were published: its tables only on request
    old = tmp_path / "old"
    shutil.copytree(out, old)
    manifest = json.loads((old / MANIFEST_FILE).read_text())
    manifest["files"] = [e for e in manifest["files"] if e["kind"] != "consistent_tables"]
    (old / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(OutputError, match="estimator='unbiased'"):
        ldp_marginals.read(str(old), "tables")
    assert ldp_marginals.read(str(old), "tables", estimator="unbiased").num_rows == len(unbiased)


def test_a_rerun_owns_the_directory_and_earlier_files_never_mix_in(tmp_path):
    job(tmp_path, "four", 4)
    before = {r["window_start"] for r in ldp_marginals.read_rows(str(tmp_path / "out"), "marginals")}
    # other reports over the same hours: under the release ledger their windows would be withheld
    # (tests/pipelines/test_release_ledger.py); this test is about files, so the rerun starts a new ledger
    job(tmp_path, "two", 2, 2, 1000, "--new-ledger")
    after = ldp_marginals.read_rows(str(tmp_path / "out"), "marginals")
    assert len(before) == 4 and len({r["window_start"] for r in after}) == 2
    assert sum(r["n_reports"] for r in after if r["columns"] == [0]) == 1000   # the rerun's reports, no more
    # the earlier run's two extra windows are gone from the directory, not only from the manifest: two
    # windows of two keys (regions) each, a file per window and key
    assert len(list((tmp_path / "out" / "marginals").glob("*.avro"))) == 4
    assert len(list((tmp_path / "out" / "parquet" / "marginals" / "app").glob("*.parquet"))) == 4


def test_before_any_run_has_finished_readers_refuse_and_say_why(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(OutputError, match="holds no complete run: manifest.json is missing"):
        ldp_marginals.read(str(tmp_path / "out"), "marginals")


def test_a_changed_or_damaged_file_is_an_error_naming_it_and_the_dashboard_shows_the_rest(tmp_path):
    job(tmp_path, "four", 4)
    out = tmp_path / "out"
    files = sorted((out / "parquet" / "marginals" / "app").glob("*.parquet"))   # by window, then key
    changed, damaged = files[0], files[2]   # a key of the first window, a key of the second
    table = pq.read_table(changed)
    pq.write_table(table.slice(0, table.num_rows - 1), changed)      # a row short of its entry
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    with pytest.raises(OutputError, match=rf"{changed} holds {table.num_rows - 1} rows where the run's manifest says "
                                          rf"{table.num_rows}"):
        ldp_marginals.read(str(out), "marginals", windows=DEFAULT_START_MS)
    with pytest.raises(OutputError, match=rf"{damaged} cannot be read"):
        ldp_marginals.read(str(out), "marginals", windows=DEFAULT_START_MS + HOUR)
    assert ldp_marginals.read(str(out), "marginals", windows=DEFAULT_START_MS + 2 * HOUR).num_rows > 0
    data = view(str(out), parse_selection({}), FileCache(str(out)))
    assert len(data["problems"]) == 2 and str(changed) in data["problems"][0] and str(damaged) in data["problems"][1]
    # a damaged file costs its window and key only: the dashboard's key is shown wherever its own file is whole
    keys = {e["files"]["parquet"]: e["key"] for e in load_manifest(str(out))["files"]}
    lost = {(w, json.dumps(keys[os.path.relpath(f, out)])) for w, f in ((DEFAULT_START_MS, changed),
                                                                      (DEFAULT_START_MS + HOUR, damaged))}
    shown = {(r["window_start"], json.dumps(r["dimensions"])) for r in data["marginals"]}
    assert not shown & lost and {w for w, _ in shown} >= {DEFAULT_START_MS + 2 * HOUR, DEFAULT_START_MS + 3 * HOUR}
    assert data["summary"]["reports_counted"] == 2000
    # the window of the damaged file chosen: its problem named, the other kinds of the window shown
    data = view(str(out), dict(parse_selection({}), window=DEFAULT_START_MS + HOUR), FileCache(str(out)))
    assert data["window"] == DEFAULT_START_MS + HOUR and any(str(damaged) in p for p in data["problems"])


def test_every_kind_has_an_arrow_schema_matching_its_avro_fields():
    from ldp_marginals.schemas.arrow import arrow_schema
    for kind in KINDS:
        avro = [f["name"] for f in schemas.raw_schema(SCHEMA_OF[kind])["fields"]]
        assert arrow_schema(SCHEMA_OF[kind]).names == avro, kind
    assert set(ESTIMATE_KINDS) < set(KINDS)


def test_the_readmes_reader_example_runs_on_a_runs_outputs(first, tmp_path):
    import re
    import subprocess
    import sys
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = re.search(r"```py\n(import ldp_marginals\n.*?)```", readme, re.S).group(1)
    code = code.replace("out/demo/estimates", str(first / "out")).replace('"demo_app"', '"app"')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    # windows 00:00 to 06:00 of this run: its four hours, region eu only
    expected = ldp_marginals.read(str(first / "out"), "marginals", dimensions={"region": "eu"}).num_rows
    assert out.stdout.split() == [str(expected), "timestamp[ms,", "tz=UTC]"] and expected > 0
