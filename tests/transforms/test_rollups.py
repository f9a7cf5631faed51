"""Complementary suppression over rollups (``transforms/publication/rollups.py``): the published rows'
span holds no nonzero vector on cells of fewer than ``min_reports`` reports, checked by brute force
over every such set of cells on random grids, for the exact search (``suppress``) and for the rule the
job runs (``nested``); and the batch engine's rollup rows (``engine.batch_window``): a rollup is
published where small keys are withheld, key rows are the same with rollups as without."""
import itertools

import numpy as np
import pytest

from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.engine import batch_window, rollup_rows
from ldp_marginals.transforms.publication.rollups import is_rollup, nested, published_rollups, rows_of, suppress

ROLLUPS = [("region",), ("version",), ()]


def grid(counts: dict) -> dict:
    """``{(region, version): n}`` -> cells keyed by sorted ``(name, value)`` pairs."""
    return {(("region", r), ("version", v)): n for (r, v), n in counts.items()}


def smallest_isolated(cells: dict, rows: list) -> int | None:
    """The fewest reports of a set of cells that some nonzero vector of the rows' span lies on (None:
    no vector lies on fewer than all cells), by every subset: ``dim(V n W_T) = rank(R) - rank(R
    without T's columns)``."""
    order = sorted(cells)
    if not rows:
        return None
    matrix = np.array([[1.0 if c in row else 0.0 for c in order] for row in rows])
    rank = np.linalg.matrix_rank(matrix)
    best = None
    for size in range(1, len(order) + 1):
        for t in itertools.combinations(range(len(order)), size):
            rest = [i for i in range(len(order)) if i not in t]
            if rank - (np.linalg.matrix_rank(matrix[:, rest]) if rest else 0) > 0:
                weight = sum(cells[order[i]] for i in t)
                best = weight if best is None else min(best, weight)
    return best


def test_random_grids_keep_the_promise_by_every_set_of_cells():
    rng = np.random.default_rng(37)
    for _ in range(120):
        regions, versions = rng.integers(1, 4), rng.integers(1, 4)
        counts = {(f"r{i}", f"v{j}"): int(rng.choice([rng.integers(1, 30), rng.integers(30, 120)]))
                  for i in range(regions) for j in range(versions)}
        cells = grid(counts)
        rollups = [r for r in ROLLUPS if rng.random() < 0.7]
        published = suppress(cells, rollups, 50)
        rows = rows_of(cells, rollups)
        least = smallest_isolated(cells, [rows[r] for r in published])
        assert least is None or least >= 50, (counts, rollups, sorted(published))
        # nothing below the guard is published as it is
        assert all(sum(cells[c] for c in rows[r]) >= 50 for r in published)


def test_a_rollup_is_published_where_a_small_key_is_withheld_with_one_more_key():
    cells = grid({("eu", "1"): 10, ("eu", "2"): 100, ("eu", "3"): 120, ("us", "1"): 200})
    published = suppress(cells, [("region",)], 50)
    eu = ("rollup", ("region",), (("region", "eu"),))
    assert eu in published
    keys = {r[1] for r in published if r[0] == "key"}
    # eu, 1 is withheld, and so is eu, 2 (the smallest of eu's): eu minus its published keys holds 110
    assert keys == {(("region", "eu"), ("version", "3")), (("region", "us"), ("version", "1"))}


@pytest.mark.parametrize("min_reports", [45, 50])   # 50: rows of exactly min_reports are published
def test_crossed_rollups_are_suppressed_where_each_rollup_alone_looks_safe(min_reports):
    # every rollup row and every rollup minus its published keys holds 50, but eu - v2 = (eu,1) - (us,2)
    # holds 20 reports
    cells = grid({("eu", "1"): 10, ("eu", "2"): 40, ("us", "1"): 40, ("us", "2"): 10})
    rows = rows_of(cells, [("region",), ("version",)])
    assert smallest_isolated(cells, [rows[r] for r in rows if r[0] == "rollup"]) == 20
    published = suppress(cells, [("region",), ("version",)], min_reports)
    # one direction of rollups stays (its two rows hold 50 each and share no cell)
    assert published == {("rollup", ("version",), (("version", "1"),)), ("rollup", ("version",), (("version", "2"),))}
    assert smallest_isolated(cells, [rows[r] for r in published]) == 50


