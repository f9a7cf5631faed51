"""The bound on a slice's keys per device in streaming (``privacy.unit: device`` with dimensions; no
Beam: the engines wired as the adapter wires them, every message and state through its bytes, messages
delivered in seeded random orders): each window's last pane equals what batch publishes for the same
reports, whatever the bundles and their order; the reports past the bounds are counted as batch counts
them; no pane publishes a report of a slice before the slice is sealed; and the slice step's state is
bounded by the devices, not their reports."""
import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.key_table import key_table, merge_key_tables
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication import key_atoms, slices
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, batch_bound_keys, batch_window
from tests.transforms.local_stream import LocalStream

MIN = 60_000
REGIONS = ("eu", "us", "asia")


def config(window="fixed", keys=1, reports=2):
    spec = {"collection": "dk", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
            "channel": {"p": 0.25, "q": 0.75}, "max_order": 2, "min_reports": 4, "early_firing_seconds": 5,
            "window": {"type": "fixed", "size_seconds": 60} if window == "fixed" else
            {"type": "sliding", "size_seconds": 120, "period_seconds": 60},
            "dimensions": {"region": {}},
            "privacy": {"unit": "device", "max_reports_per_device": reports, "max_keys_per_device": keys}}
    return parse_config(spec)


def reports(seed, n_devices=40, n_slices=3):
    """``[(slice start, region, token, bits)]``: each device in 1 to 3 regions of a slice, 1 to 3
    reports in each."""
    rng = np.random.default_rng(seed)
    out = []
    for sl in range(n_slices):
        for d in range(n_devices):
            for region in rng.choice(REGIONS, int(rng.integers(1, 4)), replace=False):
                out += [(sl * MIN, str(region), f"t{sl}-{d}", int(rng.integers(8)))
                        for _ in range(int(rng.integers(1, 4)))]
    # each report's event ms (what a device's ranks hash): distinct within its slice
    return [r + (r[0] + i,) for i, r in enumerate(out)]


def _open(cfg, rows):
    agg = cfg.aggregator
    packed = np.array([[b] for _, _, _, b, _ in rows], dtype=np.uint8)
    keys = np.array([client_key(t) for _, _, t, _, _ in rows], dtype=np.uint64)
    return agg.add_devices(agg.create_open(), packed, keys, np.array([ms for *_, ms in rows], dtype=np.int64))


def dims(region):
    return (("region", region),)


def batch(cfg, rows):
    """``({(window, capped key, kind): rows}, reports over the key bound, reports over the device bound)``."""
    agg = cfg.aggregator
    windows, over_keys, over_reports = {}, 0, 0
    for start in sorted({r[0] for r in rows}):
        parts = {dims(g): _open(cfg, [r for r in rows if r[:2] == (start, g)]) for g in REGIONS
                 if any(r[:2] == (start, g) for r in rows)}
        bounded, over = batch_bound_keys(cfg, parts)
        over_keys += over
        for d, acc in bounded.items():
            over_reports += acc.over_bound
            for w in cfg.window.windows_of_slice(start):
                windows.setdefault(w, []).append((start, d, agg.settle(acc) if acc.devices is not None else acc))
    out = {}
    for w, parts in windows.items():
        for key, kinds in batch_window(cfg, w, parts).items():
            out.update({(w, key, kind): list(r) for kind, r in kinds.items() if len(r)})
    return out, over_keys, over_reports


