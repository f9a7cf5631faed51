"""The whole-report kinds' conditionals, means and extremes over reports through the command
(`ldp-marginals run`, batch) and the streaming engine: each row is the estimator of ldp/kind_analyses.py
on the window's reports, a window under min_reports publishes none of them, and a row whose table rests
on too few reports is withheld with it (issue 48 item 1)."""
import numpy as np
import pytest

from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.means import feature_mean
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.hadamard_rows import hadamard_estimates, kind_estimate, thin_sets
from tests.batch_runs import run_command
from tests.pipelines.test_hadamard_job import START, reports


def config(kind: str, min_reports: int = 40) -> dict:
    """Four booleans and a numeric (its 1-bit encoding is bit 4), a conditional, the numeric's mean and
    conditional mean, an OR over three bits (max_order 3). Subset RR at width 3 = max_order: the window
    counts every union of sets a report holds, so the family rule's regions are exact (at width 4 the
    regions of a 3-bit table beside its bits' marginals are bounded below by 0 only, and the rule, sufficient
    not exact, withholds them: ldp/thin_rows.py)."""
    return {"collection": "survey", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(4)]
            + [{"name": "x", "type": "numeric", "low": 0, "high": 10}],
            "channel": {"kind": kind, "epsilon": 2.0, **({"width": 3} if kind == "subset" else {})}, "max_order": 3,
            "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": min_reports,
            "conditionals": [{"of": ["q0"], "given": ["q1", "q2"]}], "means": [{"of": "x", "given": ["q0"]}],
            "extremes": [{"name": "any", "op": "or", "bits": ["q0", "q1", "q2"]},
                         {"name": "all", "op": "and", "bits": ["q1", "q3"]}]}


def _ms(t) -> int:
    return round(t.timestamp() * 1000)


def _encoder(kind):
    from ldp_marginals.ldp.channel_kind import channel_kind
    return channel_kind(kind).encode_reports


def run(tmp_path, spec, records) -> dict:
    return run_command(tmp_path, spec, records, ("conditionals", "means", "extremes", "withheld"))


