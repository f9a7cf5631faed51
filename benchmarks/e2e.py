"""Goal 1 (end-to-end batch job vs the floor and vs the naive per-element pipeline) and goal 5
(peak memory at 10x the input), measured side by side on the same rolling Avro files."""
from __future__ import annotations

import glob
import os
import statistics
import subprocess
import sys
import time

import apache_beam as beam
import numpy as np
import yaml

from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS, simulate_population, write_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.avro_blocks import iter_report_batches

D = 32
REPEATS = 3
CONFIG = {
    "collection": "bench",
    "features": [{"name": f"f{i}", "type": "boolean"} for i in range(D)],
    "channel": {"mechanism": "symmetric", "epsilon": 1.0},
    "max_order": 2,
    "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 1,
}


def make_files(folder, n_files, per_file):
    cfg = parse_config(CONFIG)
    os.makedirs(folder, exist_ok=True)
    for i in range(n_files):
        pop = simulate_population(cfg, per_file, seed=i, start_ms=DEFAULT_START_MS + i * 3_600_000,
                                  span_seconds=3600)
        write_population(cfg, pop, os.path.join(folder, f"reports-{i:03d}.avro"))
    return cfg


def floor_seconds(pattern, cfg):
    """The fastest decoder plus the core kernel, no Beam."""
    start = time.perf_counter()
    n = 0
    for path in sorted(glob.glob(pattern)):
        acc = CooccurrenceAccumulator(cfg.family)
        with open(path, "rb") as fh:
            for block in iter_report_batches(fh):
                packed = block.packed(np.arange(len(block)), cfg.layout.n_bytes)
                acc.add_bits(unpack_bits(packed, cfg.layout.n_bits))
                n += len(block)
    return time.perf_counter() - start, n


class NaiveCombineFn(beam.CombineFn):
    """The baseline: one numpy update per report (what a straightforward CombineFn does)."""

    def create_accumulator(self):
        return np.zeros((D, D), dtype=np.int64)

    def add_input(self, acc, bits):
        x = np.unpackbits(np.frombuffer(bits, np.uint8), bitorder="little")[:D].astype(np.int64)
        acc += np.outer(x, x)
        return acc

    def merge_accumulators(self, accs):
        it = iter(accs)
        first = next(it)
        for a in it:
            first += a
        return first

    def extract_output(self, acc):
        return acc


def naive_seconds(pattern):
    start = time.perf_counter()
    with beam.Pipeline(runner="DirectRunner") as p:
        (p | beam.io.ReadFromAvro(pattern) | beam.Map(lambda r: r["bits"])
         | beam.CombineGlobally(NaiveCombineFn()))
    return time.perf_counter() - start


def job_seconds(pattern, config_path, out_dir, extra=()):
    from ldp_marginals.pipelines.run import run
    start = time.perf_counter()
    run(["--config", config_path, "--input", pattern, "--output", out_dir, *extra])
    return time.perf_counter() - start


def peak_rss_mib(pattern, config_path, out_dir):
    """Peak RSS of the job in a fresh process (ru_maxrss of the child)."""
    code = ("import resource, subprocess, sys\n"
            "subprocess.run([sys.executable, '-m', 'ldp_marginals.pipelines.cli', 'run', '--config', sys.argv[1], '--input', "
            "sys.argv[2], '--output', sys.argv[3]], check=True, capture_output=True)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, config_path, pattern, out_dir], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def run(tmp, full):
    n_files, per_file = (10, 1_000_000) if full else (3, 1_000_000)
    naive_n = 200_000 if full else 50_000
    folder = os.path.join(tmp, "e2e")
    cfg = make_files(os.path.join(folder, "files"), n_files, per_file)
    make_files(os.path.join(folder, "tiny"), n_files, 1000)  # same files and windows, 1,000 reports each
    naive_cfg = parse_config(CONFIG)
    pop = simulate_population(naive_cfg, naive_n, seed=99, span_seconds=3600)
    os.makedirs(os.path.join(folder, "naive"), exist_ok=True)
    write_population(naive_cfg, pop, os.path.join(folder, "naive", "reports.avro"))
    config_path = os.path.join(folder, "config.yaml")
    with open(config_path, "w") as fh:
        yaml.safe_dump(CONFIG, fh)
    pattern = os.path.join(folder, "files", "*.avro")
    n_total = n_files * per_file

    floor_seconds(pattern, cfg)  # warm-up: numba compiled, files in the page cache
    floor_s, n_floor = min(floor_seconds(pattern, cfg) for _ in range(REPEATS))
    tiny = os.path.join(folder, "tiny", "*.avro")
    job_seconds(tiny, config_path, os.path.join(folder, "out-warm"))  # first run loads numba's cache
    # the rate is a difference of two times: take the median of REPEATS runs of each (noisy machine)
    start_s = statistics.median(job_seconds(tiny, config_path, os.path.join(folder, f"out-tiny{i}"))
                                for i in range(REPEATS))
    job_s = statistics.median(job_seconds(pattern, config_path, os.path.join(folder, f"out{i}"))
                              for i in range(REPEATS))
    naive_start = naive_seconds(os.path.join(folder, "tiny", "reports-000.avro"))
    naive_s = naive_seconds(os.path.join(folder, "naive", "*.avro"))
    job_rate = n_total / max(job_s - start_s, 1e-9)
    floor_rate = n_floor / floor_s
    naive_rate = naive_n / max(naive_s - naive_start, 1e-9)

    one = os.path.join(folder, "files", "reports-000.avro")
    rss_one = peak_rss_mib(one, config_path, os.path.join(folder, "rss1"))
    rss_all = peak_rss_mib(pattern, config_path, os.path.join(folder, "rssN"))
    goals = [
        {"goal": f"1a. batch job vs floor (d={D}, k=2, {n_files} files of {per_file:,})",
         "measured": f"{job_rate:,.0f} reports/s", "baseline": f"floor {floor_rate:,.0f} reports/s",
         "ratio": job_rate / floor_rate, "target": ">= 0.5x", "met": job_rate / floor_rate >= 0.5},
        {"goal": "1b. batch job vs naive per-element Beam", "measured": f"{job_rate:,.0f} reports/s",
         "baseline": f"ReadFromAvro + per-report CombineFn {naive_rate:,.0f} reports/s",
         "ratio": job_rate / naive_rate, "target": ">= 20x", "met": job_rate / naive_rate >= 20},
        {"goal": f"5. peak RSS at {n_files}x the input", "measured": f"{rss_all:,.0f} MiB ({n_total:,} reports)",
         "baseline": f"{rss_one:,.0f} MiB ({per_file:,} reports)", "ratio": rss_all / rss_one, "target": "<= 1.2x",
         "met": rss_all / rss_one <= 1.2},
    ]
    details = {"job runs": f"median of {REPEATS} runs each; floor: best of {REPEATS}",
               f"job fixed cost (start-up, {n_files} files and windows of 1,000 reports)": f"{start_s:.1f} s",
               "job total": f"{job_s:.1f} s for {n_total:,} ({n_total / job_s:,.0f} reports/s with start-up)",
               "naive start-up": f"{naive_start:.1f} s", "naive": f"{naive_s:.1f} s for {naive_n:,}"}
    return goals, details
