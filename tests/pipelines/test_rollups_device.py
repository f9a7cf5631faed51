"""Rollups under ``privacy.unit: device`` through the batch job (``ldp-marginals run`` on an Avro file,
issue 48 item 4): complementary suppression weighs a rollup's withheld part in distinct devices, a
device in two of its withheld keys once (docs/design.md, section 7, "Rollups").

One hour, ``min_reports`` 20 devices, at most 3 reports a device and key and 2 keys a device
(``max_keys_per_device``), a rollup per region. Each region has a version 1.0 of 30 devices (released)
and two versions below 20 devices (withheld):
- eu: the same 12 devices in 2.0 and 3.0, 3 reports in each: 72 reports, 24 as the keys' device counts
  summed, 12 devices: the rollup would single out 12 devices; withheld;
- asia: 8 devices in 2.0 and 4 others in 3.0, 3 reports each: 36 reports of 12 devices; withheld;
- us: 12 devices in 2.0 and 10 others in 3.0: 22 devices; published, summing its three keys.
Counting reports would publish all three rollups, counting each key's devices apart eu's too."""
import numpy as np
import pytest

from ldp_marginals import read_rows
from ldp_marginals.pipelines.run import run
from tests.batch_runs import run_args

T0 = 1_767_225_600_000   # 2026-01-01, an hour boundary
HOUR = 3_600_000
ALL = "__all__"
CONFIG = {
    "collection": "dr", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
    "channel": {"p": 0.25, "q": 0.75}, "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 20, "dimensions": {"region": {"max_values": 4}, "version": {"max_values": 8}},
    "rollups": [["region"]],
    "privacy": {"unit": "device", "max_reports_per_device": 3, "max_keys_per_device": 2}}
# region -> [(devices' tokens, versions each sends to, reports to each)]
DEVICES = {
    "eu": [([f"eu-{d}" for d in range(30)], ("1.0",), 1), ([f"eu-two-{d}" for d in range(12)], ("2.0", "3.0"), 3)],
    "asia": [([f"as-{d}" for d in range(30)], ("1.0",), 1), ([f"as-a-{d}" for d in range(8)], ("2.0",), 3),
             ([f"as-b-{d}" for d in range(4)], ("3.0",), 3)],
    "us": [([f"us-{d}" for d in range(30)], ("1.0",), 1), ([f"us-a-{d}" for d in range(12)], ("2.0",), 3),
           ([f"us-b-{d}" for d in range(10)], ("3.0",), 3)],
}


def _records(seed=48):
    rng = np.random.default_rng(seed)
    out = []
    for region, groups in DEVICES.items():
        for tokens, versions, n in groups:
            for token in tokens:
                for version in versions:
                    # distinct event ms per report (a device's reports stamped in one ms would tie)
                    for t in rng.choice(HOUR, n, replace=False):
                        out.append({"collection": "dr", "event_time": T0 + int(t), "bits": bytes([int(rng.integers(8))]),
                                    "dimensions": {"region": region, "version": version}, "client": token})
    rng.shuffle(out)
    return out


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rollups_device")
    run(run_args(tmp, CONFIG, _records(), "dr", tmp / "out"))
    return str(tmp / "out")


def test_a_rollup_is_published_only_where_its_withheld_keys_hold_min_reports_devices(out):
    rows = read_rows(out, "marginals", collection="dr")
    rolled = {r["dimensions"]["region"] for r in rows if r["dimensions"]["version"] == ALL}
    # eu: 12 devices in both withheld keys (72 reports, 24 summed per key); asia: 12 devices, 36 reports
    assert rolled == {"us"}
    (us,) = [r for r in rows if r["dimensions"] == {"region": "us", "version": ALL} and r["columns"] == [0]]
    assert us["n_reports"] == 30 + 12 * 3 + 10 * 3   # its released key and both withheld ones
    # the keys are what they are without rollups: each region's 1.0 published, its small versions withheld
    keys = {(r["dimensions"]["region"], r["dimensions"]["version"]) for r in rows
            if r["dimensions"]["version"] != ALL}
    assert keys == {("eu", "1.0"), ("asia", "1.0"), ("us", "1.0")}
    held = {(r["dimensions"]["region"], r["dimensions"]["version"]): r["n_reports"]
            for r in read_rows(out, "withheld", collection="dr")}
    assert held == {("eu", "2.0"): 36, ("eu", "3.0"): 36, ("asia", "2.0"): 24, ("asia", "3.0"): 12,
                    ("us", "2.0"): 36, ("us", "3.0"): 30}


def test_streaming_publishes_the_batch_rollups_once_at_the_close(out):
    """TestStream, as a streaming job runs: the same reports in bundles of 97, shuffled (a device's
    keys in different bundles); the rollup rows come once, at the window's close, and are batch's."""
    from apache_beam.testing import test_stream

    from ldp_marginals.schemas.config import parse_config
    from tests.pipelines.test_streaming import run_stream

    def rolled(rows):
        return sorted((r["dimensions"]["region"], tuple(r["columns"]), r["n_reports"], round(r["estimate"], 9),
                       round(r["variance"], 9)) for r in rows if r["dimensions"]["version"] == ALL)

    records = _records()
    rng = np.random.default_rng(1)
    records = [records[i] for i in rng.permutation(len(records))]
    stream = test_stream.TestStream().advance_watermark_to(T0 / 1000)
    for at in range(0, len(records), 97):
        stream = stream.add_elements(records[at:at + 97])
    got, _ = run_stream(stream.advance_watermark_to_infinity(), parse_config(CONFIG))
    assert not got["dead_letters"]
    want = rolled(read_rows(out, "marginals", collection="dr"))
    assert want and {w[0] for w in want} == {"us"}
    assert rolled(got["marginals"]) == want
    panes = [f for f in got["panes"] if f.kind == "marginals" and ALL in dict(f.key).values()]
    assert [(dict(f.key)["region"], f.pane) for f in panes] == [("us", 0)]
