"""A Hadamard-sampling collection (channel: {kind: hadamard}) through the batch job: its rows equal the
estimator's on each window's reports (ldp/hadamard_reports.py), through both readers and with shards
merged; the guard withholds a small window; malformed reports are dead letters with their reason."""
import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from ldp_marginals import schemas
from ldp_marginals.ldp.consistent import project_group_tables
from ldp_marginals.ldp.hadamard_reports import encode_reports
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.blocks import ReadReportFilesFast
from ldp_marginals.transforms.reports import ReadNoisyReportFiles
from tests import batch_runs
from tests.pipelines.test_job_batch import Shards

START = 1_767_225_600_000   # 2026-01-01, an hour boundary
# min_reports 40: a row rests on the reports that drew each of its coefficients (issue 47 item 6), and of
# 2,400 reports an order-3 coefficient draws 50-75 (weights sqrt); hour 1's 30 reports are below it
CONFIG = {"collection": "survey", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(5)],
          "channel": {"kind": "hadamard", "epsilon": 2.0}, "max_order": 3,
          "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 40, "groups": [["q0", "q2"]]}
LATE = 30   # reports in hour 1


def reports(cfg, seed=0, encode=encode_reports, late=LATE):
    """2,400 reports in hour 0, ``late`` in hour 1 (below min_reports); correlated bits; ``encode`` the
    kind's simulated devices."""
    rng = np.random.default_rng(seed)
    n = 2400 + late
    z = rng.random(n) < 0.4
    bits = (rng.random((n, 5)) < np.where(z[:, None], 0.8, 0.2)).astype(np.uint8)
    event = START + np.where(np.arange(n) < 2400, rng.integers(0, 3_600_000, n), 3_600_000 + rng.integers(0, 3_600_000, n))
    packed = encode(bits, cfg.sampling, rng)
    records = [{"collection": cfg.name, "event_time": int(event[i]), "bits": packed[i].tobytes(), "dimensions": {},
                "client": None} for i in range(n)]
    return records, packed, event


def expected(cfg, packed, event):
    idx = np.flatnonzero(event < START + 3_600_000)
    agg = cfg.aggregator
    got = agg.marginals(agg.add_packed(agg.create(), packed[idx]))
    marg = [(tuple(s), round(got.means[i], 6), round(got.variances[i], 4)) for i, s in enumerate(got.family) if s]
    table = got.estimate.table((0, 2))   # cell z: bit 0 is q0, bit 1 q2; the group lists ff, ft, tf, tt
    cells = [(("false", "false"), table.estimate[0]), (("false", "true"), table.estimate[2]),
             (("true", "false"), table.estimate[1]), (("true", "true"), table.estimate[3])]
    return marg, [(c, round(e, 6)) for c, e in cells]


def expected_consistent(cells, n=2400):
    """The consistent tables' rows of hour 0: the projection of the unbiased group table (frequencies)."""
    (fixed,), _ = project_group_tables([np.array([e for _, e in cells]) / n], [[("q0", 2), ("q2", 2)]])
    assert fixed.min() >= 0 and abs(fixed.sum() - 1) < 1e-9
    return [(c, round(float(f), 6), "projection") for (c, _), f in zip(cells, fixed)]


@pytest.mark.parametrize("reader", ["records", "per_element", "block_reader"])
def test_rows_are_the_estimators_on_each_window(tmp_path, reader):
    cfg = parse_config(CONFIG)
    records, packed, event = reports(cfg)
    bad = [dict(records[0], bits=bytes([0])),                 # index 0: no coefficient
           dict(records[0], bits=bytes([0b0011111])),         # index 31 > T = 25
           dict(records[0], bits=b"\x01\x00"),                # two bytes: wrong length
           dict(records[0], bits=bytes([0b1000001]))]         # bit 6 is padding (6 bits a report)
    marg, cells = expected(cfg, packed, event)
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
                    equal_to([(START + 3_600_000, LATE, "privacy")]), label="guard")
        assert_that(outs["dead_letters"] | beam.Map(lambda d: d["reason"]),
                    equal_to(["bad_coefficient", "bad_coefficient", "wrong_length", "padding_bits"]), label="dead")
        assert_that(outs["extremes"], equal_to([]), label="no extremes")


