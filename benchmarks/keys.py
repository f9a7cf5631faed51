"""Publication at 2,000 keys (issue 37, item 1): the batch job on a local Flink session cluster at
parallelism 2 (two TaskManagers of one slot, a Python worker each, as deployed; ``benchmarks.flink``)
over one hourly window of 64-bit reports in 2,000 keys (two dimensions of 50 and 40 values), measured
inside the workers:

- publication CPU per worker: the CPU seconds of the step that makes a window's rows (the thread's
  own time in its ``process``), summed per worker process;
- the largest element: the bytes of accumulator arrays in the biggest element that crosses the
  shuffle into that step (what its encoding is made of: 8 bytes per counted set, per client key and
  per client state entry);
- a worker's peak memory: the largest peak resident set (``VmHWM``) of a Python worker process over
  the job, sampled from /proc (a worker of an earlier job that does no publication in this one is
  left out: its peak is not this job's), and the worker's own ``ru_maxrss`` after each publication call.

The step is measured by a subclass of the job's own publication DoFn (:class:`ProbedPublish`, in this
module, which the workers import), so the job runs unchanged. A job that fails is cancelled and run
again once, measured afresh (on the shared 2-core machine a worker's data channel is sometimes
cancelled); a second failure is reported with its root cause (Flink's REST API). Each measurement runs at 2,000 keys and at 800 (40 x
20, which the earlier code could still publish). Before and after in one session: the
same measurement runs under another interpreter whose ``ldp_marginals`` is an earlier tree
(``--baseline-python``; ``make bench`` reads ``LDP_BENCH_BASELINE_PYTHON``), the cluster's workers
running that interpreter too. Without one, the baseline is this code on a cluster of one TaskManager
(parallelism 1): how much of the publication the busiest worker keeps when a second one is added.

    python -m benchmarks.keys [--baseline-python PATH] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

import apache_beam as beam

from benchmarks.procs import Sampler, cpu_seconds, peak_kb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = (50, 40)   # values of the two dimensions: 2,000 keys
BITS = 64
REPORTS = 200_000
PROBE_ENV = "LDP_BENCH_PROBE_FILE"
RETRIES = 1   # a failed measured job is run again (a worker's data channel cancelled under load happens)
CONFIG = {
    "collection": "keys",
    "features": [{"name": f"f{i}", "type": "boolean"} for i in range(BITS)],
    "channel": {"mechanism": "symmetric", "epsilon": 1.0},
    "max_order": 2,
    "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 20,
    "dimensions": {"region": {"max_values": KEYS[0]}, "app": {"max_values": KEYS[1]}},
}


# -- the probe, run inside the workers ----------------------------------------------------------------

def _publication_class():
    """The job's publication DoFn: per capped key (this tree) or per collection (earlier trees)."""
    from ldp_marginals.transforms import estimate
    return getattr(estimate, "PublishKeyFn", None) or estimate.PublishWindowFn


def _accumulator_bytes(value) -> int:
    """The bytes of the accumulator arrays in ``value`` (nested tuples, lists and iterables)."""
    if hasattr(value, "cooc") and hasattr(value, "client_states"):
        return int(value.cooc.counts.nbytes + value.extreme_sums.nbytes + value.clients.nbytes
                   + value.client_states.nbytes)
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return 0
    try:
        return sum(_accumulator_bytes(v) for v in value)
    except TypeError:
        return 0


