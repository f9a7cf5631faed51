"""Attacks on issue 47's publication rules by a reader who holds every output (task a-attack). Each test
runs ``ldp-marginals run`` as users do and shows a combination of published values that depends on fewer
than ``min_reports`` reports: LEAKS FOUND ON MAIN at 3e51ad3, each test fails there and passes once the
rule it names is fixed (none of them is xfail: a failing test here is an open privacy bug).

1. Whole-report kinds, sliding windows: the thin-row rule (ldp/thin_rows.py) counts the reports a row
   rests on per *window*, but sliding windows share slices, so the rows of two windows difference a slice:
   window {h0, h1} minus window {h0} of a pair's marginal is a function of the reports of h1 whose subset
   holds the pair, here one report, though both windows' rows rest on at least min_reports. FIXED first by
   refusing sliding windows, early firings and lateness for these kinds; now (task q-3) the rule holds per
   atom (a released slice or increment, transforms/publication/hadamard_rows.py: atom_thin_sets), the
   refusals are lifted, and the test runs the sliding config and checks every difference of published rows.
2. The release ledger keys its blocks by the digest of a slice's dimensions: a rerun into the same
   output whose config drops a dimension publishes a key the ledger never saw, checked against nothing;
   its row minus the first run's published keys is the key the guard withheld. FIXED on this branch
   (pipelines/release_ledger.py: check_dimensions refuses the rerun).
3. The release ledger's witnesses (the 4 devices of smallest public witness order per slice) catch a
   renamed collection over the same reports, but an attacker's devices, whose tokens it grinds to the
   smallest orders, take every witness of the renamed run, which is then checked against nothing. FIXED
   on this branch: a run compares every one of its devices with other collections' witnesses.
4. Whole-report kinds and the release ledger: a backfill of min_reports reports, one of them holding a
   pair, passes the ledger (a one-slice difference of at least min_reports) and the thin rule (both runs'
   pair rows rest on 10 and 11 reports); the two runs' rows of the pair difference that one report. FIXED
   on this branch: under these kinds a changed ledger block is withheld. Attack 1 is OPEN (its test fails).
5. Whole-report kinds, ONE fixed window: tables whose subsets overlap, (b2,b4) + (b1,b3,b4) - (b0,b4) on
   b4 = 1, cancel down to the 3 reports of subset (b1,b2,b3,b4) though each table rests on 7 to 10 reports
   (min_reports 5). FIXED on this branch (ldp/thin_rows.py, the family rule per monomial); the exact rank
   check is tests/ldp/test_thin_rows_span.py.
Attacks 1 and 4 share a cause: the thin rule counts the reports of a published row, not of the cells
(slices, ledger differences, streaming increments) that rows of the same key difference into.
"""
import numpy as np
import pytest
import yaml

from ldp_marginals import schemas
from ldp_marginals.ldp.subset_reports import SubsetFormat
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import LEDGER_DIR, LEDGER_FILE

T0 = 1_767_225_600_000   # 2026-01-01T00:00Z, an hour boundary
HOUR = 3_600_000


def _run(tmp_path, config: dict, records: list, name: str, out, *more) -> dict:
    """``ldp-marginals run`` (batch, DirectRunner) of ``config`` over ``records`` into ``out``: its summary."""
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / name).mkdir()
    schemas.write_avro(tmp_path / name / "r.avro", "noisy_report", records)
    return run(["--config", str(tmp_path / f"{name}.yaml"), "--input", str(tmp_path / name / "*.avro"),
                "--output", str(out), "--progress-seconds", "0", *more])


# -- 1. whole-report kinds: thin rows difference across sliding windows ------------------------------------
SLIDING = {"collection": "pairs", "features": [{"name": f"b{i}", "type": "boolean"} for i in range(4)],
           "channel": {"kind": "subset", "epsilon": 2.0, "width": 2}, "max_order": 2,
           "window": {"type": "sliding", "size_seconds": 7200, "period_seconds": 3600}, "min_reports": 5}
