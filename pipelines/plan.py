"""``ldp-marginals plan``: the precision each published marginal, table cell and numeric mean of a
config will have at N reports per window, and the reports a target precision needs
(:mod:`ldp_marginals.ldp.planning`). Marginals and cells on the frequency scale, means on the
feature's; intervals at the collection's level, Sidak-adjusted where the config asks for
simultaneous intervals."""
from __future__ import annotations

import argparse
import json

from ldp_marginals.ldp.intervals import sidak_level
from ldp_marginals.ldp.planning import (
    cell_variance,
    half_width,
    half_width_of,
    mean_variance,
    reports_for,
    reports_for_half_width,
)
from ldp_marginals.ldp.tables import group_cells


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="collection config (JSON or YAML)")
    parser.add_argument("--reports-per-window", type=int, default=None, metavar="N",
                        help="reports per window and key: the half-width of every published marginal")
    parser.add_argument("--frequency", type=float, action="append", default=[], metavar="F",
                        help="also at this frequency of each set (repeatable); default: the worst case only")
    parser.add_argument("--target-half-width", type=float, default=None, metavar="H",
                        help="the reports per window each marginal needs for a half-width of at most H")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def plan(args) -> dict:
    from ldp_marginals.schemas.config import load_configs
    if args.reports_per_window is None and args.target_half_width is None:
        raise ValueError("plan needs --reports-per-window N or --target-half-width H, got neither")
    frequencies = [None] + list(args.frequency)
    out = {"reports_per_window": args.reports_per_window, "target_half_width": args.target_half_width,
           "frequencies": list(args.frequency), "collections": []}
    n, target = args.reports_per_window, args.target_half_width
    for name, cfg in sorted(load_configs(args.config).items()):
        labels, chan = cfg.layout.labels, cfg.channels
        published = [list(s) for s in cfg.published_sets]   # as the job's marginal rows
        level = sidak_level(cfg.level, len(published)) if cfg.marginal_interval == "simultaneous" else cfg.level
        rows = []
        for cols in published:
            p, q = chan.p[cols], chan.q[cols]
            row = {"labels": [labels[b] for b in cols], "columns": cols}
            if n is not None:
                row["half_width"] = {("worst" if f is None else str(f)): half_width(p, q, n, level, f)
                                     for f in frequencies}
            if target is not None:
                row["reports_needed"] = {("worst" if f is None else str(f)): reports_for_half_width(
                    p, q, target, level, f) for f in frequencies}
            rows.append(row)
        cells = []
        for group, interval in zip(cfg.groups, cfg.group_intervals or ("per_cell",) * len(cfg.groups)):
            table = group_cells(cfg.layout, group)
            cell_level = sidak_level(cfg.level, len(table)) if interval == "simultaneous" else cfg.level
            for cell, ones, zeros in table:
                ones, zeros = list(ones), list(zeros)
                per_report = cell_variance(chan.p[ones], chan.q[ones], chan.p[zeros], chan.q[zeros])
                cells.append({"group": list(group), "cell": list(cell), "interval": interval,
                              **_precision(per_report, n, target, cell_level)})
        means = []
        for bit in cfg.layout.numeric_bits:
            f = cfg.layout.feature(labels[bit])
            per_report = mean_variance(chan.p[bit], chan.q[bit], f.low, f.high, 1)
            means.append({"feature": f.name, "low": f.low, "high": f.high,
                          **_precision(per_report, n, target, cfg.level)})
        out["collections"].append({"collection": name, "level": cfg.level, "min_reports": cfg.min_reports,
                                   "marginal_interval": cfg.marginal_interval, "sets": rows, "cells": cells,
                                   "means": means})
    return out


def _precision(per_report: float, n, target, level) -> dict:
    """The worst-case half-width at ``n`` reports and the reports ``target`` needs."""
    out = {}
    if n is not None:
        out["half_width"] = {"worst": half_width_of(per_report / n, level)}
    if target is not None:
        out["reports_needed"] = {"worst": reports_for(per_report, target, level)}
    return out


def render(out: dict) -> str:
    lines = []
    for c in out["collections"]:
        lines.append(f"{c['collection']} (level {c['level']:g}, min_reports {c['min_reports']:,}): "
                     "half-width of each marginal's frequency interval (an upper bound)")
        cols = ["worst"] + [str(f) for f in out["frequencies"]]
        head = "set".ljust(32)
        if out["reports_per_window"] is not None:
            head += "".join(f"  at N={out['reports_per_window']:,} f={k}".ljust(22) for k in cols)
        if out["target_half_width"] is not None:
            head += "".join(f"  N for +-{out['target_half_width']:g} f={k}".ljust(24) for k in cols)
        lines.append(head)
        for r in c["sets"]:
            line = ",".join(r["labels"])[:32].ljust(32)
            if "half_width" in r:
                line += "".join(f"  {r['half_width'][k]:.4f}".ljust(22) for k in cols)
            if "reports_needed" in r:
                line += "".join(f"  {r['reports_needed'][k]:,}".ljust(24) for k in cols)
            lines.append(line)
        extra = [(", ".join(f"{g}={v}" for g, v in zip(r["group"], r["cell"])), r) for r in c["cells"]]
        extra += [(f"mean({r['feature']}) in [{r['low']:g}, {r['high']:g}]", r) for r in c["means"]]
        if extra:
            lines.append("table cells (frequency) and means (the feature's scale), worst case:")
        for label, r in extra:
            line = label.ljust(32)
            if "half_width" in r:
                line += f"  {r['half_width']['worst']:.4f}".ljust(22)
            if "reports_needed" in r:
                line += f"  {r['reports_needed']['worst']:,}".ljust(24)
            lines.append(line)
    return "\n".join(lines)


def main(args) -> dict:
    out = plan(args)
    print(json.dumps(out, indent=2) if args.json else render(out))
    return out
