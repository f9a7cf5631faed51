"""The report unit with device bounds through the job (issue 48): ``privacy: {max_reports_per_device: M}``
without ``unit: device`` (refused before: device-bounds-need-device), and memoized channels under the report
unit (refused before: memoize-needs-device). Reports carry the device token; a device adds at most M reports
to a slice and key, chosen by the device unit's content-blind ranks, the excess dropped and counted in the
summary; while ``min_reports`` counts reports, as under the plain report unit. Batch through ``ldp-marginals
run``, streaming through the job's build on a TestStream."""
import json

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing import test_stream

from ldp_marginals import schemas
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.memoized import randomize_repeats, with_repeats
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.pipelines.read import read_collections, read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import SUMMARY_FILE
from tests.batch_runs import run_args
from tests.pipelines.test_device_unit import DEVICE_CONFIG, HOUR, T0, _kept, _reports
from tests.pipelines.test_same_answers import canonical, container, latest_panes, run_batch

# the device unit's test config under the report unit: the same bound, no unit given
REPORT_CONFIG = dict(DEVICE_CONFIG, privacy={"max_reports_per_device": 2})


def _run(tmp_path, config, records, name):
    out = tmp_path / f"out-{name}"
    run(run_args(tmp_path, config, records, name, out))
    return out


def test_a_chatty_device_is_bounded_and_min_reports_counts_reports(tmp_path):
    """Hour 0: 30 devices of 1-3 reports and one of 300; hour 1: 19 devices of 10. With M = 2 hour 1 keeps
    38 reports of 19 devices: published (min_reports = 20 counts reports; the device unit withholds it,
    tests/pipelines/test_device_unit.py), the chatty device's 298 excess reports dropped and counted."""
    records = _reports()
    out = _run(tmp_path, REPORT_CONFIG, records, "report")
    cfg = parse_config(REPORT_CONFIG)
    kept = _kept(records, 2)
    rows = read_rows(str(out), "marginals", collection="dev")
    assert {r["window_start"] for r in rows} == {T0, T0 + HOUR}
    assert not read_rows(str(out), "withheld", collection="dev")
    for hour in (0, 1):
        packed = np.frombuffer(b"".join(kept[hour]), dtype=np.uint8).reshape(-1, 1)
        est = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_packed(packed), cfg.channels)
        for r in (r for r in rows if r["window_start"] == T0 + hour * HOUR):
            i = cfg.family.index(tuple(r["columns"]))
            assert r["n_reports"] == len(kept[hour]) and r["estimate"] == pytest.approx(est.means[i], abs=1e-9)
            assert r["variance"] == pytest.approx(est.variances[i], abs=1e-9)
    assert len(kept[1]) == 19 * 2
    summary = json.loads((out / SUMMARY_FILE).read_text())
    valid = len(records) - 3
    assert summary["dead_letters_by_reason"] == {"no_device_token": 3}   # reports must name their device
    assert summary["reports_over_device_bound"] == valid - len(kept[0]) - len(kept[1]) > 298
    (described,) = read_collections(str(out))   # collections.json states the unit and the bounds
    assert {k: described[k] for k in ("unit", "device_token", "max_reports_per_device", "max_keys_per_device")} == {
        "unit": "report", "device_token": True, "max_reports_per_device": 2, "max_keys_per_device": 1}


def test_the_threshold_counts_the_kept_reports(tmp_path):
    """min_reports = 39: hour 1 keeps 38 reports (of 190 sent): withheld, its reason counting reports."""
    records = _reports()
    out = _run(tmp_path, dict(REPORT_CONFIG, min_reports=39), records, "thin")
    assert {r["window_start"] for r in read_rows(str(out), "marginals", collection="dev")} == {T0}
    held = read_rows(str(out), "withheld", collection="dev")
    assert [(r["window_start"], r["n_reports"]) for r in held] == [(T0 + HOUR, 38)]
    assert "38 reports < min_reports=39" in held[0]["reason"]


