"""The consistent tables a window publishes (kind ``consistent_tables``, transforms/publication/rows.py),
checked on the rows themselves: one row per unbiased table cell, non-negative, each group summing to
one, groups agreeing on the features they share, the method the window allows, and intervals that
cover the true cells at their level (seeded)."""
from collections import defaultdict

import numpy as np
import pytest

from ldp_marginals.ldp.randomizer import ClientRandomizer
from ldp_marginals.pipelines.demo import DEMO_CONFIG
from ldp_marginals.pipelines.simulate import simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.rows import window_rows
from tests.stats import assert_coverage
from tests.transforms.test_engine import accumulator

# three groups: os and plan each shared by two of them, one of them simultaneous
SHARED = dict(DEMO_CONFIG, privacy=None, channel={"mechanism": "symmetric", "epsilon": 0.7}, min_reports=0,
              groups=[{"features": ["os", "plan"], "interval": "simultaneous"}, ["os", "dark_mode"],
                      ["plan", "beta_search", "beta_sync"]])
# every feature boolean and every order counted: the joint MLE
BOOLEANS = {"collection": "flags", "features": [{"name": n, "type": "boolean"} for n in "abcd"],
            "channel": {"mechanism": "symmetric", "epsilon": 0.7}, "max_order": 4,
            "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 0,
            "groups": [["a", "b"], ["b", "c", "d"]]}


def _tables(rows):
    """``{(kind, group): [rows]}`` of a window's table rows."""
    out = defaultdict(list)
    for kind, r in rows:
        if kind in ("tables", "consistent_tables"):
            out[kind, tuple(r["group"])].append(r)
    return out


def _marginal(rows, features):
    """A table's marginal on ``features``: ``{values: frequency}``."""
    out = defaultdict(float)
    for r in rows:
        out[tuple(r["cell"][r["group"].index(f)] for f in features)] += r["frequency"]
    return dict(out)


@pytest.mark.parametrize("spec, methods", [(SHARED, {"projection"}), (BOOLEANS, {"joint-em", "joint-mle"})])
def test_consistent_rows_are_valid_tables_of_the_same_cells(spec, methods):
    cfg = parse_config(spec)
    negative = 0
    for seed in range(12):
        tables = _tables(window_rows(cfg, (("region", "eu"),) if "dimensions" in spec else (),
                                     accumulator(cfg, 300, seed), (0, 3_600_000)))
        groups = [tuple(g) for g in cfg.groups]
        for g in groups:
            raw, fixed = tables["tables", g], tables["consistent_tables", g]
            negative += sum(r["frequency"] < 0 for r in raw)
            assert [(r["cell"], r["columns"], r["interval"], r["n_reports"], r["dimensions"], r["window_start"])
                    for r in fixed] == [(r["cell"], r["columns"], r["interval"], r["n_reports"], r["dimensions"],
                                         r["window_start"]) for r in raw]
            assert len({r["method"] for r in fixed}) == 1 and {r["method"] for r in fixed} <= methods
            assert all(0.0 <= r["frequency_low"] <= r["frequency"] <= r["frequency_high"] <= 1.0 for r in fixed)
            assert sum(r["frequency"] for r in fixed) == pytest.approx(1.0, abs=1e-9)
            # the interval is the unbiased one's, clipped to [0, 1], stretched only to hold the estimate
            for a, b in zip(raw, fixed):
                assert b["frequency_low"] == min(min(max(a["frequency_low"], 0.0), 1.0), b["frequency"])
                assert b["frequency_high"] == max(min(max(a["frequency_high"], 0.0), 1.0), b["frequency"])
        for i, g in enumerate(groups):
            for h in groups[i + 1:]:
                shared = [f for f in g if f in h]
                if shared:
                    a = _marginal(tables["consistent_tables", g], shared)
                    b = _marginal(tables["consistent_tables", h], shared)
                    assert a.keys() == b.keys()
                    assert all(a[k] == pytest.approx(b[k], abs=1e-8) for k in a), (g, h, a, b)
    assert negative > 0   # the windows had negative unbiased cells to fix


@pytest.mark.statistical
def test_consistent_intervals_cover_the_true_cells_at_their_level():
    """One population of 400 reports (os=linux with plan=pro rare, so unbiased intervals reach below
    0), randomized 250 times at epsilon 0.7: the consistent rows' intervals of the 20 cells of the
    three groups cover the window's true cells at 95% (binomial band; the simultaneous group's
    intervals hold at least at 95% each, so it is checked apart, one-sided)."""
    cfg = parse_config(SHARED)
    pop = simulate_population(cfg, 400, seed=3, span_seconds=60)
    truth = {}
    for group in cfg.groups:
        from ldp_marginals.ldp.tables import group_cells
        for values, ones, zeros in group_cells(cfg.layout, group):
            hit = pop.true_bits[:, list(ones)].all(axis=1) & (pop.true_bits[:, list(zeros)] == 0).all(axis=1)
            truth[tuple(group), values] = hit.mean()
    per_cell, simultaneous, clipped = [], [], 0
    for rep in range(250):
        noisy = ClientRandomizer(cfg.layout, cfg.channels, np.random.default_rng(1000 + rep)).randomize_many(pop.true_bits)
        acc = cfg.aggregator.add_packed(cfg.aggregator.create(), noisy)
        for kind, r in window_rows(cfg, (), acc, (0, 3_600_000)):
            if kind == "tables":
                clipped += r["frequency_low"] < 0
            if kind != "consistent_tables":
                continue
            t = truth[tuple(r["group"]), tuple(r["cell"])]
            hit = r["frequency_low"] <= t <= r["frequency_high"]
            (simultaneous if r["interval"] == "simultaneous" else per_cell).append(hit)
    assert clipped > 100   # the clipping was exercised
    assert_coverage(per_cell, 0.95)
    assert np.mean(simultaneous) >= 0.95 - 4.9 * np.sqrt(0.95 * 0.05 / len(simultaneous))
