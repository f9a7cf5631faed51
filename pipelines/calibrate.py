"""``ldp-marginals calibrate``: the privacy calculator (local DP vs sufficient DP, Zhilyaev & Zeber)."""
from __future__ import annotations

import argparse
import json
import math

import numpy as np

from ldp_marginals.ldp.channels import Channel
from ldp_marginals.ldp.privacy import (
    concentration_bound,
    effective_bits,
    local_dp_flip,
    smallest_population,
    sufficient_dp_flip,
    sufficient_dp_flip_by_tail,
    tail_probability,
)


def add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None,
                        help="a collection config: the job's own numbers for its channels (local epsilon of a whole "
                             "report, the symmetric flip the channels are held to), whether the config keeps its "
                             "promise and what to change when it does not, and the sufficient-DP crowd for --epsilon; "
                             "instead of --bits and a flip worked out by hand")
    parser.add_argument("--bits", type=int, default=None, help="L, bits per report (without --config)")
    parser.add_argument("--population", type=int, default=None,
                        help="N, reports per published window: the flips that protect N reports")
    parser.add_argument("--flip", type=float, default=None,
                        help="a flip to check: the smallest N for which it gives sufficient DP (P[R > lambda] <= eta)")
    parser.add_argument("--epsilon", type=float, default=None,
                        help="privacy level; lambda = e^epsilon (with --config: also the crowd sufficient DP at "
                             "this epsilon needs, beside the config's promise)")
    parser.add_argument("--repeats", type=int, default=1, help="k, reports per user in a window")
    parser.add_argument("--sigmas", type=float, default=3.0, help="beta, standard deviations of R kept below lambda")
    parser.add_argument("--max-ones", type=int, default=None, help="w, most set bits in a true vector (2w rule)")
    parser.add_argument("--eta", type=float, default=0.01, help="tail probability allowed by the Monte Carlo calibration")
    parser.add_argument("--trials", type=int, default=20_000, help="Monte Carlo trials")
    parser.add_argument("--seed", type=int, default=0, help="Monte Carlo seed")
    parser.add_argument("--devices-per-key", type=int, default=None, metavar="D",
                        help="with --config: also the channel whose every kind of row publishes at D devices per "
                             "window and key (as plan's outlook: the job's rules on simulated windows)")
    parser.add_argument("--reports-per-device", type=int, default=None, metavar="R",
                        help="with --devices-per-key: each device's reports per window (default: the config's bound)")
    parser.add_argument("--keys", type=int, default=1, metavar="K", help="with --devices-per-key: keys per window")
    parser.add_argument("--outlook-windows", type=int, default=3, metavar="W",
                        help="with --devices-per-key: simulated windows that must each publish every kind of row")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def from_config(args) -> list:
    """Per collection of ``--config``: what the job computes from its channels (the same functions:
    :func:`ldp_marginals.schemas.config.parse_config`), whether its promise is kept and, when it is
    not, what to change; and the smallest crowd of reports per published window that sufficient DP
    needs, at the promise's epsilon or at ``--epsilon``. A promise the config does not keep is
    reported here, not refused (the job refuses it)."""
    from ldp_marginals.ldp.privacy import local_dp_epsilon
    from ldp_marginals.schemas.collection import sufficient_crowd, sufficient_flip
    from ldp_marginals.schemas.config import load_configs
    for name in ("bits", "population", "flip"):
        if getattr(args, name) is not None:
            raise ValueError(f"--config gives the bits and channels: drop --{name}, got --{name}={getattr(args, name)}")
    out = []
    from ldp_marginals.pipelines.plan_kinds import calibrate_kind, config_specs, mechanism_advice
    from ldp_marginals.pipelines.plan_outlook import outlook_population
    specs = config_specs(args.config)   # what a candidate channel is pasted into
    for cfg in load_configs(args.config, check_promise=False).values():
        # plan's outlook on withholding, asked for with --devices-per-key (calibrate has no N to default from)
        population = outlook_population(args, cfg, None) if getattr(args, "devices_per_key", None) else None
        if cfg.sampling is not None:   # a channel kind: no per-bit channels (pipelines/plan_kinds.py)
            out.append(calibrate_kind(cfg, args.epsilon, specs[cfg.name], population))
            continue
        promise = cfg.privacy.describe() if cfg.privacy else None
        local = float(local_dp_epsilon(cfg.layout, cfg.channels))
        flip = sufficient_flip(cfg.channels)
        row = {"collection": cfg.name, "bits": cfg.layout.n_bits, "features": len(cfg.layout.features),
               "channels": [{"label": label, "p": float(c.p), "q": float(c.q)}
                            for label, c in zip(cfg.layout.labels, cfg.channels.channels)],
               "local_epsilon": local, "symmetric_flip": flip, "promise": promise, "promise_kept": None,
               "raise_min_reports_to": None, "min_reports": cfg.min_reports,
               "epsilon": None, "eta": None, "sufficient_crowd": None, "unit": cfg.unit,
               "repeats": cfg.promise_repeats, "epsilons": cfg.describe_epsilons(),
               "kind": cfg.channel_kind, "mechanism": mechanism_advice(cfg, specs[cfg.name], population),
               # privacy.epsilon_per_day / _per_month against the enforced figures (the job refuses a fault)
               "promise_over_time_fault": cfg.promise_fault()}
        if promise and promise["model"] == "local":
            row["promise_kept"] = promise["epsilon"] is None or local <= promise["epsilon"] + 1e-12
        elif promise:
            row["promise_kept"] = cfg.min_reports >= promise["smallest_crowd"]
            if not row["promise_kept"]:
                row["raise_min_reports_to"] = promise["smallest_crowd"]
            row.update(epsilon=promise["epsilon"], eta=promise["eta"], sufficient_crowd=promise["smallest_crowd"])
        if args.epsilon is not None and flip > 0:   # the crowd at --epsilon, whatever the promise
            row.update(epsilon=args.epsilon, eta=args.eta, sufficient_crowd=sufficient_crowd(
                cfg.layout, flip, args.epsilon, args.eta, cfg.promise_repeats))
        out.append(row)
    return out


