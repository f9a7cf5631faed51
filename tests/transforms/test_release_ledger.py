"""The release ledger (transforms/publication/releases.py) against the exact-algebra checker: the four
reruns of issue 35 each let a reader of both runs' outputs single out fewer than ``min_reports``
reports or clients without the ledger (or with a new one), and not with it, by the rank test over
every published field of both runs (tests/transforms/publication_model.py). Each part of the rule
has a mutation that lets one of the attacks through. Under the device unit (issue 47) two more reruns
keep every count and swap what devices keep: a report (``swap``) or a key (``key_swap``)."""
from __future__ import annotations

import itertools
import json
from unittest import mock

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.devices import key_id, keys_over_bound

from ldp_marginals.transforms.publication import releases
from tests.transforms import publication_model as model

M = 3


def _scenario(reports, *, periods=1, max_values=4, clients=False):
    return model.Scenario(window="fixed", min_reports=M, lateness=0, max_values=max_values, clients=clients,
                          reports=list(reports), events=[], periods=periods)


def _reruns(scenarios, ledger: bool = True) -> tuple:
    """Each scenario run in turn into one output (batch), with the ledger carried from run to run or
    none (every run a new ledger): ``(what the rank test finds over every run's published fields,
    the ledger's releases, the last run's outcome)``. The last scenario holds every report."""
    earlier, stats, out = [], [], None
    for s in scenarios:
        cfg, out = model.run_batch(s, earlier if ledger else [])
        stats += model.statistics(s, cfg, out)
        assert model.accounting(s, cfg, out) is None   # every report published once or counted withheld
        earlier = releases.merged(earlier, out.release)
    return model.isolation(scenarios[-1], stats), earlier, out


def _withheld(out, statistic="all") -> list:
    return [r for f in out.panes if f.kind == "withheld" for r in f.rows
            if r["statistic"] == statistic and r["reason"].startswith("ledger:")]


# -- the four reruns ----------------------------------------------------------------------------------

def windows_case():
    """Windows of 2 then 3 slices over the same reports: B[0,3) - A[0,2) is the one report of slice 2."""
    reports = [(0, "x", None)] * 2 + [(1, "x", None)] + [(2, "x", None)] + [(3, "x", None)] * 3 + \
        [(4, "x", None)] * 2 + [(5, "x", None)]
    return [_scenario(reports, periods=2), _scenario(reports, periods=3)]


def _clients(slice_, value, token, k):
    return [(slice_, value, token)] * k


def client_windows_case():
    """Client rows over windows of 1 then 2 slices: client T sends one report in each slice; in the
    2-slice window its two reports meet, and run B's client rows minus run A's are T's cross term.
    Every group of clients the rows treat alike holds at least M clients in both runs."""
    reports = (_clients(0, "x", "T", 1) + _clients(1, "x", "T", 1)
               + sum((_clients(0, "x", f"U{i}", 1) + _clients(1, "x", f"V{i}", 1) for i in range(2)), [])
               + sum((_clients(0, "x", f"C{i}", 2) + _clients(1, "x", f"D{i}", 2) for i in range(3)), []))
    return [_scenario(reports, clients=True), _scenario(reports, periods=2, clients=True)]


def cap_case():
    """A cap of 1 value then of 3: client T sends one report under b and one under c; with a cap of 1
    both are in ``__other__`` (one client of 2 reports), with a cap of 3 in two keys (two clients of 1)."""
    reports = (sum((_clients(0, "a", f"A{i}", 2) for i in range(4)), [])
               + _clients(0, "b", "T", 1) + _clients(0, "c", "T", 1)
               + sum((_clients(0, "b", f"B{i}", 1) + _clients(0, "c", f"C{i}", 1) for i in range(2)), [])
               + sum((_clients(0, "d", f"E{i}", 2) for i in range(3)), []))
    return [_scenario(reports, max_values=1, clients=True), _scenario(reports, max_values=3, clients=True)]


