"""``plan`` for channel kinds: the precision of a Hadamard-sampling or subset-RR collection's marginals and
table cells (the worst case of one cell, :func:`~ldp_marginals.ldp.hadamard_reports.cell_variance_per_report`
and :func:`~ldp_marginals.ldp.subset_reports.cell_variance_per_report`), and for a collection with a ``local``
promise at a stated epsilon, which of the job's channel kinds (per-bit, hadamard, subset) gives the lowest
worst-case variance of its top-order tables at that whole-report epsilon
(:func:`~ldp_marginals.ldp.mechanism_choice.kind_choice`), every figure printed."""
from __future__ import annotations

import yaml

from ldp_marginals.ldp.channel_kind import channel_kind
from ldp_marginals.ldp.intervals import sidak_level
from ldp_marginals.ldp.mechanism_choice import kind_choice


def kind_precision(cfg, n, target, frequencies, precision) -> tuple:
    """``(set rows, cell rows)`` of a channel kind's collection, as :func:`~ldp_marginals.pipelines.plan.plan`
    writes them for per-bit channels (``precision``: its ``_precision``)."""
    if any(f is not None for f in frequencies):
        raise ValueError(f"--frequency is for per-bit channels: collection {cfg.name!r} uses channel kind "
                         f"{cfg.channel_kind}, whose plan gives the worst case only")
    labels, mech = cfg.layout.labels, cfg.sampling
    cell_variance_per_report = channel_kind(cfg.channel_kind).cell_variance_per_report
    published = [list(s) for s in cfg.published_sets]
    level = sidak_level(cfg.level, len(published)) if cfg.marginal_interval == "simultaneous" else cfg.level
    rows = [{"labels": [labels[b] for b in cols], "columns": cols,
             **precision(cell_variance_per_report(mech, len(cols)), n, target, level)} for cols in published]
    cells = []
    from ldp_marginals.ldp.tables import group_cells
    for group, interval in zip(cfg.groups, cfg.group_intervals or ("per_cell",) * len(cfg.groups)):
        table = group_cells(cfg.layout, group)
        cell_level = sidak_level(cfg.level, len(table)) if interval == "simultaneous" else cfg.level
        per_report = cell_variance_per_report(mech, len(group))
        cells += [{"group": list(group), "cell": list(cell), "interval": interval,
                   **precision(per_report, n, target, cell_level)} for cell, _, _ in table]
    return rows, cells


def candidate_refusals(cfg, channel: dict, spec: dict) -> tuple:
    """``(batch, streaming)``: why the job would refuse ``cfg`` (parsed from ``spec``, its mapping in the
    config file) with its ``channel`` replaced by ``channel`` (a kind's, memoized or not, or per-bit
    symmetric), in each mode, or None where it accepts it: the config is parsed as the job parses it
    (:func:`candidate_config`), which checks the composition table (schemas/composition.py) and the
    promise over time, then the rules of streaming."""
    from ldp_marginals.schemas.composition import composition_faults
    try:
        cand = candidate_config(spec, channel)
        fault = cand.promise_fault()
    except ValueError as err:
        return str(err), str(err)
    if fault:
        return fault, fault
    stream = composition_faults(cand, streaming=True)
    return None, (stream[0].message(cand) if stream else None)


def candidate_config(spec: dict, channel: dict):
    """The collection of ``spec`` (its mapping in the config file) with ``channel`` pasted in, parsed as
    the job parses it: raises ValueError where the job refuses it."""
    from ldp_marginals.schemas.config import parse_config
    return parse_config(dict(spec, channel=dict(channel)))


def config_specs(path) -> dict:
    """``{collection: its mapping}`` of a config file (JSON or YAML, one mapping or a list), as
    :func:`~ldp_marginals.schemas.config.load_configs` reads it: what a candidate channel is pasted into."""
    import json
    from pathlib import Path
    text = Path(path).read_text()
    data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    return {item["collection"]: item for item in (data if isinstance(data, list) else [data])}


def _memo_epsilon(cfg, epsilon: float) -> float | None:
    """One report's epsilon of the candidates when the collection memoizes ("memoized or not as the
    config says"; None when it does not): the collection's own ``epsilon_1`` where it states one below
    ``epsilon``, else half of ``epsilon``."""
    if cfg.kind_memo is None and not any(c is not None for c in cfg.permanent):
        return None
    e1 = (cfg.describe()["epsilons"] if cfg.sampling is not None else cfg.describe_epsilons()).get("epsilon_1")
    return float(e1) if e1 is not None and e1 < epsilon else epsilon / 2