PAIR = (0, 1)
PAIR_MASK = 0b0011
OTHER_MASKS = (0b0101, 0b1001, 0b0110, 0b1010, 0b1100)   # every other pair of 4 bits


def _subset_records(cfg, target_pattern: int) -> list:
    """Hour 0: 10 reports whose subset is the pair (b0, b1) and 20 of other pairs; hour 1: 29 reports of
    other pairs and ONE whose subset is (b0, b1), sending ``target_pattern`` on it (0b11 or 0b00). Every
    slice holds 30 reports (>= min_reports), every pair of every window at least 5 except (b0, b1) in the
    window of hour 1 alone (1 report: the thin rule withholds that row)."""
    rng = np.random.default_rng(47)
    fmt = SubsetFormat(cfg.sampling)

    def batch(masks, hour):
        masks = np.asarray(masks, dtype=np.int64)
        patterns = rng.integers(0, 16, masks.size) & masks
        return [(m, p, T0 + hour * HOUR + 60_000 * (i + 1)) for i, (m, p) in enumerate(zip(masks, patterns))]
    h0 = batch([PAIR_MASK] * 10 + [OTHER_MASKS[i % 5] for i in range(20)], 0)
    h1 = batch([OTHER_MASKS[i % 5] for i in range(29)], 1) + [(PAIR_MASK, target_pattern, T0 + HOUR + 59 * 60_000)]
    out = []
    for m, p, t in h0 + h1:
        out.append({"collection": cfg.name, "event_time": int(t), "bits": fmt.pack([m], [p])[0].tobytes(),
                    "dimensions": {}, "client": None})
    return out


def _set_counts(cfg, row) -> tuple:
    """``(n_K, c_K)`` of a published marginal row, as its reader recovers them from the row alone
    (estimate, variance, n_reports) and the channel (collections.json): the estimate is ``N pi`` with
    ``pi = (c/n_K - q')/(p' - q')``, the variance ``N^2 (s(1-s)/(n_K d^2) - (n_K-1)/n_K pi(1-pi)/(N-1))``,
    linear in ``1/n_K`` (ldp/subset_reports.py: window_marginals), for the projected channel of the row's order."""
    p1, q1 = cfg.sampling.projected(len(row["columns"]))
    delta = p1 - q1
    big_n = row["n_reports"]
    pi = row["estimate"] / big_n
    share = q1 + delta * pi
    a = share * (1 - share) / delta ** 2
    b = pi * (1 - pi) / (big_n - 1)
    n_k = (a + b) / (row["variance"] / big_n ** 2 + b)
    return n_k, share * n_k


def _pair_counts(cfg, row) -> tuple:
    """:func:`_set_counts` of a pair marginal row."""
    if len(row["columns"]) != 2:
        raise ValueError(f"a pair row has two columns, got columns={row['columns']!r}")
    return _set_counts(cfg, row)


def _differences_isolate_nothing(cfg, rows, min_reports: int) -> int:
    """Assert that no two published marginal rows of one set (``rows``: every published marginal row, of
    every window or pane) differ by 1 to ``min_reports - 1`` reports of that set (n_K read back from the
    row alone); returns the number of pairs of rows compared."""
    by_set = {}
    for r in rows:
        by_set.setdefault(tuple(r["columns"]), []).append(r)
    compared = 0
    for cols, of_set in by_set.items():
        counts = [(_set_counts(cfg, r)[0], r) for r in of_set]
        for n_k, _ in counts:   # the read-back is exact: n_K is an integer
            assert abs(n_k - round(n_k)) < 1e-6, (cols, n_k)
        for i, (n_i, r_i) in enumerate(counts):
            for n_j, r_j in counts[i + 1:]:
                dn = abs(round(n_i) - round(n_j))
                compared += 1
                assert dn == 0 or dn >= min_reports, (
                    f"LEAK: the published rows of {cols} of windows/panes {r_i['window_start']} and "
                    f"{r_j['window_start']} differ by {dn} report(s) (< min_reports={min_reports})")
    return compared


