"""What a batch run's publication keeps of the run before it (transforms/manifest.py: kept_releases;
docs/design.md, "The release ledger", *What stays published*), on runs written by hand through the
sink's writer: only a window and key whose rows the release ledger withheld whole keeps the earlier
rows; one the guard alone withheld does not; a kept release whose files a killed run left in its
staging folder is moved to its place before the staging folders go."""
import pytest

import ldp_marginals
from ldp_marginals.schemas.outputs import load_manifest, new_run_id
from ldp_marginals.transforms import manifest as manifest_module
from ldp_marginals.transforms.manifest import finish_run, write_dir
from ldp_marginals.transforms.sinks import write_file_set
from tests.outputs import write_run

W1 = (1_767_225_600_000, 1_767_225_660_000)
W2 = (1_767_225_660_000, 1_767_225_720_000)


def _marginal(window, n, f):
    return {"collection": "app", "window_start": window[0], "window_end": window[1], "dimensions": {"region": "eu"},
            "n_reports": n, "columns": [0], "labels": ["f0"], "estimate": f * n, "frequency": f, "variance": 1.0,
            "ci_low": f * n - 2, "ci_high": f * n + 2, "interval": "per_cell", "frequency_low": f - 0.01,
            "frequency_high": f + 0.01, "display_frequency": f, "display_low": f - 0.01, "display_high": f + 0.01,
            "out_of_range": False}


def _withheld(window, n, reason):
    return {"collection": "app", "window_start": window[0], "window_end": window[1], "dimensions": {"region": "eu"},
            "n_reports": n, "min_reports": 20, "reason": reason, "cause": "privacy", "statistic": "all"}


KEY = (("region", "eu"),)
LEDGER = "ledger: 101 reports withheld: its reports differ (docs/design.md, 'The release ledger')"
GUARD = "12 reports held back: fewer than min_reports"


def _second_run(out, reason):
    """A run that publishes W2 and only a withheld row of W1 (with ``reason``), as a rerun would."""
    run_id = new_run_id()
    staged = write_dir(str(out), run_id, False)
    write_file_set(staged, run_id, "marginals", "app", W2, 0, [_marginal(W2, 80, 0.3)], KEY)
    write_file_set(staged, run_id, "withheld", "app", W1, 0, [_withheld(W1, 101, reason)], KEY)
    summary = {}
    return run_id, finish_run(str(out), run_id, summary), summary


def test_only_what_the_ledger_withheld_whole_keeps_the_earlier_rows(tmp_path):
    first = write_run(tmp_path / "a", [("marginals", "app", W1, 0, [_marginal(W1, 100, 0.5)], KEY),
                                       ("marginals", "app", W2, 0, [_marginal(W2, 70, 0.4)], KEY)])
    _, _, summary = _second_run(tmp_path / "a", LEDGER)
    rows = ldp_marginals.read_rows(str(tmp_path / "a"), "marginals", windows=W1[0])
    assert [(r["n_reports"], r["from_run"]) for r in rows] == [(100, first["run_id"])]
    assert [(k["reports_not_published"], k["earlier_reports"]) for k in summary["earlier_releases_kept"]] == [(101, 100)]
    assert [r["from_run"] for r in ldp_marginals.read_rows(str(tmp_path / "a"), "marginals", windows=W2[0])] == [None]

    write_run(tmp_path / "b", [("marginals", "app", W1, 0, [_marginal(W1, 100, 0.5)], KEY)])
    _, _, summary = _second_run(tmp_path / "b", GUARD)   # the guard's own withholding: not the ledger's
    assert summary["earlier_releases_kept"] == [] and summary["reports_not_published_where_kept"] == 0
    assert ldp_marginals.read_rows(str(tmp_path / "b"), "marginals", windows=W1[0]) == []


def test_a_kept_release_left_in_a_killed_runs_staging_folder_is_moved_to_its_place(tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_id = new_run_id()
    write_file_set(write_dir(str(out), run_id, False), run_id, "marginals", "app", W1, 0, [_marginal(W1, 100, 0.5)], KEY)

    def killed(*_):
        raise KeyboardInterrupt("killed after the first manifest")
    with monkeypatch.context() as m:   # the run dies after its first manifest: readers read its staging folder
        m.setattr(manifest_module, "_place", killed)
        with pytest.raises(KeyboardInterrupt):
            finish_run(str(out), run_id)
    assert all(p.startswith("_staging/") for e in load_manifest(str(out))["files"] for p in e["files"].values())
    _, manifest, summary = _second_run(out, LEDGER)
    kept = [e for e in manifest["files"] if e.get("from_run") == run_id]
    assert kept and not any(p.startswith("_staging/") for e in kept for p in e["files"].values())
    assert not (out / "_staging").exists()
    rows = ldp_marginals.read_rows(str(out), "marginals", windows=W1[0])
    assert [(r["n_reports"], r["from_run"]) for r in rows] == [(100, run_id)]
