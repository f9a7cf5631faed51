"""``privacy.unit: device`` with the whole-report channel kinds (``hadamard``, ``subset``; issue 48 item 2),
through ``ldp-marginals run`` on an Avro file as users run it: a device adds at most
``max_reports_per_device`` of its reports to a window and key (its bottom M by a rank blind to content,
the same device table as per bit), the rows are the kind's estimator on exactly those reports,
``min_reports`` counts devices, the excess is counted; and, seeded, the estimates are unbiased for the
kept reports' truth however many reports a device sends."""
import json

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.hadamard_reports import HadamardAggregator
from ldp_marginals.ldp.hadamard_reports import encode_reports as hadamard_encode
from ldp_marginals.ldp.subset_reports import SubsetAggregator
from ldp_marginals.ldp.subset_reports import encode_reports as subset_encode
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.ldp.versioned import accumulator_from_bytes, accumulator_to_bytes
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import SUMMARY_FILE
from tests.batch_runs import run_args
from tests.pipelines.test_device_unit import HOUR, T0, _kept

CHANNELS = {"hadamard": {"kind": "hadamard", "epsilon": 2.0}, "subset": {"kind": "subset", "epsilon": 4.0, "width": 4}}
ENCODE = {"hadamard": hadamard_encode, "subset": subset_encode}


def config(kind, bound=2):
    return {"collection": "dev", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(5)],
            "channel": CHANNELS[kind], "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600},
            "min_reports": 20, "privacy": {"unit": "device", "max_reports_per_device": bound}}


def _records(cfg, kind, seed=0):
    """Hour 0: 1,500 devices of 1 to 3 reports (enough that every coefficient and subset a row rests on
    holds min_reports x M reports: no row is thin), one device of 300, 3 reports without a token. Hour 1: 19
    devices of 10 reports (190 reports, fewer than 20 devices)."""
    rng = np.random.default_rng(seed)
    who = [(0, f"tok-{d}") for d in range(1500) for _ in range(int(rng.integers(1, 4)))]
    who += [(0, "chatty")] * 300 + [(0, None)] * 3 + [(1, f"tok1-{d}") for d in range(19) for _ in range(10)]
    bits = (rng.random((len(who), 5)) < 0.4).astype(np.uint8)
    bits[[i for i, (_, t) in enumerate(who) if t == "chatty"]] = 1   # the chatty device's truth: all ones
    packed = ENCODE[kind](bits, cfg.sampling, rng)
    out = [{"collection": "dev", "event_time": T0 + h * HOUR + int(rng.integers(HOUR)), "bits": packed[i].tobytes(),
            "dimensions": {}, "client": t} for i, (h, t) in enumerate(who)]
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("kind", sorted(CHANNELS))
def test_a_device_adds_at_most_m_reports_and_min_reports_counts_devices(tmp_path, kind):
    """Failed before issue 48 item 2: the config was refused ("privacy.unit must be 'report' with channel
    kind ...")."""
    cfg = parse_config(config(kind))
    records = _records(cfg, kind)
    out = tmp_path / "out"
    run(run_args(tmp_path, config(kind), records, "dev", out))
    kept = _kept(records, 2)
    plain = (HadamardAggregator if kind == "hadamard" else SubsetAggregator)(cfg.sampling)
    packed = np.frombuffer(b"".join(kept[0]), dtype=np.uint8).reshape(len(kept[0]), cfg.wire.n_bytes)
    want = plain.marginals(plain.add_packed(plain.create(), packed))
    rows = read_rows(str(out), "marginals", collection="dev")
    assert {r["window_start"] for r in rows} == {T0}   # hour 1: 19 devices, withheld
    assert sorted(tuple(r["columns"]) for r in rows) == sorted(tuple(s) for s in cfg.published_sets)
    for r in rows:
        i = want.family.index(tuple(r["columns"]))
        assert r["n_reports"] == len(kept[0]) < len(records) - 19 * 10 - 3 - 298
        assert r["estimate"] == pytest.approx(want.means[i], abs=1e-9)
        assert r["variance"] == pytest.approx(want.variances[i], abs=1e-9)
    held = read_rows(str(out), "withheld", collection="dev")
    assert [(r["window_start"], r["n_reports"]) for r in held] == [(T0 + HOUR, 19 * 2)]
    assert "fewer than min_reports=20 devices" in held[0]["reason"]
    summary = json.loads((out / SUMMARY_FILE).read_text())
    valid = len(records) - 3
    assert summary["dead_letters_by_reason"] == {"no_device_token": 3}
    assert summary["reports_over_device_bound"] == valid - len(kept[0]) - len(kept[1]) >= 298 + 19 * 8


