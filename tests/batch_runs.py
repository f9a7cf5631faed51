"""A batch run of ``ldp-marginals run`` as a test gives it: a collection config and its reports written
to files of their own, and the command's arguments over them."""
from __future__ import annotations

import fastavro
import yaml

from ldp_marginals.schemas import load_schema


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
