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
    dimensions: dict | None = None   # dimension name -> (n,) object (str) value of each report
    devices: np.ndarray | None = None   # (n,) int64: each report's device (simulate_devices), None: reports alone


def parse_dimension(text: str) -> tuple:
    """``region=eu:0.6,us:0.4`` -> ``("region", [("eu", 0.6), ("us", 0.4)])`` (weights are relative;
    a value without one weighs 1)."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise ValueError(f"--dimension must be NAME=VALUE[:WEIGHT],..., got --dimension={text!r}")
    values = []
    for item in rest.split(","):
        value, _, weight = item.partition(":")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"--dimension {name}: weight of {value!r} must be a number, got {weight!r}") from None
        if not value or not w > 0:
            raise ValueError(f"--dimension {name}: each value needs a name and a weight > 0, got {item!r}")
        values.append((value, w))
    if len({v for v, _ in values}) != len(values):
        raise ValueError(f"--dimension {name}: a value is listed twice, got {text!r}")
    return name, values


def parse_prevalence(text: str) -> tuple:
    """``dark_mode=0.3`` (a boolean: the share of reports with it true) or ``os=mac:0.5,win:0.3,linux:0.2``
    (a categorical: each value's share) -> ``(feature, value)``, value a float or ``{value: share}``."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise ValueError(f"--prevalence must be FEATURE=SHARE or FEATURE=VALUE:SHARE,..., got --prevalence={text!r}")
    if ":" not in rest:
        return name, _share(name, rest)
    shares = {}
    for item in rest.split(","):
        value, _, share = item.partition(":")
        if not value or value in shares:
            raise ValueError(f"--prevalence {name}: each value once with a share, got {item!r}")
        shares[value] = _share(name, share)
    return name, shares


def _share(name: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"--prevalence {name}: a share must be a number in (0, 1), got {text!r}") from None
    if not 0 < v < 1:
        raise ValueError(f"--prevalence {name}: a share must be in (0, 1), got {text!r}")
    return v


@dataclass(frozen=True)
class Change:
    """From ``at_ms`` on, the boolean ``feature`` is true in a ``prevalence`` share of the reports
    whose dimension ``where`` (``(name, value)``, or None: every report) matches."""
    feature: str
    prevalence: float
    at_ms: int
    where: tuple | None = None


def parse_change(text: str, at_ms: int, where: str | None = None) -> Change:
    """``--change dark_mode=0.6 --change-at MS [--change-where region=eu]``."""
    name, prevalence = parse_prevalence(text)
    if isinstance(prevalence, dict):
        raise ValueError(f"--change takes a boolean feature and its new share, got --change={text!r}")
    dim = None
    if where is not None:
        key, sep, value = where.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"--change-where must be DIMENSION=VALUE, got --change-where={where!r}")
        dim = (key, value)
    return Change(name, prevalence, int(at_ms), dim)


def _threshold_for(score: np.ndarray, share: float) -> float:
    return float(np.quantile(score, 1 - share)) if score.size else 0.0


