"""A batch run of ``ldp-marginals run`` as a test gives it: a collection config and its reports written
to files of their own, and the command's arguments over them."""
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
