"""Issue 48 item 7 and issue 47's cost figure, as ratios measured in one run:

(a) each kind's batch job (per-bit, ``hadamard``, ``subset``; and per-bit under ``unit: device``, M = 1,
    issue 47's bound) on this tree against the same job, same files, on the tree of 340e214 (before
    issues 47 and 48), goal at most 1.1x;
(b) the team's configuration (device unit, hourly memoized per-bit reports, daily windows per region
    with rollups ``[[]]``, per-client OR/AND with ``reports_per_client: 1`` (memoized), a conditional, a numeric mean)
    against plain marginals of the same reports (the same features, channel, window and region
    dimension; no device unit, no rollups, no analyses), goal at most 2x.

The baseline tree is made by the benchmark itself: ``git archive 340e214`` of this repository into a
temporary folder, laid out as the editable install lays out this one (``ldp_marginals`` ->
``pipelines/root``, ``ldp_marginals.ldp`` -> ``ldp``, ...), and put first on ``PYTHONPATH`` of the
jobs that run it (the same interpreter and packages: pyproject.toml's dependencies are the same at
340e214). Every job, old and new, runs in a fresh subprocess of its own (``--job``): a warm-up job on
a tiny file (imports, numba's cache), then the same job on the tiny file again (its fixed cost: the
pipeline's construction, start-up and per-window output) and the measured job, each timed there in wall
and process CPU time, with one BLAS/OpenMP thread. The table's ratio is of whole jobs' CPU time; the
details give the ratio past the fixed cost too (the work that grows with the reports). Runs are
interleaved (old, new, old, new, ...) and the ratios are of medians, so that both meet the same load of
a shared machine; the CPU ratio is the figure to read (the wall ratio is given too).

    python -m benchmarks.composition_cost [--full] [--repeats 3] [--devices 2000,6000,12000] [--team-only]
                                          [--against COMMIT]

``--devices``: the team's population, devices a region (one comparison each, interleaved with the
others; default 2,000, the issue's); ``--team-only``: (b) alone, without the baseline tree;
``--against``: (b) also for the team's job on ``COMMIT``'s tree (extracted as the baseline is),
interleaved with plain and this tree's, so a change's before and after meet the same load.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import yaml

BASE_COMMIT = "340e214"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOUR_MS = 3_600_000
D = 32
THREADS = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
PACKAGES = {"ldp": "ldp", "schemas": "schemas", "transforms": "transforms", "pipelines": "pipelines"}

_BOOLS = [{"name": f"f{i}", "type": "boolean"} for i in range(D)]
KIND_CONFIGS = {   # (a): the jobs, each valid at 340e214 and now
    "per-bit": {"collection": "bench", "features": _BOOLS, "channel": {"mechanism": "symmetric", "epsilon": 1.0},
                "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 1},
    "hadamard": {"collection": "bench", "features": _BOOLS, "channel": {"kind": "hadamard", "epsilon": 2.0},
                 "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 1},
    "subset": {"collection": "bench", "features": _BOOLS, "channel": {"kind": "subset", "epsilon": 4.0, "width": 4},
               "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 1},
}
KIND_CONFIGS["per-bit, unit: device M=1"] = dict(KIND_CONFIGS["per-bit"],
                                                 privacy={"unit": "device", "max_reports_per_device": 1})

TEAM_FEATURES = [{"name": f"f{i}", "type": "boolean"} for i in range(1, 9)] + [
    {"name": "minutes", "type": "numeric", "low": 0, "high": 60}]
RAPPOR = {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75}
# plain marginals: the same reports' bits read as independent reports (memoize needs the device unit)
PLAIN = {"collection": "team", "features": TEAM_FEATURES, "channel": RAPPOR, "max_order": 3,
         "window": {"type": "fixed", "size_seconds": 86_400}, "min_reports": 100,
         "dimensions": {"region": {"max_values": 10}}}
TEAM = dict(PLAIN, channel=dict(RAPPOR, memoize=True), groups=[["f1", "f2"], ["f1", "f2", "f3"]],
            privacy={"unit": "device", "max_reports_per_device": 24, "reports_per_day": 24}, rollups=[[]],
            reports_per_client=1,   # memoized: one report a client (rule memoize-client-extremes)
            extremes=[{"name": "any_f", "op": "or", "bits": ["f1", "f2", "f3"], "over": "client"},
                      {"name": "all_f", "op": "and", "bits": ["f1", "f2", "f3"], "over": "client"}],
            conditionals=[{"of": ["f4"], "given": ["f1"]}], means=[{"of": "minutes", "by": ["f1"]}])
REGIONS = ("eu", "us", "asia")


# -- the baseline tree ---------------------------------------------------------------------------------

def base_tree(folder: str, commit: str = BASE_COMMIT) -> str:
    """``commit``'s tree of this repository under ``folder``, importable as ``ldp_marginals`` from the
    returned path (put it first on PYTHONPATH)."""
    src, py = os.path.join(folder, "src"), os.path.join(folder, "py")
    os.makedirs(src)
    archive = subprocess.run(["git", "-C", ROOT, "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    pkg = os.path.join(py, "ldp_marginals")
    shutil.copytree(os.path.join(src, "pipelines", "root"), pkg)
    for name, path in PACKAGES.items():
        os.symlink(os.path.join(src, path), os.path.join(pkg, name))
    return py


def _job(config_path: str, warm: str, pattern: str, out: str) -> dict:
    """In a fresh process (``--job``): a warm-up run on ``warm``, then the timed run on ``pattern``."""
    import time

    import ldp_marginals
    from ldp_marginals.pipelines.run import run as run_job
    run_job(["--config", config_path, "--input", warm, "--output", out + "-warm"])
    result = {"package": ldp_marginals.__file__}
    for name, path in (("fixed", warm), ("job", pattern)):   # the fixed cost: the same job on the tiny file
        wall, cpu = time.perf_counter(), time.process_time()
        run_job(["--config", config_path, "--input", path, "--output", f"{out}-{name}"])
        result[f"{name}_wall"], result[f"{name}_cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    result["wall"], result["cpu"] = result.pop("job_wall"), result.pop("job_cpu")
    return result


def job_seconds(config_path: str, warm: str, pattern: str, out: str, tree: str | None = None) -> dict:
    """``{wall, cpu, package}`` of one job in a subprocess, on this tree or on ``tree`` (:func:`base_tree`)."""
    env = dict(os.environ, **THREADS)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join([tree, ROOT])
    proc = subprocess.run([sys.executable, "-m", "benchmarks.composition_cost", "--job", config_path, warm, pattern,
                           out], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"job {config_path} on {tree or 'this tree'} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    want = tree or ROOT
    if not os.path.realpath(result["package"]).startswith(os.path.realpath(want)):
        raise RuntimeError(f"the job imported {result['package']}, not the tree {want}")
    return result


# -- the reports ---------------------------------------------------------------------------------------

def _write(path: str, records) -> None:
    from ldp_marginals import schemas
    os.makedirs(os.path.dirname(path), exist_ok=True)
    schemas.write_avro(path, "noisy_report", records)


def kind_files(folder: str, name: str, n: int, seed: int) -> str:
    """``n`` reports of the kind ``name`` over 2 hours, ~4 per device and hour (slice-scoped tokens)."""
    from ldp_marginals.pipelines.simulate import DEFAULT_START_MS
    from ldp_marginals.schemas.config import parse_config
    cfg = parse_config(KIND_CONFIGS[name])
    rng = np.random.default_rng(seed)
    truth = (rng.random((n, D)) < rng.uniform(0.1, 0.6, D)).astype(np.uint8)
    if name.startswith("per-bit"):
        from ldp_marginals.ldp.randomizer import ClientRandomizer
        packed = ClientRandomizer(cfg.layout, cfg.channels, rng).randomize_many(truth)
    else:
        from ldp_marginals.ldp import hadamard_reports, subset_reports
        packed = (hadamard_reports if name == "hadamard" else subset_reports).encode_reports(truth, cfg.sampling, rng)
    hours = rng.integers(0, 2, n)
    owners = rng.integers(0, max(n // 8, 1), n)
    times = DEFAULT_START_MS + hours * HOUR_MS + rng.integers(0, HOUR_MS, n)
    path = os.path.join(folder, f"{n}", "reports.avro")
    _write(path, ({"collection": "bench", "event_time": int(times[r]), "bits": packed[r].tobytes(), "dimensions": {},
                   "client": f"{hours[r]}-{owners[r]:08x}"} for r in range(n)))
    return path


def team_files(folder: str, devices: int, seed: int) -> str:
    """One day of the team: ``devices`` per region, each one memoized report an hour (24)."""
    from ldp_marginals.ldp.encoding import pack_bits
    from ldp_marginals.ldp.memoized import randomize_repeats
    from ldp_marginals.pipelines.simulate import DEFAULT_START_MS
    from ldp_marginals.schemas.config import parse_config
    cfg = parse_config(TEAM)
    rng = np.random.default_rng(seed)
    n_bits = cfg.layout.n_bits
    records = []
    for region in REGIONS:
        truth = (rng.random((devices, n_bits)) < rng.uniform(0.1, 0.6, n_bits)).astype(np.uint8)
        noisy, owner = randomize_repeats(truth, np.full(devices, 24), cfg.client_channels, rng)
        packed = pack_bits(noisy)
        slot = np.arange(owner.size) % 24   # owner is each device's 24 reports in a run: one an hour
        times = DEFAULT_START_MS + slot * HOUR_MS + rng.integers(0, HOUR_MS, owner.size)
        records += [{"collection": "team", "event_time": int(times[i]), "bits": packed[i].tobytes(),
                     "dimensions": {"region": region}, "client": f"{region}-{owner[i]}"} for i in range(owner.size)]
    order = rng.permutation(len(records))
    path = os.path.join(folder, f"{devices}", "reports.avro")
    _write(path, (records[i] for i in order))
    return path


# -- the benchmark -------------------------------------------------------------------------------------

def _median(runs: list, clock: str) -> float:
    return statistics.median(r[clock] for r in runs)


def _work(runs: list) -> float:
    """Median CPU seconds past the fixed cost (the job's CPU less the same job's on the tiny file)."""
    return statistics.median(max(r["cpu"] - r["fixed_cpu"], 1e-9) for r in runs)


def compare(pairs: dict, folder: str, repeats: int) -> dict:
    """``pairs``: name -> ((label, config, warm, pattern, tree) of the baseline, the same of the job,
    and of any other job compared with the baseline); the runs interleaved, per name ``{label: [runs]}``."""
    runs = {name: {entry[0]: [] for entry in pair} for name, pair in pairs.items()}
    for i in range(repeats):
        for name, pair in pairs.items():
            for label, config, warm, pattern, tree in pair:
                out = os.path.join(folder, "out", f"{name}-{label}-{i}".replace(" ", "_").replace(":", ""))
                runs[name][label].append(job_seconds(config, warm, pattern, out, tree))
    return runs


def _config_file(folder: str, name: str, cfg: dict) -> str:
    path = os.path.join(folder, name.replace(" ", "_").replace(":", "").replace(",", "") + ".yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path


def run(tmp, full, repeats: int = 3, populations=(2000,), team_only: bool = False, against: str | None = None):
    folder = os.path.join(tmp, "composition_cost")
    os.makedirs(folder, exist_ok=True)
    if team_only:
        old, missing = None, "(a) not measured (--team-only)"
    else:
        try:
            old = base_tree(os.path.join(folder, "base"))
        except (OSError, subprocess.CalledProcessError) as err:   # no git, or a shallow clone without 340e214
            old, missing = None, f"no baseline: git archive {BASE_COMMIT} failed ({err}); (a) not measured"
        else:
            missing = ""
    n = 1_000_000 if full else 300_000
    pairs = {}
    for j, name in enumerate(KIND_CONFIGS if old else ()):
        sub = os.path.join(folder, f"kind{j}")
        config = _config_file(folder, name, KIND_CONFIGS[name])
        warm, pattern = kind_files(sub, name, 2000, seed=j), kind_files(sub, name, n, seed=10 + j)
        pairs[name] = ((BASE_COMMIT, config, warm, pattern, old), ("now", config, warm, pattern, None))
    sub = os.path.join(folder, "team")
    warm = team_files(sub, 20, seed=1)
    plain, team = _config_file(folder, "plain", PLAIN), _config_file(folder, "team", TEAM)
    other = base_tree(os.path.join(folder, "against"), against) if against else None
    for devices in populations:   # the population: 2,000 devices a region
        pattern = team_files(sub, devices, seed=48)
        pairs[f"team {devices}"] = (("plain", plain, warm, pattern, None), ("team", team, warm, pattern, None)) + (
            ((against, team, warm, pattern, other),) if other else ())
    runs = compare(pairs, folder, repeats)
    goals, parts = [], []
    for name in KIND_CONFIGS if old else ():
        r = runs[name]
        cpu = _median(r["now"], "cpu") / _median(r[BASE_COMMIT], "cpu")
        wall = _median(r["now"], "wall") / _median(r[BASE_COMMIT], "wall")
        goals.append({"goal": f"48-7. batch job, {name} (d={D}, {n:,} reports, 2 hours, ~4 per device and hour): "
                              f"now vs {BASE_COMMIT}, CPU time",
                      "measured": f"{_median(r['now'], 'cpu'):.1f} s CPU",
                      "baseline": f"{BASE_COMMIT} {_median(r[BASE_COMMIT], 'cpu'):.1f} s CPU", "ratio": cpu,
                      "target": "<= 1.1x the time", "met": cpu <= 1.1})
        work = _work(r["now"]) / _work(r[BASE_COMMIT])
        parts.append(f"{name}: CPU {cpu:.2f}x, past the fixed cost {work:.2f}x (now {_work(r['now']):.2f} s, "
                     f"{BASE_COMMIT} {_work(r[BASE_COMMIT]):.2f} s), wall {wall:.2f}x "
                     f"(now {_median(r['now'], 'wall'):.1f} s, "
                     f"{BASE_COMMIT} {_median(r[BASE_COMMIT], 'wall'):.1f} s)")
    for devices in populations:
        r = runs[f"team {devices}"]
        cpu = _median(r["team"], "cpu") / _median(r["plain"], "cpu")
        wall = _median(r["team"], "wall") / _median(r["plain"], "wall")
        goals.append({"goal": f"48-7. the team's configuration vs plain marginals of the same reports ({len(REGIONS)} "
                              f"regions x {devices:,} devices x 24 memoized reports, one day), CPU time",
                      "measured": f"{_median(r['team'], 'cpu'):.1f} s CPU",
                      "baseline": f"plain {_median(r['plain'], 'cpu'):.1f} s CPU", "ratio": cpu,
                      "target": "<= 2x the time", "met": cpu <= 2.0})
        work = _work(r["team"]) / _work(r["plain"])
        parts.append(f"team at {devices:,} devices a region: CPU {cpu:.2f}x, past the fixed cost {work:.2f}x (team "
                     f"{_work(r['team']):.2f} s, plain {_work(r['plain']):.2f} s), wall {wall:.2f}x (team "
                     f"{_median(r['team'], 'wall'):.1f} s, plain {_median(r['plain'], 'wall'):.1f} s)")
        if against:
            parts.append(f"the team's job on {against}'s tree at {devices:,}: CPU "
                         f"{_median(r[against], 'cpu') / _median(r['plain'], 'cpu'):.2f}x plain "
                         f"({_median(r[against], 'cpu'):.2f} s; this tree's {_median(r['team'], 'cpu'):.2f} s), "
                         f"past the fixed cost {_work(r[against]) / _work(r['plain']):.2f}x ({_work(r[against]):.2f} s)")
    details = {"48-7 composition cost": f"median of {repeats} interleaved runs, each job in a fresh process after a "
                                        f"warm-up job, one BLAS thread; " + "; ".join(parts + [missing] * bool(missing))
                                        + "; load "
                                        + " ".join(f"{x:.1f}" for x in os.getloadavg())}
    return goals, details


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--devices", default="2000", help="the team's devices a region, comma-separated sizes")
    parser.add_argument("--team-only", action="store_true", help="(b) alone: no baseline tree, no kinds")
    parser.add_argument("--against", metavar="COMMIT", help="(b) also for the team's job on COMMIT's tree")
    parser.add_argument("--job", nargs=4, metavar=("CONFIG", "WARM", "INPUT", "OUTPUT"),
                        help="internal: one timed job in this process (the benchmark's subprocesses)")
    args = parser.parse_args()
    if args.job:
        print(json.dumps(_job(*args.job)))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            goals, details = run(tmp, args.full, args.repeats, [int(d) for d in args.devices.split(",")],
                                 args.team_only, args.against)
        for g in goals:
            print(f"{g['goal']}: {g['measured']} vs {g['baseline']}: {g['ratio']:.2f}x (target {g['target']})")
        print(details)