def test_subset_sliding_windows_difference_a_thin_pair(tmp_path):
    """Window [h0, h2) minus window [h-1, h1) of the pair (b0, b1): before the rule per atom both rows were
    published (they rest on 11 and 10 reports, min_reports 5), and their difference is a function of ONE
    report, the only one of hour 1 whose subset holds the pair: n_K differs by 1 and the all-ones count by
    that report's (1,1) indicator. The rule now holds per atom (a released slice, batch): the pair rests on
    1 report of slice h1, so every window summing h1 withholds it. Run with the sliding window (config and
    ``--window`` override): no two published rows of any set, over every window, differ by 1..4 reports."""
    cfg = parse_config(dict(SLIDING, window={"type": "fixed", "size_seconds": 3600}))
    fixed = dict(SLIDING, window={"type": "fixed", "size_seconds": 3600})
    for name, config, more in (("config", SLIDING, ()), ("override", fixed, ("--window", "sliding:7200:3600"))):
        for pattern in (PAIR_MASK, 0):
            (tmp_path / f"{name}{pattern}").mkdir()
            out = tmp_path / f"{name}{pattern}" / "out"
            _run(tmp_path / f"{name}{pattern}", config, _subset_records(cfg, pattern), "in", out, *more)
            marginals = read_rows(str(out), "marginals")
            # every set's rows over every window: differences of 0 or >= min_reports reports, never fewer
            assert _differences_isolate_nothing(cfg, marginals, SLIDING["min_reports"]) >= 10
            pairs = {r["window_start"]: r for r in marginals if tuple(r["columns"]) == PAIR}
            # the windows holding slice h1 withhold the pair, the one of h0 alone publishes it (10 reports)
            assert set(pairs) == {T0 - HOUR}, sorted(pairs)
            withheld = [r for r in read_rows(str(out), "withheld") if "b0,b1" in r["reason"]]
            assert {r["window_start"] for r in withheld} == {T0, T0 + HOUR}, withheld
            assert any("released increment" in r["reason"] for r in withheld if r["window_start"] == T0)
    # the fixed windows of the same reports publish each hour once: the pair of hour 1 (1 report) is withheld
    (tmp_path / "fixed").mkdir()
    _run(tmp_path / "fixed", fixed, _subset_records(cfg, PAIR_MASK), "in", tmp_path / "fixed" / "out")
    pairs = {r["window_start"] for r in read_rows(str(tmp_path / "fixed" / "out"), "marginals")
             if tuple(r["columns"]) == PAIR}
    assert pairs == {T0}


# -- 2. the release ledger: a rerun that regroups reports into other keys --------------------------------
KEYED = {"collection": "app", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
         "channel": {"p": 0.25, "q": 0.75}, "max_order": 1, "window": {"type": "fixed", "size_seconds": 3600},
         "min_reports": 5, "dimensions": {"region": {}}}


def _keyed_records(region: bool) -> list:
    """One hour: 10 reports of region us, 3 of region eu (below min_reports); ``region`` False: the same
    reports with the dimension dropped (the operator's export after the config dropped it)."""
    rng = np.random.default_rng(5)
    out = []
    for i, reg in enumerate(["us"] * 10 + ["eu"] * 3):
        out.append({"collection": "app", "event_time": T0 + 60_000 * (i + 1), "bits": bytes([int(rng.integers(8))]),
                    "dimensions": {"region": reg} if region else {}, "client": None})
    return out


def _sums(out) -> dict:
    """``{(region or None, bit): (estimate, n_reports)}`` of the marginal rows the output holds."""
    return {(r["dimensions"].get("region"), r["columns"][0]): (r["estimate"], r["n_reports"])
            for r in read_rows(str(out), "marginals")}