@pytest.mark.parametrize("kind", sorted(CHANNELS))
def test_an_open_state_keeps_the_wire_bytes_and_round_trips(kind):
    """An open accumulator of a kind keeps each device's reports in the kind's wire format (not its virtual
    bits'), and its saved state reads back with and without the aggregator. Failed before: the table was as
    wide as the virtual bits (``add_devices`` refused the wire's reports) and the state read its width from
    them."""
    cfg = parse_config(config(kind))
    agg = cfg.aggregator
    assert agg.wire_bytes == cfg.wire.n_bytes != (agg.family.n_bits + 7) // 8
    rng = np.random.default_rng(3)
    packed = ENCODE[kind]((rng.random((50, 5)) < 0.5).astype(np.uint8), cfg.sampling, rng)
    keys = np.repeat(np.arange(1, 11, dtype=np.uint64), 5)
    acc = agg.add_devices(agg.create_open(), packed, keys, T0 + np.arange(50, dtype=np.int64))
    assert acc.devices.kept == 20 and acc.devices.bits.shape[1] == cfg.wire.n_bytes
    for back in (accumulator_from_bytes(accumulator_to_bytes(acc, agg), agg),
                 accumulator_from_bytes(accumulator_to_bytes(acc))):
        assert np.array_equal(back.devices.bits, acc.devices.bits)
        assert np.array_equal(agg.settle(back).cooc.counts, agg.settle(acc).cooc.counts)


@pytest.mark.statistical
@pytest.mark.parametrize("kind", sorted(CHANNELS))
def test_estimates_are_unbiased_for_the_kept_reports(kind):
    """Seeded: 300 devices a window, half send 1 report with q0 = 1 w.p. 0.1, half send 8 with q0 = 1 w.p.
    0.9; M = 2. Over R = 120 windows the estimate of q0's count minus the kept reports' true count averages
    within z = 4.5 standard errors of 0 (the standard error from the closed-form variances the rows publish,
    sqrt(mean var / R)). Counting every report instead (no bound) would add ~ 630 a window, ~ 60 standard
    errors."""
    cfg = parse_config(config(kind))
    agg = cfg.aggregator
    rng = np.random.default_rng(48)
    reps, errors, variances = 120, [], []
    q0 = agg.marginals(agg.settle(agg.create_open())).family.index((0,))
    for _ in range(reps):
        chatty = rng.random(300) < 0.5
        sizes = np.where(chatty, 8, 1)
        device = np.repeat(np.arange(1, 301, dtype=np.uint64), sizes)
        truth = (rng.random((device.size, 5)) < 0.5).astype(np.uint8)
        truth[:, 0] = rng.random(device.size) < np.where(np.repeat(chatty, sizes), 0.9, 0.1)
        ms = T0 + rng.permutation(device.size).astype(np.int64)
        acc = agg.settle(agg.add_devices(agg.create_open(), ENCODE[kind](truth, cfg.sampling, rng), device, ms))
        ranks = report_ranks(client_key("dev"), device, ms)
        kept = np.zeros(device.size, dtype=bool)   # by definition: each device's 2 reports of smallest rank
        for d in range(1, 301):
            at = np.flatnonzero(device == d)
            kept[at[np.argsort(ranks[at])[:2]]] = True
        est = agg.marginals(acc)
        assert est.n == kept.sum()
        errors.append(est.means[q0] - truth[kept, 0].sum())
        variances.append(est.variances[q0])
    bound = 4.5 * np.sqrt(np.mean(variances) / reps)
    assert abs(np.mean(errors)) <= bound


@pytest.mark.parametrize("kind", sorted(CHANNELS))
def test_streaming_gives_the_batch_answers_under_the_device_unit(kind):
    """The kind under the device unit through the streaming engine (single messages and a container, two
    regions, a device in at most one of them a slice): every window and key's latest pane holds the batch
    job's rows exactly, and some rows are published (failed before: the config was refused)."""
    from tests.pipelines.test_same_answers import batch_and_streaming, canonical, latest_panes
    spec = dict(config(kind), dimensions={"region": {}})
    spec["privacy"] = dict(spec["privacy"], max_keys_per_device=1)
    cfg = parse_config(spec)
    records = _records(cfg, kind, seed=4)
    records = [dict(r, dimensions={"region": "eu" if i % 3 else "us"}) for i, r in enumerate(records)]
    batch, got = batch_and_streaming(records, cfg)
    expected = canonical(batch)
    assert len(expected["marginals"]) >= len(cfg.published_sets) and expected["withheld"]
    assert canonical(latest_panes(got)) == expected