def test_streaming_bounds_the_same_reports_and_publishes_what_batch_does():
    """The streaming job (single messages and a container) publishes in each window's latest pane the
    batch job's rows, hour 1 (38 kept reports of 19 devices) included."""
    from tests.pipelines.test_streaming import run_stream
    records = _reports(seed=5)
    cfg = parse_config(REPORT_CONFIG)
    messages = [schemas.encode_message("noisy_report", r) for r in records]
    batch = run_batch(beam.Create(messages), cfg)
    stream = (test_stream.TestStream().advance_watermark_to(0).add_elements(messages[:200])
              .add_elements([container(records[200:])]).advance_watermark_to_infinity())
    got, _ = run_stream(stream, cfg)
    expected = canonical(batch)
    kept = _kept(records, 2)
    assert {(json.loads(k)["window_start"], json.loads(k)["n_reports"]) for k, _ in expected["marginals"]} == {
        (T0, len(kept[0])), (T0 + HOUR, len(kept[1]))}   # the chatty device's excess dropped; hour 1 published
    assert not expected["withheld"]
    assert canonical(latest_panes(got)) == expected
    # the count of the excess in streaming: tests/transforms/test_report_unit_engine.py (this runner's metrics
    # miss the counters of the stateful stages, under the device unit as here)


M, DEVICES = 24, 80
RAPPOR = {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True}
MEMO = {"collection": "memo", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
        "channel": RAPPOR, "max_order": 2, "window": {"type": "fixed", "size_seconds": 86_400},
        "min_reports": 100, "privacy": {"max_reports_per_device": M}}