class ProbedPublish(_publication_class()):
    """The publication step, measured: per call its element's accumulator bytes, the thread's CPU
    seconds, and the process's peak resident set, appended as a JSON line to ``$LDP_BENCH_PROBE_FILE``."""

    def process(self, element, w=beam.DoFn.WindowParam):
        key, values = element
        values = list(values) if not isinstance(values, tuple) else values   # a grouped iterable, once
        size = _accumulator_bytes(values)
        start = time.thread_time()
        out = list(super().process((key, values), w))
        cpu = time.thread_time() - start
        path = os.environ.get(PROBE_ENV)
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps({"pid": os.getpid(), "bytes": size, "cpu": cpu,
                                     "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}) + "\n")
        yield from out


# -- one measurement (in the interpreter whose code it measures) --------------------------------------

def config(keys: tuple) -> dict:
    return dict(CONFIG, dimensions={"region": {"max_values": keys[0]}, "app": {"max_values": keys[1]}})


def _write_input(folder: str, keys: tuple, reports: int, name: str) -> tuple:
    from ldp_marginals import schemas
    from ldp_marginals.pipelines.simulate import report_records, simulate_population
    from ldp_marginals.schemas.config import parse_config
    import yaml
    spec = config(keys)
    cfg = parse_config(spec)
    dims = [("region", [(f"r{i:02d}", 1.0) for i in range(keys[0])]), ("app", [(f"a{i:02d}", 1.0) for i in range(keys[1])])]
    pop = simulate_population(cfg, reports, seed=37, span_seconds=3599, dimensions=dims)
    path = os.path.join(folder, f"{name}.avro")
    schemas.write_avro(path, "noisy_report", report_records(cfg, pop))
    config_path = os.path.join(folder, "config.yaml")
    with open(config_path, "w") as fh:
        yaml.safe_dump(spec, fh)
    return path, config_path


def _group_stats(group: int) -> dict:
    """``{pid: (peak resident set kB, CPU seconds)}`` of the processes of a process group."""
    out = {}
    for (g, pid), cpu in cpu_seconds().items():
        hwm = peak_kb(pid) if g == group else None
        if hwm is not None:
            out[pid] = (hwm, cpu)
    return out


class WorkerMeter(Sampler):
    """``with WorkerMeter(group) as meter: ...`` then ``meter.peak_kb`` and ``meter.cpu_s``, by pid: the
    peak resident set (VmHWM) and the CPU seconds spent inside the block of the processes of a process
    group (the worker pool and its SDK workers), sampled every 0.2 s (a worker that ends within the
    block is counted to its last sample)."""

    def __init__(self, group: int):
        super().__init__(0.2)
        self.group, self.peak_kb, self.cpu_s = group, {}, {}
        self._first = {}

    def begin(self):
        for pid, (_, cpu) in _group_stats(self.group).items():
            self._first[pid] = cpu
        self.earlier = set(self._first)   # workers of earlier jobs (their peaks are not this job's)

    def sample(self):
        for pid, (hwm, cpu) in _group_stats(self.group).items():
            self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), hwm)
            self._first.setdefault(pid, cpu)
            self.cpu_s[pid] = cpu - self._first[pid]


def _run_job(path: str, config_path: str, out: str, args: list, cluster, timeout_s: float = 1800.0) -> dict:
    """The batch job submitted to the session ``cluster`` and followed through Flink's REST API:
    ``{"seconds": Flink's job time}``, or ``{"failed": the root cause}`` at its first failure (the job
    is then cancelled: Flink would restart it for ever)."""
    from ldp_marginals.pipelines.run import run as run_job
    known = {j["jid"] for j in cluster.rest_call("/jobs/overview")["jobs"]}
    run_job(["--config", config_path, "--input", path, "--output", out, "--detach", *args])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        jobs = [j for j in cluster.rest_call("/jobs/overview")["jobs"] if j["jid"] not in known]
        if not jobs:   # the job server hands the job to Flink after run returns
            time.sleep(0.5)
            continue
        job = max(jobs, key=lambda j: j["start-time"])
        if job["state"] == "FINISHED":
            return {"seconds": (job["end-time"] - job["start-time"]) / 1000}
        if job["state"] in ("RESTARTING", "FAILING", "FAILED") or cluster.rest_call(
                f"/jobs/{job['jid']}/exceptions").get("root-exception"):
            root = None
            for _ in range(10):   # the exception is listed shortly after the state changes
                root = cluster.rest_call(f"/jobs/{job['jid']}/exceptions").get("root-exception")
                if root:
                    break
                time.sleep(0.5)
            root = root or job["state"]
            causes = [line.strip() for line in root.splitlines() if line.strip().startswith("Caused by")]
            cluster.cancel_jobs()
            return {"failed": (causes[-1] if causes else root.splitlines()[0])[:400]}
        time.sleep(0.5)
    cluster.cancel_jobs()
    return {"failed": f"not finished in {timeout_s:.0f} s"}


def _started(local_cluster, run_dir: str, parallelism: int, attempts: int = 3):
    """A session cluster of ``parallelism`` TaskManagers with a worker pool (no broker: a batch job);
    started again when its JobManager answered 503 while it was still starting (a busy machine), or
    when a part could not bind the free port it was given."""
    import urllib.error
    for attempt in range(attempts):
        try:
            return local_cluster.start(f"{run_dir}{attempt or ''}", os.path.join(ROOT, local_cluster.JVM_DIR),
                                       parallelism=parallelism, kafka=False, workers=True, flink="session",
                                       taskmanagers=parallelism)
        except urllib.error.HTTPError as err:
            if err.code != 503 or attempt == attempts - 1:
                raise
        except local_cluster.ClusterError:   # a free port taken by another process before ours bound it
            if attempt == attempts - 1:
                raise


