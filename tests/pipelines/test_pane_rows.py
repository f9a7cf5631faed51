"""Rows that say which pane they are (issue 49, item 4): every estimate row carries ``pane_index``,
``pane_timing`` (EARLY, ON_TIME, LATE, as Beam names them), ``final`` and ``rollup``; extremes rows say
what ``n`` counts. A collection's Parquet folder holds its final key rows only, so a plain glob of it
that sums counts each window and key once: neither a streaming window's early and on-time panes twice,
nor a key in itself and in its rollup. A window a stopped run never closed reads as such.

Before the change, the streaming run's glob held every pane (each window's reports counted once per pane)
and the batch run's glob held the rollup rows beside the keys' (every report counted twice)."""
import glob
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing import test_stream

import ldp_marginals
from ldp_marginals.pipelines.stopping import record_stop
from ldp_marginals.schemas import read_avro
from ldp_marginals.schemas.bigquery import table_schema, to_row
from ldp_marginals.schemas.outputs import MANIFEST_FILE, SCHEMA_OF, load_manifest
from ldp_marginals.transforms.manifest import start_run
from ldp_marginals.transforms.sinks import FileSink
from tests.batch_runs import keyed_records, run_command
from tests.outputs import write_streaming_run
from tests.pipelines.test_streaming import START, config, record, run_stream

ALL = "__all__"
CONFIG = {"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(3)],
          "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 1, "min_reports": 50,
          "window": {"type": "fixed", "size_seconds": 3600},
          "groups": [["f0", "f1"]],
          "dimensions": {"region": {"max_values": 4}, "version": {"max_values": 8}}, "rollups": [["region"]],
          "extremes": [{"name": "any_r", "op": "or", "features": ["f0", "f1"]},
                       {"name": "any_c", "op": "or", "features": ["f0", "f1"], "over": "client"}]}
# every key released (at least min_reports=50 reports, and 60 clients of two reports each in the largest)
KEYS = {("eu", "1.0"): 120, ("eu", "2.0"): 110, ("us", "1.0"): 130}


def glob_table(folder: str) -> pa.Table:
    """What ``read_parquet('<folder>/*.parquet')`` reads: the folder's files, not its subfolders."""
    files = sorted(glob.glob(os.path.join(folder, "*.parquet")))
    assert files, folder
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pane-rows")
    # clients of exactly two reports each: one group of n / 2 >= min_reports clients, so client rows publish
    run_command(tmp, CONFIG, keyed_records(CONFIG, KEYS, seed=30, reports_per_client=2), ())
    return str(tmp / "out")


def test_batch_rows_say_their_pane_and_a_plain_glob_sums_each_key_once(batch):
    rows = {kind: ldp_marginals.read_rows(batch, kind) for kind in ("marginals", "extremes", "consistent_tables")}
    for kind, kind_rows in rows.items():
        assert kind_rows, kind
        assert {(r["pane_index"], r["pane_timing"], r["final"], r["window_state"]) for r in kind_rows} == \
            {(0, "ON_TIME", True, "closed")}, kind
        assert all(r["rollup"] == (ALL in r["dimensions"].values()) for r in kind_rows), kind
    assert {r["rollup"] for r in rows["marginals"]} == {True, False}   # the run published rollups
    # the plain glob of the collection's folder: key rows only, each (key, set) once
    keys = glob_table(os.path.join(batch, "parquet", "marginals", "app"))
    assert keys.num_rows == len([r for r in rows["marginals"] if not r["rollup"]])
    assert not any(keys.column("rollup").to_pylist())
    f0 = [r for r in keys.to_pylist() if r["columns"] == [0]]
    assert sum(r["n_reports"] for r in f0) == sum(KEYS.values())   # each report counted once
    rollups = glob_table(os.path.join(batch, "parquet", "marginals", "app", "rollups"))
    assert all(rollups.column("rollup").to_pylist()) and rollups.num_rows
    assert sorted(r["n_reports"] for r in rollups.to_pylist() if r["columns"] == [0]) == [130, 120 + 110]
    # every file of the run is where its rows say: final key rows in the folder, rollups apart, no panes
    for e in load_manifest(batch)["files"]:
        if e["kind"] == "dead_letters":
            continue
        table = pq.read_table(os.path.join(batch, e["files"]["parquet"]))
        rollup = set(table.column("rollup").to_pylist())
        assert rollup == {e["rollup"]} and e["final"] and e["schema_version"] == 2
        assert ("/rollups/" in e["files"]["parquet"]) == e["rollup"] and "/panes/" not in e["files"]["parquet"]
        avro = read_avro(os.path.join(batch, e["files"]["avro"]), SCHEMA_OF[e["kind"]])
        assert {(r["pane_index"], r["pane_timing"], r["final"]) for r in avro} == {(0, "ON_TIME", True)}


