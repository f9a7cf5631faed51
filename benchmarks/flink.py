"""Goal 8 (issue 21): scale-out on Flink. The batch job on one large Avro file and the streaming job
on a Kafka topic, each on the local Flink cluster (``pipelines.local_cluster``) at parallelism 1 and
2, with the Python work in a pool of worker processes (one per slot, as deployed), beside the
DirectRunner on the same file.

A batch rate is reports over (job time - the same job's time on a tiny input), so that the start-up
of a job on Flink (translation, submission, worker start) is not counted as throughput. The target:
parallelism 2 at least 1.6x parallelism 1 on 2 cores, batch and streaming.

Streaming: container messages of 500 reports (a collector's batches) on a topic of 2 partitions,
written before the job starts and followed by one report two hours after the rest on each
partition, which moves the watermark past every window once the data are read; the job's time is
between the first window's pane and the last's (the job's start-up left out), and the reports
counted in the panes are checked. The panes step is keyed by collection: if that one key capped
the throughput, parallelism 2 would gain nothing on the streaming side.
"""
from __future__ import annotations

import os
import statistics
import time

import yaml

from benchmarks import e2e
from ldp_marginals.pipelines import local_cluster
from ldp_marginals.pipelines.run import make_pipeline, run as run_job, write_collections
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import MARGINALS, WITHHELD, file_stem, kind_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPEATS = 2
HOURS = 8
CONFIG = dict(e2e.CONFIG, collection="scale", min_reports=1)


def _records(cfg, n: int, seed: int) -> list:
    pop = simulate_population(cfg, n, seed=seed, span_seconds=HOURS * 3600)
    return list(report_records(cfg, pop))


def _write(path: str, records: list) -> str:
    from ldp_marginals import schemas
    schemas.write_avro(path, "noisy_report", records)
    return path


def _repeated(src: str, dst: str, times: int) -> str:
    """``src``'s blocks ``times`` over under its header (one valid container: the blocks share the
    header's sync marker): a large file without simulating every report."""
    from ldp_marginals.transforms.avro_container import _Stream, read_header
    with open(src, "rb") as fh:
        data = fh.read()
    end = read_header(_Stream(open(src, "rb"))).end
    with open(dst, "wb") as fh:
        fh.write(data[:end])
        for _ in range(times):
            fh.write(data[end:])
    return dst


def _counted(out: str, windows) -> int:
    """Reports in the output's latest panes of ``windows``: each (window, dimensions) key's
    ``n_reports``, once."""
    import json
    from ldp_marginals.schemas.outputs import read_rows
    starts = {w[0] for w in windows}
    per_key = {(row["window_start"], json.dumps(row.get("dimensions"), sort_keys=True)): row["n_reports"]
               for row in read_rows(out, MARGINALS) if row["window_start"] in starts}
    return sum(per_key.values())


def batch_seconds(path, config_path, out, beam_args) -> float:
    start = time.perf_counter()
    run_job(["--config", config_path, "--input", path, "--output", out, *beam_args])
    return time.perf_counter() - start


