"""``privacy.unit: device`` through the job, run as users run it (``ldp-marginals run`` on an Avro
file): a device adds at most ``max_reports_per_device`` reports to a window and key (the bottom M by
rank, the same whatever the files' order), ``min_reports`` counts devices, a report without a device
token is a dead letter, the excess is counted in the summary and the manifest; and a collection that
keeps ``unit: report`` publishes the rows it always did."""
import json

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import MANIFEST_FILE, SUMMARY_FILE
from tests.batch_runs import run_args

T0 = 1_767_225_600_000   # 2026-01-01, an hour boundary
HOUR = 3_600_000
DEVICE_CONFIG = {
    "collection": "dev", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
    "channel": {"p": 0.25, "q": 0.75}, "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 20, "privacy": {"unit": "device", "max_reports_per_device": 2}}


def _reports(seed=0):
    """Hour 0: 30 devices of 1 to 3 reports, one device of 300, 3 reports without a token. Hour 1: 19
    devices of 10 reports each (190 reports, fewer than 20 devices)."""
    rng = np.random.default_rng(seed)
    out = []

    def add(hour, token, n):
        for _ in range(n):
            out.append({"collection": "dev", "event_time": T0 + hour * HOUR + int(rng.integers(HOUR)),
                        "bits": bytes([int(rng.integers(8))]), "dimensions": {}, "client": token})
    for d in range(30):
        add(0, f"tok-{d}", int(rng.integers(1, 4)))
    add(0, "chatty", 300)
    add(0, None, 3)
    for d in range(19):
        add(1, f"tok1-{d}", 10)
    rng.shuffle(out)
    return out


def kept_by_definition(items, bound):
    """Of one device's ``(rank, bits)`` items, the bits it keeps: those of rank below the (bound+1)-th
    smallest rank (all with at most ``bound``; reports of one millisecond share a rank, kept both or
    neither)."""
    ranks = sorted(r for r, _ in items)
    return [b for r, b in sorted(items) if len(ranks) <= bound or r < ranks[bound]]


def _kept(records, bound, collection="dev"):
    """Per hour, the kept reports by the definition: per token those of rank (a hash of the device and
    the event ms) below its (bound+1)-th smallest."""
    key = client_key(collection)
    per = {}
    for r in records:
        if r["client"] is None:
            continue
        rank = int(report_ranks(key, np.array([client_key(r["client"])], dtype=np.uint64),
                                np.array([r["event_time"]], dtype=np.int64))[0])
        per.setdefault(((r["event_time"] - T0) // HOUR, r["client"]), []).append((rank, r["bits"]))
    kept = {}
    for (hour, _), items in per.items():
        kept.setdefault(hour, []).extend(kept_by_definition(items, bound))
    return kept


def _run(tmp_path, config, records, name):
    out = tmp_path / f"out-{name}"
    run(run_args(tmp_path, config, records, name, out))
    return str(out)


def test_a_device_adds_at_most_m_reports_min_reports_counts_devices_and_the_excess_is_counted(tmp_path):
    records = _reports()
    out = _run(tmp_path, DEVICE_CONFIG, records, "device")
    cfg = parse_config(DEVICE_CONFIG)
    kept = _kept(records, 2)
    packed = np.frombuffer(b"".join(kept[0]), dtype=np.uint8).reshape(-1, 1)
    est = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_packed(packed), cfg.channels)
    rows = read_rows(out, "marginals", collection="dev")
    assert {r["window_start"] for r in rows} == {T0}   # hour 1 has 190 reports of 19 devices: withheld
    for r in rows:
        i = cfg.family.index(tuple(r["columns"]))
        assert r["n_reports"] == len(kept[0]) and r["estimate"] == pytest.approx(est.means[i], abs=1e-9)
        assert r["variance"] == pytest.approx(est.variances[i], abs=1e-9)
    held = read_rows(out, "withheld", collection="dev")
    assert [(r["window_start"], r["n_reports"]) for r in held] == [(T0 + HOUR, 19 * 2)]
    assert "fewer than min_reports=20 devices" in held[0]["reason"]
    summary = json.loads((tmp_path / "out-device" / SUMMARY_FILE).read_text())
    valid = len(records) - 3
    assert summary["dead_letters_by_reason"] == {"no_device_token": 3}
    assert summary["reports_counted"] == valid
    assert summary["reports_over_device_bound"] == valid - len(kept[0]) - len(kept[1]) > 298
    manifest = json.loads((tmp_path / "out-device" / MANIFEST_FILE).read_text())
    assert manifest["summary"]["reports_over_device_bound"] == summary["reports_over_device_bound"]
    letters = read_rows(out, "dead_letters")
    assert {r["reason"] for r in letters} == {"no_device_token"} and all(r["client_length"] is None for r in letters)


def test_the_choice_does_not_depend_on_the_order_of_the_reports(tmp_path):
    records = _reports()
    first = read_rows(_run(tmp_path, DEVICE_CONFIG, records, "one"), "marginals")
    second = read_rows(_run(tmp_path, DEVICE_CONFIG, records[::-1], "two"), "marginals")
    key = lambda r: (r["window_start"], r["columns"])   # noqa: E731
    assert [(r["estimate"], r["n_reports"]) for r in sorted(first, key=key)] == \
        [(r["estimate"], r["n_reports"]) for r in sorted(second, key=key)]


def test_unit_report_is_the_default_and_publishes_what_it_always_did(tmp_path):
    """The same reports under ``unit: report`` (explicit) and with no unit: identical rows, every report
    counted, tokenless reports too, and hour 1 (190 reports) published."""
    records = _reports()
    plain = dict(DEVICE_CONFIG, privacy={"unit": "report"})
    default = {k: v for k, v in DEVICE_CONFIG.items() if k != "privacy"}
    assert parse_config(plain) == parse_config(default) and parse_config(default).device is None
    a, b = (read_rows(_run(tmp_path, c, records, n), "marginals") for c, n in ((plain, "plain"), (default, "default")))
    key = lambda r: (r["window_start"], r["columns"])   # noqa: E731
    assert sorted(a, key=key) == sorted(b, key=key)
    assert {(r["window_start"], r["n_reports"]) for r in a} == {(T0, 300 + 3 + sum(
        1 for r in records if r["client"] and r["client"].startswith("tok-"))), (T0 + HOUR, 190)}


def test_records_and_messages_take_the_same_bound_as_files(tmp_path):
    """The per-record path (dicts and single-report messages, in shards the runner merges) keeps the
    same reports as the file reader, and dead-letters the same tokenless reports."""
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from ldp_marginals import schemas
    from ldp_marginals.pipelines.job import JobOptions, build
    from tests.pipelines.test_job_batch import Shards

    records = _reports(seed=4)
    files = read_rows(_run(tmp_path, DEVICE_CONFIG, records, "files"), "marginals")
    want = sorted((r["window_start"], tuple(r["columns"]), round(r["estimate"], 9), r["n_reports"]) for r in files)
    inputs = [schemas.encode_message("noisy_report", r) if i % 2 else r for i, r in enumerate(records)]
    cfg = parse_config(DEVICE_CONFIG)
    with TestPipeline() as p:
        outs = build(p, Shards(inputs, 5), None, JobOptions({cfg.name: cfg}))
        assert_that(outs["marginals"] | beam.Map(lambda r: (r["window_start"], tuple(r["columns"]),
                                                            round(r["estimate"], 9), r["n_reports"])),
                    equal_to(want), label="marginals")
        assert_that(outs["dead_letters"] | beam.Map(lambda r: r["reason"]), equal_to(["no_device_token"] * 3),
                    label="dead letters")


def _bits_ranked_add_devices(self, acc, packed, device_keys, event_ms):
    """The mutation of main's rule: each device keeps the report whose (device, bits) hashes lowest
    (FNV-1a over the bits from the mixed keys, as main's ``report_ranks``); equal bits by position."""
    from ldp_marginals.ldp.devices import _mix, merge_tables, table_of
    keys = np.asarray(device_keys, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = _mix(keys ^ np.uint64(self.collection_key & 0xFFFFFFFFFFFFFFFF))
        for j in range(packed.shape[1]):
            h = (h ^ packed[:, j].astype(np.uint64)) * np.uint64(0x100000001B3)
        low = np.uint64((1 << 24) - 1)
        ranks = (_mix(h) & ~low) | (np.arange(keys.size, dtype=np.uint64) & low)
    batch = table_of(keys, ranks, packed, self.device_bound)
    acc.devices = merge_tables([acc.devices, batch], self.device_bound) if acc.devices.devices.size else batch
    return acc


@pytest.mark.statistical
@pytest.mark.parametrize("rule", ["event_ms", "bits (main's, a mutation)"])
def test_a_device_that_sends_ten_reports_counts_one_chosen_blind_to_its_bits(tmp_path, monkeypatch, rule):
    """Issue 47's case: 400 devices whose true bit is 1 each send 10 reports, M = 1. The published
    frequency is within Z = 5 standard errors of the truth (1.0; closed-form variance of the count of
    one bit, ``alpha N + (beta - 1) t`` with N = t = 400 kept reports: sd 17.3 of 400). On main the kept
    report was the one whose bits hashed lowest, per device the OR or the AND of its ten: 0.565 in the
    issue; the mutation restores that rule and must fail (seen: 0.535, 0.580, 0.550 for seeds 47-49,
    10 to 11 standard errors off; the new rule 0.990, 0.980, 0.930)."""
    from ldp_marginals.ldp import aggregate
    if rule != "event_ms":
        monkeypatch.setattr(aggregate.ReportAggregator, "add_devices", _bits_ranked_add_devices)
    config = {"collection": "blind", "features": [{"name": "a", "type": "boolean"}],
              "channel": {"p": 0.25, "q": 0.75}, "max_order": 1, "window": {"type": "fixed", "size_seconds": 3600},
              "min_reports": 20, "privacy": {"unit": "device", "max_reports_per_device": 1}}
    rng = np.random.default_rng(47)
    records = [{"collection": "blind", "event_time": T0 + int(rng.integers(HOUR)),
                "bits": bytes([int(rng.random() < 0.75)]), "dimensions": {}, "client": f"dev-{d}"}
               for d in range(400) for _ in range(10)]   # true bit 1: noisy 1 with probability q
    (row,) = read_rows(_run(tmp_path, config, records, "blind"), "marginals", collection="blind")
    alpha, beta = 0.25 * 0.75 / 0.5 ** 2, (1 - 2 * 0.25) / 0.5
    n = t = 400
    sd = np.sqrt(alpha * n + (beta - 1) * t)
    assert row["n_reports"] == n and row["columns"] == [0]
    if rule == "event_ms":
        assert abs(row["estimate"] - t) <= 5 * sd, f"published frequency {row['estimate'] / n:.3f}, truth 1.0"
    else:
        assert abs(row["estimate"] - t) > 5 * sd