def measure(parallelism: int, folder: str, sizes: list) -> list:
    """Batch jobs at ``parallelism`` on one fresh session cluster, one per key count of ``sizes``
    (``[(values of region, values of app)]``): per job the probe's figures per worker."""
    from benchmarks.keys import ProbedPublish as probed   # by its module's name, which the workers import
    from deploy.local import cluster as local_cluster
    from ldp_marginals.transforms import estimate
    os.makedirs(folder, exist_ok=True)
    probe = os.path.join(folder, "probe.jsonl")
    os.environ[PROBE_ENV] = probe   # the worker pool and its workers inherit it
    name = _publication_class().__name__
    setattr(estimate, name, probed)
    cluster = _started(local_cluster, os.path.join(folder, "cluster"), parallelism)
    results = []
    try:
        args = cluster.pipeline_args()
        for keys in sizes:
            here = os.path.join(folder, f"{keys[0] * keys[1]}keys")
            os.makedirs(here, exist_ok=True)
            path, config_path = _write_input(here, keys, REPORTS, "reports")
            tiny, _ = _write_input(here, keys, 2_000, "tiny")
            _run_job(tiny, config_path, os.path.join(here, "warm"), args, cluster)   # numba's cache, the page cache
            failures = []
            for attempt in range(RETRIES + 1):   # a job that failed is run again once, measured afresh
                open(probe, "w").close()
                out = os.path.join(here, f"out{attempt or ''}")
                with WorkerMeter(cluster.pids["workers"]) as meter:
                    job = _run_job(path, config_path, out, args, cluster)
                if "failed" not in job:
                    break
                failures.append(job["failed"])
            calls = [json.loads(line) for line in open(probe)]
            results.append(dict(_figures(name, parallelism, keys, job, calls, meter, out, cluster.pids["workers"]),
                                failures=failures))
    finally:
        cluster.stop()
    return results


def _figures(name, parallelism, keys, job, calls, meter, out: str, pool: int) -> dict:
    workers = {}
    for pid in sorted(meter.cpu_s):
        mine = [c for c in calls if c["pid"] == pid]
        if pid == pool or (pid in meter.earlier and not mine):   # the pool; an earlier job's worker
            continue
        workers[str(pid)] = {"publication_calls": len(mine), "publication_cpu_s": sum(c["cpu"] for c in mine),
                             "worker_cpu_s": meter.cpu_s[pid], "peak_kb": meter.peak_kb[pid],
                             "largest_bytes": max((c["bytes"] for c in mine), default=0)}
    files = sum(len(f) for _, _, f in os.walk(out))
    return {"code": name, "parallelism": parallelism, "keys": keys[0] * keys[1], **job,
            "publication_calls": len(calls), "workers": workers,
            "largest_bytes": max((c["bytes"] for c in calls), default=0),
            "worker_peak_kb": max((w["peak_kb"] for w in workers.values()), default=0), "files_written": files}


def measured(python: str, parallelism: int, folder: str, sizes: list) -> list:
    """:func:`measure` under ``python`` (its own ``ldp_marginals``), in a process of its own."""
    os.makedirs(folder, exist_ok=True)
    result = os.path.join(folder, "result.json")
    subprocess.run([python, "-m", "benchmarks.keys", "--measure", str(parallelism), "--folder", folder,
                    "--result", result, "--sizes", json.dumps(sizes)], cwd=ROOT, check=True)
    with open(result) as fh:
        return json.load(fh)


def _summary(m: dict) -> str:
    retried = "".join(f" (run again after a failure: {f})" for f in m.get("failures", [])[:RETRIES])
    if "failed" in m:
        return f"{m['code']}, parallelism {m['parallelism']}, {m['keys']:,} keys: the job FAILED: {m['failed']}{retried}"
    workers = "; ".join("publication %.1f s of %.1f s CPU (%d calls), peak %.2f GiB" % (
        w["publication_cpu_s"], w["worker_cpu_s"], w["publication_calls"], w["peak_kb"] / 2 ** 20)
        for w in m["workers"].values())
    return (f"{m['code']}, parallelism {m['parallelism']}, {m['keys']:,} keys: workers [{workers}]; largest element "
            f"{m['largest_bytes'] / 2 ** 20:.2f} MiB; Flink job {m['seconds']:.1f} s; {m['files_written']} files{retried}")