def _windows(records) -> list:
    size = 3_600_000
    return sorted({(r["event_time"] // size * size, r["event_time"] // size * size + size) for r in records})


def _closed(out: str, window) -> bool:
    """The window's pane is out (no early firings, no lateness: its on-time pane is its only one)."""
    stem = file_stem(window, CONFIG["collection"], 0) + ".jsonl"
    return any(os.path.exists(os.path.join(kind_dir(out, kind), stem)) for kind in (MARGINALS, WITHHELD))


def stream_seconds(cluster, topic, records, config_path, out, repeat: int = 1, timeout_s=900.0) -> tuple:
    """``(seconds to the first window's pane, seconds from it to the last window's pane, reports
    after the first window)`` of the streaming job on ``records`` in containers of 500, each sent
    ``repeat`` times, in event-time order (Kafka IO's CreateTime watermark follows the newest time
    read, so reports out of order by more than a window would be late). The reports are in time
    order, so the first window's pane comes once its reports are read and the last's once every
    report is: the time between the two is the job reading and counting the later windows' reports,
    its start-up left out."""
    from benchmarks.streaming import container
    from tests.cluster.streams import produce   # the tests' producer (kafka-python)
    records = sorted(records, key=lambda r: r["event_time"])
    messages = [(container(records[i:i + 500]), records[i]["event_time"]) for i in range(0, len(records), 500)
                for _ in range(repeat)]
    # a report two hours after the last, on each partition, moves the watermark past every window
    # as soon as the data are read (else Kafka IO waits to find a partition idle: a fixed delay)
    late = dict(records[-1], event_time=records[-1]["event_time"] + 2 * 3_600_000)
    messages += [(container([late]), late["event_time"])] * 2
    produce(cluster.bootstrap, topic, messages)
    argv = ["--config", config_path, "--streaming", "--kafka-topic", topic, "--kafka-bootstrap", cluster.bootstrap,
            "--kafka-consumer-config", "auto.offset.reset=earliest", "--kafka-expansion-service",
            cluster.expansion_service, "--allowed-lateness-seconds", "0", "--output", out] + cluster.pipeline_args()
    windows = _windows(records)
    after_first = sum(1 for r in records if r["event_time"] >= windows[0][1]) * repeat
    start = time.perf_counter()
    pipeline, args, configs = make_pipeline(argv)
    write_collections(args.output, configs)
    result = pipeline.run()
    try:
        seen = {}
        while len(seen) < len(windows):
            now = time.perf_counter()
            if now - start > timeout_s:
                raise TimeoutError(f"the streaming job did not close its {len(windows)} windows in {timeout_s:.0f} s")
            for w in windows:
                if w not in seen and _closed(out, w):
                    seen[w] = now
            time.sleep(0.05)
        counted = _counted(out, windows)
        if counted != len(records) * repeat:
            raise RuntimeError(f"the streaming job counted {counted:,} reports of {len(records) * repeat:,}")
        return seen[windows[0]] - start, seen[windows[-1]] - seen[windows[0]], after_first
    finally:
        try:
            result.cancel()
        except Exception:  # noqa: BLE001 - a job that ended on its own
            pass


def run(tmp, full):
    base, times = 2_000_000, (20 if full else 10)
    n = base * times
    cfg = parse_config(CONFIG)
    folder = os.path.join(tmp, "flink")
    os.makedirs(folder, exist_ok=True)
    config_path = os.path.join(folder, "config.yaml")
    with open(config_path, "w") as fh:
        yaml.safe_dump(CONFIG, fh)
    records = _records(cfg, base, 7)
    big = _repeated(_write(os.path.join(folder, "base.avro"), records), os.path.join(folder, "big.avro"), times)
    tiny_records = _records(cfg, 2000, 8)
    tiny = _write(os.path.join(folder, "tiny.avro"), tiny_records)
    stream_records, stream_repeat = records[:400_000], times
    stream_n = len(stream_records) * stream_repeat
    out = lambda name: os.path.join(folder, "out", name)   # noqa: E731

    batch_seconds(tiny, config_path, out("warm"), [])   # numba's cache, the page cache
    direct = statistics.median(batch_seconds(big, config_path, out(f"direct{i}"), []) for i in range(REPEATS))
    direct_tiny = batch_seconds(tiny, config_path, out("direct-tiny"), [])
    rates = {}
    details = {}
    for p in (1, 2):
        cluster = local_cluster.start(os.path.join(folder, f"cluster{p}"), os.path.join(ROOT, local_cluster.JVM_DIR),
                                      parallelism=p, workers=True)
        try:
            args = cluster.pipeline_args()
            batch_seconds(tiny, config_path, out(f"p{p}-warm"), args)
            t_tiny = statistics.median(batch_seconds(tiny, config_path, out(f"p{p}-tiny{i}"), args)
                                       for i in range(REPEATS))
            t_big = statistics.median(batch_seconds(big, config_path, out(f"p{p}-big{i}"), args)
                                      for i in range(REPEATS))
            s_first, s_rest, s_n = stream_seconds(cluster, "big", stream_records, config_path, out(f"p{p}-sbig"),
                                                  stream_repeat)
        finally:
            cluster.stop()
        rates[p] = (n / max(t_big - t_tiny, 1e-9), s_n / max(s_rest, 1e-9))
        details[f"Flink parallelism {p}"] = (f"batch {t_big:.1f} s ({t_tiny:.1f} s on 2,000 reports); streaming: "
                                             f"first window's pane after {s_first:.1f} s, the last's {s_rest:.1f} s "
                                             f"later ({s_n:,} reports in between)")
    direct_rate = n / max(direct - direct_tiny, 1e-9)
    details["DirectRunner"] = f"{direct:.1f} s for the file ({direct_tiny:.1f} s on 2,000 reports)"
    details["scale-out input"] = (f"one Avro file of {n:,} reports (the blocks of {base:,} simulated ones, {times} times; "
                                  f"{os.path.getsize(big) / 2 ** 20:.0f} MiB, {e2e.D} bits, k=2, {HOURS} hourly windows), read in 16 MiB splits; streaming: "
                                  f"{stream_n:,} reports ({len(stream_records):,} of them, each container of 500 sent "
                                  f"{stream_repeat} times) on 2 Kafka partitions; the Python work in "
                                  "p worker processes (Beam's worker pool, --sdk_worker_parallelism=p)")
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