def stream(cfg, rows, seed):
    """The streaming engines fed ``rows`` in a seeded order, in bundles of 1 to 20 reports (a partial
    per key and slice of a bundle), early firings between bundles, each slice's window end passed after
    its reports -> ``(latest pane rows {(window, key, kind): rows}, every pane file, the stream)``."""
    rng = np.random.default_rng(seed)
    s = LocalStream(cfg, rng)
    order = [rows[i] for i in rng.permutation(len(rows))]
    order.sort(key=lambda r: r[0] + int(rng.integers(0, 2)) * MIN // 2)   # slices overlap in arrival
    at, n = 0, 0
    while at < len(order):
        bundle = order[at:at + int(rng.integers(1, 21))]
        at += len(bundle)
        for key in sorted({r[:2] for r in bundle}):
            start = key[0]
            if s.clock.close_us(cfg.window.windows_of_slice(start)[0]) <= s.status.through_us:
                raise AssertionError("the test's watermark passed a slice before its reports")
            s.partial(start, dims(key[1]), _open(cfg, [r for r in bundle if r[:2] == key]), f"p{n}")
            n += 1
        if rng.random() < 0.5:
            s.early()
        s.deliver(everything=False)
        behind = min(r[0] for r in order[at:]) if at < len(order) else None
        if behind is not None and behind > 0:   # every report of the slices before ``behind`` has come
            s.advance(behind * 1000)
    s.advance(END_OF_TIME_US)
    s.deliver()
    if not s.idle():
        raise AssertionError("messages wait for others that never came")
    latest = {}
    for f in s.panes:
        k = (f.window, f.key, f.kind)
        if k not in latest or f.pane > latest[k][0]:
            latest[k] = (f.pane, list(f.rows))
    return {k: r for k, (_, r) in latest.items()}, s.panes, s


def _unpaned(rows):
    return {k: [{c: v for c, v in r.items() if c not in ("pane", "timing")} for r in rs] for k, rs in rows.items()}


# no dimension cap: a streaming window decides its cap from the reports received (before the bounds,
# and at each pane from the values seen so far), batch from the reports kept (docs/design.md)
CASES = [("fixed", 1, 2), ("fixed", 2, 1), ("sliding", 1, 2), ("sliding", 2, 1)]


@pytest.mark.parametrize("window,keys,per_key", CASES)
def test_streaming_publishes_what_batch_publishes_and_counts_the_same(window, keys, per_key):
    cfg = config(window, keys, per_key)
    rows = reports(3)
    want, over_keys, over_reports = batch(cfg, rows)
    assert over_keys > 50 and len(want) >= 9   # the bound binds, and keys publish
    for seed in range(3):
        got, panes, s = stream(cfg, rows, seed)
        assert _unpaned(got) == _unpaned(want), seed
        assert s.over_key_bound == over_keys and s.over_bound == over_reports, seed
        assert s.counted == len(rows) and not s.late


def test_no_pane_publishes_a_report_of_a_slice_before_it_is_sealed():
    """Fixed windows: a window is its one slice, sealed at its close, so its early panes publish nothing
    (the early firings did fire: the same stream under ``unit: report`` publishes early panes)."""
    cfg = config()
    rows = reports(5)
    _, panes, _ = stream(cfg, rows, 1)
    assert panes and all(f.timing != "early" for f in panes)
    # sliding: a window's early panes publish only slices sealed before (the earlier slice)
    cfg = config("sliding")
    _, panes, _ = stream(cfg, rows, 2)
    early = [f for f in panes if f.timing == "early" and f.kind == "marginals"]
    assert early
    for f in early:   # its slices: the sealed one holds at most what is published; the newer one nothing
        assert all(r["n_reports"] <= sum(1 for x in rows if x[0] == f.window[0] and dims(x[1]) == f.key)
                   for r in f.rows)


def test_a_slice_step_holds_per_device_at_most_k_keys_whatever_its_reports():
    """The slice's table after every partial of a chatty device in every key: K pairs a device."""
    bound = 2
    devices = np.arange(50, dtype=np.uint64)
    tables = [key_table(7, k, devices, bound) for k in range(10) for _ in range(20)]   # 200 partials
    merged = merge_key_tables(tables, bound)
    assert merged.size == 50 * bound
    again = merge_key_tables([merge_key_tables(tables[i::3], bound) for i in range(3)], bound)
    assert np.array_equal(again.device, merged.device) and np.array_equal(again.key, merged.key)


def _first_arriving(tables, bound):
    """Mutation: each device keeps the first keys it arrived with, not the smallest key ranks."""
    tables = [t for t in tables if t.size]
    if not tables:
        return slices.KeyTable()
    device = np.concatenate([t.device for t in tables])
    rank = np.concatenate([t.rank for t in tables])
    key = np.concatenate([t.key for t in tables])
    keep, seen = [], {}
    for i, (d, k) in enumerate(zip(device.tolist(), key.tolist())):
        mine = seen.setdefault(d, [])
        if k not in mine and len(mine) < bound:
            mine.append(k)
            keep.append(i)
    keep = np.array(keep, dtype=np.int64)
    order = np.lexsort((key[keep], rank[keep], device[keep]))
    return slices.KeyTable(device[keep][order], rank[keep][order], key[keep][order])


@pytest.mark.parametrize("mutation", ["first arriving keys", "released before the seal", "no wait for the kept devices"])
def test_each_mutation_of_the_streaming_bound_is_caught(mutation, monkeypatch):
    if mutation == "first arriving keys":
        monkeypatch.setattr(slices, "merge_key_tables", _first_arriving)
    elif mutation == "released before the seal":
        monkeypatch.setattr(key_atoms.KeyBoundAtoms, "_releasing", lambda self, cmd: None)
    else:
        monkeypatch.setattr(key_atoms.KeyBoundAtoms, "_ready", lambda self, *a: True)
    caught = []
    for window, keys, per_key in CASES:
        cfg = config(window, keys, per_key)
        rows = reports(3)
        want, over_keys, _ = batch(cfg, rows)
        for seed in range(3):
            try:
                got, _, s = stream(cfg, rows, seed)
            except AssertionError as e:
                caught.append(str(e))
                continue
            caught += [seed] if _unpaned(got) != _unpaned(want) or s.over_key_bound != over_keys else []
    assert caught, mutation


def test_a_partial_of_a_sealed_slice_is_late_though_a_later_window_is_open():
    """Sliding windows: slice 1 is sealed when its first window (0-120 s... its first is 60-120 s) closes;
    a partial of it that comes after is a dead letter, not a change to a choice already published."""
    cfg = config("sliding")
    s = LocalStream(cfg, np.random.default_rng(0))
    rows = [r for r in reports(4) if r[0] == MIN]
    s.partial(MIN, dims("eu"), _open(cfg, rows[:30]), "p0")
    s.advance(2 * MIN * 1000)   # the window 60-120 s closes: slice 1 is sealed; 60-180 s is still open
    s.deliver()
    step = s.partial(MIN, dims("eu"), _open(cfg, rows[30:40]), "p1")
    assert [b.reports for b in step.late] == [10]
    s.advance(END_OF_TIME_US)
    s.deliver()
    assert s.idle() and s.counted == 30
