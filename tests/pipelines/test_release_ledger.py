"""The release ledger as the command uses it (issue 35, item 3): batch runs into one ``--output`` read
``DIR/_ledger/releases.json`` before they publish and add their release after. A rerun over the same
input withholds nothing; the same input plus one backfilled report withholds that report's window,
with the reason, counted in the summary and manifest; ``--new-ledger`` publishes it (and the window's
rows then differ from the first run's by that one report); a streaming run into the output is refused.
The rule itself is proven against the exact-algebra checker in tests/transforms/test_release_ledger.py."""
import json

import pytest
import yaml

import ldp_marginals
from ldp_marginals.pipelines.run import run
from ldp_marginals.pipelines.simulate import simulate_population, write_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import LEDGER_DIR, LEDGER_FILE, load_manifest

CONFIG = {"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(3)],
          "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 1, "min_reports": 20,
          "window": {"type": "fixed", "size_seconds": 60}}


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

    backfilled = _run(inputs, "backfilled", out)   # plus one report: its window would single it out
    assert backfilled["reports_counted"] == 401
    after = _by_window(_rows(out, "marginals"))
    changed = set(before) - set(after)
    assert len(changed) == 1 and all(after[w] == before[w] for w in after)
    (start,) = changed
    held = [r for r in _rows(out, "withheld") if r["window_start"] == start]
    assert len(held) == 1 and held[0]["reason"].startswith("ledger:") and held[0]["cause"] == "privacy"
    assert backfilled["reports_withheld_by_ledger"] == held[0]["n_reports"] == before[start][0]["n_reports"] + 1
    assert load_manifest(str(out))["summary"]["reports_withheld_by_ledger"] == held[0]["n_reports"]
    assert len(_ledger(out)["collections"]["app"]) == 2   # the backfill's release, its window unpublished

    fresh = _run(inputs, "backfilled", out, "--new-ledger")   # starting over publishes the difference
    assert fresh["reports_withheld_by_ledger"] == 0
    published = _by_window(_rows(out, "marginals"))[start]
    assert published[0]["n_reports"] - before[start][0]["n_reports"] == 1   # what a reader of both can difference
    assert len(_ledger(out)["collections"]["app"]) == 1


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