def _memoized(cfg, seed=48):
    """One day: 80 devices, one memoized report an hour each (24)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random((DEVICES, 3)) < [0.4, 0.6, 0.7]).astype(np.uint8)
    noisy, owner = randomize_repeats(truth, np.full(DEVICES, M), cfg.client_channels, rng)
    packed = pack_bits(noisy)
    records = [{"collection": "memo", "event_time": T0 + (i % M) * HOUR + int(rng.integers(HOUR)),
                "bits": bytes(packed[i]), "dimensions": {}, "client": f"dev-{owner[i]}"} for i in range(owner.size)]
    return records, noisy, owner


@pytest.mark.parametrize("bound", [M, None])
def test_memoized_reports_under_the_report_unit_carry_the_shared_term_of_the_enforced_bound(tmp_path, bound):
    """With max_reports_per_device = 24 every report is kept, min_reports = 100 counts the 1,920 reports
    (80 devices: the device unit would withhold the day), and each variance is ``with_repeats`` at
    s = M - 1 (the shared permanent responses), not the independent reports' variance. Without a bound the
    device unit's default (1 report a device and slice) applies: 80 reports kept, their variance the
    independent one (no two kept reports share a device), the rest counted past the bound."""
    spec = MEMO if bound else dict(MEMO, privacy={}, min_reports=50)
    cfg = parse_config(spec)
    records, noisy, owner = _memoized(cfg)
    out = _run(tmp_path, spec, records, f"memo-{bound}")
    rows = read_rows(str(out), "marginals", collection="memo")
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert rows and not read_rows(str(out), "withheld", collection="memo")
    if bound:
        plain = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_packed(pack_bits(noisy)), cfg.channels)
        est = with_repeats(plain, cfg.client_channels, M - 1)
        assert summary["reports_over_device_bound"] == 0
        for r in rows:
            i = cfg.family.index(tuple(r["columns"]))
            assert r["n_reports"] == DEVICES * M and r["estimate"] == pytest.approx(est.means[i], abs=1e-9)
            assert r["variance"] == pytest.approx(est.variances[i], rel=1e-9) and r["variance"] > 1.5 * plain.variances[i]
    else:
        assert cfg.shared_reports == 0
        assert summary["reports_over_device_bound"] == DEVICES * (M - 1)
        # each device's report of smallest rank (the content-blind choice), and their independent variance
        from ldp_marginals.ldp.aggregate import client_key
        from ldp_marginals.ldp.devices import report_ranks
        times = np.array([r["event_time"] for r in records], dtype=np.int64)
        ranks = report_ranks(client_key("memo"), np.array([client_key(r["client"]) for r in records],
                                                          dtype=np.uint64), times)
        first = [min(np.flatnonzero(owner == d), key=lambda i: int(ranks[i])) for d in range(DEVICES)]
        est = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_packed(pack_bits(noisy[first])), cfg.channels)
        for r in rows:
            i = cfg.family.index(tuple(r["columns"]))
            assert r["n_reports"] == DEVICES and r["estimate"] == pytest.approx(est.means[i], abs=1e-9)
            assert r["variance"] == pytest.approx(est.variances[i], rel=1e-9)


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_the_whole_report_kinds_take_the_bound_and_count_reports(tmp_path, kind):
    """The kinds under the report unit with M = 2 (tests/pipelines/test_kind_device_unit.py's reports: hour 0
    1,500 devices and a chatty one, hour 1 19 devices of 10): hour 0's rows are the kind's estimator on
    exactly the kept reports; hour 1's 38 kept reports pass min_reports = 20 (no window withheld, as the
    device unit's 19 devices are), and what its rows rest on is judged by the thin-row rule in reports
    (per_device 1)."""
    from ldp_marginals.ldp.hadamard_reports import HadamardAggregator
    from ldp_marginals.ldp.subset_reports import SubsetAggregator
    from tests.pipelines.test_kind_device_unit import _records, config
    spec = dict(config(kind), privacy={"max_reports_per_device": 2})
    cfg = parse_config(spec)
    assert (cfg.unit, cfg.device.max_reports_per_device) == ("report", 2)
    records = _records(cfg, kind)
    out = _run(tmp_path, spec, records, f"kind-{kind}")
    kept = _kept(records, 2)
    plain = (HadamardAggregator if kind == "hadamard" else SubsetAggregator)(cfg.sampling)
    packed = np.frombuffer(b"".join(kept[0]), dtype=np.uint8).reshape(len(kept[0]), cfg.wire.n_bytes)
    want = plain.marginals(plain.add_packed(plain.create(), packed))
    rows = read_rows(str(out), "marginals", collection="dev")
    first = [r for r in rows if r["window_start"] == T0]
    assert sorted(tuple(r["columns"]) for r in first) == sorted(tuple(s) for s in cfg.published_sets)
    for r in first:
        i = want.family.index(tuple(r["columns"]))
        assert r["n_reports"] == len(kept[0]) and r["estimate"] == pytest.approx(want.means[i], abs=1e-9)
        assert r["variance"] == pytest.approx(want.variances[i], abs=1e-9)
    held = read_rows(str(out), "withheld", collection="dev")
    assert all(r["window_start"] == T0 + HOUR and r["statistic"] != "all" for r in held)   # rows, not the window
    second = [r for r in rows if r["window_start"] == T0 + HOUR]
    assert second and all(r["n_reports"] == 38 for r in second + held)   # seen: hadamard 1 row, subset 14
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["reports_over_device_bound"] == len(records) - 3 - len(kept[0]) - len(kept[1]) >= 298 + 19 * 8


def test_two_keys_a_device_under_the_report_unit(tmp_path):
    """The probe's "two keys a device" under the report unit (tests/pipelines/test_device_keys.py's reports:
    60 devices in 1-4 regions in hour 0; hour 1 25 devices in af, 12 of them also in 3 other regions):
    per slice a device adds to at most K = 2 keys and M = 2 reports a key, the rest counted; a key is
    published on min_reports *reports*: min_reports one more than af's kept devices in hour 1, which its
    2 reports a device pass (the device unit withholds that key)."""
    from tests.pipelines.test_device_keys import CONFIG as KEYS
    from tests.pipelines.test_device_keys import _expected
    from tests.pipelines.test_device_keys import _reports as key_reports
    records = key_reports()
    kept, devices, over = _expected(records, 2, 2)
    m = len(devices[(1, "af")]) + 1
    assert len(kept[(1, "af")]) >= m   # fewer devices than min_reports, as many reports
    spec = dict(KEYS, min_reports=m, privacy={"max_reports_per_device": 2, "max_keys_per_device": 2})
    cfg = parse_config(spec)
    assert (cfg.unit, cfg.bounds_keys) == ("report", True)
    out = _run(tmp_path, spec, records, "keys")
    rows = read_rows(str(out), "marginals", collection="dk")
    published = {(r["window_start"], r["dimensions"]["region"]) for r in rows}
    assert published == {(T0 + h * HOUR, g) for (h, g), bits in kept.items() if len(bits) >= m}
    assert (T0 + HOUR, "af") in published
    for r in rows:
        assert r["n_reports"] == len(kept[((r["window_start"] - T0) // HOUR, r["dimensions"]["region"])])
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["reports_over_key_bound"] == over > 50
    assert summary["reports_over_device_bound"] == len(records) - over - sum(len(v) for v in kept.values())