def memoized_rappor(n_bits: int, epsilon: float, epsilon_1: float) -> dict:
    """The per-bit memoized channel of a whole report memoized at ``epsilon`` (epsilon_infinity) with one
    report at ``epsilon_1``: RAPPOR with its permanent stage ``(f/2, 1 - f/2)`` at ``epsilon / n_bits`` a
    bit, ``f = 2 / (1 + e^(epsilon/n))``, and a symmetric instantaneous stage ``p = 1 - q`` whose
    composition with it is ``epsilon_1 / n_bits`` a bit: by docs/design.md's composition, ``q - p =
    tanh(epsilon_1 / 2n) / tanh(epsilon / 2n)``."""
    import math
    u = math.tanh(epsilon_1 / (2 * n_bits)) / math.tanh(epsilon / (2 * n_bits))
    return {"mechanism": "rappor", "f": 2.0 / (1.0 + math.exp(epsilon / n_bits)), "p": (1.0 - u) / 2,
            "q": (1.0 + u) / 2, "memoize": True}


def outlook_candidates(cfg, epsilon: float) -> list:
    """Every variant of the job's channel kinds at whole-report ``epsilon``, best first by the worst-case
    top-order table variance per report: per-bit, Hadamard sampling at each number of slots (powers of two
    and every coefficient), subset RR at each width. Memoized as the collection is (:func:`_memo_epsilon`):
    the kinds with ``memoize: true`` and ``epsilon_1``, per-bit as :func:`memoized_rappor`, each figure at
    one report's epsilon_1 (what the job's estimator inverts; without the repeats term, the same for
    every candidate's reports of one device). ``[{kind, label, variance_per_report, channel}]``."""
    from ldp_marginals.ldp.channels import Channel
    from ldp_marginals.ldp.hadamard import HadamardSampling
    from ldp_marginals.ldp.planning import table_variance_per_report
    from ldp_marginals.ldp.subset_rr import SubsetRR
    from ldp_marginals.schemas.channel_kinds import kind_sets_of
    d, k, sets = cfg.layout.n_bits, cfg.max_order, kind_sets_of(cfg)
    e1 = _memo_epsilon(cfg, epsilon)
    memo = {} if e1 is None else {"memoize": True, "epsilon_1": e1}
    at = epsilon if e1 is None else e1   # the epsilon of one report
    bit = Channel.symmetric_from_epsilon(at / d)
    out = [{"kind": "per_bit", "label": "per-bit RR" + (" (memoized)" if memo else ""),
            "variance_per_report": table_variance_per_report([bit.p] * k, [bit.q] * k),
            "channel": memoized_rappor(d, epsilon, e1) if memo else {"mechanism": "symmetric",
                                                                     "epsilon": float(epsilon) / d}}]
    pool = HadamardSampling(d, k, epsilon, sets=sets).n_coefficients
    for m in sorted({1 << i for i in range(pool.bit_length()) if 1 << i <= pool} | {pool}):
        mech = HadamardSampling(d, k, at, slots=m, sets=sets)
        out.append({"kind": "hadamard", "label": f"Hadamard sampling (m={m})",
                    "variance_per_report": mech.table_variance_per_report(),
                    "channel": {"kind": "hadamard", "epsilon": float(epsilon), "slots": m, **memo}})
    widest = max([k] + [len(s) for s in sets])
    for w in range(widest, d + 1):
        mech = SubsetRR(d, k, at, width=w, sets=sets)
        out.append({"kind": "subset", "label": f"subset RR (s={w})", "variance_per_report":
                    mech.table_variance_per_report(), "channel": {"kind": "subset", "epsilon": float(epsilon),
                                                                  "width": w, **memo}})
    return sorted(out, key=lambda c: c["variance_per_report"])


def _paste(channel: dict) -> str:
    return "channel: {" + ", ".join(f"{k}: {v!r}" for k, v in channel.items()) + "}"


