"""``ldp-marginals demo``: simulate a population with the embedded default config, run the job on
the DirectRunner, write the outputs and print estimates beside the truth (and, for a collection keyed
by region and app version, the per-region totals its rollups publish)."""
from __future__ import annotations

import argparse
import glob
import json
import os
import time

import numpy as np
import yaml

from ldp_marginals import schemas
from ldp_marginals.pipelines import compare
from ldp_marginals.pipelines.dashboard import export
from ldp_marginals.pipelines.demo_devices import DEVICE_CONFIG, print_devices, write_device_reports
from ldp_marginals.pipelines.demo_rollups import ROLLUP_CONFIG, print_rollups, write_rollup_reports
from ldp_marginals.pipelines.run import run
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS, simulate_population, true_counts, write_population
from ldp_marginals.schemas.config import parse_config

DEMO_CONFIG = {
    "collection": "demo_app",
    "features": [
        {"name": "dark_mode", "type": "boolean"},
        {"name": "os", "type": "categorical", "values": ["mac", "win", "linux"]},
        {"name": "plan", "type": "categorical", "values": ["free", "pro"]},
        {"name": "beta_search", "type": "boolean"},
        {"name": "beta_sync", "type": "boolean"},
        {"name": "notifications", "type": "boolean"},
        # one bit on the wire: 1 with probability minutes / 120 (Ding et al.'s 1-bit mean encoding)
        {"name": "session_minutes", "type": "numeric", "low": 0, "high": 120},
    ],
    "channel": {"mechanism": "symmetric", "epsilon": 2.0},
    # the promise, checked at start: these channels make a whole report 18-LDP (2 per boolean or numeric
    # feature, 4 per categorical). A sufficient-DP promise would need far more reports per window than
    # the demo has (calibrate)
    "privacy": {"model": "local", "epsilon": 18},
    "max_order": 2,
    "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 2000,
    "groups": [{"features": ["os", "plan"], "interval": "simultaneous"}],   # 6 cells' intervals hold together
    "dimensions": {"region": {"max_values": 10}},
    "level": 0.95,
    "conditionals": [{"of": ["beta_search"], "given": ["plan=pro"]}],   # P(beta_search | plan=pro) per window
    "means": [{"of": "session_minutes", "by": ["plan"]}],   # mean minutes, overall and per plan, per window
    "extremes": [
        {"name": "any_beta", "op": "or", "features": ["beta_search", "beta_sync"]},
        {"name": "all_betas", "op": "and", "features": ["beta_search", "beta_sync"]},
    ],
}


def _step(message: str):
    print(f"[demo] {message}", flush=True)


