"""The release ledger as the command uses it (issue 35, item 3): batch runs into one ``--output`` read
``DIR/_ledger/releases.json`` before they publish and add their release after. A rerun over the same
input withholds nothing; the same input plus one backfilled report withholds that report's window,
with the reason, counted in the summary and manifest, and keeps the first run's rows of that window
published (issue 47, item 3: a rerun never unpublishes), readable by ``read``, ``compare`` and the
dashboard, marked as the first run's; a backfill the ledger lets through replaces the earlier rows;
``--new-ledger`` publishes it (and the window's rows then differ from the first run's by that one
report); a streaming run into the output is refused. The rule itself is proven against the
exact-algebra checker in tests/transforms/test_release_ledger.py."""
import argparse
import json

import pytest
import yaml

import ldp_marginals
from ldp_marginals.pipelines.compare import add_compare_arguments, compare, iso, render
from ldp_marginals.pipelines.dashboard.view import FileCache, parse_selection, view
from ldp_marginals.pipelines.run import run
from ldp_marginals.pipelines.simulate import simulate_population, write_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import LEDGER_DIR, LEDGER_FILE, load_manifest

CONFIG = {"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(3)],
          "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 2, "min_reports": 20,
          "window": {"type": "fixed", "size_seconds": 60}, "groups": [["f0", "f1"]],   # tables beside marginals
          "extremes": [{"name": "any", "op": "or", "bits": ["f0", "f1", "f2"]}]}


def _rows(out, kind):
    return list(ldp_marginals.read_rows(str(out), kind))


def _by_window(rows) -> dict:
    out = {}
    for r in rows:
        out.setdefault(r["window_start"], []).append(r)
    return out


def _ledger(out) -> dict:
    return json.loads((out / LEDGER_DIR / LEDGER_FILE).read_text())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ledger")
    cfg = parse_config(CONFIG)
    (tmp / "app.yaml").write_text(yaml.safe_dump(CONFIG))
    (tmp / "first").mkdir()
    (tmp / "backfilled").mkdir()
    write_population(cfg, simulate_population(cfg, 400, seed=1, span_seconds=4 * 60), str(tmp / "first" / "a.avro"))
    write_population(cfg, simulate_population(cfg, 400, seed=1, span_seconds=4 * 60), str(tmp / "backfilled" / "a.avro"))
    write_population(cfg, simulate_population(cfg, 1, seed=7, span_seconds=4 * 60), str(tmp / "backfilled" / "b.avro"))
    return tmp


def _run(inputs, folder, out, *more):
    return run(["--config", str(inputs / "app.yaml"), "--input", str(inputs / folder / "*.avro"),
                "--output", str(out), "--progress-seconds", "0", *more])


def test_reruns_respect_the_ledger(inputs, tmp_path):
    out = tmp_path / "out"
    first = _run(inputs, "first", out)
    assert first["reports_withheld_by_ledger"] == 0 and first["client_rows_withheld_by_ledger"] == 0
    ledger = _ledger(out)
    assert [len(r["slices"]) for r in ledger["collections"]["app"]] == [4]   # 4 windows, one key
    assert sum(s[3] for s in ledger["collections"]["app"][0]["slices"]) == 400
    before = _by_window(_rows(out, "marginals"))
    assert len(before) == 4

    again = _run(inputs, "first", out)   # the same input and config: nothing withheld, nothing added
    assert again["reports_withheld_by_ledger"] == 0
    assert _by_window(_rows(out, "marginals")) == before
    assert len(_ledger(out)["collections"]["app"]) == 1

    first_run, first_files = load_manifest(str(out))["run_id"], load_manifest(str(out))["files"]
    backfilled = _run(inputs, "backfilled", out)   # plus one report: its window would single it out
    assert backfilled["reports_counted"] == 401
    held = [r for r in _rows(out, "withheld") if r["reason"].startswith("ledger:")]
    assert len(held) == 1 and held[0]["cause"] == "privacy"
    start = held[0]["window_start"]
    assert backfilled["reports_withheld_by_ledger"] == held[0]["n_reports"] == before[start][0]["n_reports"] + 1
    assert load_manifest(str(out))["summary"]["reports_withheld_by_ledger"] == held[0]["n_reports"]
    assert len(_ledger(out)["collections"]["app"]) == 2   # the backfill's release, its window unpublished
    _check_kept(out, before, first_files, start, first_run, backfilled, held[0]["n_reports"])

    again = _run(inputs, "backfilled", out)   # the backfill again: the first run's rows are still the ones kept
    assert again["reports_withheld_by_ledger"] == held[0]["n_reports"]
    _check_kept(out, before, first_files, start, first_run, again, held[0]["n_reports"])

    fresh = _run(inputs, "backfilled", out, "--new-ledger")   # starting over publishes the difference
    assert fresh["reports_withheld_by_ledger"] == 0 and fresh["earlier_releases_kept"] == []
    published = _by_window(_rows(out, "marginals"))[start]
    assert published[0]["n_reports"] - before[start][0]["n_reports"] == 1   # what a reader of both can difference
    assert {r["from_run"] for r in published} == {None}
    assert len(_ledger(out)["collections"]["app"]) == 1


