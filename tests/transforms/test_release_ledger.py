"""The release ledger (transforms/publication/releases.py) against the exact-algebra checker: the four
reruns of issue 35 each let a reader of both runs' outputs single out fewer than ``min_reports``
reports or clients without the ledger (or with a new one), and not with it, by the rank test over
every published field of both runs (tests/transforms/publication_model.py). Each part of the rule
has a mutation that lets one of the attacks through."""
from __future__ import annotations

from unittest import mock

import pytest

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


CASES = {"windows": windows_case, "client_windows": client_windows_case, "cap": cap_case, "backfill": backfill_case,
         "linear_then_clients": linear_then_clients_case, "remainder": remainder_case}


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
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_is_caught(name):
    patch, case = MUTATIONS[name]
    with patch:
        found, _, _ = _reruns(CASES[case]())
    assert found is not None, name
