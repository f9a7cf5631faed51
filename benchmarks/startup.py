"""The command's fixed cost: how long a person waits before anything happens.

Measured in fresh processes (median of REPEATS), against ``python -c "import apache_beam"`` as the
floor of any Beam job: ``ldp-marginals --help``; ``ldp-marginals run`` on a 10-record file, from
process start to the reader opening the first file and to the end of the run.

    python -m benchmarks.startup
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

from benchmarks.e2e import CONFIG
from ldp_marginals.pipelines.simulate import simulate_population, write_population
from ldp_marginals.schemas.config import parse_config

REPEATS = 3
# the child marks the moment the block reader starts on its first file, then runs the command
_MARKED_RUN = """
import sys, time
from ldp_marginals.transforms import blocks
mark_path, argv = sys.argv[1], sys.argv[2:]
process = blocks.ReadAndPreaggregateFn.process
def marked(self, readable_file):
    with open(mark_path, "a") as fh:
        fh.write(f"{time.time()}\\n")
    yield from process(self, readable_file)
blocks.ReadAndPreaggregateFn.process = marked
from ldp_marginals.pipelines.cli import main
sys.exit(main(argv))
"""


def _seconds(argv) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def _run_seconds(folder: str, i: int) -> tuple:
    """(seconds to the first file read, seconds in all) of one ``run`` on the 10-record file."""
    mark = os.path.join(folder, f"mark{i}")
    argv = ["run", "--config", os.path.join(folder, "config.yaml"), "--input", os.path.join(folder, "ten.avro"),
            "--output", os.path.join(folder, f"out{i}")]
    launched = time.time()
    total = _seconds([sys.executable, "-c", _MARKED_RUN, mark, *argv])
    with open(mark) as fh:
        first = float(fh.readline())
    return first - launched, total


def run(tmp, full):
    folder = os.path.join(tmp, "startup")
    os.makedirs(folder, exist_ok=True)
    cfg = parse_config(CONFIG)
    write_population(cfg, simulate_population(cfg, 10, seed=5), os.path.join(folder, "ten.avro"))
    with open(os.path.join(folder, "config.yaml"), "w") as fh:
        yaml.safe_dump(CONFIG, fh)
    _run_seconds(folder, -1)  # warm-up: numba's cache and the page cache
    beam_s = statistics.median(_seconds([sys.executable, "-c", "import apache_beam"]) for _ in range(REPEATS))
    help_s = statistics.median(_seconds([sys.executable, "-m", "ldp_marginals.pipelines.cli", "--help"])
                               for _ in range(REPEATS))
    runs = [_run_seconds(folder, i) for i in range(REPEATS)]
    first_s = statistics.median(r[0] for r in runs)
    total_s = statistics.median(r[1] for r in runs)
    goals = [
        {"goal": "7a. `ldp-marginals --help`", "measured": f"{help_s:.2f} s",
         "baseline": f"`import apache_beam` {beam_s:.2f} s", "ratio": help_s / beam_s, "target": "no Beam import",
         "met": None},
        {"goal": "7b. `ldp-marginals run`, 10-record file: start to first file read",
         "measured": f"{first_s:.2f} s", "baseline": f"`import apache_beam` {beam_s:.2f} s",
         "ratio": first_s / beam_s, "target": "report", "met": None},
        {"goal": "7c. `ldp-marginals run`, 10-record file: whole run", "measured": f"{total_s:.2f} s",
         "baseline": f"`import apache_beam` {beam_s:.2f} s", "ratio": total_s / beam_s, "target": "report",
         "met": None},
    ]
    details = {"start-up runs": f"median of {REPEATS} fresh processes each, after one warm-up run"}
    return goals, details


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        for g in run(tmp, False)[0]:
            print(f"{g['goal']}: {g['measured']} vs {g['baseline']} ({g['ratio']:.2f}x)")