@pytest.mark.parametrize("small", [5, 40])   # 40 small keys: more than EXACT_CELLS, merged as one
def test_a_rollup_of_small_keys_only_is_published_and_none_of_its_keys(small):
    cells = grid({("eu", str(i)): 15 for i in range(small)} | {("us", "1"): 80})
    published = suppress(cells, [("region",), ()], 50)
    assert published == {("key", (("region", "us"), ("version", "1"))), ("rollup", (), ()),
                         ("rollup", ("region",), (("region", "eu"),)), ("rollup", ("region",), (("region", "us"),))}


@pytest.mark.parametrize("rollups", [[], [("region",)]])
def test_without_small_keys_or_rollups_every_key_of_min_reports_is_published(rollups):
    cells = grid({("eu", "1"): 60, ("eu", "2"): 10, ("us", "1"): 70})
    published = suppress(cells, [], 50)
    assert published == {("key", c) for c, n in cells.items() if n >= 50}
    cells = grid({("eu", "1"): 60, ("eu", "2"): 55, ("us", "1"): 70})
    assert {r for r in suppress(cells, rollups, 50) if r[0] == "key"} == {("key", c) for c in cells}


def test_light_keys_that_only_differ_together_by_min_reports_leave_the_rollups_published():
    # (eu,1) and (us,2) are light and apart in the rows, but every combination of the four rollups on
    # them is (eu,1) - (us,2): 25 + 25 reports, exactly min_reports. The heavy keys go (each would
    # isolate a light one: eu - (eu,2) = (eu,1)), the rollups stay.
    cells = grid({("eu", "1"): 25, ("eu", "2"): 100, ("us", "1"): 100, ("us", "2"): 25})
    rollups = [("region",), ("version",)]
    published = suppress(cells, rollups, 50)
    assert published == {r for r in rows_of(cells, rollups) if r[0] == "rollup"}
    rows = rows_of(cells, rollups)
    assert smallest_isolated(cells, [rows[r] for r in published]) == 50


# -- the publication's rollups (engine.batch_window, rollups.published_rollups) ---------------------------

def config(rollups=None, min_reports=45):
    spec = {"collection": "g", "features": [{"name": "a", "type": "boolean"}, {"name": "b", "type": "boolean"}],
            "channel": {"p": 0.25, "q": 0.75}, "max_order": 2, "window": {"type": "fixed", "size_seconds": 60},
            "min_reports": min_reports, "dimensions": {"region": {}, "version": {"max_values": 3}}}
    if rollups is not None:
        spec["rollups"] = rollups
    return parse_config(spec)


def window_of(cfg, counts: dict, seed: int = 0) -> list:
    """``[(slice start, dims, accumulator)]`` of one window, ``{(region, version): reports}``."""
    rng = np.random.default_rng(seed)
    out = []
    for (r, v), n in sorted(counts.items()):
        packed = rng.integers(0, 4, size=(n, cfg.layout.n_bytes)).astype(np.uint8)
        out.append((0, (("region", r), ("version", v)), cfg.aggregator.add_packed(cfg.aggregator.create(), packed)))
    return out


W = (0, 60_000)
ALL = "__all__"


def test_without_rollups_a_collection_publishes_its_keys_exactly_as_with_them():
    counts = {("eu", "1"): 10, ("eu", "2"): 40, ("eu", "3"): 90, ("us", "1"): 40, ("us", "2"): 10, ("us", "4"): 5}
    plain = batch_window(config(), W, window_of(config(), counts))
    rolled = batch_window(config("all"), W, window_of(config("all"), counts))
    assert not any(is_rollup(k) for k in plain)
    assert any(is_rollup(k) for k in rolled)   # the cap (3 versions) puts version 4 under __other__
    assert (("region", "us"), ("version", "__other__")) in plain
    assert {k: repr(v) for k, v in rolled.items() if not is_rollup(k)} == {k: repr(v) for k, v in plain.items()}


def test_a_rollup_row_sums_its_keys_released_and_withheld_reports():
    # eu's many small versions are each withheld, together they hold 60 reports: eu is published whole
    counts = {("eu", str(v)): 12 for v in range(5)} | {("eu", "big"): 100, ("us", "1"): 80}
    cfg = config([["region"]])
    slices = window_of(cfg, counts)
    out = batch_window(cfg, W, slices)
    eu = out[(("region", "eu"), ("version", ALL))]
    (row,) = [r for r in eu["marginals"] if r["columns"] == [0, 1]]
    whole = cfg.aggregator.merge([cfg.aggregator.create()] + [a for _, d, a in slices if dict(d)["region"] == "eu"])
    (want,) = [r for r in rollup_rows(cfg, W, (("region", "eu"), ("version", ALL)), whole)["marginals"]
               if r["columns"] == [0, 1]]
    assert row["n_reports"] == 160 and row == want
    assert not eu["withheld"] and not any(len(eu[k]) for k in ("extremes",))
    assert (("region", "us"), ("version", ALL)) in out   # us holds nothing withheld: a sum of its published key


