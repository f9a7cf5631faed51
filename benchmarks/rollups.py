"""What rollups cost (issue 37, item 2): the batch job on the DirectRunner over one hourly window of
reports in two dimensions (20 regions and 50 versions, Zipf-weighted: many keys below ``min_reports``),
without rollups and with ``rollups: all`` (per region, per version and the window's total), runs
interleaved in one session; the ratio of the median job times. Beside it, what complementary
suppression decides on this window (rollup rows published of those with reports, and the reports
the published ones hold that their keys withhold) and the time of that decision alone
(``rollups.published_rollups`` on the window's withheld counts). And the streaming job (issue 37,
item 2, streaming): the same reports as container messages of 500 on a TestStream on the streaming
DirectRunner, without rollups and with ``rollups: all`` (the rows made once per window at its close by
the ``Rollups`` step), interleaved in the same session; the ratio of the median job times.

    python -m benchmarks.rollups [--reports N] [--repeats R] [--streaming-reports N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import yaml

from ldp_marginals.pipelines.simulate import simulate_population, write_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.rollups import published_rollups

REGIONS, VERSIONS = 20, 50
REPORTS = 60_000
REPEATS = 3
CONFIG = {
    "collection": "rolled",
    "features": [{"name": f"f{i}", "type": "boolean"} for i in range(16)],
    "channel": {"mechanism": "symmetric", "epsilon": 1.0},
    "max_order": 2,
    "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 50,
    "dimensions": {"region": {"max_values": REGIONS}, "version": {"max_values": VERSIONS}},
}


def zipf(n: int, prefix: str) -> list:
    weights = 1.0 / np.arange(1, n + 1)
    return [(f"{prefix}{i}", float(w)) for i, w in enumerate(weights / weights.sum())]


def population(folder: str, reports: int) -> str:
    cfg = parse_config(CONFIG)
    pop = simulate_population(cfg, reports, seed=37, span_seconds=3599,
                              dimensions=[("region", zipf(REGIONS, "r")), ("version", zipf(VERSIONS, "v"))])
    path = os.path.join(folder, "reports.avro")
    write_population(cfg, pop, path)
    return path


def job_seconds(inputs: str, config: dict, out_dir: str) -> float:
    from ldp_marginals.pipelines.run import run
    path = out_dir + ".yaml"
    with open(path, "w") as fh:
        yaml.safe_dump(config, fh)
    start = time.perf_counter()
    run(["--config", path, "--input", inputs, "--output", out_dir, "--progress-seconds", "0"])
    return time.perf_counter() - start


STREAMING_REPORTS = 20_000


def streaming_seconds(inputs: str, reports: int, repeats: int) -> dict:
    """``{"plain": [seconds], "rollups": [seconds]}`` of the streaming job on the first ``reports``
    reports of ``inputs`` as container messages of 500 on a TestStream, runs interleaved after one
    warm-up of each."""
    import fastavro

    from benchmarks.streaming import container, job, stream_of
    with open(inputs, "rb") as fh:
        records = list(fastavro.reader(fh))[:reports]
    messages = [container(records[i:i + 500]) for i in range(0, len(records), 500)]
    plain, rolled = parse_config(CONFIG), parse_config(dict(CONFIG, rollups="all"))

    def timed(cfg) -> float:
        start = time.perf_counter()
        job(lambda: stream_of(messages), cfg, streaming=True)
        return time.perf_counter() - start
    timed(plain), timed(rolled)
    times = {"plain": [], "rollups": []}
    for _ in range(repeats):
        times["plain"].append(timed(plain))
        times["rollups"].append(timed(rolled))
    return times


def decisions(out_dir: str) -> dict:
    """From a rollup run's outputs: keys, their withheld reports, rollup rows published, and the time of
    the suppression decision on the window's withheld counts."""
    import ldp_marginals
    cfg = parse_config(dict(CONFIG, rollups="all"))
    withheld = ldp_marginals.read_rows(out_dir, "withheld")
    marginals = ldp_marginals.read_rows(out_dir, "marginals")
    keys = {tuple(sorted(r["dimensions"].items())) for r in marginals + withheld
            if "__all__" not in r["dimensions"].values()}
    held = {k: 0 for k in keys}
    for r in withheld:
        held[tuple(sorted(r["dimensions"].items()))] += r["n_reports"]
    start = time.perf_counter()
    chosen = published_rollups(cfg, held)
    seconds = time.perf_counter() - start
    possible = {tuple(sorted((n, v if n in over else "__all__") for n, v in k)) for k in keys for over in cfg.rollups}
    return {"keys": len(keys), "keys_withheld": sum(1 for n in held.values() if n), "reports_withheld": sum(held.values()),
            "rollup_rows": len(possible), "rollup_rows_published": len(chosen), "suppress_seconds": seconds}


def run(tmp: str, full: bool = False, reports: int = REPORTS, repeats: int = REPEATS,
        streaming_reports: int = STREAMING_REPORTS):
    folder = os.path.join(tmp, "rollups")
    os.makedirs(folder, exist_ok=True)
    inputs = population(folder, reports * (2 if full else 1))
    job_seconds(inputs, CONFIG, os.path.join(folder, "warm"))   # numba's cache, imports
    times = {"plain": [], "rollups": []}
    for i in range(repeats):   # interleaved: the machine's load falls on both alike
        times["plain"].append(job_seconds(inputs, CONFIG, os.path.join(folder, f"plain{i}")))
        times["rollups"].append(job_seconds(inputs, dict(CONFIG, rollups="all"), os.path.join(folder, f"rolled{i}")))
    plain, rolled = statistics.median(times["plain"]), statistics.median(times["rollups"])
    seen = decisions(os.path.join(folder, f"rolled{repeats - 1}"))
    goal = {"goal": "37-2 batch job time with rollups: all (2 dimensions, 1,000 keys)",
            "measured": f"{rolled:.1f} s", "baseline": f"{plain:.1f} s without rollups", "ratio": rolled / plain,
            "target": "measured", "met": None}
    details = {"37-2 rollups": (
        f"{reports * (2 if full else 1):,} reports, {seen['keys']} keys ({seen['keys_withheld']} withheld, "
        f"{seen['reports_withheld']:,} reports); {seen['rollup_rows_published']} of {seen['rollup_rows']} rollup rows "
        f"published; suppression decided in {seen['suppress_seconds']:.2f} s; job times plain "
        f"{', '.join(f'{t:.1f}' for t in times['plain'])} s, with rollups {', '.join(f'{t:.1f}' for t in times['rollups'])} s")}
    stream = streaming_seconds(inputs, streaming_reports, repeats)
    s_plain, s_rolled = statistics.median(stream["plain"]), statistics.median(stream["rollups"])
    goals = [goal, {"goal": f"37-2 streaming job time with rollups: all ({streaming_reports:,} reports, TestStream)",
                    "measured": f"{s_rolled:.1f} s", "baseline": f"{s_plain:.1f} s without rollups",
                    "ratio": s_rolled / s_plain, "target": "measured", "met": None}]
    details["37-2 streaming rollups"] = (
        f"job times plain {', '.join(f'{t:.1f}' for t in stream['plain'])} s, with rollups "
        f"{', '.join(f'{t:.1f}' for t in stream['rollups'])} s")
    return goals, details


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=REPORTS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--streaming-reports", type=int, default=STREAMING_REPORTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        goals, details = run(tmp, reports=args.reports, repeats=args.repeats, streaming_reports=args.streaming_reports)
    for g in goals:
        print(f"{g['goal']}: {g['measured']} vs {g['baseline']}: {g['ratio']:.2f}x")
    for k, v in details.items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    main()