def _without_run(rows) -> list:
    return [{k: v for k, v in r.items() if k != "from_run"} for r in rows]


def _check_kept(out, before, first_files, start, first_run, summary, left_out):
    """The window the ledger withheld is still published with the first run's rows, marked as its, with
    the reports the rerun left out counted and named: in ``read``, the summary, the manifest, ``compare``
    and the dashboard's view."""
    after = _by_window(_rows(out, "marginals"))
    assert sorted(after) == sorted(before)   # no window vanished
    assert _without_run(after[start]) == _without_run(before[start])   # the first run's rows, as they were
    assert {r["from_run"] for r in after[start]} == {first_run}
    assert all(after[w] == before[w] for w in after if w != start)   # the rerun's own rows elsewhere (equal here)
    (kept,) = summary["earlier_releases_kept"]
    kinds = {e["kind"] for e in first_files if e["window_start"] == start and e["kind"] != "withheld"}
    assert len(kinds) > 1 and kept["kinds"] == sorted(kinds)
    for kind in kinds:   # every kind the first run published of the window and key is kept, marked alike
        rows = ldp_marginals.read_rows(str(out), kind, windows=start, **({"estimator": "unbiased"} if kind == "tables" else {}))
        assert rows and {r["from_run"] for r in rows} == {first_run}
    assert kept["window_start"] == start and kept["from_run"] == first_run and kept["key"] == {}
    assert kept["reports_not_published"] == summary["reports_not_published_where_kept"] == left_out
    assert kept["earlier_reports"] == before[start][0]["n_reports"]
    assert f"{left_out:,} reports of this run not published" in kept["note"] and first_run in kept["note"]
    manifest = load_manifest(str(out))
    assert manifest["summary"]["earlier_releases_kept"] == [kept]
    carried = [e for e in manifest["files"] if e.get("from_run")]
    assert carried and {e["window_start"] for e in carried} == {start} and {e["from_run"] for e in carried} == {first_run}
    assert all((out / p).exists() for e in carried for p in e["files"].values())

    parser = argparse.ArgumentParser()
    add_compare_arguments(parser)
    other = min(w for w in before if w != start)
    result = compare(parser.parse_args(["--estimates", str(out), "--windows", iso(other), iso(start)]))
    assert result["compared"] == len(before[start]) and result["from_runs"] == [[], [first_run]]
    assert f"the earlier release of run {first_run}, kept" in render(result)

    shown = view(str(out), parse_selection({"window": str(start)}), FileCache(str(out)))
    assert shown["window"] == start and start in shown["windows"]
    assert (start, before[start][0]["n_reports"]) in [tuple(p) for p in shown["published"]]
    assert shown["from_run"] == [first_run] and shown["notes"] == [kept["note"]] and shown["kept"] == [kept]
    assert {r["from_run"] for r in shown["consistent_tables"]} == {first_run}