def test_ledger_a_rerun_that_drops_a_dimension_differences_the_withheld_key(tmp_path):
    """Run 1 (dimension region): us (10 reports) published, eu (3) withheld by the guard. Run 2 into the same
    --output, the same collection and reports with the dimension dropped from the config: its one key holds
    all 13 reports, and the ledger, whose blocks are per key digest, checks it against nothing. Run 2's row
    minus run 1's us row is eu's 3 reports, which no run published."""
    out = tmp_path / "out"
    first = _run(tmp_path, KEYED, _keyed_records(True), "first", out)
    before = _sums(out)
    assert {k[0] for k in before} == {"us"} and {v[1] for v in before.values()} == {10}
    ledger = (out / LEDGER_DIR / LEDGER_FILE).read_text()
    try:
        second = _run(tmp_path, {k: v for k, v in KEYED.items() if k != "dimensions"}, _keyed_records(False),
                      "second", out)
    except ValueError as err:   # fixed: refused before anything is published, naming the change
        assert "dimensions ['region']" in str(err) and "declares []" in str(err), err
        assert _sums(out) == before and (out / LEDGER_DIR / LEDGER_FILE).read_text() == ledger
        # the same run into another output, or with --new-ledger (knowingly), is what the message offers
        fresh = _run(tmp_path, {k: v for k, v in KEYED.items() if k != "dimensions"}, _keyed_records(False),
                     "fresh", out, "--new-ledger")
        assert fresh["reports_withheld_by_ledger"] == 0 and {v[1] for v in _sums(out).values()} == {13}
        return
    after = _sums(out)
    print("run 1:", first["reports_withheld_by_ledger"] if "reports_withheld_by_ledger" in first else None,
          "run 2 withheld by the ledger:", second["reports_withheld_by_ledger"], "rows:", sorted(after.items()))
    recovered = {bit: after[(None, bit)][0] - before[("us", bit)][0] for bit in range(3) if (None, bit) in after}
    assert not recovered, (f"LEAK: run 2's rows (13 reports) minus run 1's region us rows (10) publish the 3 "
                           f"reports of region eu that the guard withheld: {recovered}")


# -- 3. the release ledger's witnesses: a renamed collection whose new devices take every witness ----------
DEVICE = {"collection": "dev", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
          "channel": {"p": 0.25, "q": 0.75}, "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600},
          "min_reports": 5, "privacy": {"unit": "device", "max_reports_per_device": 1}}


def _device_report(token, bits, minute, collection="dev"):
    return {"collection": collection, "event_time": T0 + minute * 60_000, "bits": bytes([bits]), "dimensions": {},
            "client": token}


def _ground_tokens(genuine: list, n: int) -> list:
    """``n`` tokens an attacker mints whose witness order (ldp/devices.py: witness_order, a public keyless
    mix of the token's FNV hash) is below every genuine device's: the ledger's witnesses of any slice that
    holds them are theirs."""
    from ldp_marginals.ldp.aggregate import client_key
    from ldp_marginals.ldp.devices import witness_order
    floor = int(witness_order(np.array([client_key(t) for t in genuine], dtype=np.uint64)).min())
    out, i = [], 0
    while len(out) < n:
        token = f"sybil-{i}"
        if int(witness_order(np.array([client_key(token)], dtype=np.uint64))[0]) < floor:
            out.append(token)
        i += 1
    return out


