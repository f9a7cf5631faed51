"""An exact model of what the publication engine's rows reveal, for the property tests of the rule.

Scenarios: a handful of reports, each with a slice, a dimension value, maybe a client token and two
payload bits ``a`` and ``b``, arrive in partials between watermark advances and early firings; the
engine is driven exactly as the Beam adapter drives it (an event timer that fires at its own
timestamp, a bag of entries), or, in batch, each window goes to ``batch_window`` with its slices
complete. Batch and streaming outputs go through the same checks.

Provenance from the published numbers themselves: report j alone sets tracer bit ``tj``, so a row's
count of ``tj`` (its marginal's estimate times ``q - p`` plus ``n p``: exact under any channel) is 1
exactly when the row holds report j.

The rows as polynomials. Channels are noisy (symmetric, asymmetric, mixed per bit, or noiseless),
and the payload bits are variables: ``y_ra``, ``y_rb`` of report r. Every numeric field of every
row is a function of a few polynomials in them, computed here from the formulas (not by the
engine's code) and cross-checked against the engine's numbers (:func:`cross_check`):

- a marginal of a set over the reports H of its pane and key: its counts ``sum_{r in H} prod y_rj``
  over the set's subsets (estimate, variance, interval, frequencies and display fields are
  functions of them and ``|H|``, recomputed here with TMDH's formulas);
- an extreme over reports (OR and AND of ``{a, b}``): ``sum_{r in H} g(y_r)`` and the variance
  estimate's ``sum_{r in H} h(y_r)`` (Hehir's per-report products);
- an extreme over clients (OR and AND of ``{a}``, ``{b}``, ``{a, b}``, and OR of ``{a}`` twice:
  overlapping bit sets, several extremes over the same bits): ``sum_c G(S_c)`` and ``sum_c H(S_c)``,
  each client's product over all the bits of all its reports in the row;
- counts (``n_reports``, ``n``) are functions of which reports the row holds, not of their bits;
- with ``derived`` scenarios (a numeric feature m, the pair counts ab and am, a table, a conditional
  and a conditional mean): every other linear row is a function of its pane's counts of a, b, m, ab
  and am, and :func:`cross_check_linear` checks that those rows (and their withholdings for
  precision) are exactly the rows of an accumulator of the reports the pane holds.

The tracer bits' marginals add copies of the payload marginals' structure on variables of their own,
so the span over the payload variables decides every question below exactly.

The algebra. A combination of published fields is, through these polynomials, a vector of their
span ``V`` over the non-constant monomials (a monomial is a set of (report, bits) factors; its
reports are the reports it involves). The rule holds when, for every set R of fewer than
``min_reports`` reports, no nonzero vector of V is supported on monomials of R; and, for every set P
of fewer than ``min_reports`` parties (a client, or a report without one), the vectors of V supported
on the reports of P are those the linear rows alone give (``V_lin``: the rows that are sums over
reports; the promise for them counts reports). Both are rank questions: ``dim(V n W_R)`` is the
number of unit singular values of an orthonormal basis of V restricted to R's columns.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from statistics import NormalDist

import numpy as np

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.schemas.collection import ROLLED_UP
from ldp_marginals.schemas.composition import check_job_composition, composition_faults
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.ldp.windows import GLOBAL_WINDOW
from ldp_marginals.transforms.publication.engine import (END_OF_TIME_US, PaneFile, batch_bound_keys, batch_window,
                                                         ledger_verdict)
from ldp_marginals.transforms.publication.hadamard_rows import group_bits
from ldp_marginals.transforms.publication.rows import window_rows
from tests.transforms.local_stream import LocalStream

PERIOD_MS = 60_000
BASE_MS = 1_767_225_600_000
A, B, M = 1, 2, 4   # the payload bits as a mask over a report's payload (m: a numeric feature's bit)
PAYLOAD = (A, B, M)
CHANNELS = {   # (p, q) of the payload bits a and b; tracer bits use the symmetric channel
    "symmetric": ((0.25, 0.75), (0.25, 0.75)),
    "asymmetric": ((0.1, 0.6), (0.2, 0.9)),
    "mixed": ((0.25, 0.75), (0.1, 0.6)),
    "noiseless": ((0.0, 1.0), (0.0, 1.0)),
}
TRACER = (0.25, 0.75)
REPORT_EXTREMES = (("r_or", "or", A | B), ("r_and", "and", A | B))
CLIENT_EXTREMES = (("c_or_a", "or", A), ("c_and_a", "and", A), ("c_or_ab", "or", A | B), ("c_and_ab", "and", A | B),
                   ("c_and_b", "and", B), ("c_or_a_again", "or", A))
MAX_PER_CLIENT = 5   # reports per token in a scenario: a client's product has 4^k monomials


@dataclass
class Scenario:
    window: str               # fixed, sliding or global
    min_reports: int
    lateness: int             # seconds
    max_values: int           # of the dimension k
    clients: bool             # extremes over clients
    reports: list             # (slice index, dimension value, client token or None) per report
    events: list              # ("partial", [report ids]) | ("watermark", slice index) | ("early",)
    payload: list = field(default_factory=list)   # per report, its noisy (a, b, m) bits
    channel: str = "symmetric"
    derived: bool = False     # also a numeric feature m, a table, a conditional and a conditional mean
    device_bound: int | None = None   # privacy.unit: device with this max_reports_per_device (tokens: devices)
    key_bound: int | None = None      # and with dimensions: this max_keys_per_device
    delivery: int = 0         # the seed of the order the engines' messages are delivered in
    periods: int = 1          # a fixed window's size in slices of PERIOD_MS (reruns with other windows)
    rollups: tuple | None = None   # two dimensions k and j (a value "ax" is k=a, j=x) and these rollups
    client_sample: int | None = None   # reports_per_client: client rows on each client's c reports of smallest rank
    unit: str = "device"      # with device_bound: what min_reports counts ("report": the report unit with device bounds)
    kind: str = "per_bit"     # the channel kind: per_bit, hadamard (one slot) or subset (width 2): KIND_BITS payload bits
    draws: list = field(default_factory=list)   # a whole-report kind's public draw per report: a coefficient or subset
    batch: bool = False       # kind_holdings: the twin's run is the batch job
    modes: tuple = (False, True)   # the runs (batch?) of a kind scenario: those the job accepts (kind_scenario)

    def draw(self, r: int) -> tuple:
        """Report r's draw (a whole-report kind): a coefficient (hadamard) or subset (subset), a sorted tuple
        of payload bit indices; given, or the r-th of the kind's draws in turn."""
        if r < len(self.draws):
            return tuple(self.draws[r])
        pool = KIND_DRAWS[self.kind]
        return pool[r % len(pool)]

    def bits(self, r: int) -> tuple:
        given = tuple(self.payload[r]) if r < len(self.payload) else ()
        return (given + (r % 2, (r // 2) % 2, (r // 4) % 2)[len(given):])[:3]


KIND_BITS = 3   # a whole-report kind's payload bits (a, b, c), max_order 2
KIND_DRAWS = {"hadamard": [s for o in (1, 2) for s in itertools.combinations(range(KIND_BITS), o)],
              "subset": list(itertools.combinations(range(KIND_BITS), 2))}


def config_of(s: Scenario, n_tracers: int):
    if s.kind != "per_bit":
        return kind_config_of(s)
    window = {"fixed": {"type": "fixed", "size_seconds": 60 * s.periods},
              "sliding": {"type": "sliding", "size_seconds": 180, "period_seconds": 60},
              "global": {"type": "global"}}[s.window]
    features = [{"name": f"t{j}", "type": "boolean"} for j in range(n_tracers)]
    features += [{"name": "a", "type": "boolean"}, {"name": "b", "type": "boolean"}]
    channels = [{"p": TRACER[0], "q": TRACER[1]}] * n_tracers + [{"p": p, "q": q} for p, q in _payload_channels(s)]
    names = {A: ["a"], B: ["b"], A | B: ["a", "b"]}
    spec = {"collection": "g", "features": features, "channel": channels[:len(features)], "max_order": 1,
            "window": window, "min_reports": s.min_reports, "allowed_lateness_seconds": s.lateness,
            "early_firing_seconds": 5, "dimensions": {"k": {"max_values": s.max_values}},
            "extremes": [{"name": n, "op": op, "bits": names[m]} for n, op, m in REPORT_EXTREMES]}
    if s.derived:
        features.append({"name": "m", "type": "numeric", "low": 0, "high": 60})
        spec.update(channel=channels, sets=[["a", "b"], ["a", "m"]], groups=[["a", "b"]],
                    conditionals=[{"of": ["a"], "given": ["b"]}], means=[{"of": "m", "given": ["a"]}],
                    conditional_alpha=0.3)
    if s.clients:
        spec["extremes"] += [{"name": n, "op": op, "bits": names[m], "over": "client"} for n, op, m in CLIENT_EXTREMES]
        if s.client_sample is not None:
            spec["reports_per_client"] = s.client_sample
    if s.rollups is not None:
        spec["dimensions"]["j"] = {"max_values": s.max_values}
        spec["rollups"] = [list(r) for r in s.rollups]
    if s.device_bound is not None:   # one key, or with a bound on keys (batch) dimensions
        if s.key_bound is None:
            del spec["dimensions"]
        spec["privacy"] = {"unit": s.unit, "max_reports_per_device": s.device_bound}
        if s.key_bound is not None:
            spec["privacy"]["max_keys_per_device"] = s.key_bound
    return parse_config(spec)


def kind_config_of(s: Scenario):
    """A whole-report kind's collection: payload bits a, b, c, ``max_order`` 2, one slot (hadamard) or
    subsets of width 2 (subset), the table of (a, b) and the extremes over reports of (a, b); the
    scenario's window, guard, dimension and device unit as :func:`config_of` sets them (no tracer bits:
    whole reports carry one draw; what a row holds comes from the per-bit twin, :func:`kind_holdings`)."""
    window = {"fixed": {"type": "fixed", "size_seconds": 60 * s.periods},
              "sliding": {"type": "sliding", "size_seconds": 180, "period_seconds": 60},
              "global": {"type": "global"}}[s.window]
    channel = {"kind": s.kind, "epsilon": 2.0} | ({"slots": 1} if s.kind == "hadamard" else {"width": 2})
    spec = {"collection": "g", "features": [{"name": n, "type": "boolean"} for n in "abc"[:KIND_BITS]],
            "channel": channel, "max_order": 2, "window": window, "min_reports": s.min_reports,
            "allowed_lateness_seconds": s.lateness, "early_firing_seconds": 5,
            "dimensions": {"k": {"max_values": s.max_values}}, "groups": [["a", "b"]],
            "extremes": [{"name": n, "op": op, "bits": ["a", "b"]} for n, op, _ in REPORT_EXTREMES]}
    if s.rollups is not None:
        spec["dimensions"]["j"] = {"max_values": s.max_values}
        spec["rollups"] = [list(r) for r in s.rollups]
    if s.device_bound is not None:
        if s.key_bound is None:
            del spec["dimensions"]
            spec.pop("rollups", None)
        spec["privacy"] = {"unit": s.unit, "max_reports_per_device": s.device_bound}
        if s.key_bound is not None:
            spec["privacy"]["max_keys_per_device"] = s.key_bound
    return parse_config(spec)


def _kind_wire(cfg, s: Scenario, ids: list) -> np.ndarray:
    """The reports ``ids`` encoded by the kind: the draw public, the parity (hadamard: report r's payload
    bit 0) or pattern (subset: the payload bits on the subset) its randomized variable."""
    fmt, fam = cfg.aggregator.format, cfg.aggregator.mechanism.family
    if s.kind == "hadamard":
        index = {fam[i]: i for i in range(1, len(fam))}
        return fmt.pack(np.array([[index[s.draw(r)]] for r in ids], dtype=np.int64).reshape(len(ids), 1),
                        np.array([[s.bits(r)[0]] for r in ids], dtype=np.int64).reshape(len(ids), 1))
    subsets = np.array([sum(1 << b for b in s.draw(r)) for r in ids], dtype=np.int64)
    patterns = np.array([sum(1 << b for b in s.draw(r) if s.bits(r)[b]) for r in ids], dtype=np.int64)
    return fmt.pack(subsets, patterns)


def _tracers(cfg, s: Scenario) -> int:
    return cfg.layout.n_bits - (3 if s.derived else 2)


def _payload_channels(s: Scenario) -> tuple:
    """``(p, q)`` of a, b and m (m on a's channel)."""
    (pa, qa), (pb, qb) = CHANNELS[s.channel]
    return (pa, qa), (pb, qb), (pa, qa)


@dataclass
class Outcome:
    panes: list = field(default_factory=list)
    late: set = field(default_factory=set)         # reports dead-lettered late
    accepted: dict = field(default_factory=dict)   # report -> the windows open when it arrived
    counted: int = 0
    release: object = None   # batch with a release ledger: the run's release (publication/releases.py)


def _packed(cfg, s: Scenario, ids: list) -> tuple:
    if s.kind != "per_bit":
        packed = _kind_wire(cfg, s, ids)
    else:
        n_tracers = _tracers(cfg, s)
        packed = np.zeros((len(ids), cfg.layout.n_bytes), dtype=np.uint8)
        for row, j in enumerate(ids):
            for bit in [j] + [n_tracers + i for i, v in enumerate(s.bits(j)[:cfg.layout.n_bits - n_tracers]) if v]:
                packed[row, bit // 8] |= 1 << (bit % 8)
    tokens = [s.reports[j][2] for j in ids]
    keys = np.array([client_key(t) if t else 0 for t in tokens], dtype=np.uint64)
    named = np.array([t is not None for t in tokens])
    if s.device_bound is not None:   # a reader's partial: open, each device's bottom M of the batch
        # report j's event ms: in its slice, distinct per report (what a device's ranks hash: rank_of)
        event_ms = np.array([_start(s, s.reports[j][0]) + j for j in ids], dtype=np.int64)
        return cfg.aggregator.add_devices(cfg.aggregator.create_open(), packed, keys, event_ms)
    ranks = np.array([rank_of(s, j) for j in ids], dtype=np.uint64) if cfg.client_sample is not None else None
    return cfg.aggregator.add_packed(cfg.aggregator.create(), packed, keys, named, ranks)


def rank_of(s: Scenario, j: int) -> int:
    """Report j's rank for the client sample: the keyed hash of (collection, client, event ms), report j
    stamped at its slice's start plus j ms."""
    token = s.reports[j][2]
    ms = _start(s, s.reports[j][0]) + j
    return int(report_ranks(client_key("g"), np.array([client_key(token) if token else 0], dtype=np.uint64),
                            np.array([ms], dtype=np.int64))[0])


def sampled_groups(s: Scenario, c: int, m: int, reports, atom_of) -> list:
    """The model of the client sample: per client of the row (its reports ``reports``) with at least
    ``c`` reports and its c-th report strictly before its (c+1)-th, its first ``c`` reports by
    (``atom_of(r)``, rank): earlier atoms first (``atom_of`` orders them as they were released), by
    rank within one; then only the clients whose composition (those reports per atom) at least ``m``
    such clients share (with one atom, all)."""
    clients = {}
    for r in sorted(reports):
        if s.reports[r][2] is not None:
            clients.setdefault(s.reports[r][2], []).append(r)
    kept = {}
    for token, rs in clients.items():
        rs = sorted(rs, key=lambda r: (atom_of(r), rank_of(s, r)))
        if len(rs) < c or (len(rs) > c and (atom_of(rs[c - 1]), rank_of(s, rs[c - 1])) == (atom_of(rs[c]),
                                                                                           rank_of(s, rs[c]))):
            continue
        kept[token] = rs[:c]
    comps = {t: tuple(sorted(atom_of(r) for r in rs)) for t, rs in kept.items()}
    if m > 1 and len({atom_of(r) for r in reports}) > 1:
        size = {}
        for comp in comps.values():
            size[comp] = size.get(comp, 0) + 1
        kept = {t: rs for t, rs in kept.items() if size[comps[t]] >= m}
    return [kept[t] for t in sorted(kept)]


def _start(s: Scenario, sl: int) -> int:
    return BASE_MS + sl * PERIOD_MS if s.window != "global" else 0


def run(s: Scenario) -> tuple:
    """Drive the streaming engines through the scenario (the clock, each key's atoms, each capped key's
    panes, wired as the Beam adapter wires them; messages delivered in an order drawn from
    ``s.delivery``, a share of them after each event and the rest at the end); ``(config, Outcome)``."""
    cfg = config_of(s, max(len(s.reports), 1))
    stream, out = LocalStream(cfg, np.random.default_rng(s.delivery)), Outcome()
    for i, event in enumerate(s.events + [("watermark", None)]):
        if event[0] == "partial":
            ids = event[1]
            sl, value, _ = s.reports[ids[0]]
            start = _start(s, sl)
            open_before = [w for w in cfg.window.windows_of_slice(start)
                           if stream.clock.close_us(w) > stream.status.through_us]
            step = stream.partial(start, dims_of(s, value), _packed(cfg, s, ids), f"p{i}")
            if step.late:
                out.late |= set(ids)
            else:
                for j in ids:
                    out.accepted[j] = open_before
        elif event[0] == "watermark":
            stream.advance(END_OF_TIME_US if event[1] is None else (BASE_MS + event[1] * PERIOD_MS) * 1000)
        else:   # an early firing, as the processing-time timer the clock armed
            stream.early()
        stream.deliver(everything=False)
    stream.deliver()
    if not stream.idle():
        raise AssertionError("messages wait for others that never came")
    out.panes, out.counted = stream.panes, stream.counted
    return cfg, out


def dims_of(s: Scenario, value: str) -> tuple:
    """A report's key: ``(("k", value),)``, or with rollups ``k`` and ``j`` from the value's two letters."""
    return (("j", value[1]), ("k", value[0])) if s.rollups is not None else (("k", value),)


def is_rollup(key: tuple) -> bool:
    return any(v == ROLLED_UP for _, v in key)


def run_batch(s: Scenario, earlier: list | None = None) -> tuple:
    """The batch job over the scenario's reports: each window's complete slices to ``batch_window``
    (which caps, routes and publishes each capped key apart, as the job's steps do); with ``earlier``
    (a release ledger's releases) under the ledger's verdict over the whole run, its release in
    ``Outcome.release``."""
    cfg = config_of(s, max(len(s.reports), 1))
    out = Outcome()
    slices = {}
    for j, (sl, value, _) in enumerate(s.reports):
        slices.setdefault((cfg.window.slice_of(_start(s, sl)), value), []).append(j)
    settled = {(start, value): _packed(cfg, s, ids) for (start, value), ids in slices.items()}
    if cfg.bounds_keys:   # each slice's keys bounded per device, then settled (the job's BoundKeys)
        for start in {start for start, _ in settled}:
            value_of = {dims_of(s, v): v for st, v in settled if st == start}
            bounded, _ = batch_bound_keys(cfg, {dims: settled[(start, v)] for dims, v in value_of.items()})
            settled.update({(start, value_of[dims]): acc for dims, acc in bounded.items()})
    windows = {}
    for (start, value), ids in sorted(slices.items()):
        acc = cfg.aggregator.settle(settled[(start, value)])   # the combine's output (settled)
        for w in cfg.window.windows_of_slice(start):
            windows.setdefault(w, []).append((start, dims_of(s, value), acc))
        for j in ids:
            out.accepted[j] = cfg.window.windows_of_slice(start)
    ledger = None if earlier is None else ledger_verdict(cfg, earlier, windows)
    if ledger is not None:
        out.release = ledger.release
    for w, parts in sorted(windows.items()):
        for key, kinds in batch_window(cfg, w, parts, *([] if ledger is None else [ledger])).items():
            for kind, rows in kinds.items():
                if len(rows):
                    out.panes.append(PaneFile(kind, "g", None if s.window == "global" else w, 0, "on_time", rows, key, True))
    out.counted = len(s.reports)
    return cfg, out


# -- the polynomials ------------------------------------------------------------------------------

def _factor(op: str, p: float, q: float) -> tuple:
    """A bit's estimator factor and variance factor, each ``(c0, c1)`` of ``c0 + c1 y`` (Hehir:
    OR ``w = (q - y)/(q - p)``, AND ``z = (y - p)/(q - p)``; variance factor ``e1 + (e0 - e1) w`` or
    ``a0 + (a1 - a0) z``, with ``e1 = a0' = q(1-q)/(q-p)^2`` and ``e0 = 1 + p(1-p)/(q-p)^2``)."""
    gap = q - p
    low, high = p * (1 - p) / gap ** 2, q * (1 - q) / gap ** 2
    if op == "or":
        f = (q / gap, -1 / gap)
        slope = 1 + low - high
        return f, (high + slope * f[0], slope * f[1])
    f = (-p / gap, 1 / gap)
    slope = 1 + high - low
    return f, (low + slope * f[0], slope * f[1])


def _report_poly(factors: dict, mask: int, r: int) -> dict:
    """``prod_{i in mask} (c0_i + c1_i y_ri)`` -> ``{monomial: coef}``; a monomial is a sorted tuple
    of (report, payload mask) factors, one per report it involves."""
    by_mask = {0: 1.0}
    for bit in (A, B):
        if mask & bit:
            c0, c1 = factors[bit]
            nxt = {}
            for m, coef in by_mask.items():
                nxt[m] = nxt.get(m, 0.0) + coef * c0
                nxt[m | bit] = nxt.get(m | bit, 0.0) + coef * c1
            by_mask = nxt
    return {((r, m),) if m else (): coef for m, coef in by_mask.items()}


def _times(x: dict, y: dict) -> dict:
    out = {}
    for m1, c1 in x.items():
        for m2, c2 in y.items():
            mono = tuple(sorted(m1 + m2))   # factors of different reports
            out[mono] = out.get(mono, 0.0) + c1 * c2
    return out


def _add(x: dict, y: dict, scale=1) -> dict:
    out = dict(x)
    for m, c in y.items():
        out[m] = out.get(m, 0.0) + scale * c
    return out


def extreme_polys(s: Scenario, op: str, mask: int, groups: list) -> tuple:
    """``(estimate, variance)`` polynomials of an extreme over each group of reports (a report, or a
    client's reports), summed over the groups: OR ``1 - prod F``, AND ``prod F``, variance
    ``prod V - prod F`` over every bit of the group."""
    (pa, qa), (pb, qb), _ = _payload_channels(s)
    fa, va = _factor(op, pa, qa)
    fb, vb = _factor(op, pb, qb)
    est, var = {}, {}
    for group in groups:
        f_prod, v_prod = {(): 1.0}, {(): 1.0}
        for r in sorted(group):
            f_prod = _times(f_prod, _report_poly({A: fa, B: fb}, mask, r))
            v_prod = _times(v_prod, _report_poly({A: va, B: vb}, mask, r))
        est = _add(est, {(): 1.0}) if op == "or" else est
        est = _add(est, f_prod, -1 if op == "or" else 1)
        var = _add(_add(var, v_prod), f_prod, -1)
    return est, var


def evaluate(s: Scenario, poly: dict) -> float:
    """The polynomial's value at the scenario's payload bits."""
    total = 0.0
    for mono, coef in poly.items():
        if all(all(s.bits(r)[i] or not m & bit for i, bit in enumerate(PAYLOAD)) for r, m in mono):
            total += coef
    return total


# -- what the rows hold ---------------------------------------------------------------------------

def _key(row) -> tuple:
    return tuple(sorted(row["dimensions"].items()))


def holdings(s: Scenario, cfg, out: Outcome) -> dict:
    """``{(window, pane, key): frozenset of reports}`` of every pane and key with marginals, from the
    tracer bits' counts."""
    n_tracers = _tracers(cfg, s)
    p, q = TRACER
    held = {}
    for f in out.panes:
        if f.kind != "marginals":
            continue
        for r in f.rows:
            j = r["columns"][0]
            if j >= n_tracers:
                continue
            count = r["estimate"] * (q - p) + r["n_reports"] * p
            if abs(count - round(count)) > 1e-6 or round(count) not in (0, 1):
                raise AssertionError(f"a tracer bit's count must be 0 or 1, got {count} in {f}")
            members = held.setdefault((f.window, f.pane, _key(r)), set())
            if round(count):
                members.add(j)
    return {k: frozenset(v) for k, v in held.items()}


@dataclass
class Stat:
    """A polynomial that published fields are functions of."""

    poly: dict
    client: bool    # from a row over clients
    where: str


def statistics(s: Scenario, cfg, out: Outcome, batch: bool = False) -> list:
    """Every published row as its polynomials, each field cross-checked against the engine's numbers
    (:func:`cross_check`); raises AssertionError when a row holds what the model cannot explain."""
    held = holdings(s, cfg, out)
    latest = {}   # (window, key) -> [(pane, reports)] for rows of panes without marginals
    for (w, pane, key), reports in held.items():
        latest.setdefault((w, key), []).append((pane, reports))
    z = NormalDist().inv_cdf(0.5 + cfg.level / 2)
    n_tracers = _tracers(cfg, s)
    channels = [TRACER] * n_tracers + list(_payload_channels(s))
    stats, done = [], set()
    for (w, pane, key), reports in held.items():   # the counts every linear row is a function of
        for mask in (A, B, M, A | B, A | M) if s.derived else (A, B, A | B):
            stats.append(Stat({((r, mask),): 1.0 for r in reports}, False, f"{w} {pane} {key}"))
    if s.derived:
        cross_check_linear(s, cfg, out, held)
    for f in out.panes:
        if f.kind not in ("marginals", "extremes"):
            continue
        for row in f.rows:
            key = _key(row)
            before = [x for x in latest.get((f.window, key), []) if x[0] <= f.pane]
            if not before:
                raise AssertionError(f"a row of a pane and key that published no marginals so far: {row}")
            reports = max(before)[1]
            where = f"{f.kind} {f.window} pane {f.pane} {dict(key)}"
            check_pane_fields(row, f, where)
            if f.kind == "marginals":
                def count(bits):   # the reports of the row whose wire bits ``bits`` are all 1
                    return sum(all(b == r if b < n_tracers else s.bits(r)[b - n_tracers] for b in bits)
                               for r in reports)
                cross_check_marginal(row, count, len(reports), channels, z, where)
                continue
            by_name = {n: (op, m, False) for n, op, m in REPORT_EXTREMES}
            by_name.update({n: (op, m, True) for n, op, m in CLIENT_EXTREMES})
            op, mask, over_clients = by_name[row["name"]]
            counts = "reports" if not over_clients else "devices" if cfg.device is not None else "clients"
            if row["n_counts"] != counts:   # what n counts: the extreme's config, nothing of the reports
                raise AssertionError(f"{where}: n_counts is {row['n_counts']!r}, the extreme counts {counts}")
            if over_clients and cfg.client_sample is not None:
                first = {}   # a report's first pane of the window and key that holds it
                for pane, rs in sorted(latest[(f.window, key)]):
                    for r in rs:
                        first.setdefault(r, pane)
                # a report's atom as the model sees it, in the engine's release order: its number among
                # its slice and value's increments (by first pane), then its slice and value
                panes_of = {}
                for r in reports:
                    panes_of.setdefault(s.reports[r][:2], set()).add(first[r])
                number = {r: sorted(panes_of[s.reports[r][:2]]).index(first[r]) for r in reports}
                groups = sampled_groups(s, cfg.client_sample, cfg.min_reports, reports,
                                        (lambda r: 0) if batch else lambda r: (number[r], *s.reports[r][:2]))
            elif over_clients:
                clients = {}
                for r in reports:
                    if s.reports[r][2] is not None:
                        clients.setdefault(s.reports[r][2], []).append(r)
                groups = list(clients.values())
            else:
                groups = [[r] for r in reports]
            est, var = extreme_polys(s, op, mask, groups)
            cross_check_extreme(row, len(groups), evaluate(s, est), evaluate(s, var), z, where)
            if (f.window, f.pane, key, row["name"]) not in done:
                done.add((f.window, f.pane, key, row["name"]))
                stats += [Stat(est, over_clients, where), Stat(var, over_clients, where)]
    return stats


# -- whole-report kinds ---------------------------------------------------------------------------

def kind_holdings(s: Scenario) -> dict:
    """``{(window, pane, key): frozenset of reports}`` of a whole-report kind's scenario: its per-bit twin's
    (the same reports, events, guard and device unit; which reports a pane releases is a matter of counts,
    not of the channel), read from the twin's tracer bits. :func:`kind_statistics` checks every row of the
    kind against an accumulator of exactly those reports, so a twin that differs cannot pass unseen."""
    twin = replace(s, kind="per_bit")
    cfg, out = (run_batch if s.batch else run)(twin)
    return holdings(twin, cfg, out)


def _row_set(cfg, kind: str, row) -> tuple:
    """The payload bits (a sorted tuple) a row of a whole-report kind rests on: a marginal's columns, a
    table's group, an extreme's bits."""
    if kind == "marginals":
        return tuple(sorted(row["columns"]))
    if kind in ("tables", "consistent_tables"):
        return tuple(sorted(group_bits(cfg.layout, tuple(row["group"]))))
    if kind == "extremes":
        return (0, 1)
    raise AssertionError(f"a row of kind {kind} is not modelled for channel kind {cfg.channel_kind}: {row}")


def _kind_polys(s: Scenario, bits: tuple, table: bool, reports) -> list:
    """The vectors a row over ``bits`` reads, as polynomials of the reports' randomized variables (module
    docstring of tests/ldp/test_thin_rows_span.py and test_kind_rollups_span.py): hadamard, each coefficient
    a within ``bits`` its parity sum over the reports that drew a (monomial ``((r, a),)``: report r's one
    parity); subset, the all-ones indicator of ``bits`` summed over the reports whose subset holds them, and
    with a table each cell's indicator (``prod y or (1 - y)`` over ``bits``, monomials ``((r, T),)``: report
    r's pattern bits T, T within its subset)."""
    if s.kind == "hadamard":
        return [{((r, a),): 1.0 for r in reports if s.draw(r) == a}
                for a in KIND_DRAWS["hadamard"] if set(a) <= set(bits)]
    held = [r for r in reports if set(bits) <= set(s.draw(r))]
    cells = [tuple(1 for _ in bits)] + (list(itertools.product((0, 1), repeat=len(bits))) if table else [])
    out = []
    for cell in cells:
        poly = {}
        for r in held:
            terms = {(): 1.0}
            for b, v in zip(bits, cell):
                nxt = {}
                for mono, c in terms.items():   # y (v = 1) or 1 - y (v = 0)
                    if not v:
                        nxt[mono] = nxt.get(mono, 0.0) + c
                    grown = tuple(sorted(mono + (b,)))
                    nxt[grown] = nxt.get(grown, 0.0) + (c if v else -c)
                terms = nxt
            for mono, c in terms.items():
                key = ((r, mono),) if mono else ()
                poly[key] = poly.get(key, 0.0) + c
        out.append(poly)
    return out


def _settled(cfg, s: Scenario, reports) -> object:
    """The settled accumulator of ``reports``: each slice and value's reports settled apart (under the device
    unit each keeps its devices' bottom M, as the job's slices do), merged."""
    parts = {}
    for r in sorted(reports):
        parts.setdefault(s.reports[r][:2], []).append(r)
    agg = cfg.aggregator
    return agg.merge([agg.create()] + [agg.settle(_packed(cfg, s, ids)) for ids in parts.values()])


def kind_statistics(s: Scenario, cfg, out: Outcome) -> list:
    """Every published row of a whole-report kind as the polynomials it is a function of (:func:`_kind_polys`
    of its set over the reports its pane and key hold); each row of marginals, tables, consistent tables and
    extremes cross-checked against the rows of an accumulator of exactly those reports (their fields are
    functions of its counts; a row the engine publishes that such an accumulator does not give fails)."""
    held = kind_holdings(s)
    latest = {}
    for (w, pane, key), reports in held.items():
        latest.setdefault((w, key), []).append((pane, reports))
    stats, done, wanted = [], set(), {}
    for f in out.panes:
        if f.kind == "withheld":
            continue
        for row in f.rows:
            key = _key(row)
            before = [x for x in latest.get((f.window, key), []) if x[0] <= f.pane]
            if not before:
                raise AssertionError(f"a row of a pane and key the twin released nothing of: {f.kind} {row}")
            pane, reports = max(before)
            where = f"{f.kind} {f.window} pane {f.pane} {dict(key)}"
            check_pane_fields(row, f, where)
            if (f.window, pane, key) not in wanted:
                acc = _settled(cfg, s, reports)
                wanted[f.window, pane, key] = {repr(_rounded(r)) for _, r in window_rows(
                    cfg, key, acc, f.window or GLOBAL_WINDOW, final=True)}
            mine = _rounded({k: v for k, v in row.items() if k not in PANE_FIELDS or v is None})
            if repr(mine) not in wanted[f.window, pane, key]:
                raise AssertionError(f"{where}: row {mine} is no row of an accumulator of its reports {sorted(reports)}")
            bits = _row_set(cfg, f.kind, row)
            table = f.kind in ("tables", "consistent_tables")
            if (f.window, f.pane, key, bits, table) not in done:
                done.add((f.window, f.pane, key, bits, table))
                stats += [Stat(poly, False, where) for poly in _kind_polys(s, bits, table, reports)]
    return stats


LINEAR_KINDS = ("tables", "consistent_tables", "conditionals", "means")


def cross_check_linear(s: Scenario, cfg, out: Outcome, held: dict) -> None:
    """The rows of every other linear kind (table cells, conditionals, means, and the withheld rows of
    cause precision) of each pane and key are exactly the rows of an accumulator of the reports the
    model says the pane and key hold: functions of those reports' counts (which the statistics above
    give the span). A pane that published no marginals of a key (a window's close with nothing new
    released) may only repeat the withheld rows of cause precision of the key's latest pane that did."""
    got = {}
    for f in out.panes:
        for row in f.rows:
            if f.kind in LINEAR_KINDS or (f.kind == "withheld" and row["cause"] == "precision"):
                got.setdefault((f.window, f.pane, _key(row)), []).append((f.kind, _rounded(row)))
    wanted = {}
    for (w, pane, key), reports in held.items():
        acc = _packed(cfg, s, sorted(reports))
        want = wanted[w, pane, key] = [
            (kind, _rounded(row)) for kind, row in window_rows(cfg, key, acc, w or GLOBAL_WINDOW, final=False)
            if kind in LINEAR_KINDS or (kind == "withheld" and row["cause"] == "precision")]
        have = got.pop((w, pane, key), [])
        if sorted(map(repr, have)) != sorted(map(repr, want)):
            raise AssertionError(f"pane {pane} of {w} {dict(key)}: rows {have} are not those of its reports {want}")
    for (w, pane, key), have in got.items():
        before = [p for (w2, p, k2) in wanted if (w2, k2) == (w, key) and p < pane]
        want = [(kind, row) for kind, row in wanted[w, max(before), key] if kind == "withheld"] if before else None
        if want is None or sorted(map(repr, have)) != sorted(map(repr, want)):
            raise AssertionError(f"pane {pane} of {w} {dict(key)} published no marginals, and its rows {have} "
                                 f"are not the precision rows of the key's latest pane that did {want}")


def _rounded(row: dict) -> dict:
    return {k: round(v, 9) if isinstance(v, float) else v for k, v in sorted(row.items())}


MARGINAL_FIELDS = {"collection", "window_start", "window_end", "dimensions", "n_reports", "columns", "labels",
                   "estimate", "frequency", "variance", "ci_low", "ci_high", "interval", "frequency_low",
                   "frequency_high", "display_frequency", "display_low", "display_high", "out_of_range"}
EXTREME_FIELDS = {"collection", "window_start", "window_end", "dimensions", "name", "op", "n", "estimate",
                  "variance", "ci_low", "ci_high", "display_estimate", "display_low", "display_high", "out_of_range",
                  "n_counts"}


# what says which pane a row is of (issue 49): functions of the pane and the key, never of the reports. The
# engine's rows leave them unset (None, or absent from a dict row) and the pane's step stamps them
# (transforms/pane_outputs.py); set, they must be the pane's own
PANE_FIELDS = {"pane_index", "pane_timing", "final", "rollup"}


def check_pane_fields(row, f, where):
    """The pane fields of ``row``, of the PaneFile ``f``: unset, or ``f``'s index, timing, finality and
    whether its key is a rollup's."""
    from ldp_marginals.schemas.outputs import is_rollup
    want = {"pane_index": f.pane, "pane_timing": f.beam_timing, "final": f.final, "rollup": is_rollup(f.key)}
    for name, value in want.items():
        if row.get(name) is not None and row[name] != value:
            raise AssertionError(f"{where}: {name} is {row[name]!r}, the pane's is {value!r}")


def _close(got, want, where, name):
    if not abs(float(got) - float(want)) <= 1e-7 * max(1.0, abs(float(want))):
        raise AssertionError(f"{where}: {name} is {got}, the model says {want}")


def _clip(v, lo, hi):
    return min(max(v, lo), hi)


def _check_interval(row, est, var, z, where, lo="ci_low", hi="ci_high", scale=1.0):
    """``row[lo], row[hi] = (est -+ z sqrt(max(var, 0))) / scale``; a variance within rounding of 0 may
    be clipped on either side of it, so the half-widths are compared squared."""
    for name, sign in ((lo, -1), (hi, 1)):
        half = (float(row[name]) * scale - est) * sign
        if not (half >= -1e-9 * max(1.0, abs(est)) and abs(half ** 2 - z * z * max(var, 0.0))
                <= 1e-9 * z * z * max(1.0, abs(var)) + 1e-9 * max(1.0, abs(est)) ** 2):
            raise AssertionError(f"{where}: {name} is {row[name]}, the model says {est} {'-+'[sign > 0]} "
                                 f"{z} sqrt({var})")


def _check_flag(flag, value, lo, hi, where):
    """``out_of_range`` says whether ``value`` left ``[lo, hi]`` (either way within rounding of a bound)."""
    slack = 1e-9 * max(1.0, abs(hi))
    if lo + slack < value < hi - slack or value < lo - slack or value > hi + slack:
        if flag != (not lo <= value <= hi):
            raise AssertionError(f"{where}: out_of_range is {flag} for {value} in [{lo}, {hi}]")


def cross_check_marginal(row, count, n, channels, z, where):
    """Every field of a marginal row from the counts of its set's subsets and ``n`` (TMDH, Carette eq.
    35 and Thm 3.6 in per-bit form: ``t_S = sum_{A in S} c_A prod_{S-A} (-p_i) / prod_S (q_i - p_i)``,
    ``Var t_S = sum_{A in S} prod_{S-A} alpha_i prod_A beta_i t_A - t_S`` with ``t_{} = n``,
    ``alpha = p(1-p)/(q-p)^2``, ``beta = (1-2p)/(q-p)``)."""
    if set(row) - PANE_FIELDS != MARGINAL_FIELDS:
        raise AssertionError(f"{where}: marginal fields {sorted((set(row) - PANE_FIELDS) ^ MARGINAL_FIELDS)} are not "
                             "modelled")
    bits = tuple(row["columns"])
    subsets = [tuple(b for i, b in enumerate(bits) if mask >> i & 1) for mask in range(1 << len(bits))]
    p = {b: channels[b][0] for b in bits}
    gap = {b: channels[b][1] - channels[b][0] for b in bits}

    def t(subset):
        if not subset:
            return float(n)
        inner = sum(count(a) * np.prod([-p[i] for i in subset if i not in a])
                    for a in subsets if set(a) <= set(subset))
        return inner / np.prod([gap[i] for i in subset])

    est = t(bits)
    var = sum(np.prod([p[i] * (1 - p[i]) / gap[i] ** 2 for i in bits if i not in a])
              * np.prod([(1 - 2 * p[i]) / gap[i] for i in a]) * t(a) for a in subsets) - est
    if row["n_reports"] != n:
        raise AssertionError(f"{where}: n_reports {row['n_reports']}, the model says {n}")
    want = {"estimate": est, "variance": var, "frequency": est / n, "display_frequency": _clip(est / n, 0, 1),
            "display_low": _clip(row["frequency_low"], 0, 1), "display_high": _clip(row["frequency_high"], 0, 1)}
    for name, value in want.items():
        _close(row[name], value, where, name)
    _check_interval(row, est, var, z, where)
    _check_interval(row, est, var, z, where, "frequency_low", "frequency_high", n)
    _check_flag(row["out_of_range"], est / n, 0.0, 1.0, where)


def cross_check_extreme(row, n, est, var, z, where):
    """Every field of an extreme row from its estimate, variance and ``n`` (reports or clients)."""
    if set(row) - PANE_FIELDS != EXTREME_FIELDS:
        raise AssertionError(f"{where}: extreme fields {sorted((set(row) - PANE_FIELDS) ^ EXTREME_FIELDS)} are not "
                             "modelled")
    if row["n"] != n:
        raise AssertionError(f"{where}: n {row['n']}, the model says {n}")
    want = {"estimate": est, "variance": var, "display_estimate": _clip(est, 0, n),
            "display_low": _clip(row["ci_low"], 0, n), "display_high": _clip(row["ci_high"], 0, n)}
    for name, value in want.items():
        _close(row[name], value, where, name)
    _check_interval(row, est, var, z, where)
    _check_flag(row["out_of_range"], est, 0.0, float(n), where)


# -- the rank test ----------------------------------------------------------------------------------

def _orthonormal(M: np.ndarray) -> np.ndarray:
    if M.size == 0:
        return np.zeros((0, M.shape[1]))
    _, sv, vt = np.linalg.svd(M, full_matrices=False)
    return vt[:int((sv > 1e-9 * sv[0]).sum())] if sv.size and sv[0] > 0 else np.zeros((0, M.shape[1]))


def _inside(basis: np.ndarray, cols: np.ndarray) -> int:
    """``dim(V n W)``: V the row space of the orthonormal ``basis``, W the coordinates ``cols``."""
    if basis.shape[0] == 0 or cols.size == 0:
        return 0
    sv = np.linalg.svd(basis[:, cols], compute_uv=False)
    unsure = sv[(sv > 1 - 1e-5) & (sv < 1 - 1e-9)]
    if unsure.size:
        raise AssertionError(f"numerically undecided: singular values {unsure} near 1")
    return int((sv >= 1 - 1e-9).sum())


def isolation(s: Scenario, stats: list) -> str | None:
    """A description of a combination of published fields that isolates fewer than ``min_reports``
    reports, or that uses the client rows and depends on fewer than ``min_reports`` parties; None
    when there is none."""
    m = s.min_reports
    monos = sorted({mono for st in stats for mono in st.poly if mono})
    if not monos or m <= 1:
        return None
    index = {mono: i for i, mono in enumerate(monos)}
    M = np.zeros((len(stats), len(monos)))
    for i, st in enumerate(stats):
        for mono, coef in st.poly.items():
            if mono:
                M[i, index[mono]] = float(coef)
    M /= np.abs(M).max(axis=0)   # scaling columns keeps every support, and evens the magnitudes
    norms = np.linalg.norm(M, axis=1)
    keep = norms > 0
    M = M[keep] / norms[keep, None]
    linear = np.array([not st.client for st in stats])[keep]
    full, lin = _orthonormal(M), _orthonormal(M[linear])
    owners = [frozenset(r for r, _ in mono) for mono in monos]
    reports = sorted(set().union(*owners))

    def cols(inside: frozenset) -> np.ndarray:
        return np.array([i for i, o in enumerate(owners) if o <= inside], dtype=int)

    for chosen in itertools.combinations(reports, min(m - 1, len(reports))):
        if _inside(full, cols(frozenset(chosen))):
            least = set(chosen)
            for r in chosen:   # the smallest such set, for the message
                if _inside(full, cols(frozenset(least - {r}))):
                    least.discard(r)
            return f"a combination isolates reports {sorted(least)} (< min_reports={m})"
    party = {r: ("c", s.reports[r][2]) if s.reports[r][2] else ("r", r) for r in reports}
    parties = sorted(set(party.values()), key=repr)
    if s.device_bound is not None and s.unit == "device":   # nothing may depend on fewer than m devices
        for chosen in itertools.combinations(parties, min(m - 1, len(parties))):
            if _inside(full, cols(frozenset(r for r in reports if party[r] in chosen))):
                return f"a combination depends only on devices {list(chosen)} (< min_reports={m})"
        return None
    for chosen in itertools.combinations(parties, min(m - 1, len(parties))):
        inside = cols(frozenset(r for r in reports if party[r] in chosen))
        if _inside(full, inside) > _inside(lin, inside):
            return f"a combination with client rows depends only on parties {list(chosen)} (< min_reports={m})"
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
    device = s.device_bound is not None   # reports past a device's bound are in no row: only counted
    glob = s.window == "global"
    latest, withheld = {}, {}   # (window, key) -> (its latest pane, its reports); window -> reports withheld
    for (w, pane, key), reports in holdings(s, cfg, out).items():
        if (w, key) not in latest or pane > latest[(w, key)][0]:
            latest[(w, key)] = (pane, reports)
    published, rollups = {}, {}   # window -> {report: key}; (window, rollup key) -> its reports
    for (w, key), (_, reports) in sorted(latest.items(), key=repr):
        if is_rollup(key):
            rollups[(w, key)] = reports
            continue
        for j in reports:
            if j in published.setdefault(w, {}):
                return f"report {j} is in the latest panes of two keys of window {w}"
            published[w][j] = key
    for f in out.panes:
        if f.kind == "withheld":
            withheld[f.window] = withheld.get(f.window, 0) + sum(
                r["n_reports"] for r in f.rows if r["statistic"] == "all")
    windows = {None if glob else w for ws in out.accepted.values() for w in ws}
    for w in windows | set(published) | set(withheld):
        into = {j for j, ws in out.accepted.items() if (None if glob else w) in [None if glob else x for x in ws]}
        pub = set(published.get(w, {}))
        unpublished = len(into) - len(pub)
        if not pub <= into or (unpublished < withheld.get(w, 0) if device else unpublished != withheld.get(w, 0)):
            return f"window {w}: accepted {sorted(into)}, published {sorted(pub)}, withheld {withheld.get(w, 0)}"
        for (w2, key), reports in rollups.items():   # a rollup row: its keys' published reports and held ones
            kept = {(name, value) for name, value in key if value != ROLLED_UP}
            covered = {j for j, k in published.get(w, {}).items() if kept <= set(k)}
            if w2 == w and not covered <= reports <= into:
                return f"window {w}: rollup {dict(key)} holds {sorted(reports)}, its keys publish {sorted(covered)}"
    return None


def over_bound(s: Scenario, cfg, out: Outcome) -> str | None:
    """Under the device unit: a pane that holds more than ``device_bound`` reports of one device in one
    slice and key value (a capped key's ``__other__`` sums up to ``key_bound`` values of a device, each
    bounded: docs/design.md, k*K*M), or (with ``key_bound``) a window whose panes hold reports of one device in one slice
    in more than ``key_bound`` keys (values before the cap); None when none does."""
    if s.device_bound is None:
        return None
    if s.key_bound is not None:
        keys = {}
        for (w, _, _), reports in holdings(s, cfg, out).items():
            for j in reports:
                sl, value, token = s.reports[j]
                keys.setdefault((w, sl, token), set()).add(value)
        worst = max(keys.items(), key=lambda kv: len(kv[1]), default=None)
        if worst and len(worst[1]) > s.key_bound:
            return f"window {worst[0][0]} holds device {worst[0][2]} of slice {worst[0][1]} in keys {sorted(worst[1])}"
    for (w, pane, key), reports in holdings(s, cfg, out).items():
        per = {}   # by (slice, device, value before the cap): a pane of __other__ sums up to K keys of a device
        for j in reports:
            sl, value, token = s.reports[j]
            per[(sl, token, value)] = per.get((sl, token, value), 0) + 1
        worst = max(per.items(), key=lambda kv: kv[1], default=None)
        if worst and worst[1] > s.device_bound:
            return (f"pane {pane} of {w} holds {worst[1]} reports of device {worst[0][1]} in slice {worst[0][0]} "
                    f"and key value {worst[0][2]!r}")
    return None


def violations(s: Scenario, batch: bool = False) -> tuple:
    """``(isolation, accounting)`` of the scenario's streaming run (or its batch run); accounting
    includes the device bound. A whole-report kind's scenario must be one the job accepts in that mode
    (the job's check, schemas/composition.py): a ValueError otherwise."""
    if s.kind != "per_bit":
        check_job_composition({"g": kind_config_of(s)}, streaming=not batch)
    cfg, out = (run_batch if batch else run)(s)
    if s.kind != "per_bit":
        return isolation(s, kind_statistics(replace(s, batch=batch), cfg, out)), None
    return isolation(s, statistics(s, cfg, out, batch)), accounting(s, cfg, out) or over_bound(s, cfg, out)


def client_rows(s: Scenario, batch: bool = False) -> int:
    """How many rows over clients the scenario publishes (to see that a test reaches them)."""
    _, out = (run_batch if batch else run)(s)
    names = {n for n, _, _ in CLIENT_EXTREMES}
    return sum(1 for f in out.panes if f.kind == "extremes" for r in f.rows if r["name"] in names)


# -- scenarios ----------------------------------------------------------------------------------------
# Generators take ``rng`` with numpy's ``integers(low, high)`` (high excluded), ``choice(seq)``,
# ``random()`` and ``permutation(n)``: a seeded numpy Generator, or the property tests' adapter of
# hypothesis draws (so hypothesis draws, and shrinks, the same shapes).

def _payload(rng, n: int) -> list:
    return [tuple(int(rng.integers(0, 2)) for _ in PAYLOAD) for _ in range(n)]


def _events(rng, reports: list, order: list) -> list:
    """Partials of reports of one slice and value, in ``order``, with watermark advances and early
    firings between them."""
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
    return events


def _tokens(rng, n: int, n_tokens: int, unnamed: float) -> list:
    """A token (or None) per report, no token holding more than MAX_PER_CLIENT reports."""
    left = {f"t{i}": MAX_PER_CLIENT for i in range(n_tokens)}
    out = []
    for _ in range(n):
        free = [t for t, k in left.items() if k]
        if not free or rng.random() < unnamed:
            out.append(None)
            continue
        t = str(rng.choice(free))
        left[t] -= 1
        out.append(t)
    return out


def random_scenario(rng, n_max: int = 12) -> Scenario:
    """A seeded random scenario of any window, clients or not, late partials and early firings."""
    window = str(rng.choice(["fixed", "sliding", "global"]))
    clients = window != "sliding" and rng.random() < 0.7
    n = int(rng.integers(1, n_max + 1))
    tokens = _tokens(rng, n, int(rng.integers(2, 6)), 0.15) if clients else [None] * n
    values = list("abc")[:int(rng.integers(1, 4))]
    reports = [(int(rng.integers(0, 3)) if window != "global" else 0, str(rng.choice(values)), tokens[j])
               for j in range(n)]
    events = _events(rng, reports, [int(j) for j in rng.permutation(n)])
    return Scenario(window, int(rng.choice([2, 2, 3, 4])), int(rng.choice([0, 60, 300])), int(rng.integers(1, 4)),
                    bool(clients), reports, events, _payload(rng, n), str(rng.choice(list(CHANNELS))),
                    delivery=int(rng.integers(0, 1000)))


def classes_scenario(rng) -> Scenario:
    """One window whose clients fall in a few groups of equal numbers of reports, each group of about
    ``min_reports`` clients, with reports without a client on time and late, some clients sending one
    of their reports late: the windows where the client rule decides, and where each of its parts
    matters. Shapes, drawn first: ``groups`` (groups of ``min_reports`` - 1 to + 1 clients, anything
    late), ``split`` (groups of at least ``min_reports``, one or more clients of one split by a late
    report: groups by composition over the atoms), ``unnamed`` (groups of at least ``min_reports``,
    reports without a client on time and late: counted atom by atom), ``any order``."""
    m = int(rng.choice([2, 3]))
    shape = str(rng.choice(["groups", "split", "unnamed", "any order"]))
    sizes = [m - 1, m, m, m + 1] if shape in ("groups", "any order") else [m, m + 1]
    on_time, late = [], []
    splits = int(rng.integers(1, m + 1)) if shape == "split" else 0
    for c in range(int(rng.integers(1, 4))):
        k = int(rng.integers(1, 4)) if not (shape == "split" and c == 0) else 2
        for i in range(int(rng.choice(sizes))):
            token = f"g{c}k{k}n{i}"
            split = k > 1 and (i < splits if c == 0 and shape == "split" else shape == "groups" and rng.random() < 0.3)
            on_time += [(0, "x", token)] * (k - split)
            late += [(0, "x", token)] * split
    if shape == "unnamed":
        on_time += [(0, "x", None)] * int(rng.integers(1, m + 1))
        late += [(0, "x", None)] * int(rng.choice([m, m + 1]))
    else:
        on_time += [(0, "x", None)] * int(rng.choice([0, 0, 1, m]))
        late += [(0, "x", None)] * int(rng.choice([0, 1, m, m]))
    if shape == "any order":
        both = on_time + late
        picked = [both[j] for j in rng.permutation(len(both))]
        cut = int(rng.integers(1, len(both) + 1))
        on_time, late = picked[:cut], picked[cut:]
    late = late[:6]
    on_time = on_time[:13 - len(late)]   # a client cut here is a client of fewer reports
    reports = on_time + late
    n = len(reports)
    events = [("early",)] if rng.random() < 0.3 else []
    events += [("partial", list(range(len(on_time)))), ("watermark", 1)]
    rest = list(range(len(on_time), n))
    while rest:
        take = len(rest) if rng.random() < 0.6 else int(rng.integers(1, m + 2))
        events += [("partial", rest[:take])] + ([("watermark", 2)] if rng.random() < 0.5 else [])
        rest = rest[take:]
    return Scenario(str(rng.choice(["fixed", "global"])), m, 300, 1, True, reports, events, _payload(rng, n),
                    str(rng.choice(list(CHANNELS))), delivery=int(rng.integers(0, 1000)))


def sample_scenario(rng) -> Scenario:
    """A scenario whose client rows take a sample of ``c`` = 1 or 2 reports per client
    (``reports_per_client``): the classes scenario's windows (groups of about ``min_reports`` clients,
    of 1 to 3 reports, some split by a late report, reports without a client on time and late), or a
    random scenario's, so that clients have fewer than, exactly and more than ``c`` reports, their
    reports past ``c`` and the clients left out fall in groups of 1 to ``min_reports`` + 1 parties."""
    s = classes_scenario(rng) if rng.random() < 0.7 else random_scenario(rng)
    if s.window == "sliding":
        s.window = "fixed"
    s.clients = True
    s.client_sample = int(rng.integers(1, 3))
    return s


def device_sample_scenario(rng) -> Scenario:
    """``privacy.unit: device`` with extremes over clients on fixed or global windows: the client rows
    take each device's ``c`` = M kept reports (the sample's default), and leave out the devices that
    kept fewer."""
    s = device_scenario(rng)
    if s.window == "sliding":
        s.window = "fixed"
    s.clients = True
    return s


def derived_scenario(rng) -> Scenario:
    """A random scenario whose collection also publishes a table, a conditional and means (each a
    function of its pane's counts), or withholds them for precision."""
    s = random_scenario(rng, n_max=8) if rng.random() < 0.5 else classes_scenario(rng)
    s.derived = True
    return s


def sliding_clients_scenario(rng) -> Scenario:
    """Sliding windows of three slices (which the config refuses with extremes over clients: the
    mutation tests lift the refusal) whose clients come in groups of about ``min_reports``, each
    client sending one report in each of one or two consecutive slices, slice by slice on time."""
    m = int(rng.choice([2, 3]))
    reports = []
    for c in range(int(rng.integers(1, 4))):
        first, span = int(rng.integers(0, 3)), int(rng.integers(1, 3))
        for i in range(int(rng.choice([m, m, m + 1]))):
            reports += [(sl, "x", f"g{c}n{i}") for sl in range(first, min(first + span, 4))]
    reports = reports[:13]
    events = []
    for sl in range(4):
        ids = [j for j, r in enumerate(reports) if r[0] == sl]
        events += ([("partial", ids)] if ids else []) + [("watermark", sl + 1)]
    return Scenario("sliding", m, 0, 1, True, reports, events, _payload(rng, len(reports)),
                    str(rng.choice(list(CHANNELS))), delivery=int(rng.integers(0, 1000)))


def device_keys_scenario(rng) -> Scenario:
    """``privacy.unit: device`` with dimensions: a few devices, each sending 1 to 4 reports over
    the slices and over 1 to 3 values of the key (a device that changes region), a bound of 1 or 2
    reports per device, slice and key and of 1 or 2 keys per device and slice, a cap of 1 to 3 values
    (the rest in ``__other__``), min_reports 2 or 3 devices."""
    s = device_scenario(rng)
    values = list("xyz")[:int(rng.integers(1, 4))]
    reports = [(sl, str(rng.choice(values)), token) for sl, _, token in s.reports]
    return replace(s, reports=reports, events=_events(rng, reports, [int(j) for j in rng.permutation(len(reports))]),
                   max_values=int(rng.integers(1, 4)), key_bound=int(rng.choice([1, 2])))

def rollup_scenario(rng) -> Scenario:
    """Batch, fixed or global windows, keys of two dimensions (k in a, b, c; j in x, y, z; a cap of 1 to 3
    values each) and some of the rollups over k, over j and over neither (the window's total): keys
    below ``min_reports`` whose sums reach it, where rollups cross."""
    window = str(rng.choice(["fixed", "global"]))
    m = int(rng.choice([2, 3, 4]))
    ks, js = list("abc")[:int(rng.integers(1, 4))], list("xyz")[:int(rng.integers(1, 4))]
    reports = []
    for k in ks:
        for j in js:
            reports += [(int(rng.integers(0, 2)) if window == "fixed" else 0, k + j, None)] * int(rng.integers(0, m + 2))
    reports = [reports[i] for i in rng.permutation(len(reports))][:12]
    rollups = tuple(r for r in (("k",), ("j",), ()) if rng.random() < 0.7)
    return Scenario(window, m, 0, int(rng.integers(1, 4)), False, reports, [("partial", list(range(len(reports))))],
                    _payload(rng, len(reports)), str(rng.choice(list(CHANNELS))), rollups=rollups)


def stream_rollup_scenario(rng) -> Scenario:
    """:func:`rollup_scenario`'s keys and rollups in streaming: reports over three slices of fixed
    windows (or the global window) in partials with watermark advances, early firings and late partials
    within and past an allowed lateness of 0, 1 or 5 slices, delivered in a random order."""
    s = rollup_scenario(rng)
    reports = [(int(rng.integers(0, 3)) if s.window == "fixed" else 0, value, token) for _, value, token in s.reports]
    return replace(s, reports=reports, events=_events(rng, reports, [int(j) for j in rng.permutation(len(reports))]),
                   lateness=int(rng.choice([0, 60, 300])), delivery=int(rng.integers(0, 1000)))


def device_scenario(rng) -> Scenario:
    """``privacy.unit: device``: a few devices (the tokens), each sending 1 to 4 reports over the
    slices of fixed, sliding or global windows, in partials with watermarks and early firings between
    them; a bound of 1 or 2 reports per device, slice and key; min_reports 2 or 3 devices."""
    window = str(rng.choice(["fixed", "sliding", "global"]))
    reports = []
    for d in range(int(rng.integers(1, 6))):
        for _ in range(int(rng.integers(1, 5))):
            reports.append((int(rng.integers(0, 3)) if window != "global" else 0, "x", f"d{d}"))
    reports = reports[:12]
    n = len(reports)
    events = _events(rng, reports, [int(j) for j in rng.permutation(n)])
    return Scenario(window, int(rng.choice([2, 3])), int(rng.choice([0, 60, 300])), 1, False, reports, events,
                    _payload(rng, n), str(rng.choice(list(CHANNELS))), device_bound=int(rng.choice([1, 2])),
                    delivery=int(rng.integers(0, 1000)))


def report_device_scenario(rng) -> Scenario:
    """:func:`device_scenario` under the report unit with device bounds: the same devices and bound, and
    min_reports counts reports (2 or 3)."""
    return replace(device_scenario(rng), unit="report")


def report_device_rollup_scenario(rng) -> Scenario:
    """:func:`device_rollup_scenario` (two dimensions, rollups, bounds on reports and keys; batch) under the
    report unit with device bounds."""
    return replace(device_rollup_scenario(rng), unit="report")


def device_rollup_scenario(rng) -> Scenario:
    """:func:`rollup_scenario`'s two dimensions and rollups under ``privacy.unit: device`` (batch, fixed
    or global windows): a few devices, each sending 1 to 4 reports to 1 to 3 cells (a device that
    changes region or version), a bound of 1 or 2 reports per device, slice and key and of 1 or 2 keys
    per device and slice, a cap of 1 to 3 values a dimension, min_reports 2 or 3 devices: withheld
    keys that share devices, whose reports reach min_reports where their devices do not."""
    window = str(rng.choice(["fixed", "global"]))
    ks, js = list("abc")[:int(rng.integers(1, 4))], list("xyz")[:int(rng.integers(1, 4))]
    cells = [k + j for k in ks for j in js]
    reports = []
    for d in range(int(rng.integers(1, 6))):
        mine = [str(rng.choice(cells)) for _ in range(int(rng.integers(1, 4)))]
        home = int(rng.integers(0, 2)) if window == "fixed" else 0   # most of a device's reports in one slice
        for _ in range(int(rng.integers(1, 5))):
            sl = home if rng.random() < 0.8 or window != "fixed" else int(rng.integers(0, 2))
            reports.append((sl, str(rng.choice(mine)), f"d{d}"))
    reports = [reports[i] for i in rng.permutation(len(reports))][:12]
    rollups = tuple(r for r in (("k",), ("j",), ()) if rng.random() < 0.7)
    return Scenario(window, int(rng.choice([2, 3])), 0, int(rng.integers(1, 4)), False, reports,
                    [("partial", list(range(len(reports))))], _payload(rng, len(reports)),
                    str(rng.choice(list(CHANNELS))), device_bound=int(rng.choice([1, 2])),
                    key_bound=int(rng.choice([1, 2])), rollups=rollups)


def stream_device_rollup_scenario(rng) -> Scenario:
    """:func:`device_rollup_scenario` in streaming: over three slices of fixed windows (a bound on keys
    does not stream on the global window), in partials with watermark advances, early firings and late
    partials within and past an allowed lateness of 0, 1 or 5 slices, delivered in a random order."""
    s = device_rollup_scenario(rng)
    home = {token: int(rng.integers(0, 3)) for _, _, token in s.reports}
    reports = [(home[token] if rng.random() < 0.8 else int(rng.integers(0, 3)), value, token)
               for _, value, token in s.reports]
    return replace(s, window="fixed", reports=reports,
                   events=_events(rng, reports, [int(j) for j in rng.permutation(len(reports))]),
                   lateness=int(rng.choice([0, 60, 300])), delivery=int(rng.integers(0, 1000)))


KIND_SHAPES = ("random_scenario", "device_scenario", "report_device_scenario", "device_keys_scenario", "rollup_scenario",
               "stream_rollup_scenario", "device_rollup_scenario", "stream_device_rollup_scenario")
BATCH_SHAPES = ("rollup_scenario", "device_rollup_scenario")   # their streaming forms are the stream_ shapes


def kind_modes(s: Scenario, shape: str) -> tuple:
    """The runs (``batch`` flags) of a kind scenario of ``shape``: batch, and streaming unless the shape is a
    batch shape or the job refuses the config in streaming (schemas/composition.py, as the job checks it: a
    bound on keys on the global window does not stream, rule device-keys-streaming-global)."""
    streams = shape not in BATCH_SHAPES and not composition_faults(kind_config_of(s), streaming=True)
    return (False, True) if streams else (True,)


def kind_scenario(rng, shapes=KIND_SHAPES) -> Scenario:
    """A whole-report kind (hadamard or subset) on one of the per-bit shapes ``shapes``: fixed, sliding and
    global windows with early and late panes, the device unit (with bounds on reports and keys), the report
    unit with device bounds, rollups in batch and streaming; each report's draw (coefficient or subset)
    drawn uniformly, no extremes over clients (the kinds refuse them: rule kind-client-extremes)."""
    kind = str(rng.choice(["hadamard", "subset"]))
    shape = shapes[int(rng.integers(0, len(shapes)))]
    s = globals()[shape](rng)
    while not s.reports:   # a job of no reports publishes nothing (the rollup shapes can draw none)
        s = globals()[shape](rng)
    pool = KIND_DRAWS[kind]
    reports = s.reports if s.device_bound is not None else [(sl, v, None) for sl, v, _ in s.reports]
    s = replace(s, kind=kind, clients=False, client_sample=None, reports=reports,
                draws=[pool[int(rng.integers(0, len(pool)))] for _ in s.reports])
    return replace(s, modes=kind_modes(s, shape))
