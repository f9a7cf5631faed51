"""Rollups of the whole-report kinds (``subset``, ``hadamard``) through ``ldp-marginals run`` and in streaming
(issue 48 item 4; transforms/publication/kind_rollups.py; docs/design.md section 7, "Rollups"). Before
this, rule ``kind-rollups`` refused them: a rollup row minus its keys' published rows gives back a key's
row withheld for resting on fewer than min_reports reports.

Five keys of 3 bits (max_order 2, min_reports 5), rollups over region: eu 1.0 (20 reports, ONE of them
drew the pair (b0, b1): its pair row is withheld) and eu 2.0 (20, 6 drew it) are released, so eu's rollup
is a sum of published keys, whose pair row minus eu 2.0's would be that one report's answer; us 1.0 (20)
is released and us 2.0 and us 3.0 (4 each) are withheld, 8 together, so us's rollup is published, but its
withheld part holds ONE report that drew the pair: its pair row minus us 1.0's would be that report's.
Both rollups withhold the pair (a withheld row each, naming why), publish what else they can, and every
row they publish is the kind's estimator on the union of their keys' reports."""
import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing import test_stream

from ldp_marginals import schemas
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.config import parse_config
from tests.pipelines.test_attacks_issue47 import T0, _run, _set_counts
from tests.pipelines.test_same_answers import latest_panes, run_batch, run_streaming
from tests.pipelines.test_streaming import run_stream

M = 5
ALL = "__all__"
PAIR = (0, 1)


DEVICE = {"unit": "device", "max_reports_per_device": 1, "max_keys_per_device": 1}


def _spec(kind: str, unit: str = "report") -> dict:
    """Under ``privacy.unit: device`` every report is its own device's (a token each; at most one report a
    device and one key: R = 1), so the thin-row rule decides as under the report unit, and the withheld
    parts weigh devices (docs/design.md, section 7, "Rollups", "Under the device unit")."""
    channel = {"kind": kind, "epsilon": 2.0} | ({"width": 2} if kind == "subset" else {})
    features = [{"name": f"b{i}", "type": "boolean"} for i in range(3)]
    return ({"privacy": DEVICE} if unit == "device" else {}) | {"collection": "kr", "features": features,
            "channel": channel, "max_order": 2, "min_reports": M, "window": {"type": "fixed", "size_seconds": 3600},
            "dimensions": {"region": {"max_values": 4}, "version": {"max_values": 8}}, "rollups": [["region"]]}


# the draws of each key's reports (a subset of two bits, or a coefficient), the pair's count first
KEYS = {("eu", "1.0"): [PAIR] + [(0, 2)] * 10 + [(1, 2)] * 9,
        ("eu", "2.0"): [PAIR] * 6 + [(0, 2)] * 7 + [(1, 2)] * 7,
        ("us", "1.0"): [PAIR] * 6 + [(0, 2)] * 7 + [(1, 2)] * 7,
        ("us", "2.0"): [PAIR] + [(0, 2)] * 2 + [(1, 2)],
        ("us", "3.0"): [(0, 2)] * 3 + [(1, 2)]}
# Hadamard sampling (one coefficient a report at epsilon 2): the same story over coefficients, with six
# draws of every other coefficient in the released keys, and the withheld keys' other draws on few of them
_REST = [(0,), (1,), (2,), (0, 2), (1, 2)] * 6
HADAMARD_KEYS = {("eu", "1.0"): [PAIR] + _REST, ("eu", "2.0"): [PAIR] * 6 + _REST, ("us", "1.0"): [PAIR] * 6 + _REST,
                 ("us", "2.0"): [PAIR] + [(2,)] * 3, ("us", "3.0"): [(2,)] * 2 + [(0, 2)] * 2}


def _records(cfg) -> list:
    """Each key's reports, with random patterns (seeded), a minute apart within the hour."""
    rng = np.random.default_rng(4801)
    family = cfg.sampling.family if cfg.channel_kind == "hadamard" else None
    fmt = cfg.aggregator.format
    out = []
    for (region, version), draws in (KEYS if cfg.channel_kind == "subset" else HADAMARD_KEYS).items():
        for i, draw in enumerate(draws):
            if cfg.channel_kind == "subset":
                mask = sum(1 << b for b in draw)
                packed = fmt.pack([mask], [int(rng.integers(0, 8)) & mask])
            else:
                packed = fmt.pack(np.array([[family.index(draw)]]), np.array([[int(rng.integers(0, 2))]]))
            out.append({"collection": cfg.name, "event_time": T0 + 60_000 * (i + 1), "bits": packed[0].tobytes(),
                        "dimensions": {"region": region, "version": version},
                        "client": f"{region}-{version}-{i}" if cfg.device is not None else None})
    return out