def test_ledger_a_renamed_collection_whose_attacker_devices_take_every_witness_is_not_refused(tmp_path):
    """Run 1, collection dev in hourly windows: hour 0 holds 6 devices (published), hour 1 holds 3 (withheld
    by the guard). The operator then runs the same reports as collection dev2 in 2-hour windows into the same
    output (the rename tests/pipelines/test_ledger_device_swaps.py shows refused), but the input now also
    holds 4 reports of an attacker's devices whose tokens it ground to the smallest witness order (290
    tries): dev2's witnesses are all the attacker's, none is shared, and the run publishes. dev2's window
    minus dev's hour 0 is the 3 withheld reports plus the attacker's 4, which it knows (it sent them)."""
    genuine = [_device_report(f"d{i}", i % 8, i) for i in range(6)] + \
        [_device_report(f"e{i}", 0b111, 60 + i) for i in range(3)]
    out = tmp_path / "out"
    first = _run(tmp_path, DEVICE, genuine, "first", out)
    assert first["reports_withheld_by_ledger"] == 0
    hour_0 = {tuple(r["columns"]): r for r in read_rows(str(out), "marginals", collection="dev")}
    assert {r["n_reports"] for r in hour_0.values()} == {6}
    sybils = [_device_report(t, 0b000, 90 + i, "dev2")
              for i, t in enumerate(_ground_tokens([r["client"] for r in genuine], 4))]
    renamed = dict(DEVICE, collection="dev2", window={"type": "fixed", "size_seconds": 7200})
    try:
        _run(tmp_path, renamed, [dict(r, collection="dev2") for r in genuine] + sybils, "renamed", out)
    except ValueError as err:   # what a fixed ledger does: refuse the rename (as it does without the sybils)
        assert "dev2" in str(err) and "dev" in str(err)
        return
    two_hours = {tuple(r["columns"]): r for r in read_rows(str(out), "marginals", collection="dev2")}
    assert not two_hours, (
        "LEAK: the renamed run published {} reports; its marginal of a minus dev's hour 0 minus the attacker's "
        "4 known reports (debiased bit -0.5 each: they sent 0) is {:.3f}, the 3 withheld reports' sum (all sent "
        "a = 1: 4.5)".format(two_hours[(0,)]["n_reports"],
                             two_hours[(0,)]["estimate"] - hour_0[(0,)]["estimate"] - 4 * -0.5))


# -- 4. whole-report kinds: a backfill the ledger lets through differences a thin pair -------------------
FIXED = dict(SLIDING, window={"type": "fixed", "size_seconds": 3600})


def test_subset_backfill_of_min_reports_differences_a_pair_resting_on_one_report(tmp_path):
    """Run 1: hour 0 of attack 1 (30 reports, 10 of them holding the pair (b0, b1)). Run 2 into the same
    output adds 5 backfilled reports (min_reports 5: the ledger publishes a one-slice difference of at least
    min_reports), ONE of them holding the pair. Both runs' pair rows rest on >= 10 reports, so the thin rule
    passes them; their difference rests on that one report, and follows its answer."""
    cfg = parse_config(FIXED)
    got = {}
    for pattern in (PAIR_MASK, 0):
        hour0 = [r for r in _subset_records(cfg, pattern) if r["event_time"] < T0 + HOUR]
        backfill = [dict(r, event_time=r["event_time"] - HOUR) for r in _subset_records(cfg, pattern)
                    if r["event_time"] >= T0 + HOUR][-5:]   # 4 of other pairs, then the one holding (b0, b1)
        out = tmp_path / f"out{pattern}"
        _run(tmp_path, FIXED, hour0, f"first{pattern}", out)
        first = {r["window_start"]: r for r in read_rows(str(out), "marginals") if tuple(r["columns"]) == PAIR}
        second_summary = _run(tmp_path, FIXED, hour0 + backfill, f"second{pattern}", out)
        second = {r["window_start"]: r for r in read_rows(str(out), "marginals") if tuple(r["columns"]) == PAIR}
        if second_summary["reports_withheld_by_ledger"]:   # fixed: withheld, the first run's rows stay
            assert second_summary["reports_withheld_by_ledger"] == 35 and second[T0]["n_reports"] == 30
            assert second[T0]["from_run"] and second[T0]["estimate"] == first[T0]["estimate"]
        else:
            assert second[T0]["n_reports"] == 35
        (n1, c1), (n2, c2) = _pair_counts(cfg, first[T0]), _pair_counts(cfg, second[T0])
        got[pattern] = (n2 - n1, c2 - c1)
    print("n_K and c_K differences run 2 - run 1:",
          {bin(k): tuple(round(x, 6) for x in v) for k, v in got.items()})
    for pattern, (dn, dc) in got.items():
        assert round(dn) == 0 or round(dn) >= FIXED["min_reports"], (
            f"LEAK: the two runs' rows of the pair differ by {dn:.3f} reports (< min_reports="
            f"{FIXED['min_reports']}), their all-ones counts by {dc:.3f}: one report's answer ({bin(pattern)})")