def linear_then_clients_case():
    """Windows of 1 slice without client rows, then of 2 slices with them: in the 2-slice window client
    T (one report in each slice) is a two-report client like C0..C2 (both reports in slice 0), so on a
    symmetric channel its variance row minus the first run's marginals leaves T's report in slice 1."""
    reports = (_clients(0, "x", "T", 1) + _clients(1, "x", "T", 1)
               + sum((_clients(0, "x", f"C{i}", 2) + _clients(1, "x", f"V{i}", 1) for i in range(3)), []))
    return [_scenario(reports), _scenario(reports, periods=2, clients=True)]


def backfill_case(backfilled: int = 1):
    """The same input, then plus ``backfilled`` reports of the same slice and key."""
    reports = [(0, "x", None)] * 4 + [(1, "x", None)] * 3
    return [_scenario(reports), _scenario(reports + [(0, "x", None)] * backfilled)]


def remainder_case():
    """Windows of 2 slices, then of 1: slice 1 holds one report, held below the guard by the second run,
    so the first run's window minus the second run's slice 0 is that report."""
    reports = [(0, "x", None)] * 4 + [(1, "x", None)] + [(2, "x", None)] * 3 + [(3, "x", None)] * 3
    return [_scenario(reports, periods=2), _scenario(reports)]


def _device_scenario(reports, payload=(), key_bound=None):
    return model.Scenario(window="fixed", min_reports=M, lateness=0, max_values=4, clients=False, reports=reports,
                          events=[], device_bound=1, key_bound=key_bound, payload=list(payload))


