"""``compare``'s power to find a change and its false discoveries on stationary data (issue 40 item 5).

The simulator (pipelines/simulate.py) writes the demo's collection (11 bits, per-bit epsilon 2, max
order 2) in two regions over four hourly windows; in the change scenario ``dark_mode`` moves from a
share of 0.30 to 0.30 + delta at the third window's start, in region ``eu`` only. Each replicate
estimates every window and key with the job's estimator (TMDH from the co-occurrence counts, no Beam)
and runs compare's test (``ldp.compare.change`` per marginal on the population variance
``ldp.compare.population_variance``, Benjamini-Hochberg at 0.05 over the marginals compared, as
``ldp-marginals compare --windows`` does) on eu's second and third windows. Power: the share of
replicates that flag ``dark_mode``; a discovery on a marginal without ``dark_mode`` is false; on
stationary data (delta 0) every discovery is false, so the false discovery rate is the share of
replicates with any discovery. Beside it, the test compare ran before (the randomization variance
alone: "did these two windows' reports differ?"), which has no false discovery rate to speak of on
the population's question.
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.compare import benjamini_hochberg, change, population_variance
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.pipelines.demo import DEMO_CONFIG
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS, Change, simulate_population
from ldp_marginals.schemas.config import parse_config

HOUR_MS = 3_600_000
REPORTS = 24_000          # 4 windows x 2 regions: ~3,000 reports per window and key


def _frequencies(cfg, pop, rows):
    acc = CooccurrenceAccumulator(cfg.family).add_packed(pop.noisy[rows])
    est = estimate_tmdh(acc, cfg.channels, exclusive_groups=cfg.layout.exclusive_groups)
    n = len(rows)
    sets = [s for s in list(cfg.family)[1:] if not est.is_structural_zero(s)]
    return {s: (est.mean(s) / n, est.variance(s) / n ** 2) for s in sets}


def replicate(cfg, delta: float, seed: int):
    at = DEFAULT_START_MS + 2 * HOUR_MS
    dims = [("region", [("eu", 0.5), ("us", 0.5)])]
    pop = simulate_population(cfg, REPORTS, seed=seed, dimensions=dims, span_seconds=4 * 3600,
                              prevalences={"dark_mode": 0.3},
                              change=Change("dark_mode", 0.3 + delta, at, ("region", "eu")) if delta else None)
    eu = pop.dimensions["region"] == "eu"
    before = np.flatnonzero(eu & (pop.event_ms >= at - HOUR_MS) & (pop.event_ms < at))
    after = np.flatnonzero(eu & (pop.event_ms >= at) & (pop.event_ms < at + HOUR_MS))
    first, second = _frequencies(cfg, pop, before), _frequencies(cfg, pop, after)
    sets = list(first)
    bit = cfg.layout.bit_index("dark_mode")
    out = []
    for population in (True, False):   # False: the randomization variance alone (compare before issue 40)
        def side(v, n):
            f, var = v
            return f, population_variance(f, var, n) if population else var
        tests = [change(*side(first[s], len(before)), *side(second[s], len(after))) for s in sets]
        flagged = benjamini_hochberg([t.p_value for t in tests], 0.05)
        found = any(f for s, f in zip(sets, flagged) if s == (bit,))
        false = sum(f for s, f in zip(sets, flagged) if delta == 0 or bit not in s)
        out.append((found, false, sum(flagged), len(sets)))
    return out


def run(reps: int = 100) -> dict:
    cfg = parse_config(DEMO_CONFIG)
    out = {}
    for delta in (0.0, 0.03, 0.05, 0.1):
        both = [replicate(cfg, delta, seed=1000 + r) for r in range(reps)]
        for name, runs in (("compare (population)", [b[0] for b in both]),
                           ("randomization only (before)", [b[1] for b in both])):
            any_false = float(np.mean([r[1] > 0 for r in runs]))
            out[f"{name} +{delta:.2f}"] = {
                "test": name, "delta": delta,
                "power": float(np.mean([r[0] for r in runs])) if delta else None,
                "replicates_with_a_false_discovery": any_false,
                "binomial_se": float(np.sqrt(any_false * (1 - any_false) / reps)),
                "false_discovery_proportion": float(np.mean([r[1] / r[2] if r[2] else 0.0 for r in runs])),
                "marginals_compared": runs[0][3],
            }
    return {"reps": reps, "reports_per_window_and_key": REPORTS // 8, "by_delta": out}


def render(res: dict) -> str:
    first = next(iter(res["by_delta"].values()))
    lines = [f"compare on eu's windows 2 and 3 (~{res['reports_per_window_and_key']:,} reports each, "
             f"{first['marginals_compared']} marginals, BH at 0.05, {res['reps']} replicates; on stationary data "
             "the false discovery rate is the share of replicates with a false discovery, +- its binomial "
             "standard error):", "",
             "| test | dark_mode change | power (dark_mode flagged) | replicates with a false discovery | "
             "mean false discovery proportion |", "|---|---|---|---|---|"]
    for r in res["by_delta"].values():
        power = "n/a (stationary)" if r["power"] is None else f"{r['power']:.2f}"
        lines.append(f"| {r['test']} | +{r['delta']:.2f} | {power} | {r['replicates_with_a_false_discovery']:.2f} "
                     f"+- {r['binomial_se']:.2f} | {r['false_discovery_proportion']:.3f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(run()))
