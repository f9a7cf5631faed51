"""Extremes over clients on realistic populations, through the command as users run it
(``ldp-marginals run`` on Avro files, batch DirectRunner). Without a client sample the groups rule
(docs/design.md section 7) withholds every client row of a population whose clients send varying
numbers of reports; with ``reports_per_client: c`` the rows take each client's c reports of smallest
rank (a keyed hash of client and event time) and publish, and the linear rows are unchanged.

The populations are written by a small generator here (``ldp-marginals simulate`` draws a client per
report): issue 47's day (600 devices a region sending 5 to 30 reports a day, ``min_reports`` 100;
three regions, two days) and its month, scaled down to a week of two regions of 150 devices each
sending 24 reports a day, each hour's report lost with probability 0.1 (as devices miss hours), so
that a device sends 15 to 24 (the month in the issue: 30 days, three regions; the rule is per window
and key, so more windows change nothing but the count)."""
import numpy as np
import pytest
import yaml

from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from tests.batch_runs import run_args

T0 = 1_767_225_600_000   # 2026-01-01 00:00 UTC
DAY, HOUR = 86_400_000, 3_600_000
EXTREMES = [{"name": "any_ab", "op": "or", "bits": ["a", "b"], "over": "client"},
            {"name": "all_ab", "op": "and", "bits": ["a", "b"], "over": "client"},
            {"name": "any_report", "op": "or", "bits": ["a", "b"]}]


def config(**changes):
    base = {"collection": "fleet", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
            "channel": {"p": 0.2, "q": 0.8}, "max_order": 2, "window": {"type": "fixed", "size_seconds": 86400},
            "min_reports": 100, "dimensions": {"region": {}}, "extremes": EXTREMES}
    base.update(changes)
    return base


def day_population(seed=0, regions=3, days=2, devices=600):
    """Issue 47's day: per region and day, ``devices`` devices each sending 5 to 30 reports at random
    times of the day."""
    rng = np.random.default_rng(seed)
    out = []
    for region in range(regions):
        for day in range(days):
            for d in range(devices):
                for _ in range(int(rng.integers(5, 31))):
                    out.append((f"r{region}", f"r{region}-d{d}", T0 + day * DAY + int(rng.integers(DAY))))
    return _records(rng, out)


def month_population(seed=1, regions=2, days=7, devices=150):
    """Issue 47's month, scaled down: each device one report an hour, each lost with probability 0.1."""
    rng = np.random.default_rng(seed)
    out = []
    for region in range(regions):
        for day in range(days):
            for d in range(devices):
                for hour in np.flatnonzero(rng.random(24) >= 0.1):
                    out.append((f"r{region}", f"r{region}-d{d}",
                                T0 + day * DAY + int(hour) * HOUR + int(rng.integers(HOUR))))
    return _records(rng, out)


def _records(rng, items):
    rate = {}
    records = []
    for region, token, ms in items:
        r = rate.setdefault(token, rng.uniform(0.05, 0.5))   # a device's own rate of a and b
        bits = int(rng.random() < r) | (int(rng.random() < r) << 1) | (int(rng.random() < 0.5) << 2)
        records.append({"collection": "fleet", "event_time": ms, "bits": bytes([bits]),
                        "dimensions": {"region": region}, "client": token})
    return records


def run_command(tmp_path, spec, records, name):
    out = tmp_path / f"out-{name}"
    run(run_args(tmp_path, spec, records, name, out))
    return str(out)


def client_rows(out):
    """``(published, withheld)``: the (window, region) client rows published (both extremes) and withheld."""
    rows = read_rows(out, "extremes", collection="fleet")
    got = {}
    for r in rows:
        if r["name"] in ("any_ab", "all_ab"):
            got.setdefault((r["window_start"], r["dimensions"]["region"]), []).append(r)
    held = {(r["window_start"], r["dimensions"]["region"]) for r in read_rows(out, "withheld", collection="fleet")
            if r["statistic"] == "client_extremes"}
    assert all(len(v) == 2 for v in got.values()) and not set(got) & held
    return got, held


def linear(out):
    return sorted((r["window_start"], r["dimensions"]["region"], tuple(r["columns"]), r["estimate"], r["n_reports"])
                  for r in read_rows(out, "marginals", collection="fleet"))


@pytest.mark.parametrize("population, c, windows", [(day_population, 5, 6), (month_population, 20, 14)],
                         ids=["day", "month"])
