"""What ``pip install .`` gives a new user is what was tested (issue 36): the package installed with no
constraints file and no extras in a fresh venv (pip resolves every dependency from the package's own
requirements; its cache keeps this to about a minute) runs the demo, a batch job from the command
line and a streaming job driven by TestStream. The rest of the suite runs in the Makefile's venv, whose
versions come from the deployment pins, so this is the only test of what pip resolves."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.plain_install

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what the source tree holds besides the package's own files (a stale build/ would leak into the wheel;
# Maven's target/, which another test may be writing at the same time under xdist, is the JVM client's)
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", ".jvm", "build", "*.egg-info", "out", "__pycache__",
                                     ".pytest_cache", "node_modules", "target")

STREAMING_JOB = r'''
"""A streaming job on TestStream, run where only the installed package and what pip resolved for it are."""
import collections
import json
import sys

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream

import ldp_marginals
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import new_run_id
from ldp_marginals.transforms.manifest import start_run
from ldp_marginals.transforms.sinks import FileSink

START_MS = 1_767_225_600_000
cfg = parse_config({"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(3)],
                    "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 2, "min_reports": 1,
                    "window": {"type": "fixed", "size_seconds": 60}})
records = list(report_records(cfg, simulate_population(cfg, 300, seed=3, start_ms=START_MS, span_seconds=180)))
out, run_id = sys.argv[1], new_run_id()
stream = TestStream().advance_watermark_to(START_MS / 1000).add_elements(records).advance_watermark_to_infinity()
options = PipelineOptions()
options.view_as(StandardOptions).streaming = True
start_run(out, run_id, streaming=True)
with TestPipeline(options=options) as p:
    build(p, stream, FileSink(out, streaming=True, run_id=run_id), JobOptions({cfg.name: cfg}, streaming=True))
sent = collections.Counter((r["event_time"] - START_MS) // 60_000 * 60_000 + START_MS for r in records)
counted = collections.Counter()
for row in ldp_marginals.read_rows(out, "marginals"):
    if row["columns"] == [0]:
        counted[row["window_start"]] += row["n_reports"]
print(json.dumps({"sent": sorted(sent.items()), "counted": sorted(counted.items()),
                  "dead_letters": len(ldp_marginals.read_rows(out, "dead_letters"))}))
'''


def call(args, cwd, env, timeout=600):
    out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{args[:3]} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """``(bin folder, work folder, environment)`` of a fresh venv into which the package was installed
    from a copy of the sources, as ``pip install .``: no constraints, no extras."""
    tmp = tmp_path_factory.mktemp("plain")
    shutil.copytree(ROOT, tmp / "src", ignore=NOT_SOURCES)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_CONSTRAINT")}
    venv = tmp / "venv"
    call([sys.executable, "-m", "venv", str(venv)], tmp, env)
    bin_dir = venv / "bin"
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--quiet"]
    # as `make env` does: the venv's own pip upgraded first (Python 3.11's bundled pip 23 took 3 minutes to
    # resolve here where pip 26 takes one); --no-compile: Python compiles what it imports anyway
    call(pip + ["--upgrade", "pip"], tmp, env)
    call(pip + ["--no-compile", str(tmp / "src")], tmp, env, timeout=1200)
    (tmp / "work").mkdir()
    return bin_dir, tmp / "work", env


def test_pip_resolves_the_beam_the_package_pins(plain):
    bin_dir, work, env = plain
    version = call([str(bin_dir / "python"), "-c", "import apache_beam; print(apache_beam.__version__)"], work, env)
    import apache_beam
    assert version.strip() == apache_beam.__version__   # the tests' Beam (from the deployment pins)


@pytest.fixture(scope="module")
def demo(plain):
    bin_dir, work, env = plain
    return call([str(bin_dir / "ldp-marginals"), "demo", "--out", "d", "--reports", "20000"], work, env)


def _counted(work) -> int:
    """The demo's reports: its app collection's 20,500, its device-unit collection's and its collection
    with rollups'."""
    result = json.loads((work / "d" / "demo_result.json").read_text())
    return 20500 + result["devices"]["reports"] + result["rollups"]["reports"]


def test_the_demo_runs_from_a_plain_install(plain, demo):
    _, work, _ = plain
    assert f"counted {_counted(work)} reports; dead-lettered 0" in demo, demo[-2000:]
    assert re.search(r"\d+ of \d+ estimates \([\d.]+%\) cover the truth", demo), demo[-2000:]
    assert (work / "d" / "dashboard.html").stat().st_size > 0 and (work / "d" / "estimates" / "manifest.json").exists()


def test_a_batch_job_runs_from_a_plain_install(plain, demo):
    """``ldp-marginals run`` on the demo's report files (issue 36: Beam 2.77 refused its options)."""
    bin_dir, work, env = plain
    stdout = call([str(bin_dir / "ldp-marginals"), "run", "--config", "d/demo_config.yaml", "--input",
                   "d/reports/*.avro", "--output", "o", "--progress-seconds", "0"], work, env)
    assert f"counted {_counted(work)} reports; dead-lettered 0" in stdout, stdout
    summary = json.loads((work / "o" / "summary.json").read_text())
    assert summary["reports_counted"] == _counted(work) and (work / "o" / "manifest.json").exists()


def test_a_streaming_job_runs_from_a_plain_install(plain):
    bin_dir, work, env = plain
    (work / "stream.py").write_text(STREAMING_JOB)
    result = json.loads(call([str(bin_dir / "python"), "stream.py", "s"], work, env).splitlines()[-1])
    assert sum(n for _, n in result["sent"]) == 300 and len(result["sent"]) == 3
    assert result["counted"] == result["sent"] and result["dead_letters"] == 0
