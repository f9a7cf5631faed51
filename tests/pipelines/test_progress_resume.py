"""A resumed job's progress lines say that their counts start again (issue 49 item 7): after Ctrl-C and a
resume from the savepoint, the counters are the new job's metrics, which start at 0; the lines said
"counted 1,200 reports" as if the job had counted nothing before. No job runs here: the progress printer is
driven directly (its first line is printed on entry, not on a timer), and ``make_pipeline`` up to the source."""
import io
import json

import pytest

from ldp_marginals.pipelines import run as run_mod
from ldp_marginals.pipelines.progress import Progress, progress_line
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import MANIFEST_FILE
from tests.configs import SMALL_CONFIG

TOTALS = {"reports.valid": 1_200}


def test_a_resumed_jobs_lines_say_the_counts_restarted():
    assert "since the resume" not in progress_line(TOTALS, 5.0)
    assert progress_line(TOTALS, 5.0, resumed=True).startswith("[00:05] counted 1,200 reports since the resume;")
    out = io.StringIO()
    with Progress(3600, stream=out, resumed_from="--savepoint_path=/sp/1") as progress:
        assert progress.line().startswith("[00:00] counted 0 reports since the resume")
    assert out.getvalue().startswith("resumed from --savepoint_path=/sp/1: the counts below start again at 0")
    fresh = io.StringIO()
    with Progress(3600, stream=fresh) as progress:
        assert "since the resume" not in progress.line()
    assert fresh.getvalue() == ""


def test_run_tells_the_progress_that_the_job_resumes(tmp_path, monkeypatch):
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CONFIG))
    out = tmp_path / "out"
    out.mkdir()
    run_mod.write_state_shapes(str(out), {"app": parse_config(SMALL_CONFIG)})
    (out / MANIFEST_FILE).write_text(json.dumps({"run_id": "r1", "mode": "streaming"}))
    seen = {}

    def source(args, configs, expansion_service=None):
        seen["resumed_from"] = args.resumed_from
        raise KeyError("built")
    monkeypatch.setattr(run_mod, "make_source", source)
    argv = ["--config", str(tmp_path / "c.json"), "--streaming", "--kafka-topic", "t", "--kafka-bootstrap", "b:9",
            "--kafka-expansion-service", "x:1", "--output", str(out)]
    with pytest.raises(KeyError):
        run_mod.make_pipeline(argv + ["--savepoint_path=/sp/1"])
    assert seen["resumed_from"] == "--savepoint_path=/sp/1"
    with pytest.raises(KeyError):
        run_mod.make_pipeline(argv[:-1] + [str(tmp_path / "new")])
    assert seen["resumed_from"] is None