def publishing_advice(cfg, spec: dict, epsilon: float, population: dict) -> dict:
    """The lowest-variance channel (:func:`outlook_candidates`) the job accepts for the collection and
    whose every kind of row publishes at ``population`` (``devices`` a key, ``reports`` a device, ``keys``,
    ``windows``: :func:`~ldp_marginals.pipelines.plan_outlook.publication_outlook`, the job's own
    publication step on simulated windows), with the config line to paste. Each candidate is screened on
    one window in order of variance and the first that publishes is confirmed on ``windows``; when the best
    accepted candidate does not publish, the devices a key it needs (``needed``: doubling the devices, up
    to :data:`POPULATION_GROWTH` times, one window of one key each: the rules of a key, not the rollups')."""
    from ldp_marginals.pipelines.plan_outlook import publication_outlook
    tried = []
    recommended = None
    first = None   # the best candidate the job accepts
    for c in outlook_candidates(cfg, epsilon):
        c["paste"] = _paste(c["channel"])
        c["refused_batch"], c["refused_streaming"] = candidate_refusals(cfg, c["channel"], spec)
        if c["refused_batch"] is not None:
            continue
        cand = candidate_config(spec, c["channel"])
        first = first or (c, cand)
        look = publication_outlook(cand, population["devices"], population["reports"], population["keys"], windows=1)
        if look["publishes"] and population["windows"] > 1:
            look = publication_outlook(cand, population["devices"], population["reports"], population["keys"],
                                       windows=population["windows"])
        tried.append(dict(c, outlook=look))
        if look["publishes"]:
            recommended = tried[-1]
            break
    needed = None   # the population the best accepted candidate needs, when it does not publish
    if first is not None and (recommended is None or recommended["label"] != first[0]["label"]):
        c, cand = first
        devices = population["devices"]
        for _ in range(POPULATION_GROWTH.bit_length() - 1):
            devices *= 2
            if publication_outlook(cand, devices, population["reports"], 1, windows=1)["publishes"]:   # a key's rules
                needed = {"candidate": c["label"], "devices_per_key": devices}
                break
        if needed is None:
            needed = {"candidate": c["label"], "devices_per_key": None,
                      "more_than": population["devices"] * POPULATION_GROWTH}
    return {"population": population, "tried": tried, "recommended": recommended, "needed": needed,
            "paste": recommended["paste"] if recommended else None}


POPULATION_GROWTH = 8   # how far publishing_advice looks for the population the best candidate needs


def mechanism_advice(cfg, spec: dict, population: dict | None = None) -> dict:
    """The job's channel kinds compared for the collection's stated local promise (``None`` fields and a
    ``reason`` when the comparison does not apply). Each candidate carries why the job would refuse the
    config with it (``refused_batch``, ``refused_streaming``: None when accepted) and the config line to
    paste; ``best`` is the best the job accepts in batch (``best_any`` the best of all)."""
    p = cfg.privacy
    if p is None or p.model != "local" or p.epsilon is None:
        return {"reason": "no local promise with an epsilon (privacy: {model: local, epsilon: E}) to compare "
                          "the channel kinds at"}
    from ldp_marginals.schemas.channel_kinds import kind_sets_of
    choice = kind_choice(cfg.layout.n_bits, cfg.max_order, p.epsilon, kind_sets_of(cfg))   # the kinds' pools with
    #                                                                                       the collection's extra sets
    for c in choice["candidates"]:
        # the line as printed is what is checked: its numbers in full (a rounded per-bit epsilon times the
        # bits can exceed the promise, and the job would refuse the line)
        c["paste"] = "channel: {" + ", ".join(f"{k}: {v!r}" for k, v in c["channel"].items()) + "}"
        c["refused_batch"], c["refused_streaming"] = candidate_refusals(cfg, yaml.safe_load(c["paste"])["channel"],
                                                                        spec)
    figures = {c["kind"]: c["variance_per_report"] for c in choice["candidates"]}
    accepted = [c for c in choice["candidates"] if c["refused_batch"] is None or c["kind"] == cfg.channel_kind]
    best = accepted[0] if accepted else None
    publishing = None if population is None else publishing_advice(cfg, spec, p.epsilon, population)
    return dict(choice, best_any=choice["best"], best=best["kind"] if best else None,
                paste=best["paste"] if best else None, epsilon=p.epsilon, order=cfg.max_order,
                current=cfg.channel_kind,
                current_ratio=figures[cfg.channel_kind] / figures[best["kind"]] if best else None, reason=None,
                publishing=publishing)


def _refusal(text: str) -> str:
    """A refusal in a few words: its rule's name where the composition table refused it."""
    import re
    m = re.search(r"; rule ([a-z-]+)\]", text)
    return f"rule {m.group(1)}" if m else text[:100]


def advice_lines(m: dict) -> list:
    if m.get("reason"):
        return [f"mechanism: {m['reason']}"]
    lines = [f"mechanism for the local promise at whole-report epsilon {m['epsilon']:g} (worst-case summed cell "
             f"variance of a {m['order']}-way table, per report: divide by N):"]
    # with an outlook the pick is the outlook's: it ranks at one report's epsilon (memoized where the config
    # is) and drops what withholds rows at the population, so this section's best may not be it
    deferred = bool(m.get("publishing"))
    for c in m["candidates"]:
        mark = "" if c["kind"] != m["best"] else (
            "  <- lowest variance the job accepts (before withholding: the pick is below)" if deferred
            else "  <- best the job accepts")
        if c.get("refused_batch") and c["kind"] != m["current"]:
            mark = f"  (the job refuses it with this config: {_refusal(c['refused_batch'])})"
        elif c.get("refused_streaming"):
            mark += f"  (batch only; streaming refuses it: {_refusal(c['refused_streaming'])})"
        lines.append(f"  {c['label']:<28} {c['variance_per_report']:>14,.2f}   channel: "
                     f"{_flow(c['channel'])}{mark}")
    if m["best"] is None:
        lines.append("  the job accepts none of the kinds with this config")
    elif deferred:
        lines.append("  which channel to use at this population, with the rows each withholds there, is below")
    elif m["current"] == m["best"]:
        lines.append(f"  this collection uses the best kind ({m['current']}) the job accepts with this config; the "
                     f"runner-up's variance is {m['ratio']:,.3g}x")
    else:
        lines.append(f"  this collection uses {m['current']}: {m['best']} would give a {m['current_ratio']:,.3g}x "
                     "lower variance at the same promise; paste into the config:")
        lines.append(f"    {m['paste']}")
    if m.get("publishing"):
        lines += publishing_lines(m["publishing"])
    return lines