def calibrate(args) -> dict:
    """The flips for ``--population`` N, and/or the smallest N for ``--flip`` (one of them at least)."""
    for name in ("bits", "epsilon"):
        if getattr(args, name) is None:
            raise ValueError(f"calibrate needs --{name} (or --config C.yaml, which gives the bits and channels)")
    if args.population is None and args.flip is None:
        raise ValueError("calibrate needs --population N (the flips for N reports) or --flip F (the reports "
                         "F needs), got neither")
    lam = math.exp(args.epsilon)
    L = effective_bits(args.bits, args.max_ones)
    out = {"bits": args.bits, "effective_bits": L, "epsilon": args.epsilon, "lambda": lam,
           "repeats": args.repeats, "local_dp_flip": local_dp_flip(L, lam), "monte_carlo_eta": args.eta}
    if args.flip is not None:
        out["flip"] = args.flip
        out["smallest_population"] = smallest_population(args.flip, args.bits, lam, args.eta, args.repeats,
                                                         args.max_ones, args.trials, args.seed)
    if args.population is not None:
        out.update(_flips(args, lam, L))
    return out


def _flips(args, lam, L) -> dict:
    local = local_dp_flip(L, lam)
    suff = sufficient_dp_flip(args.bits, args.population, lam, args.repeats, args.sigmas, args.max_ones)
    rng = np.random.default_rng(args.seed)
    tail = tail_probability(suff, L, args.population, lam, args.repeats, args.trials, rng)
    by_tail = sufficient_dp_flip_by_tail(args.bits, args.population, lam, args.eta, args.repeats, args.max_ones,
                                         args.trials, args.seed)
    check = tail_probability(by_tail, L, args.population, lam, args.repeats, args.trials,
                             np.random.default_rng(args.seed + 1))
    out = {
        "population": args.population, "sigmas": args.sigmas,
        "sufficient_dp_flip": suff,
        "tail_probability": tail.probability, "tail_standard_error": tail.standard_error,
        "concentration_bound": concentration_bound(suff, L, args.population, args.sigmas) if args.repeats == 1 else None,
        "monte_carlo_flip": by_tail, "monte_carlo_eta": args.eta,
        "monte_carlo_tail_check": check.probability,
        "per_bit_epsilon_local": Channel.symmetric(local).epsilon_bit,
        "per_bit_epsilon_sufficient": Channel.symmetric(suff).epsilon_bit,
    }
    return out


def render(out: dict) -> str:
    rows = [
        ("bits L (effective)", f"{out['bits']} ({out['effective_bits']})"),
        ("epsilon (lambda)", f"{out['epsilon']:g} ({out['lambda']:.4g})"),
        ("local DP flip", f"{out['local_dp_flip']:.4f}"),
    ]
    if "smallest_population" in out:
        rows.append((f"reports needed at flip {out['flip']:g}",
                     f"{out['smallest_population']:,}  (P[R > lambda] <= {out['monte_carlo_eta']:g}, "
                     "3 standard errors of margin)"))
    if "population" in out:
        rows += _flip_rows(out)
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("The flip is our p for a symmetric channel (p, q) = (flip, 1 - flip). Rely on the Monte Carlo-"
                 "calibrated flip: the moment rule is a heuristic and eq. 6.3 understates the variance for k > 1.")
    return "\n".join(lines)


def _flip_rows(out: dict) -> list:
    return [
        ("reports per window N", f"{out['population']:,}"),
        ("repeats k, sigmas", f"{out['repeats']}, {out['sigmas']:g}"),
        ("sufficient DP flip (eq. 3.15/6.3)", f"{out['sufficient_dp_flip']:.4f}"),
        ("  Monte Carlo P[R > lambda]", f"{out['tail_probability']:.4f} +- {out['tail_standard_error']:.4f}"),
        ("Monte Carlo-calibrated flip", f"{out['monte_carlo_flip']:.4f}  (P[R > lambda] <= {out['monte_carlo_eta']:g};"
                                        f" check {out['monte_carlo_tail_check']:.4f})"),
    ]