def expected(cfg, packed, event):
    """The estimator on hour 0's reports: conditional, means (unconditional, given q0), extremes."""
    idx = np.flatnonzero(event < START + 3_600_000)
    agg = cfg.aggregator
    est = kind_estimate(cfg, agg.marginals(agg.add_packed(agg.create(), packed[idx])))
    c = conditional(est, (0,), (1, 2), cfg.level, cfg.conditional_alpha)
    means = [feature_mean(est, 4, 0.0, 10.0, given, cfg.level, cfg.conditional_alpha) for given in ((), (0,))]
    extremes = [est.extreme("or", (0, 1, 2)), est.extreme("and", (1, 3))]
    return c, means, extremes


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_the_run_command_publishes_each_kinds_conditionals_means_and_extremes(tmp_path, kind):
    spec = config(kind)
    cfg = parse_config(spec)
    records, packed, event = reports(cfg, seed=5, encode=_encoder(kind))
    got = run(tmp_path, spec, records)
    c, means, extremes = expected(cfg, packed, event)
    hour0 = [r for r in got["conditionals"] if _ms(r["window_start"]) == START]
    assert len(got["conditionals"]) == 1 and len(hour0) == 1   # hour 1 (30 reports < 40): nothing
    assert hour0[0]["estimate"] == pytest.approx(c.estimate, rel=1e-9)
    assert hour0[0]["variance"] == pytest.approx(c.variance, rel=1e-9)
    assert hour0[0]["given_count"] == pytest.approx(c.given, rel=1e-9)
    rows = sorted(got["means"], key=lambda r: len(r["given"]))
    assert [r["given"] for r in rows] == [[], ["q0"]]
    for r, m in zip(rows, means):
        assert (r["estimate"], r["variance"]) == (pytest.approx(m.estimate, rel=1e-9), pytest.approx(m.variance, rel=1e-9))
    rows = {r["name"]: r for r in got["extremes"]}
    assert set(rows) == {"any", "all"} and {r["n"] for r in rows.values()} == {2400}
    for name, (count, var) in zip(("any", "all"), extremes):
        assert rows[name]["estimate"] == pytest.approx(count, rel=1e-9)
        assert rows[name]["variance"] == pytest.approx(var, rel=1e-9)
    # the OR's truth is within its interval's reach (a sign or complement error would miss by ~1000)
    bits_any = rows["any"]["estimate"]
    assert 0.5 * 2400 < bits_any < 2400


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_a_row_whose_table_rests_on_too_few_reports_is_withheld_with_it(tmp_path, kind):
    """min_reports high enough that some order-3 table of hour 0 rests on too few reports, not the
    order-2 ones: the conditional (q0 | q1, q2) and the OR over q0..q2 are withheld (cause privacy,
    statistics conditional and extreme) exactly when the table of {q0, q1, q2} is thin, the rest published."""
    records, packed, event = reports(parse_config(config(kind)), seed=5, encode=_encoder(kind))
    idx = np.flatnonzero(event < START + 3_600_000)

    def split(m):   # the table of {q0, q1, q2} thin at min_reports m, those of the other rows not
        cfg = parse_config(config(kind, min_reports=m))
        agg = cfg.aggregator
        thin = thin_sets(cfg, *hadamard_estimates(cfg, agg.add_packed(agg.create(), packed[idx])))
        return (0, 1, 2) in thin and not {(0, 4), (1, 3), (4,)} & set(thin)
    m = next(m for m in range(40, 1000, 10) if split(m))
    spec = config(kind, min_reports=m)
    got = run(tmp_path, spec, records)
    assert got["conditionals"] == [] and [r["name"] for r in got["extremes"]] == ["all"]
    assert len(got["means"]) == 2
    held = {r["statistic"]: r for r in got["withheld"] if _ms(r["window_start"]) == START and r["cause"] == "privacy"
            and r["statistic"] in ("conditional", "extreme")}
    assert set(held) == {"conditional", "extreme"}
    assert "the table of q0,q1,q2 it rests on" in held["conditional"]["reason"]


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_streaming_gives_the_batch_answers(kind):
    """The streaming engine (two regions, hourly fixed windows): every window and key's latest pane holds
    the batch job's conditionals, means, extremes and withheld rows exactly (the rows are one function of
    the released accumulator, transforms/publication/rows.py)."""
    from tests.pipelines.test_same_answers import batch_and_streaming, canonical, latest_panes
    cfg = parse_config(dict(config(kind, min_reports=25), dimensions={"region": {}}))
    records, _, _ = reports(cfg, seed=3, encode=_encoder(kind))
    records = [dict(r, dimensions={"region": "eu" if i % 3 else "us"}) for i, r in enumerate(records)]
    batch, got = batch_and_streaming(records, cfg)
    expected = canonical(batch)
    assert expected["conditionals"] and expected["means"] and expected["extremes"] and expected["withheld"]
    assert canonical(latest_panes(got)) == expected


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_under_the_device_unit_the_rows_are_the_estimator_on_the_kept_reports(tmp_path, kind):
    """privacy.unit device (M = 2): the conditional and the extreme over reports of hour 0 are the estimator
    on the reports the device table keeps (tests/pipelines/test_kind_device_unit.py), hour 1's 19 devices
    publish none."""
    from ldp_marginals.pipelines.read import read_rows
    from ldp_marginals.pipelines.run import run as run_job
    from tests.batch_runs import run_args
    from tests.pipelines.test_device_unit import T0, _kept
    from tests.pipelines.test_kind_device_unit import _records
    from tests.pipelines.test_kind_device_unit import config as device_config
    spec = dict(device_config(kind), conditionals=[{"of": ["q0"], "given": ["q1"]}],
                extremes=[{"name": "any", "op": "or", "bits": ["q2", "q3"]}])
    cfg = parse_config(spec)
    records = _records(cfg, kind)
    out = tmp_path / "out"
    run_job(run_args(tmp_path, spec, records, "dev", out))
    kept = _kept(records, 2)[0]
    agg = cfg.aggregator
    plain = type(agg)(cfg.sampling)
    packed = np.frombuffer(b"".join(kept), dtype=np.uint8).reshape(len(kept), cfg.wire.n_bytes)
    est = kind_estimate(cfg, plain.marginals(plain.add_packed(plain.create(), packed)))
    c = conditional(est, (0,), (1,), cfg.level, cfg.conditional_alpha)
    (row,) = read_rows(str(out), "conditionals", collection="dev")
    assert (row["estimate"], row["variance"]) == (pytest.approx(c.estimate, rel=1e-9), pytest.approx(c.variance, rel=1e-9))
    (row,) = read_rows(str(out), "extremes", collection="dev")
    count, var = est.extreme("or", (2, 3))
    assert (row["estimate"], row["variance"], row["n"]) == (pytest.approx(count, rel=1e-9), pytest.approx(var, rel=1e-9),
                                                            len(kept))
    assert row["window_start"] == T0
