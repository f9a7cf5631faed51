"""Issue 48 item 6: the team's configuration on a simulated month, through ``ldp-marginals run`` (batch).

The team (docs/design.md, issue 48): the device as the unit, one memoized report an hour, daily windows
per region with a rollup over the regions (``rollups: [[]]``), tables, per-client OR/AND on a sample of
``reports_per_client`` reports, a conditional and a numeric feature's mean (the configuration of
:mod:`benchmarks.composition_cost`, with the channel a parameter). The month: ``devices`` devices in each
of three regions, each with its true values, its device secret and its memoized (permanent) responses
stable over the month, sending one report an hour under its day's device token (the client's rule,
docs/client.md section 5: one token per device, collection and slice). The run must publish every kind
of row on every day and key (marginals, tables and consistent tables, the rollup's rows, the client
OR/AND, the conditional, the means), withhold nothing (every device sends 24 reports a day, more than
the sample's 1 report, memoized: rule memoize-client-extremes, and each key holds more than ``min_reports`` devices) and state the enforced epsilons
of a day and a month in ``collections.json``.

    python -m benchmarks.team_month [--devices 2000] [--days 30] [--channel '<JSON channel>']

prints what was published, the checks' findings (none when it is all there), the enforced epsilons and
the time. The test suite runs the same functions on a shorter period (tests/pipelines/test_team_month.py).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import tempfile
import time

import numpy as np

from benchmarks.composition_cost import REGIONS, TEAM

T0 = 1_767_225_600_000   # 2026-01-01T00:00Z, a day boundary
HOUR, DAY = 3_600_000, 86_400_000
PER_DAY = 24
MEMOIZED_RAPPOR = dict(TEAM["channel"])   # today's channel: per-bit RAPPOR, memoized
ALL = "__all__"   # the rollup row's value of a dimension it sums over
# the kind ``ldp-marginals plan`` picked for the team at whole-report epsilon 2 by variance alone (Hadamard
# sampling, one slot: 131 against subset's 225 and per-bit's 70,617 worst-case 3-way cell variance per report),
# memoized as the team's hourly reports need: the permanent response at epsilon 2, one report's epsilon_1 = 1.
# At 2,000 devices a region and min_reports 100 its rows are withheld (README); plan now predicts that and
# recommends what publishes (:func:`plan_recommendation`)
PLAN_KIND = {"kind": "hadamard", "epsilon": 2.0, "memoize": True, "epsilon_1": 1.0}
# the team's promise that plan compares the channels at: a whole report local DP at epsilon 2
PLAN_PRIVACY = dict(TEAM["privacy"], model="local", epsilon=2.0)
KINDS = ("marginals", "tables", "consistent_tables", "extremes", "conditionals", "means")


def team_config(channel: dict | None = None, **changes) -> dict:
    """The team's configuration with ``channel`` (default: memoized per-bit RAPPOR; :data:`PLAN_KIND` the
    kind ``plan`` picked by variance alone) and ``changes`` to its top-level keys (e.g. ``privacy``:
    :data:`PLAN_PRIVACY`)."""
    return dict(TEAM, channel=dict(MEMOIZED_RAPPOR if channel is None else channel), **changes)


def plan_recommendation(devices: int, keys: int = len(REGIONS), windows: int = 3, **changes) -> dict:
    """What ``ldp-marginals plan`` recommends for the team (its promise :data:`PLAN_PRIVACY`, ``changes`` to
    its top-level keys) at ``devices`` devices a region, ``keys`` regions, 24 reports a device a day: its
    ``publishing`` advice (pipelines/plan_kinds.py ``publishing_advice``; ``["recommended"]["channel"]``
    the channel, None when no candidate publishes every kind of row)."""
    import yaml

    from ldp_marginals.pipelines.plan import plan
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "team.yaml")
        with open(path, "w") as fh:
            # the team's config under its promise (its channel memoized with epsilon_1 1, whole-report epsilon 2:
            # what plan's candidates keep; today's per-bit RAPPOR breaks the promise and the job refuses it)
            yaml.safe_dump(team_config(PLAN_KIND, **dict({"privacy": PLAN_PRIVACY}, **changes)), fh)
        args = argparse.Namespace(config=path, reports_per_window=None, frequency=[], target_half_width=None,
                                  target_mean_half_width=[], json=True, devices_per_key=devices,
                                  reports_per_device=PER_DAY, keys=keys, outlook_windows=windows)
        (coll,) = plan(args)["collections"]
    return coll["mechanism"]["publishing"]


def month_reports(config: dict, devices: int, days: int, seed: int = 48) -> list:
    """The reports (Avro records) of ``devices`` devices a region over ``days`` days, one an hour
    (:func:`iter_month_reports` as a list)."""
    return list(iter_month_reports(config, devices, days, seed))


def iter_month_reports(config: dict, devices: int, days: int, seed: int = 48):
    """The reports (Avro records) of ``devices`` devices a region over ``days`` days, one an hour, a
    region at a time (each region's in a random order).

    The devices are randomized as the clients do and carry their slice's token by the simulator's one
    owner of both (:mod:`ldp_marginals.pipelines.simulate_devices`: :func:`randomize_devices`, memoized
    per-bit channels and whole-report kinds, each device's permanent response drawn once for the whole
    period; :func:`slice_tokens`)."""
    from ldp_marginals.pipelines.simulate_devices import randomize_devices, slice_tokens
    from ldp_marginals.schemas.config import parse_config
    cfg = parse_config(config)
    rng = np.random.default_rng(seed)
    n_bits, per_device = cfg.layout.n_bits, PER_DAY * days
    for region in REGIONS:
        truth = (rng.random((devices, n_bits)) < rng.uniform(0.1, 0.6, n_bits)).astype(np.uint8)
        packed, owner, _ = randomize_devices(cfg, truth, np.full(devices, per_device), rng)
        hour = np.arange(owner.size) % per_device   # owner: each device's reports in a run, one an hour
        times = T0 + hour * HOUR + rng.integers(0, HOUR, owner.size)
        secrets = [hashlib.sha256(f"{region}-{d}".encode()).digest() for d in range(devices)]
        tokens = slice_tokens(secrets, config["collection"], cfg.window, owner, times)
        for i in rng.permutation(owner.size):
            yield {"collection": config["collection"], "event_time": int(times[i]), "bits": packed[i].tobytes(),
                   "dimensions": {"region": region}, "client": tokens[i]}


def write_reports(path: str, records: list) -> None:
    from ldp_marginals import schemas
    os.makedirs(os.path.dirname(path), exist_ok=True)
    schemas.write_avro(path, "noisy_report", records)


def run_month(folder: str, config: dict, records) -> str:
    """``ldp-marginals run`` (batch) of ``config`` on ``records`` (an iterable, written to an Avro file
    first); returns the output folder."""
    import yaml

    from ldp_marginals.pipelines import cli
    os.makedirs(folder, exist_ok=True)
    config_path, out = os.path.join(folder, "team.yaml"), os.path.join(folder, "out")
    with open(config_path, "w") as fh:
        yaml.safe_dump(config, fh)
    if records is not None:   # None: written there already
        write_reports(os.path.join(folder, "in", "reports.avro"), records)
    code = cli.main(["run", "--config", config_path, "--input", os.path.join(folder, "in", "*.avro"),
                     "--output", out, "--progress-seconds", "0"])
    if code != 0:
        raise RuntimeError(f"ldp-marginals run exited with {code}")
    return out


def month_findings(out: str, config: dict) -> dict:
    """What the run published: rows per kind and (day, region), the withheld rows, the summary and the
    collection's stated epsilons."""
    from ldp_marginals.pipelines.read import read_rows
    from ldp_marginals.schemas.outputs import COLLECTIONS_FILE
    name = config["collection"]
    rows = {}
    for kind in KINDS + ("withheld",):
        per = {}
        extra = {"estimator": "unbiased"} if kind == "tables" else {}   # "tables" reads the consistent ones otherwise
        for r in read_rows(out, kind, collection=name, **extra) if os.path.isdir(os.path.join(out, kind)) else []:
            key = ((r["window_start"] - T0) // DAY, r["dimensions"].get("region"))
            per.setdefault(key, []).append(r)
        rows[kind] = per
    with open(os.path.join(out, "summary.json")) as fh:
        summary = json.load(fh)
    with open(os.path.join(out, COLLECTIONS_FILE)) as fh:
        (info,) = [c for c in json.load(fh) if c["collection"] == name]
    return {"rows": rows, "summary": summary, "epsilons": info["epsilons"]}


def problems(findings: dict, config: dict, devices: int, days: int, precision_withheld_ok: bool = False) -> list:
    """What is missing or wrong, as sentences (none when every kind of row is published on every day and
    key, nothing is withheld, every report counted and the month's enforced epsilon stated).

    ``precision_withheld_ok``: a region's conditional and conditional mean withheld for precision (the
    presence test of the condition, cause ``precision``; a memoized kind's count of the condition rests on
    the few devices that drew its coefficient, docs/design.md) is not a problem; the rollup row's must still
    be published, and any other withheld row is."""
    rows, out = findings["rows"], []
    excused = set()   # (day, region) whose conditional rows were withheld for precision
    if precision_withheld_ok:
        for key, per in rows["withheld"].items():
            if key[1] != ALL and per and all(r.get("cause") == "precision" for r in per):
                excused.add(key)
    n_extremes, n_means = len(config["extremes"]), len(config["means"]) * 2   # a mean overall and by its feature
    keys = [(day, region) for day in range(days) for region in REGIONS + (ALL,)]
    for day, region in keys:
        want_reports = devices * PER_DAY * (len(REGIONS) if region == ALL else 1)
        for kind in KINDS:
            got = rows[kind].get((day, region), [])
            if kind == "extremes":   # extremes over clients: per region, not on the rollup row (design.md)
                if len(got) != (0 if region == ALL else n_extremes):
                    out.append(f"day {day} {region}: {len(got)} client extremes rows")
                elif region != ALL and any(r["n"] < config["min_reports"] for r in got):
                    out.append(f"day {day} {region}: client rows over fewer than min_reports clients")
                continue
            if not got and not (kind == "conditionals" and (day, region) in excused):
                out.append(f"day {day} {region}: no {kind} rows")
            elif any(r["n_reports"] != want_reports for r in got):
                out.append(f"day {day} {region}: {kind} rows over {sorted({r['n_reports'] for r in got})} reports, "
                           f"not {want_reports}")
        if len(rows["means"].get((day, region), [])) not in (0, n_means) and (day, region) not in excused:
            out.append(f"day {day} {region}: {len(rows['means'][(day, region)])} means rows, not {n_means}")
    extra = sorted(set(k for kind in KINDS for k in rows[kind]) - set(keys))
    if extra:
        out.append(f"rows of keys or days not simulated: {extra[:5]}")
    withheld = [r for key, per in rows["withheld"].items() if key not in excused for r in per]
    if withheld:
        out.append(f"{len(withheld)} withheld rows, e.g. {withheld[0].get('reason')!r}")
    summary = findings["summary"]
    total = len(REGIONS) * devices * PER_DAY * days
    if summary["reports_counted"] != total or summary["reports_dead_lettered"]:
        out.append(f"reports counted {summary['reports_counted']} (dead-lettered {summary['reports_dead_lettered']}), "
                   f"not {total}")
    enforced = findings["epsilons"].get("enforced") or {}
    if not np.isfinite(enforced.get("epsilon_per_month", np.nan)):
        out.append(f"the month's enforced epsilon is not stated: {findings['epsilons']}")
    return out


def frequency_variances(findings: dict) -> dict:
    """``{row kind (marginals by order, tables by width): the median of variance / n_reports^2}`` over the
    regions' rows (not the rollup's): the precision the channel gives, on the frequency scale."""
    out = {}
    for kind in ("marginals", "tables"):
        per = {}
        for (_, region), got in findings["rows"][kind].items():
            for r in got if region != ALL else []:
                width = len(r["columns"]) if kind == "marginals" else len(r["group"])
                per.setdefault(f"{kind} of {width}", []).append(r["variance"] / r["n_reports"] ** 2)
        out.update({label: float(np.median(v)) for label, v in sorted(per.items())})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2000, help="devices a region")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--channel", default=None, help="the channel as JSON (default: memoized per-bit RAPPOR; "
                                                        "'plan': what plan recommends at --devices, under "
                                                        "PLAN_PRIVACY and --set)")
    parser.add_argument("--set", default="{}", help="changes to the config's top-level keys as JSON, e.g. "
                                                    "'{\"min_reports\": 3}'")
    args = parser.parse_args(argv)
    changes = json.loads(args.set)
    if args.channel == "plan":
        advice = plan_recommendation(args.devices, **changes)
        if advice["recommended"] is None:
            print(f"plan recommends nothing at {args.devices:,} devices a region: {advice['needed']}")
            return 1
        channel, changes = advice["recommended"]["channel"], dict({"privacy": PLAN_PRIVACY}, **changes)
        print(f"plan recommends {advice['recommended']['label']}: {advice['paste']}")
    else:
        channel = json.loads(args.channel) if args.channel else None
    config = team_config(channel, **changes)
    n_reports = len(REGIONS) * args.devices * PER_DAY * args.days
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        write_reports(os.path.join(tmp, "in", "reports.avro"), iter_month_reports(config, args.devices, args.days))
        simulated, cpu = time.perf_counter(), time.process_time()
        out = run_month(tmp, config, None)
        ran, cpu = time.perf_counter(), time.process_time() - cpu
        findings = month_findings(out, config)
    found = problems(findings, config, args.devices, args.days)
    rows = {kind: sum(len(v) for v in per.values()) for kind, per in findings["rows"].items()}
    rollup = {kind: sum(len(v) for (_, region), v in per.items() if region == ALL)
              for kind, per in findings["rows"].items()}
    print(f"team month: {len(REGIONS)} regions x {args.devices:,} devices x {PER_DAY} reports a day x {args.days} days "
          f"= {n_reports:,} reports; channel {json.dumps(config['channel'])}; changes {args.set}")
    print(f"rows published by kind: {rows}; of them on the rollup row: {rollup}")
    print("median frequency variance (variance / n_reports^2) of a region's rows: " + "; ".join(
        f"{label} {v:.3g}" for label, v in frequency_variances(findings).items()))
    withheld = {}
    for per in findings["rows"]["withheld"].values():
        for r in per:   # the reasons with their numbers masked, counted
            reason = re.sub(r"[0-9][0-9,.]*", "#", r.get("reason", ""))
            withheld[reason] = withheld.get(reason, 0) + 1
    for reason, n in sorted(withheld.items(), key=lambda kv: -kv[1]):
        print(f"withheld {n} x: {reason}")
    print(f"summary: {json.dumps(findings['summary'])}")
    print(f"epsilons: {json.dumps(findings['epsilons'])}")
    print(f"time: simulate and write {simulated - started:.0f} s, run {ran - simulated:.0f} s wall "
          f"({cpu:.0f} s CPU in this process); load " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    shown = "; ".join(found[:12]) + ("; ..." if len(found) > 12 else "")
    print(f"findings ({len(found)}): " + (shown or "none: every kind of row on every day and key, nothing withheld"))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