def test_a_backfill_the_ledger_lets_through_replaces_the_kept_rows(inputs, tmp_path):
    """Run 1 publishes; run 2 (one late report) keeps run 1's rows of that window; run 3 adds 30 more
    reports there (a cell of at least min_reports against both releases): the ledger lets its rows through
    and they replace the kept ones, whose files go."""
    out = tmp_path / "out"
    _run(inputs, "first", out)
    before = _by_window(_rows(out, "marginals"))
    kept = _run(inputs, "backfilled", out)["earlier_releases_kept"]
    assert len(kept) == 1
    start = kept[0]["window_start"]
    more = tmp_path / "more"
    more.mkdir()
    cfg = parse_config(CONFIG)
    for name in ("a.avro", "b.avro"):
        (more / name).write_bytes((inputs / "backfilled" / name).read_bytes())
    write_population(cfg, simulate_population(cfg, 30, seed=8, start_ms=start, span_seconds=60), str(more / "c.avro"))
    grown = run(["--config", str(inputs / "app.yaml"), "--input", str(more / "*.avro"), "--output", str(out),
                 "--progress-seconds", "0"])
    assert grown["reports_withheld_by_ledger"] == 0
    assert grown["earlier_releases_kept"] == [] and grown["reports_not_published_where_kept"] == 0
    after = _by_window(_rows(out, "marginals"))
    assert sorted(after) == sorted(before)
    assert after[start][0]["n_reports"] == before[start][0]["n_reports"] + 31   # the new rows replaced the kept ones
    assert {r["from_run"] for rows in after.values() for r in rows} == {None}
    manifest = load_manifest(str(out))
    assert not [e for e in manifest["files"] if e.get("from_run")]
    listed = {p for e in manifest["files"] for p in e["files"].values()}
    on_disk = {str(p.relative_to(out)).replace("\\", "/") for p in out.rglob("*") if p.suffix in (".avro", ".parquet")}
    assert listed == on_disk   # no file of the kept release is left behind


SLIDING = dict(CONFIG, collection="app", window={"type": "sliding", "size_seconds": 120, "period_seconds": 60})


def test_under_sliding_windows_earlier_rows_are_kept_only_where_the_rerun_publishes_nothing(inputs, tmp_path):
    """One late report in the last minute: the ledger withholds that slice. The window of the last two
    minutes also holds a released slice, so the rerun publishes it (without the slice) and its earlier
    rows are replaced, never kept beside the new ones; the trailing window holds that slice alone, so the
    rerun publishes nothing of it and its earlier rows are kept (docs/design.md, *What stays published*)."""
    (tmp_path / "sliding.yaml").write_text(yaml.safe_dump(SLIDING))
    out = tmp_path / "out"

    def go(folder):
        return run(["--config", str(tmp_path / "sliding.yaml"), "--input", str(inputs / folder / "*.avro"),
                    "--output", str(out), "--progress-seconds", "0"])
    go("first")
    first_run = load_manifest(str(out))["run_id"]
    before = _by_window(_rows(out, "marginals"))
    second = go("backfilled")
    assert second["reports_withheld_by_ledger"] > 0
    after = _by_window(_rows(out, "marginals"))
    assert sorted(after) == sorted(before)   # no window vanished
    kept = {k["window_start"] for k in second["earlier_releases_kept"]}
    replaced = {w for w in after if after[w][0]["n_reports"] < before[w][0]["n_reports"]}   # published without the slice
    assert kept and replaced and not kept & replaced
    for w, rows in after.items():
        assert len({tuple(r["columns"]) for r in rows}) == len(rows)   # never an earlier row beside a new one
        assert {r["from_run"] for r in rows} == ({first_run} if w in kept else {None})
        if w in kept:
            assert _without_run(rows) == _without_run(before[w])


def _a_ledger(out, text: str) -> None:
    (out / LEDGER_DIR).mkdir(parents=True)
    (out / LEDGER_DIR / LEDGER_FILE).write_text(text)


def test_a_streaming_run_into_a_ledger_is_refused(inputs, tmp_path):
    out = tmp_path / "out"
    _a_ledger(out, json.dumps({"format": 1, "collections": {}}))
    with pytest.raises(ValueError, match="release ledger"):
        run(["--config", str(inputs / "app.yaml"), "--streaming", "--subscription", "projects/my-project/subscriptions/reports",
             "--output", str(out)])


def test_an_unreadable_ledger_is_an_error_not_a_new_ledger(inputs, tmp_path):
    out = tmp_path / "out"
    _a_ledger(out, "{not json")
    with pytest.raises(ValueError, match="--new-ledger"):
        _run(inputs, "first", out)


def test_a_batch_run_into_a_streaming_runs_output_needs_a_new_ledger(inputs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"format": 1, "run_id": "r", "mode": "streaming"}))
    with pytest.raises(ValueError, match="no release ledger recorded"):
        _run(inputs, "first", out)
