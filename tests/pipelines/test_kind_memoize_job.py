"""Memoized whole-report kinds in the job (issue 48 items 2-3; docs/client.md section 13):
``channel: {kind: hadamard|subset, epsilon: <epsilon_inf>, memoize: true, epsilon_1: <one report's>}`` under
``privacy.unit: device``, through ``ldp-marginals run`` on an Avro file and through the streaming engine.
Devices send 24 memoized reports of one value a day (the clients' law: ldp/kind_memoize.py's simulation,
packed in the kind's wire format); the job inverts the effective mechanism (the kind at epsilon_1) and every
published variance carries the repeats term of a device's reports sharing their permanent response
(``s = M - 1 = 23``), recomputed here from ``table_with_repeats`` (the table path, not the job's vectorized
marginal path); collections.json states one report's epsilon, a day's and a month's, declared and enforced.
Failed before: the config was refused (rule kind-memoize)."""
import json

import numpy as np
import pytest

from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.kind_analyses import KindMarginals
from ldp_marginals.ldp.kind_memoize import (randomize_memoized_hadamard, randomize_memoized_subset,
                                            table_with_repeats)
from ldp_marginals.ldp.means import feature_mean
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import COLLECTIONS_FILE
from tests.batch_runs import run_args
from tests.pipelines.test_device_unit import HOUR, T0

DAY = 24 * HOUR
CHANNELS = {"hadamard": {"kind": "hadamard", "epsilon": 4.0, "memoize": True, "epsilon_1": 1.0},
            "subset": {"kind": "subset", "epsilon": 4.0, "width": 2, "memoize": True, "epsilon_1": 1.0}}
SIMULATE = {"hadamard": randomize_memoized_hadamard, "subset": randomize_memoized_subset}
DEVICES, PER_DAY = 300, 24


def config(kind):
    return {"collection": "memo", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(4)]
            + [{"name": "x", "type": "numeric", "low": 0, "high": 10}],
            "channel": CHANNELS[kind], "max_order": 2, "window": {"type": "fixed", "size_seconds": 86400},
            "min_reports": 20, "groups": [["q0", "q1"]], "conditionals": [{"of": ["q0"], "given": ["q1"]}],
            "extremes": [{"name": "any", "op": "or", "bits": ["q0", "q2"]}],
            "privacy": {"unit": "device", "model": "local", "epsilon": 1.0, "max_reports_per_device": PER_DAY,
                        "reports_per_day": PER_DAY, "epsilon_per_day": 4.0, "epsilon_per_month": 4.0}}