def publishing_lines(adv: dict) -> list:
    """What :func:`publishing_advice` found, a line a candidate tried and the config line to paste."""
    pop = adv["population"]
    lines = [f"which rows publish at {pop['devices']:,} devices a key x {pop['reports']} reports a device, "
             f"{pop['keys']} key(s) (the job's publication step on seeded simulated windows; bits at frequency "
             f"0.5; variance per report at one report's epsilon):"]
    for c in adv["tried"]:
        look = c["outlook"]
        if look["publishes"]:
            verdict = "every kind of row publishes"
        else:
            kinds = sorted(look["withheld"]) + [f"no {k}" for k in look["missing"]]
            verdict = f"withholds {', '.join(kinds)}"
        lines.append(f"  {c['label']:<28} {c['variance_per_report']:>14,.2f}   {verdict}")
    if adv["recommended"] is not None:
        lines.append(f"  recommended: {adv['recommended']['label']}, the lowest variance whose rows publish; paste "
                     "into the config:")
        lines.append(f"    {adv['paste']}")
    else:
        lines.append("  no candidate the job accepts publishes every kind of row at this population")
    if adv["needed"] is not None:
        need = adv["needed"]
        lines.append(f"  the lowest variance above, {need['candidate']}, publishes every kind of row at " + (
                         f"{need['devices_per_key']:,} devices a key" if need["devices_per_key"] else
                         f"more than {need['more_than']:,} devices a key (not found below)") +
                     " (doubling the devices; one simulated window of one key each)")
    return lines


def _flow(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}" for k, v in d.items()) + "}"


def calibrate_kind(cfg, epsilon, spec: dict, population: dict | None = None) -> dict:
    """``calibrate --config``'s row of a collection whose channel is a kind: the whole report's epsilon,
    whether a local promise is kept, and the kinds compared (sufficient DP does not apply: the kind
    does not randomize bit by bit, so ``--epsilon`` gives no crowd for it)."""
    m, p = cfg.sampling, cfg.privacy
    promise = p.describe() if p else None
    kept = None if promise is None else (promise["epsilon"] is None or m.epsilon <= promise["epsilon"] + 1e-12)
    return {"collection": cfg.name, "kind": cfg.channel_kind, "bits": cfg.layout.n_bits,
            "features": len(cfg.layout.features), "channels": [], "channel": cfg.describe()["channel"],
            "local_epsilon": float(m.epsilon), "symmetric_flip": None, "promise": promise, "promise_kept": kept,
            "raise_min_reports_to": None, "min_reports": cfg.min_reports, "epsilon": epsilon, "eta": None,
            "sufficient_crowd": None, "unit": cfg.unit, "repeats": 1, "epsilons": cfg.describe()["epsilons"],
            "mechanism": mechanism_advice(cfg, spec, population)}


def render_kind(r: dict) -> list:
    c = r["channel"]
    if c["kind"] == "subset":
        what = (f"subset randomized response over {r['bits']} bits (a subset of {c['width']} a report, its true "
                f"pattern kept with probability {c['keep']:.4g}; {c['report_bits']} bits a report)")
    else:
        what = (f"Hadamard sampling over {r['bits']} bits ({c['slots']} slot(s) of {c['coefficients']} coefficients, "
                f"{c['weights']} weights; {c['report_bits']} bits a report)")
    lines = [f"collection {r['collection']}: {what}",
             f"  local epsilon of a whole report   {r['local_epsilon']:.4g}"]
    p = r["promise"]
    if p is None:
        lines.append("  promise: none stated")
    else:
        at = f" at epsilon {p['epsilon']:g}" if p["epsilon"] is not None else ""
        lines.append(f"  promise: local DP{at}: " + (
            f"kept (a whole report's epsilon is {r['local_epsilon']:.4g})" if r["promise_kept"] else
            f"NOT kept: a whole report's epsilon is {r['local_epsilon']:.4g}; lower channel.epsilon"))
    if r["epsilon"] is not None:
        lines.append("  sufficient DP: not for this kind (it randomizes the whole report, not each bit)")
    return lines
