"""The report unit with device bounds in the streaming publication engine (no Beam): a device keeps its
bottom M of a slice as under the device unit, a pending increment is released on min_reports *reports*
(the device unit releases on devices, tests/transforms/test_device_engine.py), and the reports past the
bound are counted once, when the slice is let go."""
import numpy as np

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, batch_window
from tests.transforms.local_stream import LocalStream
from tests.transforms.test_device_engine import CONFIG, _partial

REPORT = dict(CONFIG, privacy={"max_reports_per_device": 2})   # unit report, M = 2, min_reports = 10


def test_an_increment_of_few_devices_is_released_on_its_reports_and_the_excess_counted():
    """40 reports of 9 devices, M = 2: 18 kept reports (>= 10) of 9 devices (< 10). The report unit
    publishes them (the device unit withholds them), batch and streaming alike, and counts 22 past the bound."""
    cfg = parse_config(REPORT)
    assert (cfg.unit, cfg.counts_devices) == ("report", False)
    rng = np.random.default_rng(2)
    packed = rng.integers(0, 16, (40, 1)).astype(np.uint8)
    keys = np.array([client_key(f"t{i % 9}") for i in range(40)], dtype=np.uint64)
    stream = LocalStream(cfg, np.random.default_rng(7))
    for i, idx in enumerate(np.array_split(np.arange(40), 3)):
        stream.partial(0, (), _partial(cfg, packed[idx], keys[idx], idx.astype(np.int64)).accumulator, f"p{i}")
        stream.deliver()
    assert stream.over_bound == 0   # not before the slice is let go
    stream.advance(END_OF_TIME_US)
    stream.deliver()
    marginals = [r for f in stream.panes if f.kind == "marginals" for r in f.rows]
    assert marginals and {r["n_reports"] for r in marginals} == {18}
    assert not [f for f in stream.panes if f.kind == "withheld"]
    assert stream.over_bound == 40 - 18
    agg = cfg.aggregator
    combined = agg.settle(_partial(cfg, packed, keys, np.arange(40, dtype=np.int64)).accumulator)
    assert batch_window(cfg, (0, 60_000), [(0, (), combined)])[()]["marginals"] == marginals
