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
from ldp_marginals.pipelines.plan_kinds import advice_lines, kind_precision, mechanism_advice
from ldp_marginals.pipelines.plan_outlook import ASSUMED_REPORTS_PER_WINDOW, outlook_population


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="collection config (JSON or YAML)")
    parser.add_argument("--reports-per-window", type=int, default=None, metavar="N",
                        help="reports per window and key: the half-width of every published marginal")
    parser.add_argument("--frequency", type=float, action="append", default=[], metavar="F",
                        help="also at this frequency of each set (repeatable); default: the worst case only")
    parser.add_argument("--target-half-width", type=float, default=None, metavar="H",
                        help="the reports per window each marginal and table cell needs for a half-width of at most "
                             "H on the frequency scale")
    parser.add_argument("--target-mean-half-width", action="append", default=[], metavar="FEATURE=H",
                        help="the reports per window a numeric feature's mean needs for a half-width of at most H in "
                             "the feature's own unit (repeatable)")
    parser.add_argument("--clients-per-window", type=int, default=None, metavar="N",
                        help="the population, for the extremes over clients: N clients per window and key, each "
                             "sending --reports-per-client reports; warns when the client rows would be withheld")
    parser.add_argument("--reports-per-client", default=None, metavar="LOW[-HIGH]",
                        help="with --clients-per-window: each client sends LOW to HIGH reports a window (uniformly)")
    parser.add_argument("--devices-per-key", type=int, default=None, metavar="D",
                        help="the population whose rows the recommendation must publish: D devices (the unit's "
                             "persons; clients under the report unit) per window and key (default: N / R)")
    parser.add_argument("--reports-per-device", type=int, default=None, metavar="R",
                        help="each device's reports per window (default: the config's bound, "
                             "max_reports_per_device times its slices, under the device unit; else 1)")
    parser.add_argument("--keys", type=int, default=1, metavar="K",
                        help="keys (values of the first dimension) per window, each of D devices: what the "
                             "rollups sum (default 1)")
    parser.add_argument("--outlook-windows", type=int, default=3, metavar="W",
                        help="simulated windows that must each publish every kind of row (default 3)")
    parser.add_argument("--no-outlook", dest="outlook", action="store_false",
                        help="skip the outlook on withholding (the job's rules run on simulated windows)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")




def plan(args) -> dict:
    from ldp_marginals.schemas.config import load_configs
    mean_targets = {}
    for item in args.target_mean_half_width:
        name, _, value = item.partition("=")
        try:
            mean_targets[name] = float(value)
        except ValueError:
            raise ValueError(f"--target-mean-half-width must be FEATURE=H, got --target-mean-half-width={item!r}") \
                from None
    population = _population(args)
    configs = load_configs(args.config)
    from ldp_marginals.pipelines.plan_kinds import config_specs
    specs = config_specs(args.config)   # what a candidate channel is pasted into
    n, target, assumed = args.reports_per_window, args.target_half_width, None
    if n is None and target is None and not mean_targets:
        # nothing asked: the precision at an assumed N, said so, and the pick of the mechanism (which does not
        # depend on N) printed as with N given
        n = max([ASSUMED_REPORTS_PER_WINDOW] + [cfg.min_reports for cfg in configs.values()])
        assumed = (f"no --reports-per-window N or --target-half-width H given: assuming N={n:,} reports per window "
                   f"and key (at least {ASSUMED_REPORTS_PER_WINDOW:,}, and every collection's min_reports); give "
                   "--reports-per-window for your traffic")
    frequencies = [None] + list(args.frequency)
    out = {"reports_per_window": n, "target_half_width": target, "assumed": assumed,
           "frequencies": list(args.frequency), "collections": []}
    numeric = {f.name for cfg in configs.values() for f in cfg.layout.features if f.kind == "numeric"}
    for name in mean_targets:
        if name not in numeric:
            raise ValueError(f"--target-mean-half-width {name}=...: not a numeric feature; the numeric features are "
                             f"{sorted(numeric)}")
    out["target_mean_half_width"] = mean_targets
    for name, cfg in sorted(configs.items()):
        if cfg.sampling is not None:   # a channel kind (pipelines/plan_kinds.py)
            rows, cells = kind_precision(cfg, n, target, frequencies, _precision)
            out["collections"].append({"collection": name, "level": cfg.level, "min_reports": cfg.min_reports,
                                       "marginal_interval": cfg.marginal_interval, "sets": rows, "cells": cells,
                                       "means": [], "privacy": _privacy(cfg), "mechanism": mechanism_advice(
                                           cfg, specs[name], outlook_population(args, cfg, n))})
            continue
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
            # a mean's target is in the feature's unit: --target-half-width (a frequency) is not one
            means.append({"feature": f.name, "low": f.low, "high": f.high,
                          **_precision(per_report, n, mean_targets.get(f.name), cfg.level)})
        out["collections"].append({"collection": name, "level": cfg.level, "min_reports": cfg.min_reports,
                                   "marginal_interval": cfg.marginal_interval, "sets": rows, "cells": cells,
                                   "means": means, "privacy": _privacy(cfg), "mechanism": mechanism_advice(
                                       cfg, specs[name], outlook_population(args, cfg, n)),
                                   "client_rows": _client_rows(cfg, population)})
    return out


