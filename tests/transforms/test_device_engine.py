"""The device bound in the publication engine (no Beam): streaming partials of one slice stay open
while pending and keep each device's bottom M over all of them, through the state's bytes; a pending
increment is released on min_reports *devices*, and a released atom is settled (its windows' sums are
plain sums of atoms). Batch and streaming publish the same rows when every report is on time."""
import numpy as np

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, PENDING, batch_window
from ldp_marginals.transforms.source import Partial
from tests.transforms.local_stream import LocalStream

CONFIG = {"collection": "dev", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c", "d")],
          "channel": {"mechanism": "symmetric", "flip": 0.2}, "max_order": 2,
          "window": {"type": "fixed", "size_seconds": 60}, "min_reports": 10,
          "privacy": {"unit": "device", "max_reports_per_device": 2}}


def _batches(seed, devices=12, chatty=200, n_batches=6):
    """Reports of ``devices`` devices (1 to 4 each) and one chatty device, cut into bundles."""
    rng = np.random.default_rng(seed)
    tokens = [f"d{seed}-{i}" for i in range(devices) for _ in range(int(rng.integers(1, 5)))] + ["chatty"] * chatty
    keys = np.array([client_key(t) for t in tokens], dtype=np.uint64)
    packed = rng.integers(0, 16, (keys.size, 1)).astype(np.uint8)
    event_ms = np.arange(keys.size, dtype=np.int64) * 7   # each report's time (what its rank hashes)
    order = rng.permutation(keys.size)
    return [(packed[idx], keys[idx], event_ms[idx]) for idx in np.array_split(order, n_batches)]


def _partial(cfg, packed, keys, event_ms=None):
    agg = cfg.aggregator
    event_ms = np.arange(keys.size, dtype=np.int64) if event_ms is None else event_ms
    return Partial(cfg.name, (), agg.add_devices(agg.create_open(), packed, keys, event_ms))


def _streaming(cfg, batches, now_us=END_OF_TIME_US):
    """The streaming engines (every message and the keys' entries through their state's bytes, as
    Flink keeps them) fed ``batches`` as partials of slice 0, then the watermark at ``now_us`` ->
    ``(pane files, the key's entries)``."""
    stream = LocalStream(cfg, np.random.default_rng(7))
    for i, (packed, keys, event_ms) in enumerate(batches):
        stream.partial(0, (), _partial(cfg, packed, keys, event_ms).accumulator, f"p{i}")
        stream.deliver()
    stream.advance(now_us)
    stream.deliver()
    return stream.panes, stream.keys[()][3]


def test_streaming_bundles_keep_the_bottom_m_of_the_slice_and_equal_batch():
    cfg = parse_config(CONFIG)
    agg = cfg.aggregator
    batches = _batches(1)
    combined = agg.settle(agg.merge([agg.create_open()] + [_partial(cfg, *b).accumulator for b in batches]))
    assert combined.n == sum(min(2, c) for c in np.unique(np.concatenate([k for _, k, _ in batches]),
                                                          return_counts=True)[1])
    batch = batch_window(cfg, (0, 60_000), [(0, (), combined)])[()]
    panes, _ = _streaming(cfg, batches[::-1])
    streaming = {f.kind: f.rows for f in panes}
    assert streaming["marginals"] and streaming["marginals"] == batch["marginals"]
    assert all(r["n_reports"] == combined.n for r in streaming["marginals"])


def test_release_counts_devices_and_a_released_atom_is_settled():
    cfg = parse_config(CONFIG)
    rng = np.random.default_rng(2)
    few = [(rng.integers(0, 16, (40, 1)).astype(np.uint8),
            np.array([client_key(f"t{i % 9}") for i in range(40)], dtype=np.uint64),
            np.arange(40, dtype=np.int64))]   # 40 reports, 9 devices
    panes, bag = _streaming(cfg, few)
    assert not [f for f in panes if f.kind == "marginals"]
    (held,) = [r for f in panes if f.kind == "withheld" for r in f.rows]
    assert held["n_reports"] == 18 and all(e.atom == PENDING for e in bag)
    more = few + [(rng.integers(0, 16, (1, 1)).astype(np.uint8), np.array([client_key("t9")], dtype=np.uint64),
                   np.array([40], dtype=np.int64))]
    late = parse_config(dict(CONFIG, allowed_lateness_seconds=30))   # on time, the window stays open
    panes, bag = _streaming(late, more, now_us=60_000 * 1000)
    assert {r["n_reports"] for f in panes if f.kind == "marginals" for r in f.rows} == {19}
    assert [e.atom for e in bag] == [0] and bag[0].acc.devices is None and bag[0].acc.n_devices == 10


def test_streaming_counts_the_reports_past_the_bound_once_when_the_slice_is_let_go():
    """Every report the engine received and did not keep, in a released increment, in one cut by what
    the slice's released ones hold (an early pane), or in what is held back, is counted once, when its
    slice's last window closes: the batch count when no pane came early."""
    cfg = parse_config(dict(CONFIG, early_firing_seconds=5))
    batches = _batches(3, devices=30)
    received = sum(k.size for _, k, _ in batches)
    agg = cfg.aggregator
    combined = agg.settle(agg.merge([agg.create_open()] + [_partial(cfg, *b).accumulator for b in batches]))
    for early in (None, 1, 3):
        stream = LocalStream(cfg, np.random.default_rng(5))
        for i, (packed, keys, event_ms) in enumerate(batches):
            stream.partial(0, (), _partial(cfg, packed, keys, event_ms).accumulator, f"p{i}")
            stream.deliver()
            if i == early:
                stream.early()
                stream.deliver()
        assert stream.over_bound == 0   # not before the slice is let go
        stream.advance(END_OF_TIME_US)
        stream.deliver()
        final = max(f.pane for f in stream.panes if f.kind == "marginals")
        published = {r["n_reports"] for f in stream.panes if f.kind == "marginals" and f.pane == final
                     for r in f.rows}
        held = sum(r["n_reports"] for f in stream.panes if f.kind == "withheld" for r in f.rows)
        assert len(published) == 1 and stream.over_bound == received - published.pop() - held
        if early is None:
            assert stream.over_bound == combined.over_bound
        else:   # an early pane released reports, the rest in a second atom
            assert final > 0
    rng = np.random.default_rng(2)   # 40 reports of 9 devices: held back, 18 kept, 22 past the bound
    stream = LocalStream(cfg, rng)
    stream.partial(0, (), _partial(cfg, rng.integers(0, 16, (40, 1)).astype(np.uint8), np.array(
        [client_key(f"t{i % 9}") for i in range(40)], dtype=np.uint64)).accumulator, "p")
    stream.advance(END_OF_TIME_US)
    stream.deliver()
    assert [r["n_reports"] for f in stream.panes if f.kind == "withheld" for r in f.rows] == [18]
    assert stream.over_bound == 22