def _key(row) -> tuple:
    return tuple(sorted(row["dimensions"].items()))


def _union_marginals(cfg, records, region):
    """The kind's estimator (its aggregator's marginals) on the union of a region's keys' reports."""
    agg = cfg.aggregator
    acc = agg.create()
    packed = np.array([np.frombuffer(r["bits"], dtype=np.uint8) for r in records
                       if r["dimensions"]["region"] == region])
    agg.add_packed(acc, packed)
    return agg.marginals(agg.settle(acc))


def _check(cfg, records, marginals, withheld):
    rollups = [r for r in marginals if ALL in r["dimensions"].values()]
    keys = [r for r in marginals if ALL not in r["dimensions"].values()]
    assert {r["dimensions"]["region"] for r in rollups} == {"eu", "us"}
    # a key withholds its thin pair; the rollups withhold the pair too, each with a withheld row saying why
    eu1, eu2 = {"region": "eu", "version": "1.0"}, {"region": "eu", "version": "2.0"}
    assert not [r for r in keys if r["dimensions"] == eu1 and tuple(r["columns"]) == PAIR]
    assert [r for r in keys if r["dimensions"] == eu2 and tuple(r["columns"]) == PAIR]
    assert not [r for r in rollups if tuple(r["columns"]) == PAIR], "a rollup publishes the pair"
    why = {r["dimensions"]["region"]: r["reason"] for r in withheld
           if ALL in r["dimensions"].values() and "b0,b1" in r["reason"]}
    if cfg.channel_kind == "subset":   # rule 1 (a key withholds it) and rule 2 (on a withheld part)
        assert "a key it sums withholds it" in why["eu"] and "withheld reports of 2 key(s)" in why["us"], why
    else:   # the rule per coefficient: the pair's coefficient's hidden draws, 1 in each region
        assert all("coefficient of bit(s) [0, 1]" in why[region] for region in ("eu", "us")), why
    assert {tuple(r["columns"]) for r in rollups if r["dimensions"]["region"] == "eu"} >= {(0,), (1,), (2,)}
    # every published rollup row is the kind's estimator on the union of its keys' reports
    for region in ("eu", "us"):
        est = _union_marginals(cfg, records, region)
        rows = [r for r in rollups if r["dimensions"]["region"] == region]
        assert rows
        for r in rows:
            i = cfg.family.index(tuple(r["columns"]))
            assert r["n_reports"] == est.n
            assert abs(r["estimate"] - est.means[i]) < 1e-9 * max(1.0, abs(est.means[i])), (region, r["columns"])
            assert abs(r["variance"] - est.variances[i]) < 1e-9 * max(1.0, est.variances[i]), (region, r["columns"])
    return rollups, keys


def _difference_rests_on_enough(cfg, rollups, keys):
    """Subset RR: a rollup's row of S minus its keys' published rows of S rests on 0 or at least
    min_reports reports (n_K read back from the rows alone, tests/pipelines/test_attacks_issue47.py)."""
    checked = 0
    for r in rollups:
        inside = [k for k in keys if k["dimensions"]["region"] == r["dimensions"]["region"]
                  and k["columns"] == r["columns"]]
        n_k = round(_set_counts(cfg, r)[0]) - sum(round(_set_counts(cfg, k)[0]) for k in inside)
        assert n_k == 0 or n_k >= M, f"LEAK: rollup {r['dimensions']} of {r['columns']} minus its keys: {n_k} reports"
        checked += 1
    return checked


@pytest.mark.parametrize("unit", ["report", "device"])
@pytest.mark.parametrize("kind", ["subset", "hadamard"])
def test_the_job_withholds_a_rollups_row_that_would_give_back_a_thin_key_row(kind, unit, tmp_path):
    spec = _spec(kind, unit)
    cfg = parse_config(spec)
    records = _records(cfg)
    _run(tmp_path, spec, records, "in", tmp_path / "out")
    rollups, keys = _check(cfg, records, read_rows(str(tmp_path / "out"), "marginals"),
                           read_rows(str(tmp_path / "out"), "withheld"))
    if kind == "subset":
        assert _difference_rests_on_enough(cfg, rollups, keys) >= 5
    # earlier releases: a rerun into the same output (a backfill's rollup minus the first run's) is refused,
    # as for per-bit channels (pipelines/release_ledger.py: check_rollups)
    with pytest.raises(ValueError, match="rollups, which the release ledger does not cover"):
        _run(tmp_path, spec, records, "again", tmp_path / "out")


