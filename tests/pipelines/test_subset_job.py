"""A subset-RR collection (channel: {kind: subset}) through the batch job: its rows equal the estimator's on
each window's reports (ldp/subset_reports.py), through both readers and with shards merged; the guard
withholds a small window; malformed reports are dead letters with their reason; the CLI, read and the
dashboard; streaming equal to batch."""
import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from ldp_marginals import schemas
from ldp_marginals.ldp.subset_reports import encode_reports
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.blocks import ReadReportFilesFast
from ldp_marginals.transforms.reports import ReadNoisyReportFiles
from tests.pipelines import test_hadamard_job as hadamard_job
from tests.pipelines.test_hadamard_job import START, expected, expected_consistent, run_command
from tests.pipelines.test_job_batch import Shards

CONFIG = {"collection": "survey", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(5)],
          "channel": {"kind": "subset", "epsilon": 4.0, "width": 4}, "max_order": 3,
          "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 500, "groups": [["q0", "q2"]]}


def reports(cfg, seed=0):
    return hadamard_job.reports(cfg, seed, encode_reports, late=300)


@pytest.mark.parametrize("reader", ["records", "per_element", "block_reader"])
def test_rows_are_the_estimators_on_each_window(tmp_path, reader):
    cfg = parse_config(CONFIG)
    assert cfg.wire.n_bytes == 2          # 5 mask bits + 4 pattern bits
    records, packed, event = reports(cfg)
    bad = [dict(records[0], bits=bytes([0b00000111, 0])),     # a mask of 3 bits, width 4
           dict(records[0], bits=bytes([0b00011111, 0])),     # a mask of 5 bits
           dict(records[0], bits=b"\x0f"),                    # one byte: wrong length
           dict(records[0], bits=bytes([0b00001111, 0b10]))]  # bit 9 is padding (9 bits a report)
    marg, cells = expected(cfg, packed, event)
    # the table of (q0, q2) is published, so the marginals of q0 and of q2 minus its margins leave the reports
    # whose subset holds q0 but not q2 (and q2 but not q0): 4 of 5 bits a subset, one mask each, ~480 of
    # 2,400 reports, under min_reports 500: both marginals withheld (issue 47 item 6; main published them)
    masks = np.unpackbits(packed[event < START + 3_600_000], axis=1, bitorder="little")[:, :5].astype(bool)
    apart = {(0,): int((masks[:, 0] & ~masks[:, 2]).sum()), (2,): int((masks[:, 2] & ~masks[:, 0]).sum())}
    assert all(0 < n < 500 for n in apart.values())
    marg = [m for m in marg if m[0] not in apart]
    with BeamTestPipeline() as p:
        if reader == "records":
            source = Shards(records + bad)
        else:
            schemas.write_avro(tmp_path / "r.avro", "noisy_report", records + bad)
            pattern = str(tmp_path / "*.avro")
            source = ReadReportFilesFast(pattern, {cfg.name: cfg}) if reader == "block_reader" else \
                ReadNoisyReportFiles(pattern)
        outs = build(p, source, None, JobOptions({cfg.name: cfg}))
        assert_that(outs["marginals"] | beam.Map(lambda r: (tuple(r["columns"]), round(r["estimate"], 6),
                                                            round(r["variance"], 4))),
                    equal_to(marg), label="marginals")
        assert_that(outs["tables"] | beam.Map(lambda r: (tuple(r["cell"]), round(r["estimate"], 6))),
                    equal_to(cells), label="tables")
        assert_that(outs["consistent_tables"] | beam.Map(lambda r: (tuple(r["cell"]), round(r["frequency"], 6),
                                                                   r["method"])),
                    equal_to(expected_consistent(cells)), label="consistent tables")
        assert_that(outs["withheld"] | beam.Map(lambda r: (r["window_start"], r["n_reports"], r["cause"])),
                    equal_to([(START + 3_600_000, 300, "privacy")] + [(START, 2400, "privacy")] * 2), label="guard")
        assert_that(outs["dead_letters"] | beam.Map(lambda d: d["reason"]),
                    equal_to(["bad_subset", "bad_subset", "wrong_length", "padding_bits"]), label="dead")
        assert_that(outs["extremes"], equal_to([]), label="no extremes")