# -- 5. whole-report kinds, ONE window: published tables whose reports overlap by subset ------------------
TABLES = {"collection": "tabs", "features": [{"name": f"b{i}", "type": "boolean"} for i in range(5)],
          "channel": {"kind": "subset", "epsilon": 2.0, "width": 4}, "max_order": 3,
          "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 5,
          "groups": [["b0", "b4"], ["b2", "b4"], ["b1", "b3", "b4"]]}
# reports per subset (width 4 of 5 bits): found by the exact rank search of tests/ldp/test_thin_rows_span.py
# over random populations (5 of 450 with tables leak; none of 120 without tables)
TYPES = {(0, 1, 2, 3): 2, (0, 1, 2, 4): 1, (0, 1, 3, 4): 6, (0, 2, 3, 4): 3, (1, 2, 3, 4): 3}


def _table_records(cfg, victim_pattern: int) -> list:
    """One hour of the reports of :data:`TYPES`; the 3 reports whose subset is (b1, b2, b3, b4) send
    ``victim_pattern`` (0b11110: all ones, or 0), the others fixed seeded patterns."""
    rng = np.random.default_rng(11)
    fmt = SubsetFormat(cfg.sampling)
    out, minute = [], 0
    for subset, n in TYPES.items():
        mask = sum(1 << b for b in subset)
        for _ in range(n):
            minute += 1
            pattern = victim_pattern if subset == (1, 2, 3, 4) else int(rng.integers(0, 32)) & mask
            out.append({"collection": cfg.name, "event_time": T0 + 60_000 * minute,
                        "bits": fmt.pack([mask], [pattern])[0].tobytes(), "dimensions": {}, "client": None})
    return out


def _cell_count(cfg, row) -> float:
    """The noisy count of one published table cell (or marginal), read back from the row alone: ``n_T`` from
    the variance (linear in ``1/n_T``, as :func:`_pair_counts`), then ``n_T (q' + (p' - q') f)``."""
    p1, q1 = cfg.sampling.projected(len(row["columns"]) if "group" not in row else len(row["group"]))
    delta = p1 - q1
    big_n = row["n_reports"]
    f = row["estimate"] / big_n
    share = q1 + delta * f
    a, b = share * (1 - share) / delta ** 2, f * (1 - f) / (big_n - 1)
    n_t = (a + b) / (row["variance"] / big_n ** 2 + b)
    return n_t * share


def test_subset_tables_whose_subsets_overlap_isolate_three_reports(tmp_path):
    """One window of 15 reports, min_reports 5, tables of (b0, b4), (b2, b4) and (b1, b3, b4), each resting on
    10, 7 and 9 reports: all published. The reports with b4 = 1 counted by table (b2, b4) plus table (b1, b3,
    b4) minus table (b0, b4) are twice those of the 3 reports whose subset is (b1, b2, b3, b4) (the other
    subsets holding b4 cancel). Run with those 3 sending all ones, then all zeros: 6 then 0."""
    cfg = parse_config(TABLES)
    got = {}
    for victim in (0b11110, 0):
        out = tmp_path / f"out{victim}"
        _run(tmp_path, TABLES, _table_records(cfg, victim), f"in{victim}", out)
        tables = {}
        for r in read_rows(str(out), "tables", estimator="unbiased"):
            tables.setdefault(tuple(r["group"]), []).append(r)

        def ones4(group):
            return sum(_cell_count(cfg, r) for r in tables.get(group, []) if r["cell"][-1] == "true")
        if not all(g in tables for g in (("b0", "b4"), ("b2", "b4"), ("b1", "b3", "b4"))):
            got[victim] = None   # fixed: a table withheld, the combination is not there
            continue
        got[victim] = ones4(("b2", "b4")) + ones4(("b1", "b3", "b4")) - ones4(("b0", "b4"))
    print("(b2,b4) + (b1,b3,b4) - (b0,b4), b4 = 1:", got)
    assert got[0b11110] is None or abs(got[0b11110] - got[0]) < 1e-6, (
        f"LEAK: a combination of three published tables is twice the b4 = 1 count of the 3 reports of subset "
        f"(b1, b2, b3, b4) (min_reports 5): {got[0b11110]:.3f} when they send all ones, {got[0]:.3f} all zeros")
