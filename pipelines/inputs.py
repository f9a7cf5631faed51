"""The batch job's input files, checked before anything runs: each file ``--input`` matches must be able
to hold NoisyReports. A directory, a file that is not Avro (a ``.truth.json`` beside the reports) or an
Avro file of another schema is one error naming it (exit code 2), not a run that counts nothing (one
``damaged_block``, or a ``bad_field`` dead letter per record). Only the first bytes of each file are
read (its header), on a few threads, so a glob of many remote files costs a header read each.

An empty file and an Avro file whose header is damaged pass: they are damage, which the readers
dead-letter (``damaged_block``) at the cost of that file alone.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from ldp_marginals import schemas
from ldp_marginals.transforms.avro_container import HEADER_LIMIT, MAGIC, parse_header

FIRST_READ = 1 << 16   # bytes read first; a longer header is read up to HEADER_LIMIT
THREADS = 16


def _header(fh, raw: bytes):
    """The header of an Avro file whose first bytes are ``raw``, or None when it is damaged."""
    for attempt in range(2):
        try:
            return parse_header(raw)
        except Exception:  # noqa: BLE001 - fastavro raises its own kinds on a cut or garbled header
            if attempt or len(raw) < FIRST_READ:
                return None
            raw += fh.read(HEADER_LIMIT - len(raw))
    return None


def file_problem(path: str) -> str | None:
    """Why the file at ``path`` cannot hold NoisyReports (a phrase that follows its path), or None."""
    if "://" not in path and os.path.isdir(path):
        return "is a directory"
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            raw = fh.read(FIRST_READ)
            if not raw:
                return None
            if raw[:4] != MAGIC:
                return f"is not an Avro file (it starts with {raw[:12]!r})"
            header = _header(fh, raw)
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    return None if header is None else schemas.noisy_report_mismatch(header.schema)


def check_report_files(pattern: str, paths: list) -> None:
    """Raise one ValueError naming the first of ``paths`` (matched by ``--input pattern``) that cannot
    hold NoisyReports, and how many more there are."""
    if not paths:
        return
    with ThreadPoolExecutor(max_workers=min(THREADS, len(paths))) as pool:
        problems = [(path, why) for path, why in zip(paths, pool.map(file_problem, paths)) if why]
    if not problems:
        return
    path, why = problems[0]
    more = f" (and {len(problems) - 1} more of the {len(paths)} files it matches)" if len(problems) > 1 else ""
    if why == "is a directory":
        fix = f"give a glob of its report files, such as {os.path.join(path, '*.avro')}"
    else:
        fix = "give a path or glob that matches NoisyReport Avro files only"
    raise ValueError(f"--input {pattern}: {path} {why}{more}; {fix}")