def test_the_run_command_read_and_the_dashboard_view(tmp_path):
    """As a user runs it: `ldp-marginals run` on an Avro file, then `read` and the dashboard's view: the
    collection says its kind, the tables are there, and the precision panel's plan (the closed-form worst
    case) is at least the measured half-width of every 1-way marginal and cell (less the noise of n_a)."""
    from ldp_marginals.pipelines.dashboard.view import FileCache, parse_selection, view
    from ldp_marginals.pipelines.read import read
    cfg = parse_config(CONFIG)
    records, _, _ = reports(cfg, seed=5)
    batch_runs.run_command(tmp_path, CONFIG, records, ())
    marginals = read(str(tmp_path / "out"), "marginals")
    assert len(marginals) == 25 and set(marginals["n_reports"].to_pylist()) == {2400}
    assert read(str(tmp_path / "out"), "tables", estimator="unbiased").num_rows == 4
    consistent = read(str(tmp_path / "out"), "tables")        # the default: the consistent tables
    assert consistent.num_rows == 4 and set(consistent["estimator"].to_pylist()) == {"consistent"}
    freq = np.array(consistent["frequency"].to_pylist())
    assert freq.min() >= 0 and abs(freq.sum() - 1) < 1e-9
    data = view(str(tmp_path / "out"), parse_selection({}), FileCache(str(tmp_path / "out")))
    (info,) = data["collections"]
    assert info["channel"]["kind"] == "hadamard" and info["local_epsilon"] == 2.0
    assert len(data["tables"]) == 4
    rows = data["precision"]
    assert sorted(r["kind"] for r in rows) == ["marginals"] * 5 + ["tables"] * 4
    for r in rows:
        assert r["measured"] <= 1.05 * r["planned"], r
        assert r["measured"] >= 0.8 * r["planned"], r      # a 3x wrong plan (or the per-bit figure, 0) fails


def test_streaming_gives_the_batch_answers():
    """The kind through the streaming engine (single messages and a container, two regions, hourly fixed
    windows; sliding windows and early panes: tests/pipelines/test_kind_panes.py and
    tests/pipelines/test_attacks_issue47.py): every window and key's latest pane holds the batch job's rows
    exactly."""
    from tests.pipelines.test_same_answers import batch_and_streaming, canonical, latest_panes
    cfg = parse_config(dict(CONFIG, window={"type": "fixed", "size_seconds": 3600},
                            dimensions={"region": {}}, min_reports=25))
    records, _, _ = reports(cfg, seed=3)
    records = [dict(r, dimensions={"region": "eu" if i % 3 else "us"}) for i, r in enumerate(records)]
    records.append(dict(records[0], bits=bytes([0])))
    batch, got = batch_and_streaming(records, cfg)
    expected = canonical(batch)
    assert len(expected["marginals"]) > 25 and expected["tables"] and expected["withheld"]
    assert len(expected["consistent_tables"]) == len(expected["tables"])
    assert canonical(latest_panes(got)) == expected
    assert [d["reason"] for d in got["dead_letters"]] == [d["reason"] for d in batch["dead_letters"]] == [
        "bad_coefficient"]


# -- issue 47 item 6: a row that rests on fewer than min_reports reports is withheld ------------------------
def run_command(tmp_path, config: dict, records: list) -> dict:
    """``ldp-marginals run`` (batch, DirectRunner) on ``records`` -> its marginals, tables and withheld rows
    as ``read`` gives them."""
    return batch_runs.run_command(tmp_path, config, records, ("marginals", "tables", "withheld"))


def test_a_row_holding_a_coefficient_drawn_by_fewer_than_min_reports_reports_is_withheld(tmp_path):
    """A set's row is N 2^-|S| sum_a (-1)^|a| theta_a over the coefficients a within S, theta_a resting on the
    n_a reports that drew a; the rows of S and of its subsets difference to theta_S alone. So the row of S
    is withheld when a coefficient within it was drawn by 1..min_reports-1 reports, even when the reports
    that drew some coefficient within S number far more (the mutation "count the reports of every
    coefficient within S together" publishes every row here and fails). Main published all 25 rows and
    the table; of 2,400 reports, an order-1 coefficient is drawn by ~150, order 2 by ~100, order 3 by ~60."""
    from itertools import combinations
    config = dict(CONFIG, min_reports=100)
    cfg = parse_config(config)
    records, packed, event = reports(cfg, seed=5)
    hour0 = packed[event < START + 3_600_000]
    index = hour0[:, 0].astype(np.int64) & 0b11111          # one slot: a 5-bit family index, then the parity
    drawn = {cfg.family[a]: int((index == a).sum()) for a in range(1, cfg.sampling.n_coefficients + 1)}
    assert min(drawn.values()) > 0 and sum(drawn.values()) == 2400

    def thin(s):
        return any(drawn[a] < 100 for r in range(1, len(s) + 1) for a in combinations(s, r))
    sets = [s for o in (1, 2, 3) for s in combinations(range(5), o)]
    assert 5 < sum(map(thin, sets)) < 25 and not thin((0, 2))
    rows = run_command(tmp_path, config, records)
    assert {tuple(r["columns"]) for r in rows["marginals"]} == {s for s in sets if not thin(s)}
    assert len(rows["tables"]) == 4   # the (q0, q2) table: its coefficients q0, q2, q0q2 each drawn by >= 100
    withheld = sorted(r["reason"].split(" withheld:")[0] for r in rows["withheld"] if r["statistic"] == "marginal")
    assert withheld == sorted("marginal of " + ",".join(f"q{b}" for b in s) for s in sets if thin(s))
    assert {(round(r["window_start"].timestamp() * 1000), r["n_reports"], r["statistic"]) for r in rows["withheld"]} == {
        (START, 2400, "marginal"), (START + 3_600_000, LATE, "all")}