def _offsets_for(scores: np.ndarray, offsets: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Per-value offsets that give each value its share of the argmax (fixed-point steps on the log ratio)."""
    off = offsets.copy()
    for _ in range(200):
        got = np.bincount((scores + off).argmax(axis=1), minlength=off.size) / max(len(scores), 1)
        if np.max(np.abs(got - shares)) < 2e-3:
            break
        off += 0.5 * (np.log(shares) - np.log(np.maximum(got, 1e-6)))
    return off


def _check_scenario(config, prevalences: dict, change: Change | None) -> None:
    known = {f.name: f for f in config.layout.features}
    asked = list(prevalences.items()) + ([(change.feature, change.prevalence)] if change else [])
    for i, (name, share) in enumerate(asked):
        f = known.get(name)
        if f is None:
            raise ValueError(f"{name}: the config has no feature {name!r} (features: {sorted(known)})")
        is_change = change is not None and i == len(asked) - 1
        if f.kind == "boolean" and isinstance(share, dict):
            raise ValueError(f"--prevalence {name}: a boolean takes one share, got {share!r}")
        if f.kind == "categorical" and not is_change:
            if not (isinstance(share, dict) and set(share) == set(f.values) and abs(sum(share.values()) - 1) < 1e-9):
                raise ValueError(f"--prevalence {name}: give every value of {list(f.values)} a share, summing to 1, "
                                 f"got {share!r}")
        elif f.kind != "boolean":
            raise ValueError(f"{'--change' if is_change else '--prevalence'} {name}: takes "
                             f"{'a boolean' if is_change else 'a boolean or categorical'} feature, got a {f.kind} one")


def day_curve(event_ms) -> np.ndarray:
    """The day's shape of traffic at each time (UTC): ``1 + 0.8 sin(2 pi (hour - 8) / 24)``, mean 1 over a
    day, lowest around 02:00 (0.2), highest around 14:00 (1.8)."""
    hour = (np.asarray(event_ms, dtype=np.int64) // 1000 % 86_400) / 3600.0
    return 1 + 0.8 * np.sin(2 * np.pi * (hour - 8) / 24)


def diurnal_times(rng, n: int, start_ms: int, span_ms: int) -> np.ndarray:
    """``n`` event times over ``[start_ms, start_ms + span_ms)`` whose rate follows the day (UTC):
    ``1 + 0.8 sin(2 pi (hour - 8) / 24)``, lowest around 02:00, highest around 14:00 (about 9x)."""
    minutes = max(1, span_ms // 60_000)
    rate = day_curve(start_ms + np.arange(minutes) * 60_000)
    chosen = rng.choice(minutes, size=n, p=rate / rate.sum())
    within = rng.integers(0, min(60_000, span_ms), n)
    return np.minimum(start_ms + chosen * 60_000 + within, start_ms + span_ms - 1)


def draw_features(config, n: int, rng, prevalences: dict | None = None) -> tuple:
    """``n`` rows of true features of ``config``'s layout (reports, or devices that hold their values), the
    draws of the module docstring: ``(true_bits (n, n_bits) uint8, {numeric feature: (n,) values},
    {boolean feature: (n,) scores})``. ``prevalences`` as :func:`simulate_population` takes them."""
    prevalences = prevalences or {}
    layout = config.layout
    common = rng.standard_normal(n)
    columns, values, scores_of = [], {}, {}
    for f in layout.features:
        load = rng.uniform(0.3, 1.2)
        if f.kind == "boolean":
            score = load * common + rng.standard_normal(n)
            drawn_share = rng.uniform(0.1, 0.6)          # drawn even when fixed, so the stream stays the same
            threshold = _threshold_for(score, prevalences.get(f.name, drawn_share))
            scores_of[f.name] = score
            columns.append((score > threshold).astype(np.uint8)[:, None])
        elif f.kind == "numeric":
            score = load * common + rng.standard_normal(n) + rng.uniform(-1, 1)
            unit = 1 / (1 + np.exp(-score))
            values[f.name] = f.low + (f.high - f.low) * unit
            columns.append((rng.random(n) < unit).astype(np.uint8)[:, None])   # the client's encoding
        else:
            k = len(f.values)
            offsets = rng.normal(0, 0.8, k)
            loads = rng.normal(0, load, k)
            scores = common[:, None] * loads + rng.standard_normal((n, k))
            if f.name in prevalences and n:
                offsets = _offsets_for(scores, offsets, np.array([prevalences[f.name][v] for v in f.values]))
            columns.append(np.eye(k, dtype=np.uint8)[(scores + offsets).argmax(axis=1)])
    true_bits = np.concatenate(columns, axis=1) if n else np.zeros((0, layout.n_bits), np.uint8)
    return true_bits, values, scores_of


def draw_dimensions(config, dimensions: list | None, n: int, rng) -> dict | None:
    """Each of ``n`` rows' value of each dimension of ``dimensions`` (:func:`parse_dimension`'s pairs), drawn
    with its weights; None without dimensions. A dimension the config does not declare is refused."""
    if not dimensions:
        return None
    declared = {d.name for d in config.dimensions}
    dims = {}
    for name, weighted in dimensions:
        if name not in declared:
            raise ValueError(f"--dimension {name}: the config declares no dimension {name!r} (declared: "
                             f"{sorted(declared)}); reports with it would be dead-lettered")
        names = np.array([v for v, _ in weighted], dtype=object)
        w = np.array([x for _, x in weighted], dtype=float)
        dims[name] = names[rng.choice(len(names), size=n, p=w / w.sum())]
    return dims


def simulate_population(config, n_reports: int, seed: int = 0, start_ms: int = DEFAULT_START_MS,
                        span_seconds: float | None = None, reports_per_client: int = 1,
                        dimensions: list | None = None, diurnal: bool = False, prevalences: dict | None = None,
                        change: Change | None = None) -> Population:
    """``n_reports`` reports of ``config``'s layout, event times uniform over ``span_seconds``
    (default: four windows, or one day for the global window) from ``start_ms``, or following the
    day (``diurnal``, :func:`diurnal_times`); ``dimensions``: ``[(name, [(value, weight), ...])]``,
    each report's value of each drawn with those weights (:func:`parse_dimension`).

    ``prevalences`` (:func:`parse_prevalence`) fixes a boolean's share of true reports or a
    categorical's shares (the latent factor still correlates the features); ``change`` moves one
    boolean to a new share from a time on, in the reports of one dimension value (its reports are
    re-randomized by a generator of their own, so every other report is the same as without it).
    Without either, a seed makes the same draws as before they existed."""
    prevalences = dict(prevalences or {})
    _check_scenario(config, prevalences, change)
    if n_reports < 0:
        raise ValueError(f"n_reports must be >= 0, got n_reports={n_reports}")
    if reports_per_client < 1:
        raise ValueError(f"reports_per_client must be >= 1, got reports_per_client={reports_per_client}")
    rng = np.random.default_rng(seed)
    layout = config.layout
    true_bits, values, scores_of = draw_features(config, n_reports, rng, prevalences)
    noisy = ClientRandomizer(layout, config.channels, rng).randomize_many(true_bits)
    if span_seconds is None:
        span_seconds = 86_400.0 if config.window.type == "global" else 4 * config.window.size_seconds
    span_ms = int(span_seconds * 1000)
    if diurnal:
        event_ms = np.sort(diurnal_times(rng, n_reports, start_ms, span_ms))
    else:
        event_ms = start_ms + np.sort(rng.integers(0, span_ms, n_reports))
    clients = None
    if config.client_extremes:
        n_clients = max(1, n_reports // reports_per_client)
        clients = np.array([f"c{i:07d}" for i in rng.integers(0, n_clients, n_reports)], dtype=object)
    dims = draw_dimensions(config, dimensions, n_reports, rng)
    if change is not None:
        hit = event_ms >= change.at_ms
        if change.where is not None:
            key, value = change.where
            if not dims or key not in dims:
                raise ValueError(f"--change-where {key}={value}: pass --dimension {key}=... to draw that dimension")
            hit &= dims[key] == value
        rows = np.flatnonzero(hit)
        if rows.size:
            bit = layout.bit_index(change.feature)
            score = scores_of[change.feature][rows]
            true_bits[rows, bit] = (score > _threshold_for(score, change.prevalence)).astype(np.uint8)
            again = ClientRandomizer(layout, config.channels, np.random.default_rng([seed, 40]))
            noisy[rows] = again.randomize_many(true_bits[rows])
    return Population(true_bits, noisy, event_ms.astype(np.int64), clients, values, dims)


def report_records(config, pop: Population, dimensions: dict | None = None):
    """NoisyReport records (dicts) of a population."""
    dims = dict(dimensions or {})
    drawn = pop.dimensions or {}
    for i in range(pop.noisy.shape[0]):
        mine = dict(dims, **{k: str(v[i]) for k, v in drawn.items()}) if drawn else dims
        yield {"collection": config.name, "event_time": int(pop.event_ms[i]), "bits": pop.noisy[i].tobytes(),
               "dimensions": mine, "client": None if pop.clients is None else str(pop.clients[i])}


def _keys(pop: Population, idx: np.ndarray, dimensions: dict | None) -> list:
    """``[(dims, indices)]`` of a window's reports by key (the reports' dimensions, as the job keys them)."""
    fixed = dict(dimensions or {})
    if not pop.dimensions:
        return [(fixed, idx)]
    names = sorted(pop.dimensions)
    combo = np.array(["\x00".join(str(pop.dimensions[n][i]) for n in names) for i in idx], dtype=object)
    out = []
    for key in sorted(set(combo.tolist())):
        out.append((dict(fixed, **dict(zip(names, key.split("\x00")))), idx[combo == key]))
    return out


def true_extremes(config, pop: Population, idx: np.ndarray) -> list:
    """The true value of every extreme over the reports ``idx``: how many reports (``over: report``)
    or clients (``over: client``, the OR/AND of the bits of all the client's reports) have it true."""
    out = []
    for e in config.extremes:
        bits = pop.true_bits[idx][:, list(e.bits)]
        per_report = bits.any(axis=1) if e.op == "or" else bits.all(axis=1)
        if e.over == "report":
            value, n = int(per_report.sum()), int(len(idx))
        else:
            clients = pop.clients[idx] if pop.clients is not None else np.array([], dtype=object)
            state = {}
            for c, v in zip(clients.tolist(), per_report.tolist()):
                state[c] = (state.get(c, v) or v) if e.op == "or" else (state.get(c, v) and v)
            value, n = int(sum(state.values())), len(state)
        out.append({"name": e.name, "op": e.op, "over": e.over, "n": n, "true": value})
    return out


def true_counts(config, pop: Population, dimensions: dict | None = None) -> list:
    """Per window and key: the true count of every counted set, in the family's order (a numeric
    feature's bit as encoded), the true mean of every published mean (``None`` where nothing is
    given), and the true value of every extreme; with devices, how many devices sent its reports."""
    out = []
    labels = config.layout.labels
    for (start, end), window_idx in config.window.assign(pop.event_ms):
        for dims, idx in _keys(pop, np.asarray(window_idx), dimensions):
            acc = CooccurrenceAccumulator(config.family).add_bits(pop.true_bits[idx])
            means = []
            for bit, given in config.means:
                x = pop.values[labels[bit]][idx]
                rows = np.all(pop.true_bits[idx][:, list(given)] == 1, axis=1) if given else np.ones(len(idx), bool)
                means.append({"feature": labels[bit], "given": [labels[b] for b in given],
                              "mean": float(x[rows].mean()) if rows.any() else None})
            out.append({"collection": config.name, "window_start": start, "window_end": end, "dimensions": dims,
                        "n_reports": int(len(idx)),
                        **({} if pop.devices is None else {"n_devices": int(np.unique(pop.devices[idx]).size)}),
                        "sets": [list(s) for s in config.family],
                        "counts": acc.counts.tolist(), "means": means, "extremes": true_extremes(config, pop, idx)})
    return out


def write_population(config, pop: Population, out_path: str, dimensions: dict | None = None,
                     truth_path: str | None = None, scenario: dict | None = None, devices: dict | None = None) -> str:
    """Reports to ``out_path`` (Avro), true counts to ``truth_path`` (default ``<out>.truth.json``),
    with the ``scenario`` that set them (prevalences, a change) and the ``devices``' summary
    (:func:`~ldp_marginals.pipelines.simulate_devices.simulate_devices`) when given."""
    schemas.write_avro(out_path, "noisy_report", report_records(config, pop, dimensions))
    truth_path = truth_path or out_path + ".truth.json"
    doc = {"windows": true_counts(config, pop, dimensions)}
    if scenario:
        doc["scenario"] = scenario
    if devices:
        doc["devices"] = devices
    with open(truth_path, "w") as fh:
        json.dump(doc, fh)
    return truth_path
