"""Batch on Flink: the job's files on the local Flink (parallelism 2, through Beam's portable job
server) give the rows the DirectRunner gives — counts exactly, floats to 1e-9 — and the same dead
letters and summary counts, also when progress polled the job's metrics while it ran (Beam's portable
result caches its first answer: a poll before any count once froze the summary at "counted 0")."""
import json

import pytest

from ldp_marginals import schemas
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.outputs import DEAD_LETTERS, ESTIMATE_KINDS
from tests.cluster import streams
from tests.configs import SMALL_CONFIG
from tests.pipelines.test_same_answers import FLOATS, reports

pytestmark = [pytest.mark.flink, streams.CANCELLED_WORKER_THREADS]

RAW = dict(SMALL_CONFIG, features=SMALL_CONFIG["features"] + [{"name": "minutes", "type": "numeric", "low": 0,
                                                               "high": 30}],
           channel=SMALL_CONFIG["channel"] + [{"p": 0.1, "q": 0.9}], means=[{"of": "minutes", "by": ["os"]}],
           conditionals=[{"of": ["beta"], "given": ["dark"]}])


def split(rows):
    """Rows without their floats (compared exactly), and the floats in the same order."""
    keyed = sorted((schemas.to_json_line({k: v for k, v in r.items() if k not in FLOATS}),
                    [r[k] for k in FLOATS if k in r]) for r in rows)
    return [k for k, _ in keyed], [f for _, f in keyed]


def test_batch_on_flink_gives_the_direct_runners_rows(cluster, tmp_path):
    cfg = parse_config(RAW)
    (tmp_path / "c.json").write_text(json.dumps(RAW))
    records = reports(cfg)
    schemas.write_avro(tmp_path / "reports.avro", "noisy_report", records[:900])
    schemas.write_avro(tmp_path / "more.avro", "noisy_report", records[900:])
    common = ["--config", str(tmp_path / "c.json"), "--input", str(tmp_path / "*.avro")]
    direct = run(common + ["--output", str(tmp_path / "direct"), "--runner", "DirectRunner"])
    flink = run(common + ["--output", str(tmp_path / "flink"), "--progress-seconds", "0.05"] + cluster.pipeline_args())
    assert flink["reports_counted"] == direct["reports_counted"] == len(records) - 6
    assert flink["dead_letters_by_reason"] == direct["dead_letters_by_reason"]
    assert direct["reports_dead_lettered"] == 6
    for kind in ESTIMATE_KINDS:
        keys_d, floats_d = split(read_rows(str(tmp_path / "direct"), kind))
        keys_f, floats_f = split(read_rows(str(tmp_path / "flink"), kind))
        assert keys_f == keys_d and keys_d, kind
        for a, b in zip(floats_f, floats_d):
            assert a == pytest.approx(b, rel=1e-9, abs=1e-12), kind
    dead = [sorted((d["reason"], d["detail"], d["source"]) for d in read_rows(str(tmp_path / out), DEAD_LETTERS))
            for out in ("direct", "flink")]
    assert dead[0] == dead[1] and len(dead[0]) == 6