def _population(args):
    """``(clients, low, high)`` from ``--clients-per-window`` and ``--reports-per-client``, or None."""
    n, spread = getattr(args, "clients_per_window", None), getattr(args, "reports_per_client", None)
    if (n is None) != (spread is None):
        raise ValueError("plan takes --clients-per-window N and --reports-per-client LOW[-HIGH] together, got "
                         f"--clients-per-window={n} --reports-per-client={spread}")
    if n is None:
        return None
    low, _, high = str(spread).partition("-")
    try:
        low, high = int(low), int(high or low)
    except ValueError:
        raise ValueError("--reports-per-client must be LOW or LOW-HIGH (integers), got "
                         f"--reports-per-client={spread!r}") from None
    return n, low, high


def _client_rows(cfg, population):
    """Whether the config's extremes over clients would publish for the population (None without either)."""
    if population is None or not cfg.client_extremes:
        return None
    from ldp_marginals.ldp.planning import client_rows_outlook
    return dict(client_rows_outlook(*population, cfg.min_reports, cfg.client_sample),
                reports_per_client=cfg.client_sample)


def _privacy(cfg) -> dict:
    """The privacy figures beside the precision: the local epsilon of a whole report, the promise,
    and the sufficient-DP crowd the job checks ``min_reports`` against (``calibrate --config``)."""
    from ldp_marginals.ldp.privacy import local_dp_epsilon
    p = cfg.privacy
    if cfg.sampling is not None:   # a channel kind: its epsilon is the whole report's
        described = cfg.describe()
        return {"local_epsilon": described["local_epsilon"], "promise": p.describe() if p else None,
                "sufficient_crowd": None, "unit": cfg.unit, "epsilons": described["epsilons"]}
    return {"local_epsilon": float(local_dp_epsilon(cfg.layout, cfg.channels)),
            "promise": p.describe() if p else None,
            "sufficient_crowd": p.smallest_crowd if p and p.model == "sufficient" else None,
            "unit": cfg.unit, "epsilons": cfg.describe_epsilons()}


def _precision(per_report: float, n, target, level) -> dict:
    """The worst-case half-width at ``n`` reports and the reports ``target`` needs."""
    out = {}
    if n is not None:
        out["half_width"] = {"worst": half_width_of(per_report / n, level)}
    if target is not None:
        out["reports_needed"] = {"worst": reports_for(per_report, target, level)}
    return out


def _figures(r: dict, cols: list, with_n: bool, with_target: bool) -> list:
    out = []
    if with_n:
        out += [f"{r['half_width'][k]:.4f}" if "half_width" in r else "" for k in cols]
    if with_target:
        out += [f"{r['reports_needed'][k]:,}" if "reports_needed" in r else "" for k in cols]
    return out


def _collapsed(sets: list, cols: list, with_n: bool, with_target: bool) -> list:
    """``(label, figures)`` lines: sets of one order with the same figures (a uniform channel gives
    every set of an order the same) in one line that says how many and names the first."""
    groups = {}
    for r in sets:
        key = (len(r["labels"]), tuple(_figures(r, cols, with_n, with_target)))
        groups.setdefault(key, []).append(r)
    lines = []
    for (order, figures), rows in groups.items():
        first = ",".join(rows[0]["labels"])
        label = first if len(rows) == 1 else f"{len(rows)} sets of {order} bit{'s' if order > 1 else ''} (e.g. {first})"
        lines.append((label, list(figures)))
    return lines


