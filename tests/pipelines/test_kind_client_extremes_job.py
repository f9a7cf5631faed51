"""Extremes over clients for the whole-report kinds (issue 48 items 1, 5, 6) through the command as users
run it (``ldp-marginals run``, batch DirectRunner) and the streaming job: each client row is the running
product of one term per report over each client's sampled reports (ldp/kind_client_extremes.py), the
window's other rows are unchanged, and the kinds' reads rule withholds the client rows when clients whose
relevant draws are alike are fewer than ``min_reports`` (docs/design.md, "Extremes over clients of the
whole-report kinds"). On main the configs are refused (rule kind-client-extremes)."""
import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.channel_kind import channel_kind
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from tests.batch_runs import run_args

T0 = 1_767_225_600_000   # 2026-01-01 00:00 UTC
DAY = 86_400_000


def config(kind: str, c: int, min_reports: int = 50, **changes) -> dict:
    spec = {"collection": "fleet", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(4)],
            "channel": {"kind": kind, "epsilon": 2.0, **({"width": 3} if kind == "subset" else {})}, "max_order": 2,
            "window": {"type": "fixed", "size_seconds": 86400}, "min_reports": min_reports, "reports_per_client": c,
            "extremes": [{"name": "any", "op": "or", "bits": ["q0", "q1"], "over": "client"},
                         {"name": "all", "op": "and", "bits": ["q2"], "over": "client"}]}
    spec.update(changes)
    return spec


def population(cfg, kind, seed=0, clients=1200, sends=(2, 3)):
    """``clients`` clients each sending 2 or 3 reports in day 0, each client's own rate of its bits."""
    rng = np.random.default_rng(seed)
    tokens, times, bits = [], [], []
    for i in range(clients):
        rate = rng.uniform(0.1, 0.6)
        for _ in range(int(rng.integers(sends[0], sends[1] + 1))):
            tokens.append(f"d{i}")
            times.append(T0 + int(rng.integers(DAY)))
            bits.append((rng.random(4) < rate).astype(np.uint8))
    packed = channel_kind(kind).encode_reports(np.array(bits), cfg.sampling, rng)
    records = [{"collection": "fleet", "event_time": t, "bits": p.tobytes(), "dimensions": {}, "client": k}
               for t, p, k in zip(times, packed, tokens)]
    return records, packed, np.array(tokens), np.array(times, dtype=np.int64)


def expected_sums(cfg, packed, tokens, times):
    """The aggregator on the same reports, outside the job: per client extreme (estimate, variance)."""
    agg = cfg.aggregator
    keys = np.array([client_key(t) for t in tokens], dtype=np.uint64)
    acc = agg.add_packed(agg.create(), packed, keys, np.ones(keys.size, dtype=bool),
                         report_ranks(agg.collection_key, keys, times))
    return agg.client_sums(acc, None, cfg.min_reports), acc


@pytest.mark.parametrize("kind,c", [("hadamard", 1), ("subset", 2)])
def test_the_run_command_publishes_each_kinds_client_rows(tmp_path, kind, c):
    spec = config(kind, c)
    cfg = parse_config(spec)
    records, packed, tokens, times = population(cfg, kind)
    out = tmp_path / "out"
    run(run_args(tmp_path, spec, records, "fleet", out))
    rows = {r["name"]: r for r in read_rows(str(out), "extremes", collection="fleet")}
    sums, _ = expected_sums(cfg, packed, tokens, times)
    assert set(rows) == {"any", "all"}
    for name, (estimate, variance) in zip(("any", "all"), sums):
        assert rows[name]["n"] == 1200   # every client sent at least c reports
        assert rows[name]["estimate"] == pytest.approx(estimate, rel=1e-9)
        assert rows[name]["variance"] == pytest.approx(variance, rel=1e-9) and variance > 0
    # the OR over q0, q1 of 1200 clients: far inside (0, 1200) for these rates, and its interval holds it
    assert 0.3 * 1200 < rows["any"]["estimate"] < 1200
    marginals = read_rows(str(out), "marginals", collection="fleet")
    assert marginals and all(r["n_reports"] == len(records) for r in marginals)


def test_clients_read_alike_by_too_few_withhold_the_client_rows(tmp_path):
    """Hadamard sampling with c = 2: clients whose two reports drew the same coefficients of the extremes
    are few (about N w_a^2 each), so the reads rule withholds the client rows (cause privacy, statistic
    client_extremes) and publishes the other rows."""
    spec = config("hadamard", 2)
    cfg = parse_config(spec)
    records, *_ = population(cfg, "hadamard")
    out = tmp_path / "out"
    run(run_args(tmp_path, spec, records, "fleet", out))
    assert read_rows(str(out), "extremes", collection="fleet") == []
    (held,) = [r for r in read_rows(str(out), "withheld", collection="fleet") if r["statistic"] == "client_extremes"]
    assert "draws read the extremes alike" in held["reason"]
    assert read_rows(str(out), "marginals", collection="fleet")


def test_streaming_gives_the_batch_client_rows():
    """The streaming engine (fixed day windows, no late data): the window's final pane holds the batch
    job's client rows exactly."""
    from tests.pipelines.test_same_answers import batch_and_streaming, canonical, latest_panes
    cfg = parse_config(config("subset", 2, min_reports=20))
    records, *_ = population(cfg, "subset", seed=3, clients=600)
    batch, got = batch_and_streaming(records, cfg)
    expected = canonical(batch)
    assert sorted(r["name"] for r in batch["extremes"]) == ["all", "any"]
    assert {r["n"] for r in batch["extremes"]} == {600}
    assert canonical(latest_panes(got)) == expected


def test_under_the_device_unit_the_client_rows_take_each_devices_kept_reports(tmp_path):
    """privacy.unit device (M = 3, reports_per_client M by default), subset RR: the client row is the
    aggregator's on each device's kept reports (the device table, blind to content); devices of 2 reports
    are left out of it (counted in a client_sample withheld row), those of 4 keep 3."""
    spec = config("subset", 3, extremes=[{"name": "any", "op": "or", "bits": ["q0", "q1"], "over": "client"}],
                  privacy={"unit": "device", "max_reports_per_device": 3})
    spec.pop("reports_per_client")
    cfg = parse_config(spec)
    assert cfg.client_sample == 3
    records, packed, tokens, times = population(cfg, "subset", seed=4, sends=(2, 4))
    out = tmp_path / "out"
    run(run_args(tmp_path, spec, records, "fleet", out))
    agg = cfg.aggregator
    keys = np.array([client_key(t) for t in tokens], dtype=np.uint64)
    acc = agg.settle(agg.add_devices(agg.create_open(), packed, keys, times))
    (estimate, variance), = agg.client_sums(acc, None, cfg.min_reports)
    (row,) = read_rows(str(out), "extremes", collection="fleet")
    sends = np.bincount(np.unique(tokens, return_inverse=True)[1])
    assert row["n"] == int((sends >= 3).sum())
    assert (row["estimate"], row["variance"]) == (pytest.approx(estimate, rel=1e-9), pytest.approx(variance, rel=1e-9))
    (left,) = [r for r in read_rows(str(out), "withheld", collection="fleet") if r["statistic"] == "client_sample"]
    assert f"{int((sends < 3).sum())} clients left out" in left["reason"]
