"""The release ledger under ``privacy.unit: device`` (issue 47, item 2), run as users run it
(``ldp-marginals run`` twice into one ``--output``): reruns whose counts are unchanged but whose devices
keep other reports cannot difference one device, and a collection renamed over the same reports is
refused. Each case published one device's difference (or recovered withheld reports) on main at
340e214. The rule itself, and the mutations of its new checks, are in
tests/transforms/test_release_ledger.py."""
import json
from unittest import mock

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.devices import key_id, keys_over_bound
from ldp_marginals.pipelines import release_ledger
from ldp_marginals.pipelines import run as run_module
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.outputs import LEDGER_DIR, LEDGER_FILE, MANIFEST_FILE
from ldp_marginals.transforms.publication import releases
from tests.batch_runs import run_args

T0 = 1_767_225_600_000   # 2026-01-01, an hour boundary
HOUR = 3_600_000
CONFIG = {
    "collection": "dev", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
    "channel": {"p": 0.25, "q": 0.75}, "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 5, "privacy": {"unit": "device", "max_reports_per_device": 1}}


def _report(token, bits, minute, collection="dev", dims=None):
    return {"collection": collection, "event_time": T0 + minute * 60_000, "bits": bytes([bits]),
            "dimensions": dims or {}, "client": token}


def _run(tmp_path, config, records, name, out, *more):
    """``ldp-marginals run`` of ``config`` over ``records`` (written to an Avro file of their own) into
    ``out``; returns the run's summary."""
    return run([*run_args(tmp_path, config, records, name, out), *more])


def _values(out, collection="dev", start=T0) -> dict:
    """``{(dimensions, columns): (estimate, n_reports)}`` of the marginal rows of one window in ``out``."""
    return {(tuple(sorted(r["dimensions"].items())), tuple(r["columns"])): (r["estimate"], r["n_reports"])
            for r in read_rows(str(out), "marginals", collection=collection) if r["window_start"] == start}


def _published_nothing_new(before: dict, after: dict) -> None:
    """Every marginal row the output holds after the rerun is one the first run published (a withheld
    rerun keeps, at most, the earlier run's rows): nothing a reader can subtract from them."""
    new = {k: v for k, v in after.items() if before.get(k) != v}
    assert not new, f"the rerun published rows that differ from the first run's: {sorted(new.items())[:3]}"


def _swap_inputs(tmp_path) -> tuple:
    """``(first run's reports, second run's)``: six devices of one report each; the second run adds one
    report of device d0 that wins its bound (M = 1) over d0's first report (found by a run of d0's two
    reports alone, so whatever ranks are made of)."""
    others = [_report(f"d{i}", 0b011 if i % 2 else 0b100, 5 + i) for i in range(1, 6)]
    a, b = _report("d0", 0b000, 1), _report("d0", 0b111, 30)
    probe = _run(tmp_path, dict(CONFIG, min_reports=1), [a, b], "probe", tmp_path / "probe")
    assert probe["reports_over_device_bound"] == 1
    kept = _values(tmp_path / "probe")[((), (0,))][0]
    winner, loser = (b, a) if kept > 0.5 else (a, b)   # one report: a's estimate is 1.5 if kept a = 1, else -0.5
    return others + [loser], others + [loser, winner]


def test_a_backfilled_report_that_swaps_a_devices_kept_report_is_withheld(tmp_path):
    """Six devices of one report each, M = 1, min_reports 5: the second run adds one report of device
    d0 that wins its bound over d0's first report. The counts stay 6 reports of 6 devices, and without
    the digest of the kept ranks run 2 minus run 1 is d0's new report minus its old one."""
    first_reports, swapped_reports = _swap_inputs(tmp_path)
    out = tmp_path / "out"
    first = _run(tmp_path, CONFIG, first_reports, "first", out)
    before = _values(out)
    assert first["reports_withheld_by_ledger"] == 0 and len(before) == 6
    assert {v[1] for v in before.values()} == {6}
    again = _run(tmp_path, CONFIG, first_reports, "again", out)   # the same input: the same kept ranks
    assert again["reports_withheld_by_ledger"] == 0 and _values(out) == before

    swapped = _run(tmp_path, CONFIG, swapped_reports, "swapped", out)
    assert swapped["reports_over_device_bound"] == 1   # 6 reports of 6 devices kept, as in the first run
    _published_nothing_new(before, _values(out))
    assert swapped["reports_withheld_by_ledger"] == 6
    ledger = json.loads((out / LEDGER_DIR / LEDGER_FILE).read_text())
    assert ledger["format"] == 2 and [r["slices"][0][5] for r in ledger["collections"]["dev"]] == [True, False]


def test_mutation_without_the_digest_check_the_swap_publishes_one_devices_difference(tmp_path):
    """The digest comparison off (releases._kept_changed answers None): the swapped run publishes 6
    reports again, and its estimate of bit a minus the first run's is d0's new report minus its old
    one, +-2 (one report's debiased bit is 1.5 or -0.5)."""
    first_reports, swapped_reports = _swap_inputs(tmp_path)
    out = tmp_path / "out"
    _run(tmp_path, CONFIG, first_reports, "first", out)
    before = _values(out)
    with mock.patch.object(releases, "_kept_changed", lambda *a: None):
        swapped = _run(tmp_path, CONFIG, swapped_reports, "swapped", out)
    after = _values(out)
    assert swapped["reports_withheld_by_ledger"] == 0 and {v[1] for v in after.values()} == {6}
    assert abs(after[((), (0,))][0] - before[((), (0,))][0]) == pytest.approx(2.0)


def test_a_ledger_of_format_1_is_read_as_unknown_digests_and_rewritten(tmp_path):
    """The first run's ledger rewritten as format 1 (before issue 47: no digest column, no witnesses):
    the same input again is withheld as unknown (a swap cannot be ruled out), and the ledger is then of
    format 2; a format this release does not know is refused."""
    first_reports, _ = _swap_inputs(tmp_path)
    out = tmp_path / "out"
    _run(tmp_path, CONFIG, first_reports, "first", out)
    path = out / LEDGER_DIR / LEDGER_FILE
    ledger = json.loads(path.read_text())
    for release in ledger["collections"]["dev"]:
        release["slices"] = [s[:6] for s in release["slices"]]
        del release["witnesses"]
    path.write_text(json.dumps(dict(ledger, format=1)))
    again = _run(tmp_path, CONFIG, first_reports, "again", out)
    assert again["reports_withheld_by_ledger"] == 6
    assert all("recorded no digest" in r["reason"] for r in read_rows(str(out), "withheld"))
    assert json.loads(path.read_text())["format"] == 2
    path.write_text(json.dumps(dict(ledger, format=3)))
    with pytest.raises(ValueError, match=r"format 3, this release reads formats \[1, 2\]"):
        _run(tmp_path, CONFIG, first_reports, "third", out)


def _tokens_swapping_keys(collection: str) -> tuple:
    """Two tokens ``(t1, t2)``: under max_keys_per_device 1, t1 in regions A and B is kept in B, t2 in A."""
    ckey = client_key(collection)
    a, b = key_id((("region", "A"),)), key_id((("region", "B"),))
    prefers_b, prefers_a = [], []
    for i in range(64):
        token = f"x{i}"
        over_a, _ = keys_over_bound(ckey, [(a, np.array([client_key(token)], dtype=np.uint64)),
                                           (b, np.array([client_key(token)], dtype=np.uint64))], 1)
        (prefers_b if over_a.size else prefers_a).append(token)
    return prefers_b[0], prefers_a[0]


def test_two_backfilled_reports_that_swap_the_keys_two_devices_are_kept_in_are_withheld(tmp_path):
    """max_keys_per_device 1: region A holds t1 and five devices, region B t2 and five. The second run
    adds t1's report in B and t2's in A; t1 is then kept in B and t2 in A: both regions keep 6 reports
    of 6 devices, and region A's rows minus the first run's are t2's report minus t1's."""
    cfg = dict(CONFIG, dimensions={"region": {}}, privacy={"unit": "device", "max_reports_per_device": 1,
                                                             "max_keys_per_device": 1})
    t1, t2 = _tokens_swapping_keys("dev")
    base = ([_report(f"a{i}", 0b011, i, dims={"region": "A"}) for i in range(5)]
            + [_report(f"b{i}", 0b011, i, dims={"region": "B"}) for i in range(5)]
            + [_report(t1, 0b000, 10, dims={"region": "A"}), _report(t2, 0b000, 10, dims={"region": "B"})])
    backfill = [_report(t1, 0b111, 20, dims={"region": "B"}), _report(t2, 0b111, 20, dims={"region": "A"})]
    out = tmp_path / "out"
    first = _run(tmp_path, cfg, base, "first", out)
    before = _values(out)
    assert first["reports_withheld_by_ledger"] == 0 and {v[1] for v in before.values()} == {6}
    assert {k[0] for k in before} == {(("region", "A"),), (("region", "B"),)}

    swapped = _run(tmp_path, cfg, base + backfill, "swapped", out)
    assert swapped["reports_over_key_bound"] == 2   # each region again keeps 6 reports of 6 devices
    _published_nothing_new(before, _values(out))
    assert swapped["reports_withheld_by_ledger"] == 12


def _renamed_case(tmp_path):
    """Run 1, collection ``dev`` in hourly windows: hour 0 holds 6 devices (published), hour 1 holds 3
    (withheld). Then the same reports as collection ``dev2`` in 2-hour windows into the same output:
    its window [0, 2h) minus dev's hour 0 (which a reader kept) is the three reports dev withheld.
    Returns ``(dev's rows of hour 0, the output, dev2's config, dev2's reports)``."""
    records = [_report(f"d{i}", i % 8, i) for i in range(6)] + [_report(f"e{i}", 0b111, 60 + i) for i in range(3)]
    out = tmp_path / "out"
    first = _run(tmp_path, CONFIG, records, "first", out)
    assert first["reports_withheld_by_ledger"] == 0
    assert {r["window_start"] for r in read_rows(str(out), "marginals")} == {T0}
    assert [r["n_reports"] for r in read_rows(str(out), "withheld")] == [3]
    renamed = dict(CONFIG, collection="dev2", window={"type": "fixed", "size_seconds": 7200})
    return _values(out), out, renamed, [dict(r, collection="dev2") for r in records]


def test_a_collection_renamed_over_the_same_reports_is_refused(tmp_path):
    hour_0, out, renamed, records = _renamed_case(tmp_path)
    manifest = (out / MANIFEST_FILE).read_text()
    ledger = (out / LEDGER_DIR / LEDGER_FILE).read_text()
    with pytest.raises(ValueError, match=r"collection 'dev2'.*'dev'.*(--output|--new-ledger)") as err:
        _run(tmp_path, renamed, records, "renamed", out)
    assert "nothing of it was published" in str(err.value)
    assert (out / MANIFEST_FILE).read_text() == manifest and (out / LEDGER_DIR / LEDGER_FILE).read_text() == ledger
    assert not read_rows(str(out), "marginals", collection="dev2") and _values(out) == hour_0
    # another output, or --new-ledger, is what the message offers: there the run publishes
    fresh = _run(tmp_path, renamed, records, "fresh", out, "--new-ledger")
    assert fresh["reports_withheld_by_ledger"] == 0
    assert {r["n_reports"] for r in read_rows(str(out), "marginals", collection="dev2")} == {9}


def test_mutation_without_the_witness_check_the_rename_recovers_withheld_reports(tmp_path):
    """The check off (no release shares a witness): the renamed run publishes, and its window minus
    dev's hour 0 is the three reports dev withheld."""
    hour_0, out, renamed, records = _renamed_case(tmp_path)
    with mock.patch.object(release_ledger, "shared_devices", lambda *a: None):
        _run(tmp_path, renamed, records, "renamed", out)
    two_hours = _values(out, "dev2")
    assert {v[1] for v in two_hours.values()} == {9} and {v[1] for v in hour_0.values()} == {6}
    # the difference of the two runs' counts of a: the three withheld reports (all a = 1, bits 0b111)
    # debiased, (3 - 0.25 * 3) / 0.5 = 4.5
    assert two_hours[((), (0,))][0] - hour_0[((), (0,))][0] == pytest.approx(4.5)


def _unit_change_case(tmp_path):
    """Six devices in hour 0, d0 of six reports (five past its bound of M = 1): a device-unit run publishes
    six reports; returns ``(its rows, the output, the same collection under unit report, the reports)``."""
    records = [_report(f"d{i}", i % 8, i) for i in range(6)] + [_report("d0", 0b111, 20 + i) for i in range(5)]
    out = tmp_path / "out"
    first = _run(tmp_path, CONFIG, records, "first", out)
    assert first["reports_over_device_bound"] == 5 and {v[1] for v in _values(out).values()} == {6}
    return _values(out), out, dict(CONFIG, privacy={"unit": "report"}), records


def test_a_rerun_under_another_privacy_unit_is_refused(tmp_path):
    """The same collection, reports and output under unit report: its rows minus the device-unit run's
    are d0's five reports past its bound, one device, which the earlier rows promised to bound."""
    before, out, report_unit, records = _unit_change_case(tmp_path)
    manifest = (out / MANIFEST_FILE).read_text()
    with pytest.raises(ValueError, match=r"collection 'dev'.*privacy.unit 'device'.*unit is 'report'.*--new-ledger"):
        _run(tmp_path, report_unit, records, "report_unit", out)
    assert (out / MANIFEST_FILE).read_text() == manifest and _values(out) == before


def test_mutation_without_the_unit_check_a_rerun_publishes_one_devices_reports(tmp_path, monkeypatch):
    """The check off: the report-unit rerun publishes 11 reports (the ledger's report rule lets a change of
    min_reports = 5 reports through), and its rows minus the earlier ones are d0's five reports."""
    before, out, report_unit, records = _unit_change_case(tmp_path)
    monkeypatch.setattr(run_module, "check_unit", lambda configs, earlier: None)
    _run(tmp_path, report_unit, records, "report_unit", out)
    after = _values(out)
    assert {v[1] for v in after.values()} == {11}
    # bit a's count moves by d0's five reports past its bound alone: (ones - 5 p) / (q - p), with 5 ones
    # (7.5) if the bound kept d0's 0b000 report, 4 (5.5) if it kept one of its 0b111 reports
    moved = after[((), (0,))][0] - before[((), (0,))][0]
    assert min(abs(moved - 7.5), abs(moved - 5.5)) < 1e-9, moved
