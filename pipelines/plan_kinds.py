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


def candidate_refusals(cfg, channel: dict) -> tuple:
    """``(batch, streaming)``: why the job would refuse ``cfg`` with its ``channel`` replaced by
    ``channel`` (a kind's or per-bit symmetric, as :func:`~ldp_marginals.ldp.mechanism_choice.kind_choice`
    gives it), in each mode, or None where it accepts it: the config is rebuilt with that channel, which
    checks the composition table (schemas/composition.py) and the promise over time, then the rules of
    streaming."""
    from dataclasses import replace

    from ldp_marginals.ldp.channels import Channel, ChannelSet
    from ldp_marginals.schemas.channel_kinds import kind_sets_of, parse_kind
    from ldp_marginals.schemas.composition import composition_faults
    n = cfg.layout.n_bits
    try:
        if "kind" in channel:
            cand = replace(cfg, channels=ChannelSet.uniform(Channel(0.0, 1.0), n), mechanisms=(channel["kind"],) * n,
                           permanent=(), sampling=parse_kind(channel, cfg.layout, cfg.max_order, kind_sets_of(cfg)))
        else:
            cand = replace(cfg, channels=ChannelSet.uniform(Channel.symmetric_from_epsilon(channel["epsilon"]), n),
                           mechanisms=("symmetric",) * n, permanent=(), sampling=None)
        fault = cand.promise_fault()
    except ValueError as err:
        return str(err), str(err)
    if fault:
        return fault, fault
    stream = composition_faults(cand, streaming=True)
    return None, (stream[0].message(cand) if stream else None)


def mechanism_advice(cfg) -> dict:
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
        c["refused_batch"], c["refused_streaming"] = candidate_refusals(cfg, yaml.safe_load(c["paste"])["channel"])
    figures = {c["kind"]: c["variance_per_report"] for c in choice["candidates"]}
    accepted = [c for c in choice["candidates"] if c["refused_batch"] is None or c["kind"] == cfg.channel_kind]
    best = accepted[0] if accepted else None
    return dict(choice, best_any=choice["best"], best=best["kind"] if best else None,
                paste=best["paste"] if best else None, epsilon=p.epsilon, order=cfg.max_order,
                current=cfg.channel_kind,
                current_ratio=figures[cfg.channel_kind] / figures[best["kind"]] if best else None, reason=None)


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
    for c in m["candidates"]:
        mark = "  <- best the job accepts" if c["kind"] == m["best"] else ""
        if c.get("refused_batch") and c["kind"] != m["current"]:
            mark = f"  (the job refuses it with this config: {_refusal(c['refused_batch'])})"
        elif c.get("refused_streaming"):
            mark += f"  (batch only; streaming refuses it: {_refusal(c['refused_streaming'])})"
        lines.append(f"  {c['label']:<28} {c['variance_per_report']:>14,.2f}   channel: "
                     f"{_flow(c['channel'])}{mark}")
    if m["best"] is None:
        lines.append("  the job accepts none of the kinds with this config")
    elif m["current"] == m["best"]:
        lines.append(f"  this collection uses the best kind ({m['current']}) the job accepts with this config; the "
                     f"runner-up's variance is {m['ratio']:,.3g}x")
    else:
        lines.append(f"  this collection uses {m['current']}: {m['best']} would give a {m['current_ratio']:,.3g}x "
                     "lower variance at the same promise; paste into the config:")
        lines.append(f"    {m['paste']}")
    return lines


def _flow(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}" for k, v in d.items()) + "}"


def calibrate_kind(cfg, epsilon) -> dict:
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
            "mechanism": mechanism_advice(cfg)}


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
