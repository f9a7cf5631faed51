"""Intervals stay honest under the device unit: with memoized channels a device's reports in a window
share its permanent responses, and the rows' variances carry ``repeat_variance`` with
``s = k * M - 1`` (docs/client.md section 8). Seeded coverage through the engine's rows: devices that
each send M memoized reports per window; nominal coverage with the correction, visibly less without."""
import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.memoized import randomize_repeats
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.rows import window_rows
from tests.stats import assert_coverage

M = 8
CONFIG = {"collection": "mem", "features": [{"name": n, "type": "boolean"} for n in ("a", "b", "c")],
          "channel": {"a": {"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75, "memoize": True},
                      "b": {"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75, "memoize": True},
                      "c": {"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75}},
          "max_order": 2, "window": {"type": "fixed", "size_seconds": 60}, "min_reports": 1,
          "privacy": {"unit": "device", "max_reports_per_device": M}}
DEVICES, WINDOWS = 200, 1500


def _coverage(cfg, seed=38):
    rng = np.random.default_rng(seed)
    keys = np.array([client_key(f"d{i}") for i in range(DEVICES)], dtype=np.uint64)
    covered = {}
    agg = cfg.aggregator
    for _ in range(WINDOWS):
        truth = (rng.random((DEVICES, 3)) < [0.3, 0.5, 0.7]).astype(np.uint8)
        noisy, owner = randomize_repeats(truth, np.full(DEVICES, M), cfg.client_channels, rng)
        acc = agg.settle(agg.add_devices(agg.create_open(), pack_bits(noisy), keys[owner],
                                         np.arange(owner.size, dtype=np.int64)))
        assert acc.n == DEVICES * M   # the bound keeps every report here
        for kind, row in window_rows(cfg, (), acc, (0, 60_000)):
            if kind != "marginals":
                continue
            cols = row["columns"]
            t = M * int(truth[:, cols].all(axis=1).sum())
            covered.setdefault(tuple(cols), []).append(row["ci_low"] <= t <= row["ci_high"])
    return covered


@pytest.mark.statistical
def test_memoized_reports_of_a_device_get_nominal_coverage_with_the_correction():
    cfg = parse_config(CONFIG)
    assert cfg.shared_reports == M - 1
    covered = _coverage(cfg)
    for cols, hits in covered.items():   # s = M - 1 is exact here: every device sends M
        assert_coverage(hits, cfg.level)
    # the bit that does not memoize is untouched by the correction (its c(x) is 0)
    assert set(covered) >= {(0,), (1,), (2,), (0, 1)}


@pytest.mark.statistical
def test_without_the_correction_the_memoized_bits_under_cover():
    cfg = parse_config(CONFIG)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(cfg), "shared_reports", property(lambda self: 0))
        covered = _coverage(cfg)
    with pytest.raises(AssertionError):
        assert_coverage(covered[(0,)] + covered[(1,)], cfg.level)
