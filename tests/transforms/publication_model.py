"""A model of what the publication engine's rows reveal, for the property tests of the rule.

Scenarios: a handful of reports, each with a slice, a dimension value and maybe a client token,
arrive in partials between watermark advances and early firings; the engine is driven exactly as the
Beam adapter drives it (an event timer that fires at its own timestamp, a bag of entries).

Provenance from the published numbers themselves: report j alone sets bit j, and the channel is
noiseless (p = 0, q = 1), so a pane's marginal of bit j is 1 exactly when the pane holds report j.
With extremes over clients, one extreme per bit (OR of bit j over a client's reports) is 1 exactly
when the client row's window holds report j.

The algebra. A linear row (every kind but the client extremes) is a function of the sum of its
reports' terms ``l(r)``; a client row is ``sum_c g(c, S_c)`` over its clients, ``S_c`` the client's
reports in the window. A client with one report adds ``g(c, {r}) = l(r)`` (the per-report term: the
attacker can rebuild it from linear rows), so the model identifies them; ``g(c, S)`` for two or more
reports is a monomial of its own. Every published row is a vector over these monomials (all extremes
share one ``l`` and one ``g``: conservative, it only allows more cancellations). A combination of rows
is a vector of their span. The rule holds when no nonzero vector of the span is supported on the
monomials of fewer than ``min_reports`` reports, and none with a client monomial is supported on
fewer than ``min_reports`` parties (clients; a report without a client is a party of its own).
Supports are unions of classes of identical columns; the checker enumerates the small unions and
tests each with ranks (a nonzero vector supported inside T exists iff rank(M) > rank(M without T)).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, PaneEngine, Status
from ldp_marginals.transforms.source import Partial

PERIOD_MS = 60_000
BASE_MS = 1_767_225_600_000


@dataclass
class Scenario:
    window: str               # fixed, sliding or global
    min_reports: int
    lateness: int             # seconds
    max_values: int           # of the dimension k
    clients: bool             # extremes over clients
    reports: list             # (slice index, dimension value, client token or None) per report
    events: list              # ("partial", [report ids]) | ("watermark", slice index) | ("early",)


def config_of(s: Scenario, n_bits: int):
    window = {"fixed": {"type": "fixed", "size_seconds": 60},
              "sliding": {"type": "sliding", "size_seconds": 180, "period_seconds": 60},
              "global": {"type": "global"}}[s.window]
    spec = {"collection": "g", "features": [{"name": f"b{j}", "type": "boolean"} for j in range(n_bits)],
            "channel": {"p": 0.0, "q": 1.0}, "max_order": 1, "window": window, "min_reports": s.min_reports,
            "allowed_lateness_seconds": s.lateness, "early_firing_seconds": 5,
            "dimensions": {"k": {"max_values": s.max_values}}}
    # an extreme over reports (a linear row of another kind): OR of every bit, so its estimate is the
    # number of reports the row holds
    spec["extremes"] = [{"name": "any", "op": "or", "bits": list(range(n_bits))}]
    if s.clients:
        spec["extremes"] += [{"name": f"c{j}", "op": "or", "bits": [f"b{j}"], "over": "client"} for j in range(n_bits)]
    return parse_config(spec)


@dataclass
class Outcome:
    panes: list = field(default_factory=list)
    late: set = field(default_factory=set)         # reports dead-lettered late
    accepted: dict = field(default_factory=dict)   # report -> the windows open when it arrived
    counted: int = 0


def run(s: Scenario) -> tuple:
    """Drive the engine through the scenario; ``(config, Outcome)``."""
    n = len(s.reports)
    cfg = config_of(s, max(n, 1))
    engine, status, bag, out = PaneEngine(cfg), Status(), [], Outcome()
    timer = [None]

    def apply(step):
        nonlocal bag
        if step.store is not None:
            bag = list(step.store)
        bag += step.append
        if step.event_us is not None:
            timer[0] = step.event_us
        out.panes += step.panes
        out.counted += step.counted
        return step

    def advance(to_us):
        while timer[0] is not None and timer[0] <= to_us:
            fired, timer[0] = timer[0], None
            apply(engine.on_watermark(status, fired, lambda: list(bag)))

    for event in s.events + [("watermark", None)]:
        if event[0] == "partial":
            ids = event[1]
            sl, value, _ = s.reports[ids[0]]
            start = BASE_MS + sl * PERIOD_MS if s.window != "global" else 0
            packed = np.zeros((len(ids), cfg.layout.n_bytes), dtype=np.uint8)
            for row, j in enumerate(ids):
                packed[row, j // 8] |= 1 << (j % 8)
            tokens = [s.reports[j][2] for j in ids]
            keys = np.array([client_key(t) if t else 0 for t in tokens], dtype=np.uint64)
            named = np.array([t is not None for t in tokens])
            acc = cfg.aggregator.add_packed(cfg.aggregator.create(), packed, keys, named)
            open_before = [w for w in cfg.window.windows_of_slice(start) if engine.close_us(w) > status.through_us]
            step = apply(engine.on_partial(status, start, Partial("g", (("k", value),), acc), lambda: list(bag)))
            if step.late:
                out.late |= set(ids)
            else:
                for j in ids:
                    out.accepted[j] = open_before
        elif event[0] == "watermark":
            advance(END_OF_TIME_US if event[1] is None else (BASE_MS + event[1] * PERIOD_MS) * 1000)
        elif status.early_set:   # an early firing, as the processing-time timer the engine armed
            apply(engine.on_early(status, lambda: list(bag)))
    return cfg, out


def published(out: Outcome, n_reports: int) -> list:
    """``[(kind, window, pane, key, report set)]``: for each pane and key, the reports its linear rows
    hold (from the marginals; every other linear row of the pane and key must hold as many) and, where
    there are client rows, the reports of their window."""
    rows = []
    for f in out.panes:
        if f.kind not in ("marginals", "extremes"):
            continue
        by_key = {}
        for r in f.rows:
            key = tuple(sorted(r["dimensions"].items()))
            if f.kind == "extremes" and r["name"] == "any":
                continue
            j = r["columns"][0] if f.kind == "marginals" else int(r["name"][1:])
            value = r["estimate"]
            if abs(value - round(value)) > 1e-9 or round(value) not in (0, 1):
                raise AssertionError(f"a noiseless one-hot estimate must be 0 or 1, got {value} in {f}")
            by_key.setdefault(key, set())
            if round(value) == 1:
                by_key[key].add(j)
        for key, held in by_key.items():
            rows.append(("linear" if f.kind == "marginals" else "client", f.window, f.pane, key, frozenset(held)))
        if f.kind == "marginals":   # the pane's other linear kind holds exactly the marginals' reports
            same = [x for x in out.panes if x.kind == "extremes" and x.window == f.window and x.pane == f.pane]
            for x in same:
                for r in x.rows:
                    key = tuple(sorted(r["dimensions"].items()))
                    if r["name"] == "any" and abs(r["estimate"] - len(by_key.get(key, ()))) > 1e-9:
                        raise AssertionError(f"the extreme over reports holds other reports than the marginals: {x}")
    return rows


def vectors(s: Scenario, rows: list) -> list:
    """Each published row as ``{monomial: 1}`` (see the module docstring)."""
    out = []
    for kind, _, _, _, held in rows:
        if kind == "linear":
            out.append({("l", r): 1.0 for r in held})
            continue
        by_client = {}
        for r in held:
            by_client.setdefault(s.reports[r][2], set()).add(r)
        vec = {}
        for client, reps in by_client.items():
            if client is None:
                raise AssertionError("a client row holds a report without a client")
            vec[("l", next(iter(reps))) if len(reps) == 1 else ("g", client, frozenset(reps))] = 1.0
        out.append(vec)
    return out


def _reports(mono) -> frozenset:
    return frozenset([mono[1]]) if mono[0] == "l" else mono[2]


def _parties(mono, s: Scenario) -> frozenset:
    if mono[0] == "g":
        return frozenset([("c", mono[1])])
    client = s.reports[mono[1]][2]
    return frozenset([("c", client) if client else ("r", mono[1])])


def isolation(s: Scenario, rows: list) -> str | None:
    """A description of a combination of rows that isolates fewer than ``min_reports`` reports, or
    whose client terms involve fewer than ``min_reports`` parties; None when there is none."""
    m = s.min_reports
    vecs = vectors(s, rows)
    monos = sorted({k for v in vecs for k in v}, key=repr)
    if not monos or m <= 1:
        return None
    M = np.array([[v.get(k, 0.0) for k in monos] for v in vecs])
    classes = {}
    for j, k in enumerate(monos):
        classes.setdefault(M[:, j].tobytes(), []).append(k)
    cols = list(classes.values())
    C = np.array([[M[i, monos.index(c[0])] for c in cols] for i in range(M.shape[0])])
    reports = [frozenset().union(*map(_reports, c)) for c in cols]
    parties = [frozenset().union(*(_parties(k, s) for k in c)) for c in cols]
    has_g = [any(k[0] == "g" for k in c) for c in cols]

    def supported(inside: list) -> np.ndarray:
        """Vectors spanning the span's part supported inside the classes ``inside`` (rows; all zero
        when there is none): the combinations whose coefficients vanish on every other class."""
        rest = [j for j in range(len(cols)) if j not in inside]
        if rest:
            u, sv, _ = np.linalg.svd(C[:, rest], full_matrices=True)
            null = u[:, int((sv > 1e-9).sum()):].T
        else:
            null = np.eye(C.shape[0])
        return null @ C[:, inside]

    def unions(limit, size):
        """Maximal sets of classes whose ``size`` (reports or parties) stays under ``limit``."""
        small = [j for j in range(len(cols)) if len(size[j]) < limit]
        found = []

        def grow(chosen, union, start):
            extended = False
            for j in small[start:]:
                u = union | size[j]
                if len(u) < limit:
                    extended = True
                    grow(chosen + [j], u, small.index(j) + 1)
            if chosen and not extended:
                found.append(chosen)
        grow([], frozenset(), 0)
        return found

    for inside in unions(m, reports):
        basis = supported(inside)
        if basis.size and np.abs(basis).max() > 1e-9:
            who = sorted(set().union(*(reports[j] for j in inside)))
            return f"a combination isolates reports {who} (< min_reports={m})"
    for inside in unions(m, parties):
        g_cols = [i for i, j in enumerate(inside) if has_g[j]]
        if not g_cols:
            continue
        basis = supported(inside)
        if basis.size and np.abs(basis[:, g_cols]).max() > 1e-9:
            who = sorted(set().union(*(parties[j] for j in inside)))
            return f"a combination with client terms involves only parties {who} (< min_reports={m})"
    return None


def accounting(s: Scenario, cfg, out: Outcome) -> str | None:
    """Every report is late, or accepted into the windows open when it arrived; per window, the
    reports its latest pane publishes (each in one key) plus its withheld count are exactly the
    reports accepted into it. None when that holds, else what does not."""
    n = len(s.reports)
    if set(out.accepted) | out.late != set(range(n)) or set(out.accepted) & out.late:
        return f"reports neither accepted nor late, or both: {sorted(set(range(n)) ^ set(out.accepted) ^ out.late)}"
    if out.counted != len(out.accepted):
        return f"counted {out.counted}, accepted {len(out.accepted)}"
    glob = s.window == "global"
    latest, withheld = {}, {}
    for f in out.panes:
        if f.kind == "marginals" and (f.window not in latest or f.pane > latest[f.window][0]):
            held = {}
            for r in f.rows:
                if round(r["estimate"]) == 1:
                    held.setdefault(r["columns"][0], set()).add(tuple(sorted(r["dimensions"].items())))
            if any(len(keys) > 1 for keys in held.values()):
                return f"a report is in two keys of one pane: {f}"
            latest[f.window] = (f.pane, set(held))
        if f.kind == "withheld":
            withheld[f.window] = withheld.get(f.window, 0) + sum(
                r["n_reports"] for r in f.rows if r["statistic"] == "all")
    windows = {None if glob else w for ws in out.accepted.values() for w in ws}
    for w in windows | set(latest) | set(withheld):
        into = {j for j, ws in out.accepted.items() if (None if glob else w) in [None if glob else x for x in ws]}
        pub = latest.get(w, (0, set()))[1]
        if not pub <= into or len(into) - len(pub) != withheld.get(w, 0):
            return f"window {w}: accepted {sorted(into)}, published {sorted(pub)}, withheld {withheld.get(w, 0)}"
    return None


def random_scenario(rng, n_max: int = 20) -> Scenario:
    """A seeded random scenario (the mutation tests use these; the property tests draw the same
    shapes with hypothesis). Few slices, few clients of several reports each, late partials."""
    window = str(rng.choice(["fixed", "sliding", "global"]))
    clients = window != "sliding" and rng.random() < 0.7
    n = int(rng.integers(1, n_max + 1))
    tokens = [f"t{i}" for i in range(int(rng.integers(2, 6)))]
    reports = [(int(rng.integers(0, 3)) if window != "global" else 0, str(rng.choice(list("abc")[:int(rng.integers(1, 4))])),
                str(rng.choice(tokens)) if clients and rng.random() < 0.9 else None) for _ in range(n)]
    order = [int(j) for j in rng.permutation(n)]
    events, mark = [], 0
    while order:
        first = order[0]
        batch = [j for j in order if reports[j][:2] == reports[first][:2]][:int(rng.integers(1, 5))]
        order = [j for j in order if j not in batch]
        events.append(("partial", batch))
        roll = rng.random()
        if roll < 0.5:
            mark += int(rng.integers(1, 3))
            events.append(("watermark", mark))
        elif roll < 0.65:
            events.append(("early",))
    return Scenario(window, int(rng.choice([2, 2, 3, 4])), int(rng.choice([0, 60, 300])), int(rng.integers(1, 4)),
                    bool(clients), reports, events)


def late_clients_scenario(rng) -> Scenario:
    """One fixed window whose clients send several reports on time and again late (within the
    lateness): the windows where a client's state spans panes."""
    tokens = [f"t{i}" for i in range(int(rng.integers(2, 5)))]
    n = int(rng.integers(4, 16))
    reports = [(0, str(rng.choice(list("ab"))), str(rng.choice(tokens))) for _ in range(n)]
    cut = int(rng.integers(2, n - 1))
    events = [("partial", [j for j in range(cut) if reports[j][1] == v]) for v in "ab"]
    events = [e for e in events if e[1]] + [("watermark", 1)]
    rest = list(range(cut, n))
    while rest:
        take = int(rng.integers(1, 4))
        batch = [j for j in rest if reports[j][1] == reports[rest[0]][1]][:take]
        rest = [j for j in rest if j not in batch]
        events += [("partial", batch), ("watermark", 2)]
    return Scenario("fixed", int(rng.choice([2, 3])), 300, int(rng.integers(1, 3)), True, reports, events)
