"""``privacy.max_keys_per_device`` through the job (``ldp-marginals run`` on an Avro file): per slice a
device adds to at most K keys, the K of smallest key rank, whatever the order of the reports; within
a kept key at most M reports (the bottom M by rank); ``min_reports`` counts a key's own devices; the
reports to keys past the bound are counted in the summary and the manifest; a device in two keys
that the cap merges into ``__other__`` is not counted twice by the guard; a streaming job publishes the
same (TestStream) and refuses the bound on a global window."""
import json

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.devices import key_id, key_ranks, keys_over_bound, report_ranks
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.pipelines.job import JobOptions
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import MANIFEST_FILE, SUMMARY_FILE
from tests.pipelines.test_device_unit import _run, kept_by_definition

T0 = 1_767_225_600_000   # 2026-01-01, an hour boundary
HOUR = 3_600_000
REGIONS = ("eu", "us", "asia", "af")
CONFIG = {
    "collection": "dk", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
    "channel": {"p": 0.25, "q": 0.75}, "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 20, "dimensions": {"region": {}},
    "privacy": {"unit": "device", "max_reports_per_device": 2, "max_keys_per_device": 2}}


def _reports(seed=0):
    """Hour 0: 60 devices, each in 1 to 4 regions with 1 to 3 reports in each; hour 1: 25 devices in
    af only, of which 12 are also in 3 other regions with smaller key ranks or not (as it falls)."""
    rng = np.random.default_rng(seed)
    out = []

    def add(hour, token, region, n):
        for _ in range(n):
            out.append({"collection": "dk", "event_time": T0 + hour * HOUR + int(rng.integers(HOUR)),
                        "bits": bytes([int(rng.integers(8))]), "dimensions": {"region": region}, "client": token})
    for d in range(60):
        for region in rng.choice(REGIONS, int(rng.integers(1, 5)), replace=False):
            add(0, f"tok-{d}", str(region), int(rng.integers(1, 4)))
    for d in range(25):
        add(1, f"tok1-{d}", "af", 2)
        if d < 12:
            for region in REGIONS[:3]:
                add(1, f"tok1-{d}", region, 1)
    rng.shuffle(out)
    return out