def test_crossed_rollups_publish_one_direction_where_the_other_would_isolate_a_difference():
    # every key is withheld (below 45); regions and versions each hold 50, but eu - v2 = (eu,1) - (us,2)
    counts = {("eu", "1"): 10, ("eu", "2"): 40, ("us", "1"): 40, ("us", "2"): 10}
    out = batch_window(config("all"), W, window_of(config("all"), counts))
    published = {k for k, kinds in out.items() if len(kinds["marginals"])}
    # the rollup listed first (all: region before version) is published; the versions cross it
    assert published == {(("region", "eu"), ("version", ALL)), (("region", "us"), ("version", ALL)),
                         (("region", ALL), ("version", ALL))}
    cfg = config([["version"], ["region"], []])
    out = batch_window(cfg, W, window_of(cfg, counts))
    assert {k for k, kinds in out.items() if len(kinds["marginals"])} == {
        (("region", ALL), ("version", "1")), (("region", ALL), ("version", "2")), (("region", ALL), ("version", ALL))}
    assert published_rollups(config([["region"]]), {c: n for c, n in grid_keys(counts).items()}) == {
        (("region", "eu"), ("version", ALL)), (("region", "us"), ("version", ALL))}   # alone, regions are safe


def grid_keys(counts: dict) -> dict:
    return {(("region", r), ("version", v)): n for (r, v), n in counts.items()}


def test_a_rollup_over_a_small_withheld_part_is_withheld_and_its_keys_stay():
    # eu withholds 10 reports (version 1): eu minus its published keys would be those 10
    counts = {("eu", "1"): 10, ("eu", "2"): 100, ("us", "1"): 200}
    out = batch_window(config([["region"], []]), W, window_of(config([["region"], []]), counts))
    assert (("region", "eu"), ("version", ALL)) not in out and (("region", ALL), ("version", ALL)) not in out
    assert (("region", "us"), ("version", ALL)) in out
    assert len(out[(("region", "eu"), ("version", "2"))]["marginals"]) and out[(("region", "eu"), ("version", "1"))][
        "withheld"]


def test_nested_rows_keep_the_promise_by_every_set_of_cells():
    """:func:`nested`, the rule the job runs, on random grids with every rollup: no nonzero combination
    of the rows it publishes lies on cells of fewer than min_reports reports (brute force), and it
    publishes rows holding small cells."""
    rng = np.random.default_rng(38)
    useful = 0
    for _ in range(150):
        regions, versions = rng.integers(1, 4), rng.integers(1, 5)
        counts = {(f"r{i}", f"v{j}"): int(rng.integers(1, 40)) for i in range(regions) for j in range(versions)}
        cells = grid(counts)
        rollups = [r for r in ROLLUPS if rng.random() < 0.8]
        rows = {r: m for r, m in rows_of(cells, rollups).items() if r[0] == "rollup"}
        order = [r for r in sorted(rows, key=repr)]
        rng.shuffle(order)
        published = nested(cells, {r: rows[r] for r in order}, 50)
        least = smallest_isolated(cells, [rows[r] for r in published])
        assert least is None or least >= 50, (counts, rollups, sorted(published))
        useful += bool(published)
    assert useful > 50, useful


def test_nested_rows_publish_rows_that_nest_and_not_rows_that_cross():
    cells = grid({("eu", "1"): 30, ("eu", "2"): 30, ("us", "1"): 30, ("us", "2"): 30})
    rows = {r: m for r, m in rows_of(cells, [(), ("region",), ("version",)]).items() if r[0] == "rollup"}
    order = [("rollup", ("region",), (("region", "eu"),)), ("rollup", ("region",), (("region", "us"),)),
             ("rollup", ("version",), (("version", "1"),)), ("rollup", (), ())]
    # every region and version holds 60, but a version crosses both regions: the total nests around them
    assert nested(cells, {r: rows[r] for r in order}, 50) == {order[0], order[1], order[3]}
    # a total whose own part (outside eu) would be us's 20 reports is not published, nor eu inside it
    cells = grid({("eu", "1"): 30, ("eu", "2"): 30, ("us", "1"): 20})
    rows = {r: m for r, m in rows_of(cells, [(), ("region",)]).items() if r[0] == "rollup"}
    assert nested(cells, {r: rows[r] for r in (order[0], order[3])}, 50) == {order[0]}
    assert nested(cells, {r: rows[r] for r in (order[3], order[0])}, 50) == {order[3]}
