"""A synthetic population for a collection config: correlated true features, randomized by the
client randomizer (seeded), spread over a span of event times, with the true counts beside.

Correlation comes from one latent factor: each feature's score is ``load * common + noise``; a
boolean is on when its score passes a threshold, a categorical takes the value with the largest
score plus a per-value offset, a numeric feature is ``low + (high - low) * logistic(score + offset)``
(kept beside the bits, and encoded to its one bit by the client's Bernoulli draw). Thresholds,
loads and offsets are drawn from the seed too.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ldp_marginals import schemas
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.randomizer import ClientRandomizer

DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the first event time of simulations and the demo


@dataclass
class Population:
    true_bits: np.ndarray     # (n, n_bits) uint8
    noisy: np.ndarray         # (n, n_bytes) uint8 packed
    event_ms: np.ndarray      # (n,) int64
    clients: np.ndarray       # (n,) object (str) or None
    values: dict | None = None   # numeric feature name -> (n,) float64 true values (their bits are encoded)


def simulate_population(config, n_reports: int, seed: int = 0, start_ms: int = DEFAULT_START_MS,
                        span_seconds: float | None = None, reports_per_client: int = 1) -> Population:
    """``n_reports`` reports of ``config``'s layout, event times uniform over ``span_seconds``
    (default: four windows, or one day for the global window) from ``start_ms``."""
    if n_reports < 0:
        raise ValueError(f"n_reports must be >= 0, got n_reports={n_reports}")
    if reports_per_client < 1:
        raise ValueError(f"reports_per_client must be >= 1, got reports_per_client={reports_per_client}")
    rng = np.random.default_rng(seed)
    layout = config.layout
    common = rng.standard_normal(n_reports)
    columns, values = [], {}
    for f in layout.features:
        load = rng.uniform(0.3, 1.2)
        if f.kind == "boolean":
            score = load * common + rng.standard_normal(n_reports)
            threshold = np.quantile(score, 1 - rng.uniform(0.1, 0.6)) if n_reports else 0.0
            columns.append((score > threshold).astype(np.uint8)[:, None])
        elif f.kind == "numeric":
            score = load * common + rng.standard_normal(n_reports) + rng.uniform(-1, 1)
            unit = 1 / (1 + np.exp(-score))
            values[f.name] = f.low + (f.high - f.low) * unit
            columns.append((rng.random(n_reports) < unit).astype(np.uint8)[:, None])   # the client's encoding
        else:
            k = len(f.values)
            offsets = rng.normal(0, 0.8, k)
            loads = rng.normal(0, load, k)
            scores = common[:, None] * loads + offsets + rng.standard_normal((n_reports, k))
            columns.append(np.eye(k, dtype=np.uint8)[scores.argmax(axis=1)])
    true_bits = np.concatenate(columns, axis=1) if n_reports else np.zeros((0, layout.n_bits), np.uint8)
    noisy = ClientRandomizer(layout, config.channels, rng).randomize_many(true_bits)
    if span_seconds is None:
        span_seconds = 86_400.0 if config.window.type == "global" else 4 * config.window.size_seconds
    event_ms = start_ms + np.sort(rng.integers(0, int(span_seconds * 1000), n_reports))
    clients = None
    if config.client_extremes:
        n_clients = max(1, n_reports // reports_per_client)
        clients = np.array([f"c{i:07d}" for i in rng.integers(0, n_clients, n_reports)], dtype=object)
    return Population(true_bits, noisy, event_ms.astype(np.int64), clients, values)


def report_records(config, pop: Population, dimensions: dict | None = None):
    """NoisyReport records (dicts) of a population."""
    dims = dict(dimensions or {})
    for i in range(pop.noisy.shape[0]):
        yield {"collection": config.name, "event_time": int(pop.event_ms[i]), "bits": pop.noisy[i].tobytes(),
               "dimensions": dims, "client": None if pop.clients is None else str(pop.clients[i])}


def true_counts(config, pop: Population) -> list:
    """Per window: the true count of every counted set, in the family's order (a numeric feature's
    bit as encoded), and the true mean of every published mean (``None`` where nothing is given)."""
    out = []
    labels = config.layout.labels
    for (start, end), idx in config.window.assign(pop.event_ms):
        acc = CooccurrenceAccumulator(config.family).add_bits(pop.true_bits[idx])
        means = []
        for bit, given in config.means:
            x = pop.values[labels[bit]][idx]
            rows = np.all(pop.true_bits[idx][:, list(given)] == 1, axis=1) if given else np.ones(len(idx), bool)
            means.append({"feature": labels[bit], "given": [labels[b] for b in given],
                          "mean": float(x[rows].mean()) if rows.any() else None})
        out.append({"collection": config.name, "window_start": start, "window_end": end, "n_reports": int(len(idx)),
                    "sets": [list(s) for s in config.family], "counts": acc.counts.tolist(), "means": means})
    return out


def write_population(config, pop: Population, out_path: str, dimensions: dict | None = None,
                     truth_path: str | None = None) -> str:
    """Reports to ``out_path`` (Avro), true counts to ``truth_path`` (default ``<out>.truth.json``)."""
    schemas.write_avro(out_path, "noisy_report", report_records(config, pop, dimensions))
    truth_path = truth_path or out_path + ".truth.json"
    with open(truth_path, "w") as fh:
        json.dump({"windows": true_counts(config, pop)}, fh)
    return truth_path