def _reports(n: int) -> str:
    return f"{n:,} report" + ("" if n == 1 else "s")


def render_config(rows: list) -> str:
    from ldp_marginals.pipelines.plan_kinds import advice_lines, render_kind
    lines = []
    for r in rows:
        if r["kind"] != "per_bit":
            lines += render_kind(r) + ["  " + line for line in advice_lines(r["mechanism"])]
            continue
        same = len({(c["p"], c["q"]) for c in r["channels"]}) == 1
        chans = (f"p={r['channels'][0]['p']:.4f}, q={r['channels'][0]['q']:.4f} on each of {r['bits']} bits" if same
                 else f"{len({(c['p'], c['q']) for c in r['channels']})} channels over {r['bits']} bits")
        lines += [f"collection {r['collection']}: {chans}",
                  f"  local epsilon of a whole report   {r['local_epsilon']:.4g}",
                  f"  symmetric flip the bits are held to (sufficient DP)   {r['symmetric_flip']:.4f}"]
        p = r["promise"]
        if p is None:
            lines.append("  promise: none stated" + ("" if r["sufficient_crowd"] is not None
                                                     else " (give --epsilon E for the crowd sufficient DP needs)"))
        elif p["model"] == "local":
            at = f" at epsilon {p['epsilon']:g}" if p["epsilon"] is not None else ""
            lines.append(f"  promise: local DP{at}: " + (
                f"kept (a whole report's epsilon is {r['local_epsilon']:.4g}; each report alone, no crowd needed)"
                if r["promise_kept"] else
                f"NOT kept: a whole report's epsilon is {r['local_epsilon']:.4g}; add noise to the channels or "
                "promise sufficient DP"))
        else:
            crowd = p["smallest_crowd"]
            lines.append(f"  promise: sufficient DP at epsilon={p['epsilon']:g}, eta={p['eta']:g}: at least "
                         f"{_reports(crowd)} per published window; min_reports={r['min_reports']:,}: " + (
                             "kept" if r["promise_kept"] else f"NOT kept: raise min_reports to {crowd:,}"))
        if r["sufficient_crowd"] is not None and (p is None or p["model"] != "sufficient"
                                                  or r["epsilon"] != p["epsilon"] or r["eta"] != p["eta"]):
            crowd = r["sufficient_crowd"]
            enough = "enough" if r["min_reports"] >= crowd else f"raise min_reports to {crowd:,} for it"
            lines.append(f"  sufficient DP at --epsilon {r['epsilon']:g}, eta={r['eta']:g}: at least "
                         f"{_reports(crowd)} per published window (min_reports={r['min_reports']:,}: {enough})")
        lines.append(f"  one device over time (unit: {r['unit']}): " + epsilons_line(r["epsilons"]))
        spans = [f"{k}={p[k]:g}" for k in ("epsilon_per_day", "epsilon_per_month") if p and p.get(k) is not None]
        if spans:
            fault = r.get("promise_over_time_fault")
            lines.append(f"  promise over time ({', '.join(spans)}): " + (f"NOT kept: {fault}" if fault else
                                                                          "kept by the enforced figures"))
        lines += ["  " + line for line in advice_lines(r["mechanism"])]
    return "\n".join(lines)


def epsilons_line(e: dict) -> str:
    """One line of a collection's epsilons over time (:meth:`CollectionConfig.describe_epsilons`): the
    figures the job enforces (what a promise is checked against), and the declared rate's beside."""
    def num(v):
        return "infinite" if v is None else f"{v:.4g}"
    line = f"epsilon_1 {num(e['epsilon_1'])}, epsilon_infinity {num(e['epsilon_infinity'])}"
    enforced, declared = e.get("enforced"), e.get("declared")
    if enforced is None:
        return line + "; per report only (no device bound: nothing limits the reports of a device)"
    slices = enforced["slices_per_day"]
    line += (f"; enforced (at most {_reports(enforced['reports_per_slice'])} of a device per slice, {slices:,} "
             f"slice{'' if slices == 1 else 's'} a day): per day {num(enforced['epsilon_per_day'])} "
             f"({_reports(enforced['reports_per_day'])}), per month {num(enforced['epsilon_per_month'])} "
             f"({_reports(enforced['reports_per_month'])})")
    if declared is not None:
        line += (f"; at the declared rate of {declared['reports_per_day']:g} a day (not enforced by the job): "
                 f"per day {num(declared['epsilon_per_day'])}, per month {num(declared['epsilon_per_month'])}")
    return line


def main(args) -> dict:
    if args.config:
        out = from_config(args)
        print(json.dumps(out, indent=2) if args.json else render_config(out))
        return out
    out = calibrate(args)
    print(json.dumps(out, indent=2) if args.json else render(out))
    return out