def test_extremes_rows_name_what_n_counts(batch):
    ext = [r for r in ldp_marginals.read_rows(batch, "extremes") if not r["rollup"]]
    by_name = {}
    for r in ext:
        by_name.setdefault(r["name"], set()).add(r["n_counts"])
    assert by_name == {"any_r": {"reports"}, "any_c": {"clients"}}
    reports = {tuple(sorted(r["dimensions"].items())): r["n"] for r in ext if r["name"] == "any_r"}
    clients = {tuple(sorted(r["dimensions"].items())): r["n"] for r in ext if r["name"] == "any_c"}
    for (region, version), n in KEYS.items():
        key = (("region", region), ("version", version))
        assert reports[key] == n and clients[key] == n // 2   # two reports per client


def stream_run(tmp_path, stream, cfg):
    sink = FileSink(str(tmp_path), streaming=True)
    start_run(str(tmp_path), sink.run_id, streaming=True)
    got, _ = run_stream(stream, cfg, sink=sink)
    return got


def test_streaming_rows_say_early_on_time_late_and_final_and_the_glob_holds_the_final_pane(tmp_path):
    cfg = config(early_firing_seconds=10)   # fixed 60 s windows, allowed lateness 30 s, min_reports 1
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([record(cfg, 1), record(cfg, 2)])
              .advance_processing_time(20)                 # early pane: 2 reports
              .add_elements([record(cfg, 3)])
              .advance_watermark_to(START + 60)            # on time: 3
              .add_elements([record(cfg, 4)])              # late, within the lateness: a late pane with 4
              .advance_watermark_to(START + 95)            # the window closes: its final pane, 4
              .advance_watermark_to_infinity())
    got = stream_run(tmp_path, stream, cfg)
    f0 = [r for r in got["marginals"] if r["columns"] == [0]]   # the rows a BigQuery sink receives
    # BigQuery's table has the columns (its schema is derived from the Avro one) and the rows fill them
    fields = {f["name"]: f["mode"] for f in table_schema("marginal_estimate")["fields"]}
    assert {fields[n] for n in ("pane_index", "pane_timing", "final", "rollup")} == {"NULLABLE"}
    assert {(b["pane_timing"], b["final"]) for b in (to_row("marginal_estimate", r) for r in f0)} >= {("LATE", True)}
    panes = sorted((r["pane_index"], r["pane_timing"], r["final"], r["n_reports"]) for r in f0)
    assert [p[0] for p in panes] == list(range(len(panes)))   # one row of the set per pane, indexes count up
    assert panes[0] == (0, "EARLY", False, 2)
    assert [p[1:] for p in panes if p[1] != "EARLY"] == [("ON_TIME", False, 3), ("LATE", False, 4), ("LATE", True, 4)]
    # the files say the same, and only the final pane is in the collection's folder
    every = glob.glob(str(tmp_path / "parquet" / "marginals" / "app" / "**" / "*.parquet"), recursive=True)
    assert len(every) == len(panes)
    final = glob_table(str(tmp_path / "parquet" / "marginals" / "app"))
    assert set(final.column("final").to_pylist()) == {True}
    assert final.num_rows == len({tuple(r["columns"]) for r in got["marginals"]})   # each set once
    f0_final = [r for r in final.to_pylist() if r["columns"] == [0]]
    assert [(r["pane_index"], r["pane_timing"], r["n_reports"]) for r in f0_final] == [(len(panes) - 1, "LATE", 4)]
    earlier = glob_table(str(tmp_path / "parquet" / "marginals" / "app" / "panes"))
    assert sorted(set(earlier.column("pane_timing").to_pylist())) == ["EARLY", "LATE", "ON_TIME"]
    assert not any(earlier.column("final").to_pylist())
    # the reader: the latest pane is the final one; final_only reads the same
    read = ldp_marginals.read_rows(str(tmp_path), "marginals")
    assert {(r["pane_index"], r["final"], r["window_state"]) for r in read} == {(len(panes) - 1, True, "closed")}
    assert ldp_marginals.read_rows(str(tmp_path), "marginals", final_only=True) == read