def _keeps(s, ids: list, j: int) -> bool:
    """Whether the device bound (M = 1) of scenario ``s``'s config keeps report ``j`` of the reports
    ``ids`` of one device (by the aggregator the model's runs use, whatever ranks are made of)."""
    cfg = model.config_of(s, max(len(s.reports), 1))
    table = model._packed(cfg, s, ids).devices
    return table.kept == 1 and bool(table.bits[0, j // 8] >> (j % 8) & 1)   # report j's tracer bit


def swap_case():
    """Device unit, M = 1: devices T (a token chosen so), D1, D2 of one report each; the second run adds
    a report of T that wins T's bound over its first: both runs keep 3 reports of 3 devices, and run 2
    minus run 1 is T's new report minus its old one."""
    for token, payload in itertools.product(["T"] + [f"T{i}" for i in range(32)], itertools.product((0, 1), repeat=2)):
        first = [(0, None, token), (0, None, "D1"), (0, None, "D2")]
        second = _device_scenario(first + [(0, None, token)], payload=[(), (), (), payload])
        if _keeps(second, [0, 3], 3):
            return [_device_scenario(first), second]
    raise AssertionError("no token's second report wins its bound")


def _swapping_tokens() -> tuple:
    """``(t1, t2)``: with max_keys_per_device 1, t1 in keys a and b is kept in b, t2 in a."""
    a, b = key_id((("k", "a"),)), key_id((("k", "b"),))
    prefer = {True: [], False: []}
    for i in range(64):
        device = np.array([client_key(f"T{i}")], dtype=np.uint64)
        over_a, _ = keys_over_bound(client_key("g"), [(a, device), (b, device)], 1)
        prefer[bool(over_a.size)].append(f"T{i}")
    return prefer[True][0], prefer[False][0]


def key_swap_case():
    """Device unit, M = 1, max_keys_per_device 1: key a holds t1 and two devices, key b t2 and two. The
    second run adds t1's report in b and t2's in a, and t1 is then kept in b, t2 in a: both keys keep 3
    reports of 3 devices, and key a's rows minus the first run's are t2's report minus t1's."""
    t1, t2 = _swapping_tokens()
    first = [(0, "a", "A0"), (0, "a", "A1"), (0, "a", t1), (0, "b", "B0"), (0, "b", "B1"), (0, "b", t2)]
    return [_device_scenario(first, key_bound=1), _device_scenario(first + [(0, "b", t1), (0, "a", t2)], key_bound=1)]


CASES = {"windows": windows_case, "client_windows": client_windows_case, "cap": cap_case, "backfill": backfill_case,
         "linear_then_clients": linear_then_clients_case, "remainder": remainder_case, "swap": swap_case,
         "key_swap": key_swap_case}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_rerun_isolates_without_the_ledger(case):
    scenarios = CASES[case]()
    found, _, _ = _reruns(scenarios, ledger=False)
    assert found is not None, case
    target = [j for j, r in enumerate(scenarios[-1].reports) if r[2] == "T"]
    if target:   # what is singled out is client T: its reports, or T as a party of the client rows
        assert "'T'" in found or any(f"isolates reports {sub}" in found for sub in
                                     [target] + [[t] for t in target]), found
    else:
        assert "isolates reports" in found, found


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_ledger_withholds_what_would_isolate(case):
    found, earlier, out = _reruns(CASES[case]())
    assert found is None, (case, found)
    assert len(earlier) == 2
    withheld = _withheld(out) + _withheld(out, "client_extremes")
    assert withheld, case   # the second run says what it withheld, and why
    for row in withheld:
        assert row["cause"] == "privacy" and "earlier run" in row["reason"], row


def test_what_the_ledger_still_publishes():
    """The cases' second runs publish what keeps every cell at M or more: the kept value ``a`` (its
    window, key and clients as before) under the cap change, and a backfill of M reports."""
    _, _, out = _reruns(cap_case())
    keys = {tuple(r["dimensions"].items()) for f in out.panes if f.kind == "extremes" for r in f.rows}
    assert keys == {(("k", "a"),)}
    found, _, out = _reruns(backfill_case(M))
    assert found is None and not _withheld(out)
    assert sum(r["n_reports"] for f in out.panes if f.kind == "marginals" for r in f.rows[:1]) == 4 + M + 3


def test_three_runs_form_a_chain():
    """4 reports, then 3 more (a difference of M: published), then 1 more: against the second run the
    third differs by one report, so its window is withheld though it differs from the first by M + 1."""
    base = [(0, "x", None)] * 4
    runs = [_scenario(base), _scenario(base + [(0, "x", None)] * M), _scenario(base + [(0, "x", None)] * (M + 1))]
    found, earlier, out = _reruns(runs)
    assert found is None and len(earlier) == 3
    assert [r["n_reports"] for r in _withheld(out)] == [4 + M + 1]
    assert _reruns(runs, ledger=False)[0] is not None


def test_device_unit_needs_the_same_devices():
    """Under privacy.unit: device a count of reports bounds no devices: a backfill of M new devices is
    withheld (the rule asks for an empty difference)."""
    reports = [(0, None, f"D{i}") for i in range(4)]
    runs = [model.Scenario(window="fixed", min_reports=M, lateness=0, max_values=4, clients=False, reports=r,
                           events=[], device_bound=1) for r in (reports, reports + [(0, None, f"N{i}") for i in range(M)])]
    found, _, out = _reruns(runs)
    assert found is None and [r["n_reports"] for r in _withheld(out)] == [4 + M]
    found, _, out = _reruns([runs[0], runs[0]])
    assert found is None and not _withheld(out)


def test_an_ordinary_rerun_withholds_nothing_and_adds_nothing():
    for case in CASES.values():
        first = case()[0]
        found, earlier, out = _reruns([first, first])
        assert found is None and not _withheld(out) and not _withheld(out, "client_extremes")
        assert len(earlier) == 1   # the same release again: the ledger keeps one


def test_a_ledger_of_format_1_cannot_rule_out_a_swap():
    """An earlier release read from a ledger of format 1 has no digests of kept reports: under the device
    unit the rerun's blocks are withheld as unknown, the swap and (the cost of not knowing) an
    unchanged rerun alike; with the release as this version writes it, the unchanged rerun publishes."""
    first, swapped = swap_case()
    cfg, out = model.run_batch(first, [])
    written = releases.release_to_json(out.release)
    assert written["witnesses"] and all(s[6] is not None for s in written["slices"])
    old = dict(written, slices=[s[:6] for s in written["slices"]])
    del old["witnesses"]
    old = releases.release_from_json(json.loads(json.dumps(old)), 1)
    for rerun in (swapped, first):
        found, last = _second_run(first, rerun, old)
        assert found is None and _withheld(last), rerun
        assert all("recorded no digest" in r["reason"] for r in _withheld(last))
    found, last = _second_run(first, first, releases.release_from_json(json.loads(json.dumps(written))))
    assert found is None and not _withheld(last)
    kept_changed = releases._kept_changed

    def trusting(olds, news):   # the mutation: an earlier slice without a digest taken as unchanged
        return None if any(o.kept is None for o in olds) else kept_changed(olds, news)
    with mock.patch.object(releases, "_kept_changed", trusting):
        found, _ = _second_run(first, swapped, old)
    assert found is not None


def _second_run(first, second, release) -> tuple:
    """``first`` published (with no ledger), then ``second`` under a ledger holding only ``release``:
    ``(what the rank test finds over both runs' published fields, the second run's outcome)``."""
    cfg, out = model.run_batch(first, [])
    stats = model.statistics(first, cfg, out)
    cfg, last = model.run_batch(second, [release])
    return model.isolation(second, stats + model.statistics(second, cfg, last)), last


def test_under_the_device_unit_digests_add_over_slices():
    """Windows of 2 slices, then of 1, over the same devices (3 in each slice, one report each): the
    first run's digest is the sum of the second run's two, so nothing is withheld (a digest that did not
    add would withhold both slices)."""
    reports = [(0, None, f"D{i}") for i in range(3)] + [(1, None, f"E{i}") for i in range(3)]
    two = model.Scenario(window="fixed", min_reports=M, lateness=0, max_values=4, clients=False, reports=reports,
                         events=[], device_bound=1, periods=2)
    found, earlier, out = _reruns([two, _device_scenario(reports)])
    assert found is None and not _withheld(out) and len(earlier) == 2


def test_witnesses_find_the_same_devices_under_another_name_and_hold_no_device_key():
    first, swapped = swap_case()
    _, a = model.run_batch(first, [])
    _, b = model.run_batch(swapped, [])
    _, other = model.run_batch(_device_scenario([(0, None, f"E{i}") for i in range(4)]), [])
    assert releases.shared_devices({"g": [a.release]}, {"h": b.release}) == ("h", "g")
    assert releases.shared_devices({"g": [a.release]}, {"g": b.release}) is None   # the same name: the rule's
    assert releases.shared_devices({"g": [a.release]}, {"h": other.release}) is None
    assert releases.shared_devices({}, {"g": a.release, "h": b.release}) is not None   # in one run too
    text = json.dumps(releases.release_to_json(a.release))
    for token in {r[2] for r in swapped.reports}:
        key = client_key(token)
        assert str(key) not in text and f"{key:016x}" not in text


def test_the_release_holds_counts_only():
    _, earlier, _ = _reruns(cap_case())
    text = repr(releases.release_to_json(earlier[-1]))
    assert "'b'" not in text and "__other__" not in text   # keys as digests
    assert releases.release_from_json(releases.release_to_json(earlier[-1])) == earlier[-1]


# -- mutations: each part of the rule, broken, lets one rerun through -----------------------------------

_block = releases._block


def _no_cut(*args):
    reason, changed = _block(*args)
    return (None, changed) if reason == releases.CUT else (reason, changed)


def _no_count(*args):
    reason, changed = _block(*args)
    return (None, changed) if reason == releases.CHANGED else (reason, changed)


MUTATIONS = {
    "a slice that cuts an earlier one published": (mock.patch.object(releases, "_block", _no_cut), "windows"),
    "a changed count published": (mock.patch.object(releases, "_block", _no_count), "backfill"),
    "a remainder below min_reports published": (mock.patch.object(releases, "_block", _no_count), "remainder"),
    "client rows over a window an earlier run published in parts": (
        mock.patch.object(releases, "_client_reason", lambda *a: None), "linear_then_clients"),
    "a slice inside an earlier client row's window published apart": (
        mock.patch.object(releases, "_regrouped", lambda *a: []), "cap"),
    "a swap of the report a device keeps published": (mock.patch.object(releases, "_kept_changed", lambda *a: None),
                                                      "swap"),
    "a swap of the key a device is kept in published": (
        mock.patch.object(releases, "_kept_changed", lambda *a: None), "key_swap"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_is_caught(name):
    patch, case = MUTATIONS[name]
    with patch:
        found, _, _ = _reruns(CASES[case]())
    assert found is not None, name
