"""Simultaneous intervals of a table: Sidak's per-cell level makes all cells hold together at the
level (seeded simulation of joint coverage), where per-cell intervals do not."""
import numpy as np
import pytest

from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.intervals import sidak_level
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.tables import group_table
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.schemas.config import parse_config
from tests.configs import SMALL_CONFIG
from tests.stats import Z


@pytest.mark.statistical
def test_sidak_intervals_cover_the_whole_table_at_the_level():
    cfg = parse_config(dict(SMALL_CONFIG, groups=[{"features": ["os", "dark"], "interval": "simultaneous"}]))
    assert cfg.group_intervals == ("simultaneous",)
    rng = np.random.default_rng(8)
    n, windows, level = 5000, 600, 0.95
    joint_sidak, joint_cell = [], []
    for _ in range(windows):
        os_value = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
        truth = np.zeros((n, cfg.layout.n_bits), dtype=np.uint8)
        truth[:, 0] = rng.random(n) < np.where(os_value == 0, 0.6, 0.3)      # dark depends on os
        truth[np.arange(n), 1 + os_value] = 1
        truth[:, 4:] = rng.random((n, 2)) < 0.5
        est = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_bits(randomize_bits(truth, cfg.channels, rng)),
                            cfg.channels, exclusive_groups=cfg.layout.exclusive_groups)
        table = group_table(est, cfg.layout, ("os", "dark"))
        exact = group_table(estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_bits(truth),
                                          _noiseless(cfg), exclusive_groups=cfg.layout.exclusive_groups),
                            cfg.layout, ("os", "dark")).estimate
        m = len(table.cells)
        for level_used, out in ((sidak_level(level, m), joint_sidak), (level, joint_cell)):
            low, high = table.intervals(level_used)
            out.append(bool(np.all((low <= exact) & (exact <= high))))
    rate, se = np.mean(joint_sidak), np.sqrt(level * (1 - level) / windows)
    assert rate >= level - Z * se, rate            # simultaneous: at least the level (Sidak is conservative)
    assert np.mean(joint_cell) < rate              # per-cell intervals hold jointly less often


@pytest.mark.statistical
def test_simultaneous_marginals_cover_every_published_set_at_once():
    """``marginal_interval: simultaneous``: the job's marginal rows of a window hold together at the
    level (every published set's interval covers its true count), per-set intervals do not."""
    from ldp_marginals.transforms.publication.rows import base_row, marginal_rows
    joint = parse_config(dict(SMALL_CONFIG, marginal_interval="simultaneous"))
    alone = parse_config(SMALL_CONFIG)
    rng = np.random.default_rng(21)
    n, windows, level = 4000, 400, joint.level
    covered = {"simultaneous": [], "per_cell": []}
    for _ in range(windows):
        os_value = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
        truth = np.zeros((n, joint.layout.n_bits), dtype=np.uint8)
        truth[:, 0] = rng.random(n) < np.where(os_value == 0, 0.6, 0.3)
        truth[np.arange(n), 1 + os_value] = 1
        truth[:, 4:] = rng.random((n, 2)) < 0.4
        exact = CooccurrenceAccumulator(joint.family).add_bits(truth).counts
        est = estimate_tmdh(CooccurrenceAccumulator(joint.family).add_bits(randomize_bits(truth, joint.channels, rng)),
                            joint.channels, exclusive_groups=joint.layout.exclusive_groups)
        for cfg in (joint, alone):
            rows = marginal_rows(cfg, est, dict(base_row(cfg.name, (0, 3_600_000), ()), n_reports=est.n))
            assert {r["interval"] for r in rows} == {cfg.marginal_interval}
            covered[cfg.marginal_interval].append(all(
                r["ci_low"] <= exact[joint.family.index(tuple(r["columns"]))] <= r["ci_high"] for r in rows))
    se = np.sqrt(level * (1 - level) / windows)
    assert np.mean(covered["simultaneous"]) >= level - Z * se, np.mean(covered["simultaneous"])
    assert np.mean(covered["per_cell"]) < level - Z * se   # ~20 sets: per-set intervals rarely all hold


def _noiseless(cfg):
    from ldp_marginals.ldp.channels import Channel, ChannelSet
    return ChannelSet(tuple(Channel(0.0, 1.0) for _ in range(cfg.layout.n_bits)))


def test_sidak_level_and_its_errors():
    assert sidak_level(0.95, 1) == 0.95 and sidak_level(0.95, 6) == pytest.approx(0.95 ** (1 / 6))
    with pytest.raises(ValueError, match="m must be >= 1"):
        sidak_level(0.95, 0)
    with pytest.raises(ValueError, match="groups\\[0\\].interval must be one of"):
        parse_config(dict(SMALL_CONFIG, groups=[{"features": ["os"], "interval": "joint"}]))
