"""Goal 8 (issue 21): scale-out on Flink. The batch job on one large Avro file and the streaming job
on a Kafka topic, each on a local Flink session cluster (``deploy/local/cluster.py``) of p
TaskManagers of one slot each at parallelism p = 1 and 2, with the Python work in a pool of worker
processes (one per TaskManager, as deployed), beside the DirectRunner on the same file.

A job's time on Flink is Flink's own: from the JobManager accepting the job to its end (batch) or to
the pane's file (streaming), read from the session cluster's REST API, so that the job server's
translation and submission (10-20 s on a session cluster, varying by seconds from job to job) are
not counted; a rate is reports over (job time - the same job's time on a tiny input), so that the
rest of a job's start-up (task deployment, the SDK worker's start) is not counted as throughput
either. The target: parallelism 2 at least 1.6x parallelism 1 on 2 cores, batch and streaming.

Streaming: container messages of 500 reports (a collector's batches) on a topic of 2 partitions,
written before the job starts and followed by one report a day later on each partition, which moves
the watermark past the reports' day as soon as they are read; the streaming job counts into one
day-long window, so its time to that window's pane is start-up + reading and counting + one pane,
and the same on 2,000 reports is subtracted. (With hourly windows, the time between the first
window's pane and the last's was 10.5 s whether 1.75M or 5.25M reports lay between: it measured the
panes' cadence, not throughput.) The reports counted in the pane are checked. The panes step is keyed by collection: if that one key capped
the throughput, parallelism 2 would gain nothing on the streaming side.
"""
from __future__ import annotations

import io
import json
import os
import re
import statistics
import time

import yaml

from benchmarks import e2e
from benchmarks.procs import Sampler, cpu_seconds
from ldp_marginals import schemas
from deploy.local import cluster as local_cluster
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.pipelines.run import run as run_job
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import MANIFEST_FILE, MARGINALS, WITHHELD, entry_path, file_stem
from ldp_marginals.transforms.avro_container import _Stream, read_header

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPEATS = 2
HOURS = 8
CONFIG = dict(e2e.CONFIG, collection="scale", min_reports=1)


def _records(cfg, n: int, seed: int) -> list:
    pop = simulate_population(cfg, n, seed=seed, span_seconds=HOURS * 3600)
    return list(report_records(cfg, pop))


def _write(path: str, records: list) -> str:
    schemas.write_avro(path, "noisy_report", records)
    return path


def _repeated(src: str, dst: str, times: int) -> str:
    """``src``'s blocks ``times`` over under its header (one valid container: the blocks share the
    header's sync marker): a large file without simulating every report."""
    with open(src, "rb") as fh:
        data = fh.read()
    end = read_header(_Stream(io.BytesIO(data))).end
    with open(dst, "wb") as fh:
        fh.write(data[:end])
        for _ in range(times):
            fh.write(data[end:])
    return dst


def _counted(out: str, windows) -> int:
    """Reports in the output's latest panes of ``windows``: each (window, dimensions) key's
    ``n_reports``, once."""
    starts = {w[0] for w in windows}
    per_key = {(row["window_start"], json.dumps(row.get("dimensions"), sort_keys=True)): row["n_reports"]
               for row in read_rows(out, MARGINALS) if row["window_start"] in starts}
    return sum(per_key.values())


def newest_job(cluster) -> dict:
    """The session cluster's most recently started job (Flink's ``/jobs/overview``: id, state, start
    and end times in ms since the epoch)."""
    jobs = cluster.rest_call("/jobs/overview")["jobs"]
    if not jobs:
        raise RuntimeError(f"the Flink cluster at {cluster.rest} ran no job")
    return max(jobs, key=lambda job: job["start-time"])


def batch_seconds(path, config_path, out, beam_args, cluster=None) -> float:
    """Seconds the batch job took: on a session ``cluster`` Flink's (the job's start to its end),
    otherwise the wall time of the whole run."""
    start = time.perf_counter()
    run_job(["--config", config_path, "--input", path, "--output", out, *beam_args])
    if cluster is None:
        return time.perf_counter() - start
    job = newest_job(cluster)
    if job["state"] != "FINISHED":
        raise RuntimeError(f"the batch job {job['jid']} ended {job['state']}")
    return (job["end-time"] - job["start-time"]) / 1000


