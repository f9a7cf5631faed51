"""The team's memoized collection through ``ldp-marginals run`` (issue 48 item 3): devices sending 24
memoized reports in a daily window, with tables, a conditional, means and extremes over reports beside
the marginals. The config is accepted (it was refused: "... do not yet (their closed-form variances
assume independent reports ...)") and every kind of row is published with the variances that carry
the shared responses' term (``with_repeats``, the aggregator's shared terms), computed here from the
same reports without the job."""
import numpy as np
import pytest

from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.extremes import ExtremeAccumulator
from ldp_marginals.ldp.means import feature_mean
from ldp_marginals.ldp.memoized import extreme_repeat_terms, randomize_repeats, with_repeats
from ldp_marginals.ldp.tables import group_table
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from tests.batch_runs import run_args

T0 = 1_767_225_600_000   # 2026-01-01 00:00 UTC, a day boundary
HOUR = 3_600_000
M, DEVICES = 24, 80
RAPPOR = {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True}
CONFIG = {"collection": "team",
          "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")]
          + [{"name": "minutes", "type": "numeric", "low": 0, "high": 60}],
          "channel": RAPPOR, "max_order": 2, "window": {"type": "fixed", "size_seconds": 86_400},
          "min_reports": 20, "privacy": {"unit": "device", "max_reports_per_device": M},
          "groups": [["a", "b"]], "conditionals": [{"of": ["a"], "given": ["b"]}],
          "means": [{"of": "minutes", "by": ["b"]}], "conditional_alpha": 0.4,
          "extremes": [{"name": "any", "op": "or", "bits": ["a", "b"]},
                       {"name": "both", "op": "and", "bits": ["b", "c"]}]}


def _reports(cfg, seed=48):
    """One day: 80 devices, each one report an hour (24), memoized (its values fixed for the day)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random((DEVICES, 4)) < [0.4, 0.6, 0.7, 0.5]).astype(np.uint8)
    noisy, owner = randomize_repeats(truth, np.full(DEVICES, M), cfg.client_channels, rng)
    packed = pack_bits(noisy)
    records = [{"collection": "team", "event_time": T0 + (i % M) * HOUR + int(rng.integers(HOUR)),
                "bits": bytes(packed[i]), "dimensions": {}, "client": f"dev-{owner[i]}"} for i in range(owner.size)]
    return records, noisy


def test_the_memoized_team_config_publishes_every_kind_of_row_with_the_corrected_variances(tmp_path):
    cfg = parse_config(CONFIG)   # refused before: tables, conditionals, means, extremes beside M = 24
    assert cfg.shared_reports == M - 1
    records, noisy = _reports(cfg)
    out = tmp_path / "out"
    run(run_args(tmp_path, CONFIG, records, "team", out))
    rows = {kind: read_rows(str(out), kind, collection="team")
            for kind in ("marginals", "conditionals", "means", "extremes")}
    rows["tables"] = read_rows(str(out), "tables", collection="team", estimator="unbiased")
    rows["consistent_tables"] = read_rows(str(out), "tables", collection="team")
    assert all(rows[k] for k in rows), {k: len(v) for k, v in rows.items()}
    assert all(r["n_reports"] == DEVICES * M for r in rows["marginals"])

    # the same statistics from the same reports, without the job
    plain = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_packed(pack_bits(noisy)), cfg.channels,
                          exclusive_groups=cfg.layout.exclusive_groups)
    est = with_repeats(plain, cfg.client_channels, M - 1)
    for r in rows["marginals"]:
        i = cfg.family.index(tuple(r["columns"]))
        assert r["variance"] == pytest.approx(est.variances[i], rel=1e-9)
        assert r["variance"] > 1.5 * plain.variances[i]   # the shared term is most of it at this channel
    table = group_table(est, cfg.layout, ("a", "b"))
    old = group_table(plain, cfg.layout, ("a", "b"))
    got = {tuple(r["cell"]): r["variance"] for r in rows["tables"]}
    for cell, v, v_old in zip(table.cells, table.variances, old.variances):
        assert got[tuple(cell)] == pytest.approx(v, rel=1e-9) and v > 1.5 * v_old
    (c,) = rows["conditionals"]
    want = conditional(est, (0,), (1,), cfg.level, cfg.conditional_alpha)
    assert c["variance"] == pytest.approx(want.variance, rel=1e-9)
    assert c["variance"] > 1.5 * conditional(plain, (0,), (1,), cfg.level, cfg.conditional_alpha).variance
    bit = cfg.layout.labels.index("minutes")
    means = {tuple(r["given"]): r for r in rows["means"]}
    for given in ((), (1,)):
        want = feature_mean(est, bit, 0, 60, given, cfg.level, cfg.conditional_alpha)
        names = tuple(cfg.layout.labels[b] for b in given)
        assert means[names]["variance"] == pytest.approx(want.variance, rel=1e-9)
        assert want.variance > 1.5 * feature_mean(plain, bit, 0, 60, given, cfg.level, cfg.conditional_alpha).variance
    eff = cfg.channels
    c0, c1 = cfg.client_channels.shared
    for r in rows["extremes"]:
        ext = next(e for e in cfg.report_extremes if e.name == r["name"])
        cols = list(ext.bits)
        acc = ExtremeAccumulator(ext.op, (noisy.shape[0],)).add(noisy[:, cols].T, eff.p[cols][:, None],
                                                                  eff.q[cols][:, None])
        independent = acc.variance().sum()
        shared = extreme_repeat_terms(ext.op, noisy[:, cols], eff.p[cols], eff.q[cols], c0[cols], c1[cols]).sum()
        assert r["estimate"] == pytest.approx(acc.estimate().sum(), rel=1e-9)
        assert r["variance"] == pytest.approx(independent + (M - 1) * shared, rel=1e-9)
        assert r["variance"] > 1.5 * independent
