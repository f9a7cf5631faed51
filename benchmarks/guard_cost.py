"""What the client rule costs: windows (and their reports) whose extremes over clients are withheld,
under the rule before issue 35 (at least ``min_reports`` clients of two or more reports) and under
today's (every group of reports or clients the rows treat alike at ``min_reports``), on the demo's
population and on a realistic one. Not a speed benchmark: the rule's decisions, through the engine's
own functions (``release.client_rule`` on accumulators filled by the collection's aggregator).

    python -m benchmarks.guard_cost
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.pipelines.demo import DEMO_CONFIG
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS, diurnal_times, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.release import client_rule, releasable

HOUR_MS = 3_600_000


def earlier_rule(config, atoms) -> bool:
    """The rule before issue 35, on the window's released content: True when it published."""
    acc = config.aggregator.merge([config.aggregator.create(), *atoms])
    counts = acc.client_reports
    several, unnamed = int((counts >= 2).sum()), acc.n - int(counts.sum())
    return several >= config.min_reports or (several == 0 and unnamed == 0)


def accumulator(config, tokens: list):
    """An accumulator of one report per token (None: a report without a client); bits do not matter
    to the rule."""
    keys = np.array([client_key(t) if t else 0 for t in tokens], dtype=np.uint64)
    named = np.array([t is not None for t in tokens])
    packed = np.zeros((len(tokens), config.layout.n_bytes), dtype=np.uint8)
    return config.aggregator.add_packed(config.aggregator.create(), packed, keys, named)


def cost(config, windows: list) -> dict:
    """``windows``: per window and key, its atoms as lists of tokens (released in that order; an atom
    below ``min_reports`` stays pending and is not in the client rows). Counts of windows and reports
    whose client rows each rule publishes."""
    out = {"windows": 0, "reports": 0, "earlier": [0, 0], "now": [0, 0]}
    for atoms in windows:
        accs = [accumulator(config, tokens) for tokens in atoms]
        released = [a for a in accs if releasable(config, a)]
        n = sum(a.n for a in accs)
        out["windows"] += 1
        out["reports"] += n
        if not released:
            continue
        for name, ok in (("earlier", earlier_rule(config, released)), ("now", client_rule(config, released) is None)):
            out[name][0] += ok
            out[name][1] += n * ok
    return out


def demo(reports_per_client: int) -> dict:
    """The demo's population (``make demo``: 60,000 reports over 4 hourly windows in two regions, 500
    in a fifth hour; min_reports 2,000), with an OR over clients added to its config, clients as the
    simulator draws them (each report's client uniform among reports / ``reports_per_client``)."""
    spec = dict(DEMO_CONFIG, extremes=DEMO_CONFIG["extremes"] + [
        {"name": "any_beta_client", "op": "or", "features": ["beta_search", "beta_sync"], "over": "client"}])
    cfg = parse_config(spec)
    windows = []
    sizes = [("eu", 33_000, 7, DEFAULT_START_MS, 4 * 3600), ("us", 27_000, 17, DEFAULT_START_MS, 4 * 3600),
             ("eu", 500, 8, DEFAULT_START_MS + 4 * HOUR_MS, 3600)]
    for region, n, seed, start, span in sizes:
        pop = simulate_population(cfg, n, seed=seed, start_ms=start, span_seconds=span,
                                  reports_per_client=reports_per_client)
        hours = (pop.event_ms - DEFAULT_START_MS) // HOUR_MS
        for h in np.unique(hours):
            windows.append([[f"{region}{c}" for c in pop.clients[hours == h]]])
    return cost(cfg, windows)


def realistic(window_hours: int, heavy_tail: bool | None, late_share: float = 0.0, seed: int = 3) -> dict:
    """Three days of diurnal traffic (the simulator's ``--diurnal`` rate, about 9x more at 14:00 than
    at 02:00), 72,000 reports, min_reports 300, fixed windows of ``window_hours``; 20% of the reports
    name no client; the others come from 3,000 devices, each report's device drawn uniformly
    (``heavy_tail`` False: Poisson counts per window) or in proportion to a Gamma(0.5) activity per
    device (a heavy tail of busy devices); ``heavy_tail`` None: each device sends exactly 4 reports in a
    window it is active in (a fixed schedule). ``late_share``: that share of each window's reports
    arrives after its on-time pane, within the lateness (streaming: a second atom when it reaches
    min_reports)."""
    rng = np.random.default_rng(seed)
    n, devices = 72_000, 3_000
    cfg = parse_config({"collection": "telemetry", "features": [{"name": "crash", "type": "boolean"}],
                        "channel": {"mechanism": "symmetric", "epsilon": 1.0}, "max_order": 1,
                        "window": {"type": "fixed", "size_seconds": window_hours * 3600}, "min_reports": 300,
                        "extremes": [{"name": "crashed", "op": "or", "bits": ["crash"], "over": "client"}]})
    times = diurnal_times(rng, n, DEFAULT_START_MS, 3 * 24 * HOUR_MS)
    window = (times - DEFAULT_START_MS) // (window_hours * HOUR_MS)
    if heavy_tail is None:   # each window's reports in fours, one device each (a window's last 0-3
        keep = np.ones(n, bool)   # reports, which would make a device of fewer, are not sent)
        device = np.zeros(n, dtype=np.int64)
        for w in np.unique(window):
            inside = np.flatnonzero(window == w)
            device[inside] = w * n + np.arange(inside.size) // 4
            keep[inside[inside.size - inside.size % 4:]] = False
        times, window, device, n = times[keep], window[keep], device[keep], int(keep.sum())
        unnamed = np.zeros(n, bool)
    else:
        weight = rng.gamma(0.5, size=devices) if heavy_tail else np.ones(devices)
        device = rng.choice(devices, size=n, p=weight / weight.sum())
        unnamed = rng.random(n) < 0.2
    tokens = np.where(unnamed, None, np.array([f"d{d}" for d in device], dtype=object))
    late = rng.random(n) < late_share
    windows = []
    for w in np.unique(window):
        inside = window == w
        atoms = [list(tokens[inside & ~late])] + ([list(tokens[inside & late])] if late_share else [])
        windows.append(atoms)
    return cost(cfg, windows)


def render(name: str, c: dict) -> str:
    def part(k):
        w, r = c[k]
        return f"{w}/{c['windows']} windows ({r:,}/{c['reports']:,} reports)"
    return f"| {name} | {part('earlier')} | {part('now')} |"


def main() -> None:
    rows = ["| population | client rows published before | now |", "|---|---|---|"]
    rows.append(render("demo, as the simulator draws clients (reports / 1)", demo(1)))
    rows.append(render("demo, a client per 4 reports", demo(4)))
    for hours in (1, 24):
        for tail in (False, True):
            rows.append(render(f"diurnal, {hours} h windows, {'heavy-tailed' if tail else 'uniform'} devices",
                               realistic(hours, tail)))
    rows.append(render("diurnal, 1 h windows, uniform devices, streaming with 5% late", realistic(1, False, 0.05)))
    rows.append(render("diurnal, 1 h windows, every device 4 reports a window, all named", realistic(1, None)))
    rows.append(render("the same, streaming with 5% late", realistic(1, None, 0.05)))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