def main(out_dir: str, reports: int = 60_000, seed: int = 7) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    config_path = os.path.join(out_dir, "demo_config.yaml")
    with open(config_path, "w") as fh:
        yaml.safe_dump([DEMO_CONFIG, DEVICE_CONFIG, ROLLUP_CONFIG], fh, sort_keys=False)
    cfg = parse_config(DEMO_CONFIG)
    dev_cfg = parse_config(DEVICE_CONFIG)
    roll_cfg = parse_config(ROLLUP_CONFIG)
    t0 = time.time()
    _step(f"simulating {reports:,} reports from two regions over 4 hourly windows, plus 500 in a fifth "
          "(below min_reports)")
    reports_dir = os.path.join(out_dir, "reports")
    os.makedirs(reports_dir, exist_ok=True)
    truth = {}  # (dimensions, window start, set) -> true count; (dimensions, window start, feature, given) -> mean
    sizes = {"eu": reports * 11 // 20, "us": reports - reports * 11 // 20}
    for i, (region, size) in enumerate(sizes.items()):
        pop = simulate_population(cfg, size, seed=seed + 10 * i, start_ms=DEFAULT_START_MS, span_seconds=4 * 3600)
        write_population(cfg, pop, os.path.join(reports_dir, f"reports-{region}.avro"), dimensions={"region": region})
        for w in true_counts(cfg, pop):
            for s, c in zip(w["sets"], w["counts"]):
                truth[((("region", region),), w["window_start"], tuple(s))] = c
            for m in w["means"]:
                truth[((("region", region),), w["window_start"], m["feature"], tuple(m["given"]))] = m["mean"]
    small = simulate_population(cfg, 500, seed=seed + 1, start_ms=DEFAULT_START_MS + 4 * 3_600_000, span_seconds=3600)
    write_population(cfg, small, os.path.join(reports_dir, "reports-eu-late.avro"), dimensions={"region": "eu"})
    n_devices = max(reports // 15, dev_cfg.min_reports)
    devices = write_device_reports(dev_cfg, os.path.join(reports_dir, "reports-devices.avro"), DEFAULT_START_MS,
                                   devices=n_devices, seed=seed)
    _step(f"and {devices['reports']:,} reports of {n_devices:,} memoizing devices (collection {dev_cfg.name}, 1 to 4 "
          "reports per device and hour)")
    rolled = write_rollup_reports(roll_cfg, reports_dir, reports // 5, DEFAULT_START_MS, seed=seed)
    _step(f"and {rolled['reports']:,} reports of collection {roll_cfg.name}, keyed by region and app version (4 versions, "
          f"most of them below its min_reports={roll_cfg.min_reports} in some hour)")
    _step(f"simulated in {time.time() - t0:.1f}s; running the job on the DirectRunner")
    t1 = time.time()
    estimates_dir = os.path.join(out_dir, "estimates")
    # a new release ledger on every demo: its reports are simulated, so a rerun protects nobody, and the
    # ledger refuses a rerun of a collection with rollups into the same output (README, "release ledger")
    summary = run(["--config", config_path, "--input", os.path.join(reports_dir, "*.avro"),
                   "--output", estimates_dir, "--runner", "DirectRunner", "--new-ledger"])
    _step(f"job finished in {time.time() - t1:.1f}s; outputs under {estimates_dir}")
    all_rows = [r for path in sorted(glob.glob(os.path.join(estimates_dir, "marginals", "*.avro")))
                for r in schemas.read_avro(path, "marginal_estimate")]
    rows = [r for r in all_rows if r["collection"] == cfg.name]
    # windows withheld whole below the privacy guard (not estimates held back as imprecise)
    withheld = [r for path in sorted(glob.glob(os.path.join(estimates_dir, "withheld", "*.avro")))
                for r in schemas.read_avro(path, "withheld_window")
                if r["cause"] == "privacy" and r["statistic"] == "all" and r["collection"] == cfg.name]
    def true_count(r):
        return truth[(tuple(sorted(r["dimensions"].items())), r["window_start"], tuple(r["columns"]))]

    covered = [r["ci_low"] <= true_count(r) <= r["ci_high"] for r in rows]
    first = min(r["window_start"] for r in rows)
    shown = sorted((r for r in rows if r["window_start"] == first and r["dimensions"] == {"region": "eu"}
                    and len(r["columns"]) == 1), key=lambda r: r["columns"])
    print(f"\n1-way marginals of the first window, region eu (n = {shown[0]['n_reports']:,} reports, "
          "95% intervals):")
    print(f"{'bit':<16}{'estimate':>10}{'truth':>8}{'ci_low':>10}{'ci_high':>10}")
    for r in shown:
        t = true_count(r)
        print(f"{r['labels'][0]:<16}{r['estimate']:>10.0f}{t:>8}{r['ci_low']:>10.0f}{r['ci_high']:>10.0f}")
    rate = float(np.mean(covered)) if covered else float("nan")
    print(f"\n{sum(covered)} of {len(covered)} estimates ({rate:.1%}) cover the truth; "
          f"{len(withheld)} window(s) withheld below min_reports={cfg.min_reports}")
    means = [r for path in sorted(glob.glob(os.path.join(estimates_dir, "means", "*.avro")))
             for r in schemas.read_avro(path, "mean_estimate") if r["collection"] == cfg.name]
    print("\nmean session minutes of the first window, region eu (numeric feature, one bit per report):")
    print(f"{'over':<16}{'estimate':>10}{'truth':>8}{'ci_low':>10}{'ci_high':>10}")
    for r in sorted(means, key=lambda r: (bool(r["given"]), r["given"])):
        if r["window_start"] == first and r["dimensions"] == {"region": "eu"}:
            t = truth[(("region", "eu"),), first, r["feature"], tuple(r["given"])]
            print(f"{','.join(r['given']) or 'all reports':<16}{r['estimate']:>10.1f}{t:>8.1f}{r['ci_low']:>10.1f}"
                  f"{r['ci_high']:>10.1f}")
    device_result = print_devices(dev_cfg, all_rows, devices["truth"], summary)
    all_withheld = [r for path in sorted(glob.glob(os.path.join(estimates_dir, "withheld", "*.avro")))
                    for r in schemas.read_avro(path, "withheld_window")]
    rollup_result = dict(print_rollups(roll_cfg, all_rows, all_withheld, rolled["truth"]), reports=rolled["reports"])
    moved = compare.compare(argparse.Namespace(
        estimates=estimates_dir, collection=cfg.name, windows=None, dimension="region=eu,us", window=None,
        kind="marginals", fdr=0.05, level=0.95))
    print(f"\nwhat differs between the regions in the last window (ldp-marginals compare --dimension "
          f"region=eu,us), largest of {moved['significant']} significant changes:")
    print("\n".join(compare.render(dict(moved, changes=moved["changes"][:5])).splitlines()[1:]))
    page = export.write(estimates_dir, os.path.join(out_dir, "dashboard.html"))
    print(f"\ndashboard: {os.path.abspath(page)}")
    result = {"summary": summary, "coverage": rate, "rows": len(rows), "withheld": len(withheld),
              "means": len(means), "significant_changes": moved["significant"],
              "devices": dict(device_result, reports=devices["reports"]), "rollups": rollup_result,
              "dashboard": os.path.abspath(page)}
    with open(os.path.join(out_dir, "demo_result.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    return result
