"""The demo's collection with rollups: reports keyed by region and app version, published per key
where a key holds ``min_reports``, and per region over every version and for the whole window
(``rollups: [[region], []]``) where complementary suppression allows: a region is published even where
each of its versions is too small, and not where what it withholds could be singled out."""
from __future__ import annotations

import os

import numpy as np

from ldp_marginals.pipelines.simulate import simulate_population, true_counts, write_population

ALL = "__all__"
ROLLUP_CONFIG = {
    "collection": "demo_versions",
    "features": [{"name": "dark_mode", "type": "boolean"}, {"name": "beta_sync", "type": "boolean"}],
    "channel": {"mechanism": "symmetric", "epsilon": 2.0},
    "max_order": 1,
    "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 500,
    "dimensions": {"region": {"max_values": 10}, "app_version": {"max_values": 10}},
    "rollups": [["region"], []],   # per region over every app version, and the window's total
}
REGIONS = {"eu": 0.55, "us": 0.45}
VERSIONS = {"3.0": 0.55, "2.9": 0.2, "2.8": 0.15, "2.7": 0.1}


def write_rollup_reports(cfg, folder: str, reports: int, start_ms: int, hours: int = 4, seed: int = 7) -> dict:
    """Reports of every region and version over ``hours`` hourly windows (one Avro file per key); returns
    the truth ``{(dimensions, window start, set): count}`` of every key, region rollup and total, and how
    many reports were written."""
    truth, written = {}, 0
    for i, (region, r_share) in enumerate(REGIONS.items()):
        for j, (version, v_share) in enumerate(VERSIONS.items()):
            n = max(1, int(reports * r_share * v_share))
            written += n
            pop = simulate_population(cfg, n, seed=seed + 100 * i + j, start_ms=start_ms, span_seconds=hours * 3600)
            dims = {"region": region, "app_version": version}
            write_population(cfg, pop, os.path.join(folder, f"reports-versions-{region}-{version}.avro"), dimensions=dims)
            for w in true_counts(cfg, pop):
                for s, c in zip(w["sets"], w["counts"]):
                    for key in (dims, {"region": region, "app_version": ALL}, {"region": ALL, "app_version": ALL}):
                        at = (tuple(sorted(key.items())), w["window_start"], tuple(s))
                        truth[at] = truth.get(at, 0) + c
    return {"truth": truth, "reports": written}


def print_rollups(cfg, rows: list, withheld: list, truth: dict) -> dict:
    """The first window's per-region totals (rollup rows) beside the truth, with what their keys withhold,
    and how many rollup rows complementary suppression published."""
    mine = [r for r in rows if r["collection"] == cfg.name]
    rolled = [r for r in mine if ALL in r["dimensions"].values()]
    first = min(r["window_start"] for r in mine)
    held = {}
    for r in withheld:
        if r["collection"] == cfg.name and r["window_start"] == first and r["statistic"] == "all":
            held[r["dimensions"]["region"]] = held.get(r["dimensions"]["region"], 0) + r["n_reports"]
    print(f"\nper-region totals over every app version (collection {cfg.name}, rollups [[region], []], "
          f"min_reports={cfg.min_reports}), first window, bit dark_mode:")
    print(f"{'region':<10}{'reports':>9}{'of them withheld by their keys':>32}{'estimate':>10}{'truth':>8}"
          f"{'ci_low':>10}{'ci_high':>10}")
    for r in sorted((r for r in rolled if r["window_start"] == first and r["columns"] == [0]),
                    key=lambda r: r["dimensions"]["region"]):
        region = r["dimensions"]["region"]
        t = truth[(tuple(sorted(r["dimensions"].items())), first, (0,))]
        inside = sum(held.values()) if region == ALL else held.get(region, 0)
        print(f"{'all' if region == ALL else region:<10}{r['n_reports']:>9,}{inside:>32,}{r['estimate']:>10.0f}{t:>8}"
              f"{r['ci_low']:>10.0f}{r['ci_high']:>10.0f}")
    covered = [r["ci_low"] <= truth[(tuple(sorted(r["dimensions"].items())), r["window_start"], tuple(r["columns"]))]
               <= r["ci_high"] for r in mine]
    windows = len({r["window_start"] for r in mine})
    published = len({(r["window_start"], tuple(sorted(r["dimensions"].items()))) for r in rolled})
    print(f"{published} rollup rows published over {windows} windows (a region whose withheld versions hold "
          f"fewer than {cfg.min_reports} reports is withheld); {sum(covered)} of {len(covered)} estimates of the "
          "collection cover the truth")
    return {"rollup_rows": published, "coverage": float(np.mean(covered)) if covered else float("nan")}
