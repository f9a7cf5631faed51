"""A batch run of ``ldp-marginals run`` as a test gives it: a collection config and its reports written
to files of their own, and the command's arguments over them; reports simulated key by key."""
from __future__ import annotations

import fastavro
import yaml

from ldp_marginals.schemas import load_schema, write_avro


def run_args(tmp_path, config: dict, records: list, name: str, output) -> list:
    """``config`` written to ``tmp_path/<name>.yaml`` and ``records`` (noisy reports, the contract's
    schema) to an Avro file in ``tmp_path/<name>/``; returns the arguments of ``run`` reading them into
    ``output``, with no progress lines."""
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / name).mkdir(exist_ok=True)
    with open(tmp_path / name / "r.avro", "wb") as fh:
        fastavro.writer(fh, load_schema("noisy_report"), records)
    return ["--config", str(tmp_path / f"{name}.yaml"), "--input", str(tmp_path / name / "*.avro"),
            "--output", str(output), "--progress-seconds", "0"]


def run_command(tmp_path, config: dict, records: list, kinds) -> dict:
    """``ldp-marginals run`` (batch, DirectRunner, its own process as a user runs it) on ``config`` and
    ``records`` written to ``tmp_path``, into ``tmp_path/out``: ``{kind: rows}`` of each of ``kinds`` as
    ``read`` gives them (a list of dicts); a failed run fails the test with its stderr."""
    import subprocess
    import sys

    from ldp_marginals.pipelines.read import read
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    write_avro(tmp_path / "r.avro", "noisy_report", records)
    done = subprocess.run([sys.executable, "-m", "ldp_marginals.pipelines.cli", "run", "--config", str(tmp_path / "c.yaml"),
                           "--input", str(tmp_path / "r.avro"), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"ldp-marginals run failed ({done.returncode}): {done.stderr[-3000:]}")
    return {kind: read(str(tmp_path / "out"), kind).to_pylist() for kind in kinds}


def keyed_records(config: dict, keys: dict, seed: int, reports_per_client: int | None = None) -> list:
    """Reports of ``config``'s collection simulated key by key over the simulations' first hour: ``keys`` maps
    a key's values (in the order of ``config``'s dimensions) to its number of reports, the ``i``-th key's
    population seeded ``seed + i``; with ``reports_per_client``, each key's reports in turn from clients
    ``<values>-<j>`` of that many reports each (else the simulation's clients)."""
    import dataclasses

    import numpy as np

    from ldp_marginals.pipelines.simulate import report_records, simulate_population
    from ldp_marginals.schemas.config import parse_config
    cfg = parse_config(config)
    records = []
    for i, (values, n) in enumerate(keys.items()):
        pop = simulate_population(cfg, n, seed=seed + i, span_seconds=3599)
        if reports_per_client is not None:
            clients = [f"{'-'.join(values)}-{j // reports_per_client}" for j in range(n)]
            pop = dataclasses.replace(pop, clients=np.array(clients, object))
        records += report_records(cfg, pop, dimensions=dict(zip(config["dimensions"], values)))
    return records