def test_a_window_a_stop_cut_short_reads_as_never_closed_and_final_only_leaves_it_out(tmp_path):
    window, key = (START * 1000, (START + 60) * 1000), ()
    row = {"collection": "app", "window_start": window[0], "window_end": window[1], "dimensions": {},
           "n_reports": 7, "columns": [0], "labels": ["dark"], "estimate": 3.0, "frequency": 3 / 7, "variance": 1.0,
           "ci_low": 1.0, "ci_high": 5.0}
    run_id = write_streaming_run(tmp_path, [])
    from ldp_marginals.transforms.sinks import write_file_set
    write_file_set(str(tmp_path), run_id, "marginals", "app", window, 0, [row], key, "EARLY", False)
    running = ldp_marginals.read_rows(str(tmp_path), "marginals")
    assert [(r["pane_timing"], r["final"], r["window_state"]) for r in running] == [("EARLY", False, "open")]
    assert ldp_marginals.read_rows(str(tmp_path), "marginals", final_only=True) == []
    record_stop(str(tmp_path), run_id, {"signal": "SIGINT", "how": "cancelled", "resume_from": None})   # run's Ctrl-C
    assert json.loads((tmp_path / MANIFEST_FILE).read_text())["stopped"]
    stopped = ldp_marginals.read_rows(str(tmp_path), "marginals")
    assert [r["window_state"] for r in stopped] == ["never_closed"]
    assert not glob.glob(str(tmp_path / "parquet" / "marginals" / "app" / "*.parquet"))   # no final rows to glob


def test_a_run_written_before_rows_said_their_pane_reads_with_them_from_its_manifest(tmp_path):
    """Schema version 1: files without the pane columns, entries without ``final``. A batch run's windows
    are final (one pane each); the columns are filled from the entries, pane_timing stays unknown."""
    from tests.outputs import write_run
    window = (START * 1000, (START + 60) * 1000)
    row = {"collection": "app", "window_start": window[0], "window_end": window[1], "dimensions": {"region": ALL},
           "n_reports": 7, "columns": [0], "labels": ["dark"], "estimate": 3.0, "frequency": 3 / 7, "variance": 1.0,
           "ci_low": 1.0, "ci_high": 5.0}
    write_run(tmp_path, [("marginals", "app", window, 0, [row], (("region", ALL),))])
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    for e in manifest["files"]:   # as version 1 wrote them
        for name in ("timing", "final", "rollup", "schema_version"):
            del e[name]
        path = str(tmp_path / e["files"]["parquet"])
        old = pq.read_table(path)
        pq.write_table(old.drop_columns(["pane_index", "pane_timing", "final", "rollup"]), path)
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    (got,) = ldp_marginals.read_rows(str(tmp_path), "marginals", final_only=True)
    assert (got["pane_index"], got["pane_timing"], got["final"], got["rollup"], got["window_state"]) == \
        (0, None, True, True, "closed")
