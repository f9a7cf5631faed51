"""``ldp-marginals plan``: the precision each published marginal of a config will have at N reports
per window, and the reports a target precision needs (:mod:`ldp_marginals.ldp.planning`)."""
from __future__ import annotations

import argparse
import json

from ldp_marginals.ldp.planning import half_width, reports_for_half_width


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
    for name, cfg in sorted(load_configs(args.config).items()):
        est_zero = [any(len(set(s) & set(g)) > 1 for g in cfg.layout.exclusive_groups) for s in cfg.family]
        rows = []
        for s, zero in zip(cfg.family, est_zero):
            if not s or zero:  # not published (see the job's marginal rows)
                continue
            cols = list(s)
            p, q = cfg.channels.p[cols], cfg.channels.q[cols]
            row = {"labels": [cfg.layout.labels[b] for b in cols], "columns": cols}
            if args.reports_per_window is not None:
                row["half_width"] = {("worst" if f is None else str(f)): half_width(p, q, args.reports_per_window,
                                                                                   cfg.level, f)
                                     for f in frequencies}
            if args.target_half_width is not None:
                row["reports_needed"] = {("worst" if f is None else str(f)): reports_for_half_width(
                    p, q, args.target_half_width, cfg.level, f) for f in frequencies}
            rows.append(row)
        out["collections"].append({"collection": name, "level": cfg.level, "min_reports": cfg.min_reports,
                                   "sets": rows})
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
    return "\n".join(lines)


def main(args) -> dict:
    out = plan(args)
    print(json.dumps(out, indent=2) if args.json else render(out))
    return out
