"""The team's configuration of issue 48 (item 6) through the job: the device as the unit, one memoized
report an hour, daily windows per region with a rollup over the regions, tables, per-client OR/AND on a
sample of reports, a conditional and a mean (:func:`benchmarks.team_month.team_config`; the channel is
a parameter there, per-bit RAPPOR today).

Batch, ``ldp-marginals run``: 2,000 devices a region with their device secrets, values and memoized
responses stable over the period, each under its day's token; two days here (the month, 30 days, is
``python -m benchmarks.team_month``, whose figures the note reports: a month does not fit the suite).
Every kind of row on every day and key, nothing withheld, every report counted, and the enforced
epsilons stated. Streaming: the same configuration on a TestStream of one day (110 devices a region,
in bundles of 4 hours) publishes every kind of row too, the rollup's among them."""
import numpy as np
import pytest

from benchmarks.team_month import ALL, KINDS, month_findings, month_reports, problems, run_month, team_config

DEVICES, DAYS = 2000, 2


def test_the_team_configuration_publishes_every_kind_of_row_on_every_day_in_batch(tmp_path):
    config = team_config()
    out = run_month(str(tmp_path), config, month_reports(config, DEVICES, DAYS))
    findings = month_findings(out, config)
    assert problems(findings, config, DEVICES, DAYS) == []
    rows = findings["rows"]
    for kind in KINDS:   # the rollup row (region __all__) carries the rows over reports, every day
        want = 0 if kind == "extremes" else DAYS
        assert sum(1 for day, region in rows[kind] if region == ALL) == want, kind
    for (day, region), got in rows["extremes"].items():   # both client extremes, over every device of the key
        assert sorted(r["name"] for r in got) == ["all_f", "any_f"]
        assert all(r["n"] == DEVICES for r in got)
    # memoized: a device's reports of the month repeat its permanent responses, so the month's enforced
    # epsilon is the permanent response's (epsilon_infinity), not 720 reports' worth
    eps = findings["epsilons"]
    enforced = eps["enforced"]
    assert (enforced["reports_per_day"], enforced["reports_per_month"]) == (24, 720)
    assert enforced["epsilon_per_month"] == pytest.approx(eps["epsilon_infinity"], rel=1e-9)
    assert enforced["epsilon_per_day"] <= enforced["epsilon_per_month"] + 1e-9


def test_the_team_configuration_is_accepted_and_publishes_every_kind_of_row_in_streaming():
    from apache_beam.testing import test_stream

    from benchmarks.team_month import HOUR, T0
    from ldp_marginals.schemas.config import parse_config
    from tests.pipelines.test_streaming import run_stream
    config = team_config()
    cfg = parse_config(config)
    records = month_reports(config, 110, 1, seed=7)
    bundles = {}   # the day's reports as a collector delivers them: every 4 hours, the watermark behind
    for r in records:
        bundles.setdefault((r["event_time"] - T0) // (4 * HOUR), []).append(r)
    stream = test_stream.TestStream().advance_watermark_to(T0 / 1000)
    for at in sorted(bundles):
        stream = stream.add_elements(bundles[at]).advance_watermark_to((T0 + (at + 1) * 4 * HOUR) / 1000)
    got, _ = run_stream(stream.advance_watermark_to_infinity(), cfg)
    assert not got["dead_letters"]
    published = {}
    for f in got["panes"]:
        for r in f.rows:
            published.setdefault(f.kind, set()).add(r["dimensions"].get("region"))
    regions = {"eu", "us", "asia"}
    for kind in KINDS:
        want = regions if kind == "extremes" else regions | {ALL}
        assert published.get(kind) == want, (kind, published.get(kind))
    assert not [r for r in got["withheld"]], got["withheld"][:1]
    final = {}
    for f in got["panes"]:
        if f.kind == "marginals":
            final[dict(f.key)["region"]] = max(final.get(dict(f.key)["region"], 0), max(r["n_reports"] for r in f.rows))
    assert final == {"eu": 110 * 24, "us": 110 * 24, "asia": 110 * 24, ALL: 3 * 110 * 24}
    assert np.isfinite([r["variance"] for r in got["conditionals"] + got["means"]]).all()