DAY_MS = 86_400_000
# the streaming job counts into one day-long window (the reports span HOURS hours of one day): one
# pane to wait for, whatever the volume
STREAM_CONFIG = dict(CONFIG, window={"type": "fixed", "size_seconds": DAY_MS // 1000})


def _day(records) -> tuple:
    start = records[0]["event_time"] // DAY_MS * DAY_MS
    if any(r["event_time"] // DAY_MS * DAY_MS != start for r in records):
        raise ValueError("the streamed reports must lie in one day")
    return start, start + DAY_MS


def _pane_out(out: str, window) -> bool:
    """The window's pane is out (no early firings, no lateness: its on-time pane is its only one)."""
    stem = file_stem(window, CONFIG["collection"], 0)
    with open(os.path.join(out, MANIFEST_FILE)) as fh:   # the streaming run's: its entries name its files
        run_id = json.load(fh)["run_id"]
    return any(os.path.exists(os.path.join(out, entry_path(run_id, kind, stem))) for kind in (MARGINALS, WITHHELD))


def cpu_by_part(before: dict, after: dict, pids: dict) -> dict:
    """CPU seconds spent between two :func:`cpu_seconds` by each part of the cluster (its process
    groups by name) and by this process's group (``bench``: the submission, the producer)."""
    names = {pid: name for name, pid in pids.items() if isinstance(pid, int)}
    names[os.getpgrp()] = "bench"
    parts = {}
    for (group, pid), seconds in after.items():
        name = names.get(group, "other")
        parts[name] = parts.get(name, 0.0) + seconds - before.get((group, pid), 0.0)
    return {name: round(t, 1) for name, t in sorted(parts.items(), key=lambda kv: -kv[1]) if t >= 0.1}


class CpuMeter(Sampler):
    """``with CpuMeter(pids) as meter: ...`` then ``meter.parts``: CPU seconds spent in the block by
    part (:func:`cpu_by_part`), from samples every ``interval`` seconds while it runs, so that the
    processes that end within it (a job's SDK workers exit with the job) are counted to their last
    sample."""

    def __init__(self, pids: dict, interval: float = 0.5):
        super().__init__(interval)
        self.pids = pids
        self.parts, self.seconds = {}, 0.0

    def begin(self):
        self._before = cpu_seconds()
        self._last = dict(self._before)
        self._start = time.perf_counter()

    def sample(self):
        for key, value in cpu_seconds().items():
            self._last[key] = value

    def end(self):
        self.seconds = time.perf_counter() - self._start
        self.parts = cpu_by_part(self._before, self._last, self.pids)

    @property
    def cores(self) -> float:
        """Cores in use on average over the block."""
        return sum(self.parts.values()) / max(self.seconds, 1e-9)


def produce_stream(cluster, topic, records, repeat: int = 1, per_message: int = 500) -> tuple:
    """``records`` in containers of ``per_message`` on ``topic``, each sent ``repeat`` times, followed
    on each partition by one report a day later, which moves the watermark past the reports' day as
    soon as they are read (else Kafka IO waits to find the partitions idle). Returns the day's window
    and the reports it holds."""
    from benchmarks.streaming import container
    from tests.cluster.streams import produce   # the tests' producer (kafka-python)
    records = sorted(records, key=lambda r: r["event_time"])
    window = _day(records)
    messages = [(container(records[i:i + per_message]), records[i]["event_time"])
                for i in range(0, len(records), per_message) for _ in range(repeat)]
    later = dict(records[-1], event_time=records[-1]["event_time"] + DAY_MS)
    messages += [(container([later]), later["event_time"])] * 2
    produce(cluster.bootstrap, topic, messages)
    return window, len(records) * repeat


def stream_seconds(cluster, topic, window, n: int, config_path, out, timeout_s=900.0) -> float:
    """Seconds from the job's start on the session ``cluster`` (Flink's) to the day window's pane of
    the streaming job reading ``topic`` from its beginning (:func:`produce_stream`); the ``n``
    reports counted are checked."""
    argv = ["--config", config_path, "--streaming", "--kafka-topic", topic, "--kafka-bootstrap", cluster.bootstrap,
            "--kafka-consumer-config", "auto.offset.reset=earliest", "--kafka-expansion-service",
            cluster.expansion_service, "--allowed-lateness-seconds", "0", "--watermark-delay-seconds", "0",
            "--output", out] + cluster.pipeline_args()
    from tests.cluster.streams import running_job   # submits; cancels on leaving (a session job over REST)
    start = time.perf_counter()
    with running_job(argv, cluster):
        while not _pane_out(out, window):
            if time.perf_counter() - start > timeout_s:
                raise TimeoutError(f"the streaming job wrote no pane in {timeout_s:.0f} s")
            time.sleep(0.05)
        took = time.time() - newest_job(cluster)["start-time"] / 1000   # the JobManager's clock: this machine's
        counted = _counted(out, [window])
        if counted != n:
            raise RuntimeError(f"the streaming job counted {counted:,} reports of {n:,}")
        return took


TASK = re.compile(rb"\((\d+)/(\d+)\)#")


def _flink_logs(cluster) -> list:
    """The logs that name the tasks Flink ran: the TaskManagers', or the job server's (its embedded Flink)."""
    names = [f"{part}.log" for part in cluster.taskmanager_parts] if cluster.flink == "session" else ["job-server.log"]
    return [os.path.join(cluster.run_dir, name) for name in names]


def task_parallelism(cluster, since: dict) -> set:
    """The parallelism of the tasks Flink's logs name after their sizes ``since`` (Flink names a task
    ``<operator> (i/p)#attempt``): what the jobs ran at, whatever their options asked for."""
    ran = set()
    for path in _flink_logs(cluster):
        with open(path, "rb") as fh:
            fh.seek(since.get(path, 0))
            ran |= {int(m.group(2)) for m in TASK.finditer(fh.read())}
    return ran


def _log_sizes(cluster) -> dict:
    return {path: os.path.getsize(path) for path in _flink_logs(cluster)}


def run(tmp, full):
    """At each parallelism p in (1, 2), a local session cluster of p TaskManagers of one slot each,
    with a pool of worker processes (one per TaskManager, as deployed). Flink's job server runs a
    batch job at its configured default parallelism whatever ``--parallelism`` asks (measured: a job
    asking for 1 ran every task as (i/2) on a cluster of 2 slots, in one worker process on two
    threads), so a cluster of p slots is the only way to run at p; and a TaskManager of two slots
    binds tasks to its two workers in the order they open, which put both reading tasks of a
    streaming job on one worker in about half the runs (one core busy, the other idle), so each
    TaskManager has one slot and one worker. The tasks' parallelism is read back from the
    TaskManagers' logs and checked. On each cluster a warm-up job first (a new worker process
    imports Beam and loads numba's cache: seconds of CPU counted against whichever job first uses
    it), then ``REPEATS`` rounds, each volume measured net of the same job on 2,000 reports;
    medians."""
    base, times = 2_000_000, (100 if full else 50)   # 100M reports: a job start varies by +-1 s
    n = base * times
    cfg = parse_config(CONFIG)
    folder = os.path.join(tmp, "flink")
    os.makedirs(folder, exist_ok=True)
    config_path, stream_config = os.path.join(folder, "config.yaml"), os.path.join(folder, "stream.yaml")
    for path, config in ((config_path, CONFIG), (stream_config, STREAM_CONFIG)):
        with open(path, "w") as fh:
            yaml.safe_dump(config, fh)
    records = _records(cfg, base, 7)
    big = _repeated(_write(os.path.join(folder, "base.avro"), records), os.path.join(folder, "big.avro"), times)
    tiny_records = _records(cfg, 2000, 8)
    tiny = _write(os.path.join(folder, "tiny.avro"), tiny_records)
    stream_repeat = 20 if full else 15
    out = lambda name: os.path.join(folder, "out", name)   # noqa: E731

    batch_seconds(tiny, config_path, out("warm"), [])   # numba's cache, the page cache
    direct = statistics.median(batch_seconds(big, config_path, out(f"direct{i}"), []) for i in range(REPEATS))
    direct_tiny = batch_seconds(tiny, config_path, out("direct-tiny"), [])
    times_of = {(p, what): [] for p in (1, 2) for what in ("tiny", "big", "stiny", "sbig")}
    cpu, batch_cpu = {}, {}
    for p in (1, 2):
        cluster = local_cluster.start(os.path.join(folder, f"cluster{p}"), os.path.join(ROOT, local_cluster.JVM_DIR),
                                      parallelism=p, workers=True, flink="session", taskmanagers=p)
        try:
            stiny = produce_stream(cluster, "tiny", tiny_records)
            sbig = produce_stream(cluster, "big", records, stream_repeat)
            args = cluster.pipeline_args()
            since = _log_sizes(cluster)
            batch_seconds(tiny, config_path, out(f"p{p}-warm"), args)
            stream_seconds(cluster, "tiny", *stiny, stream_config, out(f"p{p}-swarm"))
            for i in range(REPEATS):
                times_of[p, "tiny"].append(batch_seconds(tiny, config_path, out(f"p{p}-tiny{i}"), args, cluster))
                with CpuMeter(cluster.pids) as meter:
                    times_of[p, "big"].append(batch_seconds(big, config_path, out(f"p{p}-big{i}"), args, cluster))
                batch_cpu[p] = meter
                times_of[p, "stiny"].append(stream_seconds(cluster, "tiny", *stiny, stream_config,
                                                           out(f"p{p}-stiny{i}")))
                with CpuMeter(cluster.pids) as meter:
                    times_of[p, "sbig"].append(stream_seconds(cluster, "big", *sbig, stream_config,
                                                              out(f"p{p}-sbig{i}")))
                cpu[p] = meter
            ran_at = task_parallelism(cluster, since)   # a task that cannot be spread (a source) runs at 1
            if max(ran_at, default=0) != p:
                raise RuntimeError(f"the jobs on a cluster of {p} slots ran tasks at parallelism {sorted(ran_at)} "
                                   f"(from {_flink_logs(cluster)})")
        finally:
            cluster.stop()
    med = {key: statistics.median(v) for key, v in times_of.items()}
    stream_n = sbig[1]
    rates = {p: (n / max(med[p, "big"] - med[p, "tiny"], 1e-9), stream_n / max(med[p, "sbig"] - med[p, "stiny"], 1e-9))
             for p in (1, 2)}
    details = {}
    for p in (1, 2):
        details[f"Flink parallelism {p}"] = (
            f"Flink's job times: batch {med[p, 'big']:.1f} s ({med[p, 'tiny']:.1f} s on 2,000 reports); streaming "
            f"{med[p, 'sbig']:.1f} s from the job's start to the pane ({med[p, 'stiny']:.1f} s on 2,000 reports)")
    for p, meter in sorted(cpu.items()):
        details[f"Flink parallelism {p}, streaming CPU"] = (
            f"CPU seconds of the last streaming job by part: {json.dumps(meter.parts)}; {meter.cores:.2f} of "
            f"the machine's {os.cpu_count()} cores in use on average"
            + (f" (p2/p1 at most {os.cpu_count() / meter.cores:.2f}x here)" if p == 1 else ""))
    for p, meter in sorted(batch_cpu.items()):
        details[f"Flink parallelism {p}, batch CPU"] = (
            f"CPU seconds of the last batch job by part: {json.dumps(meter.parts)}; {meter.cores:.2f} of the "
            f"machine's {os.cpu_count()} cores in use on average over the job"
            + (f" (so p2/p1 can be at most {os.cpu_count() / meter.cores:.2f}x here, even if spreading cost "
               "nothing)" if p == 1 else ""))
    direct_rate = n / max(direct - direct_tiny, 1e-9)
    details["DirectRunner"] = f"{direct:.1f} s for the file ({direct_tiny:.1f} s on 2,000 reports)"
    details["scale-out input"] = (f"one Avro file of {n:,} reports (the blocks of {base:,} simulated ones, {times} times; "
                                  f"{os.path.getsize(big) / 2 ** 20:.0f} MiB, {e2e.D} bits, k=2, {HOURS} hourly windows), read in 16 MiB splits; streaming: "
                                  f"{stream_n:,} reports ({len(records):,} of them, each container of 500 sent "
                                  f"{stream_repeat} times) on 2 Kafka partitions into one day-long window; the Python work in "
                                  "p worker processes (Beam's worker pool), one per TaskManager of one slot")
    goals = []
    for i, kind in enumerate(("batch", "streaming")):
        ratio = rates[2][i] / rates[1][i]
        goals.append({"goal": f"8{'ab'[i]}. {kind} job on Flink, parallelism 2 vs 1 (one collection)",
                      "measured": f"{rates[2][i]:,.0f} reports/s", "baseline": f"parallelism 1 {rates[1][i]:,.0f} reports/s",
                      "ratio": ratio, "target": ">= 1.6x", "met": ratio >= 1.6})
    goals.append({"goal": "8c. batch job on Flink (parallelism 2) vs the DirectRunner",
                  "measured": f"{rates[2][0]:,.0f} reports/s", "baseline": f"DirectRunner {direct_rate:,.0f} reports/s",
                  "ratio": rates[2][0] / direct_rate, "target": "report", "met": None})
    return goals, details
