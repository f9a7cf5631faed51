"""``plan``'s outlook on withholding: which kinds of row a collection would publish at a population, found by
running the job's own publication step (:func:`~ldp_marginals.transforms.publication.engine.batch_window`:
the thin-row rule of the whole-report kinds, the rule of the client rows with their reads, the release of a
key on ``min_reports`` devices or reports, the rollups' complementary rule, the conditionals' precision
rule) on seeded simulated windows of that population; nothing of the rules is re-derived here.

The rules read the reports' *draws* (which coefficients, which subsets, which clients), not their content,
except the precision rule (the presence test of a conditional's condition), which reads the estimates: the
simulated devices hold independent bits at frequency :data:`FREQUENCY`, so its verdict is for such data and
is for such data (``precision``: a row withheld for it in some window). A window is simulated as one slice per
key (a fixed window's rule; the per-slice rule of sliding windows and panes is not simulated).

The population: ``keys`` keys of ``devices`` devices each (the unit's persons; under the report unit, each
still a client token), each sending ``reports`` reports in the window; memoized channels draw each device's
permanent response once (:mod:`~ldp_marginals.ldp.kind_memoize`, :mod:`~ldp_marginals.ldp.memoized`)."""
from __future__ import annotations

import numpy as np

from ldp_marginals.schemas.outputs import (
    CONDITIONALS,
    CONSISTENT_TABLES,
    EXTREMES,
    MARGINALS,
    MEANS,
    TABLES,
    WITHHELD,
)

FREQUENCY = 0.5       # each simulated device's bits: independent, on with this probability
WINDOWS = 3           # simulated windows (seeds) per outlook: a row kind publishes when it does in every one
SEED = 48
ROW_KINDS = (MARGINALS, TABLES, CONSISTENT_TABLES, EXTREMES, CONDITIONALS, MEANS)


def simulated_window(cfg, devices: int, reports: int, keys: int, rng) -> list:
    """``[(slice start, dims, settled accumulator)]`` of one window: ``keys`` keys (values ``k0``,
    ``k1``, ... of the config's first dimension; one key without dimensions) of ``devices`` devices each
    sending ``reports`` reports, each device under its own token."""
    from ldp_marginals.ldp.aggregate import client_key
    start = 0
    size_ms = int(cfg.window.size_seconds * 1000)
    names = [d.name for d in cfg.dimensions]
    if not names and keys != 1:
        raise ValueError(f"keys must be 1 for collection {cfg.name!r} (it declares no dimension), got keys={keys}")
    agg = cfg.aggregator
    out = []
    for k in range(keys):
        truth = (rng.random((devices, cfg.layout.n_bits)) < FREQUENCY).astype(np.uint8)
        packed, owner = _reports(cfg, truth, reports, rng)
        tokens = np.array([client_key(f"k{k}-d{d}") for d in range(devices)], dtype=np.uint64)
        event_ms = start + rng.integers(0, size_ms, owner.size).astype(np.int64)
        dims = tuple((name, f"k{k}") for name in names[:1])
        if cfg.counts_devices or cfg.device is not None:
            acc = agg.settle(agg.add_devices(agg.create_open(), packed, tokens[owner], event_ms))
        else:
            acc = agg.create()
            if cfg.client_extremes:
                from ldp_marginals.ldp.devices import report_ranks
                ranks = report_ranks(agg.collection_key, tokens[owner], event_ms) \
                    if cfg.client_sample is not None else None
                agg.add_packed(acc, packed, tokens[owner], np.ones(owner.size, dtype=bool), ranks=ranks)
            else:
                agg.add_packed(acc, packed)
        out.append((start, dims, acc))
    return out


def _reports(cfg, truth, reports: int, rng) -> tuple:
    """``(packed reports, owner)``: each device's ``reports`` reports under the config's channel."""
    from ldp_marginals.ldp.encoding import pack_bits
    per_device = np.full(truth.shape[0], reports)
    if cfg.sampling is None:
        from ldp_marginals.ldp.memoized import randomize_repeats
        noisy, owner = randomize_repeats(truth, per_device, cfg.client_channels, rng)
        return pack_bits(noisy), owner
    from ldp_marginals.ldp.subset_rr import SubsetRR
    subset = isinstance(cfg.sampling, SubsetRR)
    if cfg.kind_memo is not None:
        from ldp_marginals.ldp.kind_memoize import randomize_memoized_hadamard, randomize_memoized_subset
        a, b, owner = (randomize_memoized_subset if subset else randomize_memoized_hadamard)(
            truth, per_device, cfg.kind_memo, rng)
        return cfg.wire.pack(a, b), owner
    owner = np.repeat(np.arange(truth.shape[0]), reports)
    if subset:
        from ldp_marginals.ldp.subset_rr import randomize_subset
        a, b = randomize_subset(truth[owner], cfg.sampling, rng)
    else:
        from ldp_marginals.ldp.hadamard import randomize_hadamard
        a, b = randomize_hadamard(truth[owner], cfg.sampling, rng)
    return cfg.wire.pack(a, b), owner