@pytest.mark.parametrize("unit", ["report", "device"])
@pytest.mark.parametrize("kind", ["subset", "hadamard"])
def test_streaming_rollups_of_the_kinds_equal_batch(kind, unit):
    """The same reports in streaming (TestStream, every report on time): the rollup rows, published once at
    the window's close, are batch's, and withhold the pair."""
    cfg = parse_config(_spec(kind, unit))
    records = _records(cfg)
    messages = [schemas.encode_message("noisy_report", r) for r in records]
    batch = run_batch(beam.Create(messages), cfg)
    stream = run_streaming(test_stream.TestStream().advance_watermark_to(0).add_elements(messages)
                           .advance_watermark_to_infinity(), cfg)
    latest = latest_panes(stream)
    rollups, keys = _check(cfg, records, latest["marginals"], latest["withheld"])
    if kind == "subset":
        assert _difference_rests_on_enough(cfg, rollups, keys) >= 5

    def rows(kind_rows):
        return sorted((_key(r), tuple(r.get("columns") or ()), r.get("reason", ""), round(r.get("estimate", 0.0), 9))
                      for r in kind_rows if ALL in r["dimensions"].values())
    for out in ("marginals", "withheld"):
        assert rows(batch[out]) == rows(latest[out]), out


def test_streaming_rollup_withholds_a_pair_a_key_withholds_for_one_released_increment():
    """Early panes difference a key's rows into released increments (atoms); a rollup must not give back a
    row its key withholds for one atom. eu 2.0's first 20 reports (6 drew the pair) are released in an early
    pane; its next 10 reports hold ONE that drew it, so its final pane withholds the pair (7 in the window,
    but 1 in that increment: final minus early would be that report). eu 1.0 (20 reports) has none that drew
    it. eu's rollup, published at the close on 50 reports, must withhold the pair: its row minus eu 2.0's
    early pane (6 drew it) would be the one report's answer."""
    spec = dict(_spec("subset"), early_firing_seconds=60)
    cfg = parse_config(spec)
    fmt = cfg.aggregator.format
    rng = np.random.default_rng(4802)

    def reports(version, draws, minute0):
        out = []
        for i, draw in enumerate(draws):
            mask = sum(1 << b for b in draw)
            out.append({"collection": cfg.name, "event_time": T0 + 60_000 * (minute0 + i),
                        "bits": fmt.pack([mask], [int(rng.integers(0, 8)) & mask])[0].tobytes(),
                        "dimensions": {"region": "eu", "version": version}, "client": None})
        return out
    first = (reports("1.0", [(0, 2)] * 10 + [(1, 2)] * 10, 1)
             + reports("2.0", [PAIR] * 6 + [(0, 2)] * 7 + [(1, 2)] * 7, 1))
    second = reports("2.0", [PAIR] + [(0, 2)] * 5 + [(1, 2)] * 4, 30)
    encode = lambda rs: [schemas.encode_message("noisy_report", r) for r in rs]   # noqa: E731
    stream = (test_stream.TestStream().advance_watermark_to(0)
              .add_elements(encode(first))
              .advance_watermark_to(T0 / 1000 + 60)
              .advance_processing_time(120)          # an early pane: the first 40 reports
              .add_elements(encode(second))
              .advance_watermark_to_infinity())      # the on-time (final) pane and the rollups
    got = run_stream(stream, cfg)[0]
    marginals = [r for f in got["panes"] if f.kind == "marginals" for r in f.rows]
    eu2 = {"region": "eu", "version": "2.0"}
    early = [r for r in marginals if r["dimensions"] == eu2 and tuple(r["columns"]) == PAIR]
    assert [r["n_reports"] for r in early] == [20], early   # the attack needs the early pane's pair, on 6
    rollups = [r for r in marginals if ALL in r["dimensions"].values()]
    assert rollups and {r["n_reports"] for r in rollups} == {50}
    assert not [r for r in rollups if tuple(r["columns"]) == PAIR], "the rollup gives back the increment's pair"
    why = [r["reason"] for f in got["panes"] if f.kind == "withheld" for r in f.rows
           if ALL in r["dimensions"].values() and "b0,b1" in r["reason"]]
    assert why and "released increment" in why[0], why