def _records(cfg, kind, seed=0):
    """One day: DEVICES devices, each holding one value all day and sending one memoized report an hour
    under its token (the permanent response drawn once per device, each report re-randomized)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random((DEVICES, 5)) < np.array([0.4, 0.6, 0.3, 0.5, 0.3])).astype(np.uint8)
    a, b, owner = SIMULATE[kind](truth, np.full(DEVICES, PER_DAY), cfg.kind_memo, rng)
    packed = cfg.wire.pack(a, b)
    hour = np.tile(np.arange(PER_DAY), DEVICES)
    out = [{"collection": "memo", "event_time": T0 + int(hour[i]) * HOUR + int(rng.integers(HOUR)),
            "bits": packed[i].tobytes(), "dimensions": {}, "client": f"dev-{owner[i]}"} for i in range(owner.size)]
    rng.shuffle(out)
    return out, packed


@pytest.mark.parametrize("kind", sorted(CHANNELS))
def test_a_memoized_kind_publishes_every_row_with_the_repeats_term(tmp_path, kind):
    spec = config(kind)
    cfg = parse_config(spec)
    assert cfg.sampling == cfg.kind_memo.effective and cfg.shared_reports == PER_DAY - 1
    records, packed = _records(cfg, kind)
    out = tmp_path / "out"
    run(run_args(tmp_path, spec, records, "memo", out))
    agg = cfg.aggregator
    plain = agg.marginals(agg.add_packed(agg.create(), packed))   # every report kept (24 <= M)
    est, memo, s = plain.estimate, cfg.kind_memo, PER_DAY - 1

    rows = read_rows(str(out), "marginals", collection="memo")
    assert sorted(tuple(r["columns"]) for r in rows) == sorted(tuple(c) for c in cfg.published_sets)
    for r in rows:
        cols = tuple(r["columns"])
        i = plain.family.index(cols)
        assert r["n_reports"] == DEVICES * PER_DAY
        assert r["estimate"] == pytest.approx(plain.means[i], abs=1e-6)
        # the all-ones cell of the set's own table with the term: the table path, not the marginal path
        want = table_with_repeats(est, memo, s, cols).covariance[-1, -1]
        assert r["variance"] == pytest.approx(want, rel=1e-9)
        assert r["variance"] > 1.3 * plain.variances[i]    # 24 reports of one value: the term is material

    table = table_with_repeats(est, memo, s, (0, 1))
    cells = read_rows(str(out), "tables", collection="memo", estimator="unbiased")
    assert len(cells) == 4
    assert sorted(r["variance"] for r in cells) == pytest.approx(sorted(np.diag(table.covariance)), rel=1e-9)
    assert read_rows(str(out), "consistent_tables", collection="memo")

    (ext,) = read_rows(str(out), "extremes", collection="memo")
    t02 = table_with_repeats(est, memo, s, (0, 2))
    assert ext["variance"] == pytest.approx(t02.covariance[0, 0], rel=1e-9)   # OR: N minus the all-zeros cell
    assert ext["estimate"] == pytest.approx(DEVICES * PER_DAY - t02.estimate[0], rel=1e-9)

    # the conditional and the mean: larger than the same statistic without the term (main's), by the term
    from ldp_marginals.ldp.channel_kind import channel_kind
    bare = KindMarginals(plain, channel_kind(kind).cell_variance_per_report)
    (cond,) = read_rows(str(out), "conditionals", collection="memo")
    assert cond["variance"] > 1.3 * conditional(bare, (0,), (1,)).variance
    (mean,) = read_rows(str(out), "means", collection="memo")
    assert mean["variance"] > 1.3 * feature_mean(bare, 4, 0.0, 10.0).variance

    # one report's epsilon, a day's and a month's: declared (24 a day) and enforced (1 slice a day x M = 24)
    (info,) = [c for c in json.loads((out / COLLECTIONS_FILE).read_text()) if c["collection"] == "memo"]
    eps = info["epsilons"]
    assert eps["epsilon_1"] == pytest.approx(1.0) and eps["epsilon_infinity"] == pytest.approx(4.0)
    assert eps["enforced"]["reports_per_day"] == PER_DAY and eps["enforced"]["reports_per_month"] == 30 * PER_DAY
    assert eps["enforced"]["epsilon_per_day"] == pytest.approx(4.0)      # min(24 x 1, 4)
    assert eps["enforced"]["epsilon_per_month"] == pytest.approx(4.0)    # one value: min(720 x 1, 4)
    assert eps["declared"]["epsilon_per_day"] == pytest.approx(4.0)
    assert info["channel"]["memoize"] is True and info["channel"]["epsilon_1"] == pytest.approx(1.0)
    assert info["channel"]["permanent_keep"] > info["channel"]["instantaneous_keep"] > 0
    assert info["local_epsilon"] == pytest.approx(1.0)


@pytest.mark.parametrize("kind", sorted(CHANNELS))
def test_a_day_promise_below_epsilon_infinity_is_refused_naming_the_figures(kind):
    spec = config(kind)
    spec["privacy"] = {k: v for k, v in dict(spec["privacy"], epsilon_per_day=3.0).items() if k != "epsilon_per_month"}
    with pytest.raises(ValueError, match=r"epsilon_per_day=3.*24 reports of one device a day.*epsilon_per_day=4 "
                                         r".*epsilon_1=1, epsilon_infinity=4"):
        parse_config(spec)
    # not memoized: a day's 24 reports compose, 24 x epsilon
    plain = config(kind)
    plain["channel"] = {k: v for k, v in CHANNELS[kind].items() if k not in ("memoize", "epsilon_1")}
    plain["privacy"] = {k: v for k, v in dict(plain["privacy"], epsilon=4.0, epsilon_per_day=95.0).items()
                        if k != "epsilon_per_month"}
    with pytest.raises(ValueError, match=r"epsilon_per_day=96 "):
        parse_config(plain)
    plain["privacy"]["epsilon_per_day"] = 96.0
    assert parse_config(plain).enforced_epsilons().per_day == pytest.approx(96.0)


@pytest.mark.parametrize("bad, match", [({"memoize": True}, "must have 'epsilon_1'"),
                                        ({"memoize": True, "epsilon_1": 4.0}, "epsilon_1 must be below"),
                                        ({"memoize": "yes", "epsilon_1": 1.0}, "memoize must be true or false"),
                                        ({"epsilon_1": 1.0}, "give it with memoize: true")])
def test_the_memoize_keys_are_validated(bad, match):
    spec = config("hadamard")
    spec["channel"] = dict({"kind": "hadamard", "epsilon": 4.0}, **bad)
    with pytest.raises(ValueError, match=match):
        parse_config(spec)


@pytest.mark.parametrize("kind", sorted(CHANNELS))
def test_streaming_gives_the_batch_answers_for_a_memoized_kind(kind):
    """The memoized kind under the device unit through the streaming engine (TestStream, single messages and
    a container): every window's latest pane holds the batch job's rows, marginals, tables, the conditional,
    the mean and the extreme among them."""
    from tests.pipelines.test_same_answers import batch_and_streaming, canonical, latest_panes
    cfg = parse_config(config(kind))
    records, _ = _records(cfg, kind, seed=5)
    batch, got = batch_and_streaming(records, cfg)
    expected = canonical(batch)
    for k in ("marginals", "tables", "conditionals", "means", "extremes"):
        assert expected[k], k
    assert canonical(latest_panes(got)) == expected


def test_a_coefficient_only_five_memoized_devices_drew_is_withheld_though_it_holds_120_reports(tmp_path):
    """The attacker's case memoization makes typical: a device's 24 reports all carry its permanent
    coefficient indices, so a coefficient drawn by 5 devices rests on 120 reports (over min_reports = 20) but on
    5 devices. Every device but 5 draws its two slots among the other coefficients; the 5 put one slot on the
    coefficient of {q2, q3}. Its marginal (and the rows resting on it) must be withheld as resting on fewer than
    min_reports devices, and the rest published. Fails on main (the config is refused) and with the thin rule
    counting reports instead of devices (``per_device`` = 1 in hadamard_rows.thin_sets: 120 >= 20)."""
    spec = config("hadamard")
    cfg = parse_config(spec)
    fam, rng = cfg.sampling.family, np.random.default_rng(9)
    target = fam.index((2, 3))
    others = np.array([i for i in range(1, len(fam)) if i != target])
    idx = rng.choice(others, size=(DEVICES, cfg.sampling.slots))
    idx[:5, 0] = target
    parities = rng.integers(0, 2, size=(DEVICES, cfg.sampling.slots))
    owner = np.repeat(np.arange(DEVICES), PER_DAY)
    fresh = (rng.random((owner.size, cfg.sampling.slots)) >= cfg.kind_memo.instantaneous.keep).astype(np.int64)
    packed = cfg.wire.pack(idx[owner], parities[owner] ^ fresh)
    records = [{"collection": "memo", "event_time": T0 + (i % PER_DAY) * HOUR + 1000 * (i // PER_DAY),
                "bits": packed[i].tobytes(), "dimensions": {}, "client": f"dev-{owner[i]}"} for i in range(owner.size)]
    out = tmp_path / "out"
    run(run_args(tmp_path, spec, records, "memo", out))
    published = {tuple(r["columns"]) for r in read_rows(str(out), "marginals", collection="memo")}
    assert (2, 3) not in published and (0,) in published and (0, 1) in published
    held = [r["reason"] for r in read_rows(str(out), "withheld", collection="memo")]
    assert any(r.startswith("marginal of q2,q3 withheld") and "devices" in r for r in held), held
