"""A rerun never destroys the last good outputs (issue 36): a batch run into a used ``--output`` writes
under its staging folder and publishes only once it has finished, so a rerun killed while it writes
(SIGKILL, Ctrl-C) leaves the previous run readable, whole; and publishing, interrupted after any of
its steps, leaves one whole run (the previous or the new one) for readers."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

import ldp_marginals
from ldp_marginals.pipelines.run import run
from ldp_marginals.pipelines.simulate import simulate_population, write_population
from ldp_marginals.schemas import to_json_line
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import COLLECTIONS_FILE, KINDS, MANIFEST_FILE, STAGING_DIR, load_manifest
from ldp_marginals.transforms import manifest as manifest_module
from tests.outputs import file_sets, write_month

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = {"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(4)],
          "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 2, "min_reports": 20,
          "window": {"type": "fixed", "size_seconds": 60}, "groups": [["f0", "f1"]],
          "extremes": [{"name": "any", "op": "or", "bits": ["f0", "f1"]}]}


def inputs(folder, name, reports, windows, seed, config=CONFIG):
    """``folder/<name>.avro``: ``reports`` reports spread over ``windows`` one-minute windows, and the
    config ``folder/<name>.yaml``; returns the run's arguments."""
    cfg = parse_config(config)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(config))
    write_population(cfg, simulate_population(cfg, reports, seed=seed, span_seconds=windows * 60),
                     str(folder / f"{name}.avro"))
    return ["--config", str(folder / f"{name}.yaml"), "--input", str(folder / f"{name}.avro")]


def everything(out) -> dict:
    """What a reader gets from ``out``: every kind's rows, the run's id and summary, its collections."""
    manifest = load_manifest(str(out))
    rows = {kind: sorted(map(to_json_line, ldp_marginals.read_rows(str(out), kind))) for kind in KINDS}
    return {"run_id": manifest["run_id"], "summary": manifest["summary"], "rows": rows,
            "collections": json.loads((out / COLLECTIONS_FILE).read_text())}


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    """A finished run in ``out`` (and what readers read there), and the inputs of a larger rerun."""
    tmp = tmp_path_factory.mktemp("rerun")
    first = inputs(tmp, "first", 2000, 4, seed=1)
    run(first + ["--output", str(tmp / "out"), "--progress-seconds", "0"])
    # the rerun: another config (its collections.json differs) and 150 windows (some 450 file sets,
    # a second or more of writing)
    config = dict(CONFIG, channel={"mechanism": "symmetric", "epsilon": 3.0})
    second = inputs(tmp, "second", 15_000, 150, seed=2, config=config)
    return tmp, everything(tmp / "out"), second


def written_entries(out) -> list:
    """The entries of file sets a run has written under ``out`` and not yet gathered in a manifest
    (wherever the run writes them)."""
    return glob.glob(str(out / "**" / "_runs" / "*" / "*" / "*.json"), recursive=True)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "Ctrl-C"])
def test_a_rerun_killed_while_it_writes_leaves_the_previous_run_readable(previous, tmp_path, sig):
    tmp, before, second = previous
    out = tmp_path / "out"
    shutil.copytree(tmp / "out", out)
    assert before["summary"]["reports_counted"] == 2000 and before["rows"]["marginals"]
    proc = subprocess.Popen([sys.executable, "-m", "ldp_marginals.pipelines.cli", "run", *second,
                             "--output", str(out), "--progress-seconds", "0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not written_entries(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the rerun ended before it wrote its first file set:\n" + proc.stderr.read()[-2000:]
    # mid-write: its first file sets are staged. The DirectRunner lets a Ctrl-C pass now and then (seen in
    # 1 of 9 tries: the run went on and finished), so it is pressed again, as a person would, until it stops
    try:
        for _ in range(20):
            proc.send_signal(sig)
            try:
                _, err = proc.communicate(timeout=1 if sig == signal.SIGINT else 60)
                break
            except subprocess.TimeoutExpired:
                continue
    finally:
        if proc.poll() is None:
            proc.kill()
            pytest.fail("the rerun did not stop")
    assert proc.returncode != 0, err[-2000:]
    assert written_entries(out)   # it had written file sets, and had not published them
    assert everything(out) == before   # every kind's rows, the summary and collections.json of the previous run
    if sig == signal.SIGKILL:
        # the same rerun, not interrupted, publishes itself and removes what the killed one left
        summary = run(second + ["--output", str(out), "--progress-seconds", "0"])
        after = everything(out)
        assert after["run_id"] != before["run_id"] and after["summary"] == summary
        assert summary["reports_counted"] == 15_000 and after["collections"] != before["collections"]
        assert not (out / STAGING_DIR).exists() and not list(out.rglob("*.tmp")) and not written_entries(out)


def _interrupt_at(monkeypatch, step: int) -> list:
    """Make the ``step``-th file operation of publishing raise :class:`Interrupted` (as a kill there
    would stop it); returns the list of operations seen, which grows as they run."""
    seen = []

    def wrap(name, real):
        def op(*args, **kwargs):
            seen.append(name)
            if len(seen) == step:
                raise Interrupted(name)
            return real(*args, **kwargs)
        return op

    fs = manifest_module.FileSystems
    for name in ("create", "rename", "delete", "copy"):
        monkeypatch.setattr(fs, name, staticmethod(wrap(name, getattr(fs, name))))
    for name in ("link", "remove"):
        monkeypatch.setattr(manifest_module.os, name, wrap(name, getattr(os, name)))
    monkeypatch.setattr(manifest_module.shutil, "rmtree", wrap("rmtree", shutil.rmtree))
    return seen


class Interrupted(Exception):
    pass


def test_publishing_interrupted_after_any_step_leaves_one_whole_run(tmp_path, monkeypatch):
    """The previous run has windows 0-2; the new one rewrites windows 0 and 1 with other rows. Stopped
    at every file operation of publishing in turn, readers get the previous run or the new one, whole,
    never a mix, never an error."""
    keys = [{"region": "eu"}, {"region": "us"}]
    write_month(tmp_path / "new", windows=2, bits=3, keys=keys, seed=2)
    new = sorted(map(repr, file_sets(tmp_path / "new")))
    step = 0
    outcomes = []
    while True:
        step += 1
        out = tmp_path / f"out{step}"
        write_month(out, windows=3, bits=3, keys=keys, seed=1)
        old = sorted(map(repr, file_sets(out)))
        with monkeypatch.context() as m:
            seen = _interrupt_at(m, step)
            try:
                write_month(out, windows=2, bits=3, keys=keys, seed=2)
            except Interrupted:
                pass
        now = sorted(map(repr, file_sets(out)))
        assert now in (old, new), f"interrupted at {seen[-1]} (step {step}): readers see neither run whole"
        outcomes.append("old" if now == old else "new")
        if len(seen) < step:   # publishing ran to its end before the step came
            break
    assert now == new and not (out / STAGING_DIR).exists()
    assert not list((out / "marginals").glob("*.avro"))[2:]   # the previous run's third window is gone
    # both sides of the switch were reached: interrupted early the previous run, late the new one
    assert outcomes[0] == "old" and "new" in outcomes[:-1] and len(outcomes) > 10, outcomes
    # a manifest never names a staging folder once publishing is done
    assert STAGING_DIR not in (out / MANIFEST_FILE).read_text()