def test_the_run_command_read_and_the_dashboard_view(tmp_path):
    """As a user runs it: `ldp-marginals run` on an Avro file, then `read` and the dashboard's view: the
    collection says its kind, the tables are there, and the precision panel's plan (the closed-form worst
    case of one cell) is at least the measured half-width of every 1-way marginal and cell (less the noise
    of n_K), and not far above it on these tables near 1/2."""
    import subprocess
    import sys

    import yaml

    from ldp_marginals.pipelines.dashboard.view import FileCache, parse_selection, view
    from ldp_marginals.pipelines.read import read
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    cfg = parse_config(CONFIG)
    records, packed, event = reports(cfg, seed=5)
    schemas.write_avro(tmp_path / "r.avro", "noisy_report", records)
    masks = np.unpackbits(packed[event < START + 3_600_000], axis=1, bitorder="little")[:, :5].astype(bool)
    apart = {"q0": int((masks[:, 0] & ~masks[:, 2]).sum()), "q2": int((masks[:, 2] & ~masks[:, 0]).sum())}
    assert apart == {"q0": 508, "q2": 433}   # of this seed: q2's marginal is withheld, q0's published
    done = subprocess.run([sys.executable, "-m", "ldp_marginals.pipelines.cli", "run", "--config", str(tmp_path / "c.yaml"),
                           "--input", str(tmp_path / "r.avro"), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    marginals = read(str(tmp_path / "out"), "marginals")
    # q2's marginal is withheld: the published (q0, q2) table leaves 433 < 500 of its reports apart
    assert len(marginals) == 24 and set(marginals["n_reports"].to_pylist()) == {2400}
    assert [r["reason"] for r in read(str(tmp_path / "out"), "withheld").to_pylist() if r["statistic"] == "marginal"] \
        == [f"marginal of q2 withheld: the published rows of 1 other set(s) holding bit(s) [2] with it leave 433 "
            f"of its {int(masks[:, 2].sum())} reports apart, < min_reports=500"]
    assert read(str(tmp_path / "out"), "tables", estimator="unbiased").num_rows == 4
    consistent = read(str(tmp_path / "out"), "tables")        # the default: the consistent tables
    assert consistent.num_rows == 4 and set(consistent["estimator"].to_pylist()) == {"consistent"}
    freq = np.array(consistent["frequency"].to_pylist())
    assert freq.min() >= 0 and abs(freq.sum() - 1) < 1e-9
    data = view(str(tmp_path / "out"), parse_selection({}), FileCache(str(tmp_path / "out")))
    (info,) = data["collections"]
    assert info["channel"]["kind"] == "subset" and info["channel"]["width"] == 4 and info["local_epsilon"] == 4.0
    assert len(data["tables"]) == 4
    rows = data["precision"]
    assert sorted(r["kind"] for r in rows) == ["marginals"] * 4 + ["tables"] * 4
    for r in rows:
        assert r["measured"] <= 1.05 * r["planned"], r
        assert r["measured"] >= 0.7 * r["planned"], r      # a 1.5x wrong plan (or the per-bit figure, 0) fails


def test_streaming_gives_the_batch_answers():
    """The kind through the streaming engine (single messages and a container, two regions, hourly fixed
    windows; sliding windows and early panes: tests/pipelines/test_kind_panes.py and
    tests/pipelines/test_attacks_issue47.py): every window and key's latest pane holds the batch job's rows
    exactly."""
    from tests.pipelines.test_same_answers import batch_and_streaming, canonical, latest_panes
    cfg = parse_config(dict(CONFIG, window={"type": "fixed", "size_seconds": 3600},
                            dimensions={"region": {}}, min_reports=200))
    records, _, _ = reports(cfg, seed=3)
    records = [dict(r, dimensions={"region": "eu" if i % 3 else "us"}) for i, r in enumerate(records)]
    records.append(dict(records[0], bits=bytes([0b00000111, 0])))
    batch, got = batch_and_streaming(records, cfg)
    expected = canonical(batch)
    assert len(expected["marginals"]) > 25 and expected["tables"] and expected["withheld"]
    assert len(expected["consistent_tables"]) == len(expected["tables"])
    assert canonical(latest_panes(got)) == expected
    assert [d["reason"] for d in got["dead_letters"]] == [d["reason"] for d in batch["dead_letters"]] == [
        "bad_subset"]


# -- issue 47 item 6: a row that rests on fewer than min_reports reports is withheld ------------------------
PAIRS = {"collection": "pairs", "features": [{"name": f"b{i}", "type": "boolean"} for i in range(8)],
         "channel": {"kind": "subset", "epsilon": 2.0, "width": 2}, "max_order": 2,
         "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 2}


@pytest.mark.parametrize("min_reports", [2, 5])
def test_a_row_that_rests_on_fewer_than_min_reports_reports_is_withheld(tmp_path, min_reports):
    """The issue's case: width 2 over 8 bits, one key of 24 reports. A pair's marginal rests on the reports
    whose random subset is that pair (here 8 of the 28 pairs on one report each: its estimate took one value
    iff that report sent (1,1)); a bit's on the reports whose subset holds it. Main published all 36 rows;
    now a row resting on 1..min_reports-1 reports is withheld, with a withheld row naming its bits, and the
    others published (a set no report's subset holds publishes its NaN row, which carries no report)."""
    from itertools import combinations
    cfg = parse_config(dict(PAIRS, min_reports=min_reports))
    rng = np.random.default_rng(0)
    bits = (rng.random((24, 8)) < 0.5).astype(np.uint8)
    packed = encode_reports(bits, cfg.sampling, rng)
    records = [{"collection": "pairs", "event_time": START + 1000 * i, "bits": packed[i].tobytes(), "dimensions": {},
                "client": None} for i in range(24)]
    masks = np.unpackbits(packed, axis=1, bitorder="little")[:, :8].astype(bool)   # bits 0..7: the subset
    resting = {s: int(masks[:, list(s)].all(axis=1).sum()) for o in (1, 2) for s in combinations(range(8), o)}
    thin = {s for s, n in resting.items() if 0 < n < min_reports}
    if min_reports == 2:
        assert len([s for s in thin if len(s) == 2]) == 8 and not [s for s in thin if len(s) == 1]
    else:
        assert len([s for s in thin if len(s) == 1]) >= 1 and len([s for s in thin if len(s) == 2]) >= 14
    rows = run_command(tmp_path, dict(PAIRS, min_reports=min_reports), records)
    published = {tuple(r["columns"]) for r in rows["marginals"]}
    assert published == set(resting) - thin and {r["n_reports"] for r in rows["marginals"]} == {24}
    withheld = {r["reason"].split(" withheld:")[0]: r for r in rows["withheld"]}
    assert set(withheld) == {"marginal of " + ",".join(f"b{b}" for b in s) for s in thin}
    for s in thin:
        r = withheld["marginal of " + ",".join(f"b{b}" for b in s)]
        assert (r["cause"], r["statistic"], r["n_reports"]) == ("privacy", "marginal", 24)
        assert f"rests on {resting[s]} report(s)" in r["reason"]