def render(out: dict) -> str:
    lines = [out["assumed"]] if out.get("assumed") else []
    cols = ["worst"] + [str(f) for f in out["frequencies"]]
    with_n, with_target = out["reports_per_window"] is not None, out["target_half_width"] is not None
    head = []
    if with_n:
        head += [f"at N={out['reports_per_window']:,} f={k}" for k in cols]
    if with_target:
        head += [f"N for +-{out['target_half_width']:g} f={k}" for k in cols]
    for c in out["collections"]:
        pv = c["privacy"]
        promise = pv["promise"]
        lines.append(f"{c['collection']} (level {c['level']:g}, min_reports {c['min_reports']:,}): "
                     "half-width of each marginal's frequency interval (an upper bound)")
        privacy = f"privacy: local epsilon of a whole report {pv['local_epsilon']:.4g}"
        if promise and promise["model"] == "sufficient":
            privacy += (f"; sufficient DP at epsilon {promise['epsilon']:g} needs at least {pv['sufficient_crowd']:,} "
                        "reports per published window")
        elif promise:
            privacy += "; promise: local DP"
        else:
            privacy += "; no promise stated (ldp-marginals calibrate --config gives the sufficient-DP crowd)"
        lines.append(privacy)
        from ldp_marginals.pipelines.calibrate import epsilons_line
        lines.append(f"unit: {pv['unit']}; {epsilons_line(pv['epsilons'])}")
        lines += advice_lines(c["mechanism"])
        rows_ = c.get("client_rows")
        if rows_ is not None and not rows_["published"]:
            hint = rows_["suggested_reports_per_client"]
            lines.append(f"warning: extremes over clients: {rows_['reason']}" + (
                f"; reports_per_client: {hint} would publish them" if hint is not None else ""))
        elif rows_ is not None:
            lines.append(f"extremes over clients: published, on about {rows_['kept_clients']:.0f} clients per window "
                         f"and key")
        body = _collapsed(c["sets"], cols, with_n, with_target)
        extra = [(", ".join(f"{g}={v}" for g, v in zip(r["group"], r["cell"])), _figures(r, ["worst"], with_n,
                                                                                            with_target))
                 for r in c["cells"]]
        mean_lines = []
        for r in c["means"]:
            hw = f"{r['half_width']['worst']:.4f}" if "half_width" in r else ""
            need = f"{r['reports_needed']['worst']:,}" if "reports_needed" in r else (
                f"(--target-mean-half-width {r['feature']}=H)" if with_target else "")
            mean_lines.append((f"mean({r['feature']}) in [{r['low']:g}, {r['high']:g}]", hw, need))
        width = max([len("set")] + [len(label) for label, _ in body + extra] + [len(m[0]) for m in mean_lines])
        widths = [max([len(h)] + [len(f[i]) for _, f in body]) for i, h in enumerate(head)]
        lines.append("  ".join(["set".ljust(width)] + [h.rjust(w) for h, w in zip(head, widths)]))
        for label, figures in body:
            lines.append("  ".join([label.ljust(width)] + [f.rjust(w) for f, w in zip(figures, widths)]))
        if extra:
            lines.append("table cells (frequency), worst case:")
            for label, figures in _collapsed_cells(extra):
                lines.append("  ".join([label.ljust(width)] + [f.rjust(w) for f, w in zip(figures, widths)]))
        if mean_lines:
            lines.append("means (the feature's own unit), worst case: half-width at N, reports for the feature's "
                         "target")
            mw = max(len(m[1]) for m in mean_lines)
            for label, hw, need in mean_lines:
                lines.append("  ".join([label.ljust(width), hw.rjust(mw), need]).rstrip())
    return "\n".join(lines)


def _collapsed_cells(extra: list) -> list:
    groups = {}
    for label, figures in extra:
        groups.setdefault(tuple(figures), []).append(label)
    return [(labels[0] if len(labels) == 1 else f"{len(labels)} cells (e.g. {labels[0]})", list(figures))
            for figures, labels in groups.items()]


def main(args) -> dict:
    out = plan(args)
    print(json.dumps(out, indent=2) if args.json else render(out))
    return out