def window_outlook(cfg, devices: int, reports: int, keys: int, seed: int) -> dict:
    """One simulated window through the job's publication step: ``{"published": {kind: rows},
    "withheld": {(cause, statistic): rows}, "reasons": [a reason of each (cause, statistic)]}`` over its
    keys and rollup rows."""
    from ldp_marginals.transforms.publication.engine import batch_window
    rng = np.random.default_rng(seed)
    slices = simulated_window(cfg, devices, reports, keys, rng)
    rows = batch_window(cfg, (0, int(cfg.window.size_seconds * 1000)), slices)
    published = {kind: 0 for kind in ROW_KINDS}
    withheld, reasons = {}, {}
    for kinds in rows.values():
        for kind in ROW_KINDS:
            published[kind] += len(kinds.get(kind, []))
        for r in kinds.get(WITHHELD, []):
            at = (r["cause"], r["statistic"])
            withheld[at] = withheld.get(at, 0) + 1
            reasons.setdefault(at, r["reason"])
    return {"published": published, "withheld": withheld, "reasons": reasons}


def expected_kinds(cfg) -> list:
    """The kinds of row the config asks for (:data:`ROW_KINDS` it publishes at all)."""
    out = [MARGINALS]
    if cfg.groups:
        out += [TABLES, CONSISTENT_TABLES]
    if cfg.report_extremes or cfg.client_extremes:
        out.append(EXTREMES)
    if cfg.conditionals:
        out.append(CONDITIONALS)
    if cfg.means:
        out.append(MEANS)
    return out


def publication_outlook(cfg, devices: int, reports: int, keys: int = 1, windows: int = WINDOWS,
                        seed: int = SEED) -> dict:
    """Whether every kind of row the config asks for publishes at ``devices`` devices a key (``keys``
    keys), each sending ``reports`` reports a window: ``windows`` simulated windows (module docstring).
    ``{"publishes": bool (nothing withheld for privacy in any window, every asked kind published),
    "withheld": {"cause/statistic": most rows withheld in a window}, "reasons": {...: a reason},
    "published": {kind: fewest rows in a window}, "precision": bool (a row withheld for precision in
    some window, at bits of frequency FREQUENCY), "population": {...}}``."""
    for name, value, low in (("devices", devices, 1), ("reports", reports, 1), ("keys", keys, 1),
                             ("windows", windows, 1)):
        if not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {name}={value!r}")
    runs = [window_outlook(cfg, devices, reports, keys, seed + i) for i in range(windows)]
    withheld, reasons = {}, {}
    for run in runs:
        for (cause, statistic), n in run["withheld"].items():
            at = f"{cause}/{statistic}"
            withheld[at] = max(withheld.get(at, 0), n)
            reasons.setdefault(at, run["reasons"][(cause, statistic)])
    published = {kind: min(run["published"][kind] for run in runs) for kind in ROW_KINDS}
    asked = expected_kinds(cfg)
    missing = [kind for kind in asked if not published[kind]]
    return {"publishes": not withheld and not missing, "withheld": withheld, "reasons": reasons,
            "published": published, "missing": missing,
            "precision": any(at.startswith("precision/") for at in withheld),
            "population": {"devices_per_key": devices, "reports_per_device": reports, "keys": keys,
                           "windows": windows}}


ASSUMED_REPORTS_PER_WINDOW = 10_000   # plan's N when none is given (it says so)


def outlook_population(args, cfg, n) -> dict | None:
    """The population the recommendation must publish at (``publishing_advice``): ``--devices-per-key``
    (default: N reports per window and key over R reports a device), ``--reports-per-device`` (default:
    the most reports of a device in a row, :attr:`repeats_per_window`, under the device unit; else 1),
    ``--keys`` and ``--outlook-windows``; None with ``--no-outlook``."""
    if not getattr(args, "outlook", True):
        return None
    reports = getattr(args, "reports_per_device", None)
    if reports is None:
        reports = cfg.repeats_per_window if cfg.counts_devices else 1
    devices = getattr(args, "devices_per_key", None)
    if devices is None:
        devices = max(1, (n or ASSUMED_REPORTS_PER_WINDOW) // reports)
    out = {"devices": devices, "reports": reports, "keys": getattr(args, "keys", 1),
           "windows": getattr(args, "outlook_windows", 3)}
    for name, option in (("devices", "--devices-per-key"), ("reports", "--reports-per-device"), ("keys", "--keys"),
                         ("windows", "--outlook-windows")):
        if not isinstance(out[name], int) or out[name] < 1:
            raise ValueError(f"{option} must be an integer >= 1, got {option}={out[name]!r}")
    return out