def _busiest(m: dict) -> float:
    return max((w["publication_cpu_s"] for w in m["workers"].values()), default=0.0)


def _goals(after: dict, before: dict, label: str) -> list:
    if "failed" in before:
        return [{"goal": f"37-1 batch publication, {after['keys']:,} keys at {BITS} bits (Flink p{after['parallelism']})",
                 "measured": f"busiest worker {_busiest(after):.1f} s, element {after['largest_bytes'] / 2 ** 20:.2f} MiB, "
                             f"peak {after['worker_peak_kb'] / 2 ** 20:.2f} GiB",
                 "baseline": f"{label}: the job failed ({before['failed'].split(': ', 1)[-1][:120]})",
                 "ratio": float("nan"), "target": "runs", "met": "failed" not in after}]
    return [
        {"goal": f"37-1a publication CPU of the busiest worker, {after['keys']:,} keys at {BITS} bits (Flink p2)",
         "measured": f"{_busiest(after):.1f} s", "baseline": f"{_busiest(before):.1f} s, {label}",
         "ratio": _busiest(after) / max(_busiest(before), 1e-9), "target": "report", "met": None},
        {"goal": f"37-1b largest element into publication, {after['keys']:,} keys",
         "measured": f"{after['largest_bytes'] / 2 ** 20:.3f} MiB",
         "baseline": f"{before['largest_bytes'] / 2 ** 20:.3f} MiB, {label}",
         "ratio": after["largest_bytes"] / max(before["largest_bytes"], 1), "target": "report", "met": None},
        {"goal": f"37-1c a worker's peak memory, {after['keys']:,} keys",
         "measured": f"{after['worker_peak_kb'] / 2 ** 20:.2f} GiB",
         "baseline": f"{before['worker_peak_kb'] / 2 ** 20:.2f} GiB, {label}",
         "ratio": after["worker_peak_kb"] / max(before["worker_peak_kb"], 1), "target": "report", "met": None},
    ]


SIZES = [KEYS, (40, 20)]   # the 2,000 keys, and 800 (which the earlier code could still publish)


def run(tmp, full, baseline_python: str | None = None):
    """``make bench``'s goal: this code at parallelism 2 against ``baseline_python``'s (an earlier
    tree) or, without one, against this code at parallelism 1."""
    baseline_python = baseline_python or os.environ.get("LDP_BENCH_BASELINE_PYTHON")
    folder = os.path.join(tmp, "keys")
    after = measured(sys.executable, 2, os.path.join(folder, "after"), SIZES)
    if baseline_python:
        before = measured(baseline_python, 2, os.path.join(folder, "before"), SIZES)
        label = f"{before[0]['code']} (the baseline tree), parallelism 2"
    else:
        before = measured(sys.executable, 1, os.path.join(folder, "p1"), SIZES)
        label = "this code at parallelism 1"
    goals, details = [], {"37-1 keys input": f"{REPORTS:,} reports of {BITS} bits in one hourly window, keys "
                                             f"of two dimensions, max_order 2, min_reports {CONFIG['min_reports']}"}
    for a, b in zip(after, before):
        goals += _goals(a, b, label)
        details[f"37-1 {a['keys']} keys, this code"] = _summary(a)
        details[f"37-1 {b['keys']} keys, baseline"] = _summary(b)
    return goals, details


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-python", default=None, help="an interpreter whose ldp_marginals is the baseline")
    parser.add_argument("--out", default=None, help="where to write keys.json (default: print only)")
    parser.add_argument("--work", default=None, help="a folder to keep the inputs, outputs and clusters' logs in")
    parser.add_argument("--measure", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--folder", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:
        result = measure(args.measure, args.folder, [tuple(k) for k in json.loads(args.sizes)])
        with open(args.result, "w") as fh:
            json.dump(result, fh)
        return
    if args.work:
        goals, details = run(args.work, False, args.baseline_python)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            goals, details = run(tmp, False, args.baseline_python)
    text = "\n".join([f"{g['goal']}: {g['measured']} vs {g['baseline']} "
                      f"({'n/a' if math.isnan(g['ratio']) else format(g['ratio'], '.3f') + 'x'})" for g in goals]
                     + [f"- {k}: {v}" for k, v in details.items()])
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "keys.json"), "w") as fh:
            json.dump({"goals": goals, "details": details}, fh, indent=2)


if __name__ == "__main__":
    main()
