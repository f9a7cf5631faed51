"""The whole-report kinds' extra counted sets (issue 48 item 1) through the command (`ldp-marginals run`,
batch): with max_order 2, a conditional over three bits, an OR over three bits, a group of three features and
a `sets` entry of four bits are each the table of an extra set the kind counts (hadamard: the subsets'
coefficients join the sampled pool; subset: the reports whose subset holds the set). Every such row is the
estimator of ldp/kind_analyses.py on the window's reports, and the wide sets' marginals are published.
Failed before: the config was refused (rules kind-analyses-over-order, kind-groups-over-order, kind-analyses)."""
import numpy as np
import pytest

from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.pipelines.read import read
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.hadamard_rows import kind_estimate
from tests.pipelines.test_hadamard_job import START, reports
from tests.pipelines.test_kind_analyses_job import _encoder, _ms, run


def config(kind: str) -> dict:
    return {"collection": "survey", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(5)],
            "channel": {"kind": kind, "epsilon": 2.0}, "max_order": 2,
            "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 40,
            "sets": [["q0", "q1", "q3", "q4"]], "groups": [["q1", "q2", "q3"]],
            "conditionals": [{"of": ["q0"], "given": ["q1", "q2"]}],
            "extremes": [{"name": "any", "op": "or", "bits": ["q2", "q3", "q4"]}]}


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_the_run_command_publishes_the_rows_of_extra_sets(tmp_path, kind):
    spec = config(kind)
    cfg = parse_config(spec)
    assert cfg.sampling.sets == ((0, 1, 2), (0, 1, 3, 4), (1, 2, 3), (2, 3, 4))
    records, packed, event = reports(cfg, seed=11, encode=_encoder(kind))
    got = run(tmp_path, spec, records)
    got["marginals"] = read(str(tmp_path / "out"), "marginals").to_pylist()
    got["tables"] = read(str(tmp_path / "out"), "tables", estimator="unbiased").to_pylist()
    idx = np.flatnonzero(event < START + 3_600_000)
    agg = cfg.aggregator
    marginals = agg.marginals(agg.add_packed(agg.create(), packed[idx]))
    est = kind_estimate(cfg, marginals)
    (row,) = [r for r in got["conditionals"] if _ms(r["window_start"]) == START]
    c = conditional(est, (0,), (1, 2), cfg.level, cfg.conditional_alpha)
    assert (row["estimate"], row["variance"]) == (pytest.approx(c.estimate, rel=1e-9), pytest.approx(c.variance, rel=1e-9))
    (row,) = got["extremes"]
    count, var = est.extreme("or", (2, 3, 4))
    assert (row["estimate"], row["variance"]) == (pytest.approx(count, rel=1e-9), pytest.approx(var, rel=1e-9))
    assert 0.5 * 2400 < row["estimate"] < 2400   # the data: ~0.6 of reports have one of the three bits
    wide = {tuple(r["columns"]): r for r in got["marginals"] if _ms(r["window_start"]) == START and len(r["columns"]) > 2}
    held = {r["reason"].split(" withheld")[0] for r in got["withheld"] if _ms(r["window_start"]) == START
            and r["cause"] == "privacy"}
    # subset at width 4: the family rule (ldp/thin_rows.py, sufficient not exact) withholds the group's table
    # {q1,q2,q3}, its marginal and the pair {q1,q2}'s, whose regions it can only bound; hadamard publishes them
    withheld = {"hadamard": set(), "subset": {"table of q1,q2,q3", "marginal of q1,q2,q3", "marginal of q1,q2"}}[kind]
    assert held == withheld
    expect = {(0, 1, 2), (0, 1, 3), (0, 1, 4), (0, 3, 4), (1, 3, 4), (0, 1, 3, 4), (1, 2, 3), (2, 3, 4)}
    assert set(wide) == {s for s in expect if f"marginal of {','.join(f'q{b}' for b in s)}" not in held}
    i = marginals.family.index((0, 1, 3, 4))
    assert wide[(0, 1, 3, 4)]["estimate"] == pytest.approx(marginals.means[i], rel=1e-9)
    assert wide[(0, 1, 3, 4)]["variance"] == pytest.approx(marginals.variances[i], rel=1e-9)
    cells = [r for r in got["tables"] if _ms(r["window_start"]) == START]
    assert len(cells) == (0 if "table of q1,q2,q3" in held else 8)
    assert {tuple(r["group"]) for r in cells} <= {("q1", "q2", "q3")}
    table = est.estimate.table((1, 2, 3))
    want = [] if "table of q1,q2,q3" in held else sorted(table.estimate)
    assert sorted(r["estimate"] for r in cells) == pytest.approx(want, rel=1e-9)
    consistent = [r for r in read(str(tmp_path / "out"), "tables").to_pylist() if _ms(r["window_start"]) == START]
    assert len(consistent) == len(cells) and all(0 <= r["frequency"] <= 1 for r in consistent)
    assert sum(r["frequency"] for r in consistent) == pytest.approx(1.0 if cells else 0.0, abs=1e-9)


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_streaming_gives_the_batch_answers_with_extra_sets(kind):
    """The streaming engine (two regions, hourly fixed windows): every window and key's latest pane holds the
    batch job's rows exactly, the extra sets' marginals, tables, conditional and extreme among them."""
    from tests.pipelines.test_same_answers import batch_and_streaming, canonical, latest_panes
    cfg = parse_config(dict(config(kind), min_reports=25, dimensions={"region": {}}))
    records, _, _ = reports(cfg, seed=3, encode=_encoder(kind))
    records = [dict(r, dimensions={"region": "eu" if i % 3 else "us"}) for i, r in enumerate(records)]
    batch, got = batch_and_streaming(records, cfg)
    expected = canonical(batch)
    assert expected["conditionals"] and expected["extremes"]
    assert any(len(r["columns"]) == 4 for r in batch["marginals"])   # the 4-bit sets entry is published
    assert canonical(latest_panes(got)) == expected


@pytest.mark.parametrize("kind,c", [("hadamard", 1), ("subset", 2)])
def test_a_client_extreme_over_an_extra_set_through_the_run_command(tmp_path, kind, c):
    """The probe's lifted cell (issue 48): an OR over a client's reports of 3 bits at max_order 2. Its bits are an
    extra set, so each report's term exists (hadamard: the subsets' coefficients are in the pool; subset: the
    width holds it) and the row is the aggregator's product on the same reports. Failed before: refused
    (kind-analyses-over-order)."""
    from ldp_marginals.pipelines.read import read_rows
    from ldp_marginals.pipelines.run import run as run_job
    from tests.batch_runs import run_args
    from tests.pipelines.test_kind_client_extremes_job import config as client_config
    from tests.pipelines.test_kind_client_extremes_job import expected_sums, population
    spec = client_config(kind, c, extremes=[{"name": "any3", "op": "or", "bits": ["q0", "q1", "q2"], "over": "client"}])
    cfg = parse_config(spec)
    assert cfg.sampling.sets == ((0, 1, 2),)
    records, packed, tokens, times = population(cfg, kind)
    out = tmp_path / "out"
    run_job(run_args(tmp_path, spec, records, "fleet", out))
    (row,) = read_rows(str(out), "extremes", collection="fleet")
    ((estimate, variance),), _ = expected_sums(cfg, packed, tokens, times)
    assert row["name"] == "any3" and row["n"] == 1200
    assert (row["estimate"], row["variance"]) == (pytest.approx(estimate, rel=1e-9), pytest.approx(variance, rel=1e-9))
    assert 0.3 * 1200 < row["estimate"] < 1200 and variance > 0