def test_client_rows_publish_on_realistic_populations_with_a_sample_and_the_linear_rows_stay(
        tmp_path, population, c, windows):
    records = population()
    before = run_command(tmp_path, config(), records, "before")
    after = run_command(tmp_path, config(reports_per_client=c), records, "after")
    published, held = client_rows(before)
    assert (len(published), len(held)) == (0, windows)   # the groups rule: every client row withheld
    published, held = client_rows(after)
    assert (len(published), len(held)) == (windows, 0)
    assert linear(after) == linear(before)   # marginals unchanged
    tokens = {}
    for r in records:
        key = ((r["event_time"] - T0) // DAY * DAY + T0, r["dimensions"]["region"])
        tokens.setdefault(key, {}).setdefault(r["client"], 0)
        tokens[key][r["client"]] += 1
    left = {(r["window_start"], r["dimensions"]["region"]): r["reason"]
            for r in read_rows(after, "withheld", collection="fleet") if r["statistic"] == "client_sample"}
    for key, rows in published.items():   # n: the clients with at least c reports in the window and key
        kept = sum(1 for n in tokens[key].values() if n >= c)
        assert {r["n"] for r in rows} == {kept}
        short = len(tokens[key]) - kept   # counted, in a withheld row of statistic client_sample
        assert (left[key].startswith(f"{short} clients left out of the client rows") if short else key not in left)
    assert (len(left) > 0) == (population is month_population)   # the month: ~9% send fewer than 20


def test_plan_warns_when_the_client_rows_would_be_withheld_for_the_population(tmp_path, capsys):
    from ldp_marginals.pipelines.cli import main
    spec = tmp_path / "c.yaml"
    spec.write_text(yaml.safe_dump(config()))
    args = ["plan", "--config", str(spec), "--reports-per-window", "10000", "--clients-per-window", "600",
            "--reports-per-client", "5-30"]
    main(args)
    text = capsys.readouterr().out
    assert "warning: extremes over clients: about 23 clients send each number of reports" in text
    assert "reports_per_client: 5 would publish them" in text
    spec.write_text(yaml.safe_dump(config(reports_per_client=5)))
    main(args + ["--json"])
    rows = __import__("json").loads(capsys.readouterr().out)["collections"][0]["client_rows"]
    assert rows["published"] and rows["kept_clients"] == 600 and rows["reports_per_client"] == 5
    spec.write_text(yaml.safe_dump(config(reports_per_client=29)))   # 2 x 23 clients send 29 or 30: withheld
    main(args)
    assert "fewer than min_reports=100: the client rows are withheld" in capsys.readouterr().out


def test_live_client_rows_publish_with_late_reports_when_clients_keep_their_first_released_reports():
    """Streaming (the job's builder on a TestStream, DirectRunner): five one-minute windows, 100 devices
    a minute each sending 3 or 4 reports, 10% of them late (within the lateness: a second atom). The
    groups rule splits the clients by their reports per atom and withholds every window; with
    ``reports_per_client: 3`` a client keeps its reports of the first release first, the few clients a
    late report splits off are left out (counted), and every window publishes."""
    from apache_beam.testing import test_stream

    from ldp_marginals.schemas.config import parse_config
    from tests.pipelines.test_streaming import START, run_stream
    live = dict(config(), collection="live", window={"type": "fixed", "size_seconds": 60}, min_reports=20,
                allowed_lateness_seconds=120, dimensions={}, extremes=EXTREMES[:1])
    rng = np.random.default_rng(0)
    on, late = {m: [] for m in range(5)}, {m: [] for m in range(5)}
    for m in range(5):
        for d in range(100):
            for _ in range(int(rng.integers(3, 5))):
                r = {"collection": "live", "event_time": (START + 60 * m + int(rng.integers(60))) * 1000,
                     "bits": bytes([int(rng.integers(8))]), "dimensions": {}, "client": f"d{d}"}
                (late if rng.random() < 0.1 else on)[m].append(r)
    published = {}
    for c in (None, 3):
        cfg = parse_config(dict(live, reports_per_client=c) if c else live)
        stream = test_stream.TestStream().advance_watermark_to(START)
        for m in range(5):
            stream = stream.add_elements(on[m]).advance_watermark_to(START + 60 * (m + 1) + 1)
            if m:
                stream = stream.add_elements(late[m - 1])
        got, _ = run_stream(stream.add_elements(late[4]).advance_watermark_to_infinity(), cfg)
        published[c] = len({f.window for f in got["panes"] if f.kind == "extremes"
                            and any(r["name"] == "any_ab" for r in f.rows)})
        if c:
            left = [r for r in got["withheld"] if r["statistic"] == "client_sample"]
            assert left and all("clients left out of the client rows" in r["reason"] for r in left)
    assert published == {None: 0, 3: 5}


def test_under_the_device_unit_the_sample_defaults_to_the_bound(tmp_path):
    """``privacy.unit: device`` with M = 2 and no reports_per_client: the client rows take each device's
    two kept reports (the bound's), and leave out (counted) the devices that sent one; the marginals
    keep the bound's reports of every device."""
    rng = np.random.default_rng(2)
    records, sent = [], {}
    for d in range(150):
        n = int(rng.integers(1, 5))
        sent[f"dev{d}"] = n
        for _ in range(n):
            records.append({"collection": "fleet", "event_time": T0 + int(rng.integers(DAY)),
                            "bits": bytes([int(rng.integers(8))]), "dimensions": {}, "client": f"dev{d}"})
    spec = config(dimensions={}, min_reports=20, privacy={"unit": "device", "max_reports_per_device": 2})
    out = run_command(tmp_path, spec, records, "dev")
    rows = [r for r in read_rows(out, "extremes", collection="fleet") if r["name"] in ("any_ab", "all_ab")]
    two = sum(1 for n in sent.values() if n >= 2)
    assert len(rows) == 2 and {r["n"] for r in rows} == {two}
    (left,) = [r for r in read_rows(out, "withheld", collection="fleet") if r["statistic"] == "client_sample"]
    assert left["reason"].startswith(f"{150 - two} clients left out of the client rows (reports_per_client=2)")
    marginal = [r for r in read_rows(out, "marginals", collection="fleet") if r["columns"] == [0]]
    assert marginal[0]["n_reports"] == sum(min(n, 2) for n in sent.values())
