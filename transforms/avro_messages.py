"""Single-report messages (Pub/Sub, Kafka, test sources) decoded together: a batch of Avro-encoded
``NoisyReport`` messages laid end to end and walked by one compiled call
(:func:`~ldp_marginals.transforms.avro_kernels.decode_message_spans`) into a
:class:`MessageBlock`, which the readers screen like a file's block; a message that is not exactly
one record is handed back for a record-by-record decode that names its error.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldp_marginals.transforms.avro_blocks import ReportBlock
from ldp_marginals.transforms.avro_kernels import N_FIELDS, decode_message_spans


@dataclass
class MessageBlock(ReportBlock):
    """Single-report messages decoded together: row i is message ``labels[i]`` (its source)."""

    labels: list = None

    def source(self, path: str, i: int) -> str:
        return self.labels[i]


def decode_messages(payloads: list, labels: list):
    """Single-report Avro messages -> ``(block, failed)``: a :class:`MessageBlock` of the messages
    that decode (None if none), and ``(index, payload, label)`` of each that does not (its own
    record does not parse or leaves bytes over), for a record-by-record decode that names the
    error. One compiled pass for the whole batch."""
    bounds = np.zeros(len(payloads) + 1, dtype=np.int64)
    np.cumsum([len(m) for m in payloads], out=bounds[1:])
    buf = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    fields = np.empty((N_FIELDS, len(payloads)), dtype=np.int64).T
    ok = decode_message_spans(buf, bounds, fields)
    failed = [(int(i), payloads[i], labels[i]) for i in np.flatnonzero(~ok)]
    if not ok.any():
        return None, failed
    rows = np.flatnonzero(ok)
    if rows.size < len(payloads):
        fields = np.ascontiguousarray(fields[rows].T).T  # columns stay contiguous
        labels = [labels[i] for i in rows]
    return MessageBlock(fields, buf, None, [(0, 0)], int(bounds[-1]), labels), failed