def _expected(records, keys_bound, reports_bound):
    """By the definition: ``({(hour, region): kept bits}, {(hour, region): devices}, reports to keys past
    the bound)``."""
    ckey = client_key("dk")
    per = {}
    for r in records:
        region = r["dimensions"]["region"]
        dev = np.array([client_key(r["client"])], dtype=np.uint64)
        per.setdefault(((r["event_time"] - T0) // HOUR, r["client"]), {}).setdefault(region, []).append(
            (int(report_ranks(ckey, dev, np.array([r["event_time"]], dtype=np.int64))[0]), r["bits"]))
    kept, devices, over = {}, {}, 0
    for (hour, token), by_region in per.items():
        dev = np.array([client_key(token)], dtype=np.uint64)
        rank = {g: int(key_ranks(ckey, dev, key_id((("region", g),)))[0]) for g in by_region}
        for i, g in enumerate(sorted(by_region, key=lambda g: rank[g])):
            if i < keys_bound:
                kept.setdefault((hour, g), []).extend(kept_by_definition(by_region[g], reports_bound))
                devices.setdefault((hour, g), set()).add(token)
            else:
                over += len(by_region[g])
    return kept, devices, over


def test_keys_over_bound_keeps_each_devices_k_smallest_key_ranks_in_any_order():
    rng = np.random.default_rng(1)
    members = [(key_id((("region", g),)), np.unique(rng.integers(0, 40, 30).astype(np.uint64))) for g in REGIONS]
    for k in (1, 2, 3):
        dropped = keys_over_bound(7, members, k)
        shuffled = keys_over_bound(7, members[::-1], k)[::-1]
        assert all(np.array_equal(a, b) for a, b in zip(dropped, shuffled))
        for device in range(40):
            d = np.array([device], dtype=np.uint64)
            mine = [(int(key_ranks(7, d, kid)[0]), i) for i, (kid, devs) in enumerate(members) if device in devs]
            want = {i for _, i in sorted(mine)[k:]}
            assert {i for i, drop in enumerate(dropped) if device in drop} == want


def test_a_device_adds_to_at_most_k_keys_and_min_reports_counts_each_keys_devices(tmp_path):
    records = _reports()
    out = _run(tmp_path, CONFIG, records, "dk")
    cfg = parse_config(CONFIG)
    kept, devices, over = _expected(records, 2, 2)
    assert over > 50   # the bound binds
    rows = read_rows(out, "marginals", collection="dk")
    published = {}
    for r in rows:
        published.setdefault((r["window_start"], r["dimensions"]["region"]), []).append(r)
    # hour 1: af keeps its 13 devices in af alone and those of the 12 whose af rank is among their 2
    # smallest; min_reports=20 counts those devices, whatever their reports
    assert all(len(devices[(0, g)]) >= 20 for g in REGIONS) and 13 <= len(devices[(1, "af")]) <= 25
    want_keys = {(T0, g) for g in REGIONS} | ({(T0 + HOUR, "af")} if len(devices[(1, "af")]) >= 20 else set())
    assert set(published) == want_keys
    for (start, region), key_rows in published.items():
        bits = kept[((start - T0) // HOUR, region)]
        est = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_packed(
            np.frombuffer(b"".join(bits), dtype=np.uint8).reshape(-1, 1)), cfg.channels)
        for r in key_rows:
            assert r["n_reports"] == len(bits)
            assert r["estimate"] == pytest.approx(est.means[cfg.family.index(tuple(r["columns"]))], abs=1e-9)
    held = {(r["window_start"], r["dimensions"]["region"]): r["n_reports"] for r in read_rows(out, "withheld")}
    for g in REGIONS[:3]:   # 12 devices at most in hour 1: held, with what each kept
        assert held[(T0 + HOUR, g)] == len(kept.get((1, g), []))
    summary = json.loads((tmp_path / "out-dk" / SUMMARY_FILE).read_text())
    assert summary["reports_over_key_bound"] == over
    assert summary["reports_counted"] == len(records)
    assert summary["reports_over_device_bound"] == len(records) - over - sum(len(v) for v in kept.values())
    manifest = json.loads((tmp_path / "out-dk" / MANIFEST_FILE).read_text())
    assert manifest["summary"]["reports_over_key_bound"] == over


def test_the_choice_of_keys_does_not_depend_on_the_order_of_the_reports(tmp_path):
    records = _reports(seed=2)
    key = lambda r: (r["window_start"], r["dimensions"]["region"], r["columns"])   # noqa: E731
    one = sorted(read_rows(_run(tmp_path, CONFIG, records, "one"), "marginals"), key=key)
    two = sorted(read_rows(_run(tmp_path, CONFIG, records[::-1], "two"), "marginals"), key=key)
    assert one and [(r["estimate"], r["n_reports"]) for r in one] == [(r["estimate"], r["n_reports"]) for r in two]


def test_a_device_in_two_keys_merged_into_other_is_counted_once_per_key(tmp_path):
    """15 devices, each with 2 reports in each of regions x and y (K = 2, M = 2), and 30 devices in eu.
    The cap (max_values 1) keeps eu and merges x and y into ``__other__``: 60 reports of 15 devices,
    each key 15 < 20 devices. Reports (30 a key), or the sum of the keys' device counts (30), would
    pass the guard; the guard counts each key's own devices, so ``__other__`` is withheld."""
    rng = np.random.default_rng(3)
    records = [{"collection": "dk", "event_time": T0 + int(rng.integers(HOUR)), "bits": bytes([int(rng.integers(8))]),
                "dimensions": {"region": region}, "client": token}
               for token, regions in [(f"two-{d}", ("x", "y")) for d in range(15)] + [(f"eu-{d}", ("eu",))
                                                                                       for d in range(30)]
               for region in regions for _ in range(2 if region != "eu" else 1)]
    config = dict(CONFIG, dimensions={"region": {"max_values": 1}})
    out = _run(tmp_path, config, records, "other")
    assert {r["dimensions"]["region"] for r in read_rows(out, "marginals")} == {"eu"}
    held = read_rows(out, "withheld")
    assert [(r["dimensions"]["region"], r["n_reports"]) for r in held] == [("__other__", 60)]


def test_streaming_refuses_a_bound_on_keys_on_a_global_window():
    """A streaming job bounds a slice's keys when its window closes; a global window closes only when the
    stream ends, so it is refused (fixed and sliding windows stream: tests/transforms/test_device_keys_stream.py)."""
    spec = dict(CONFIG, window={"type": "global"}, early_firing_seconds=60)
    with pytest.raises(ValueError, match=r"collection 'dk': privacy.unit 'device' with dimensions \['region'\] on a "
                                         r"global window: .*max_keys_per_device=2\)"):
        JobOptions({"dk": parse_config(spec)}, streaming=True)
    JobOptions({"dk": parse_config(CONFIG)}, streaming=True)


def _latest(panes, kind):
    """``{(window start, region): rows}`` of each window and key's latest pane of ``kind``."""
    latest = {}
    for f in panes:
        if f.kind == kind:
            key = (f.window[0], dict(f.key)["region"])
            if key not in latest or f.pane > latest[key][0]:
                latest[key] = (f.pane, f.rows)
    return {key: sorted((tuple(r.get("columns", ())), round(r.get("estimate", 0.0), 9), r["n_reports"])
                        for r in rows) for key, (_, rows) in latest.items()}


@pytest.mark.parametrize("order", [0, 1])
def test_streaming_publishes_what_batch_publishes(tmp_path, order):
    """TestStream, the job as a streaming job runs it: the reports in bundles of the collector's
    sizes, a device's keys in different bundles, hour 1's first reports before hour 0 is closed, in
    two orders; each window and key's latest pane equals the batch run's rows (and withheld rows)."""
    from apache_beam.testing import test_stream

    from tests.pipelines.test_streaming import run_stream

    records = _reports(seed=2)
    batch = _run(tmp_path, CONFIG, records, f"batch{order}")
    want = {}
    for kind in ("marginals", "withheld"):
        for r in read_rows(batch, kind):
            want.setdefault(kind, {}).setdefault((r["window_start"], r["dimensions"]["region"]), []).append(
                (tuple(r.get("columns", ())), round(r.get("estimate", 0.0), 9), r["n_reports"]))
    rng = np.random.default_rng(order)
    shuffled = [records[i] for i in rng.permutation(len(records))]
    first = [r for r in shuffled if r["event_time"] < T0 + HOUR or r["event_time"] < T0 + HOUR + HOUR // 4]
    rest = [r for r in shuffled if r not in first]
    stream = test_stream.TestStream().advance_watermark_to(T0 / 1000)
    for at in range(0, len(first), 97):
        stream = stream.add_elements(first[at:at + 97])
    stream = stream.advance_watermark_to((T0 + HOUR) / 1000).add_elements(rest).advance_watermark_to_infinity()
    got, _ = run_stream(stream, parse_config(CONFIG))
    assert not got["dead_letters"]
    for kind in ("marginals", "withheld"):
        assert _latest(got["panes"], kind) == {k: sorted(v) for k, v in want[kind].items()}, kind
    assert len(want["marginals"]) >= 4 and want["withheld"]
