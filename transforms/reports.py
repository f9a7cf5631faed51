"""Reading and validating noisy reports: every input ends up counted or dead-lettered with a reason."""
from __future__ import annotations

import numbers
from typing import NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from ldp_marginals import schemas
from ldp_marginals.ldp.encoding import has_padding
from ldp_marginals.ldp.windows import MAX_EVENT_MS, MIN_EVENT_MS
from ldp_marginals.transforms.dead_letters import (
    NAMESPACE,
    TAG,
    VALID,
    collection_detail,
    dead_letter,
    length_detail,
    padding_detail,
    time_detail,
)
from ldp_marginals.transforms.source import RECORDS, ReportSource


class Report(NamedTuple):
    """A validated report, timestamped with its event time in the pipeline."""

    collection: str
    dimensions: tuple   # sorted (name, value) pairs: hashable and deterministic as a key
    bits: bytes
    client: str | None


class ReadAvroFileFn(beam.DoFn):
    """A matched Avro file -> ``(record, source)`` per record; a file that cannot be read (or stops
    decoding midway) yields a dead letter for what could not be read."""

    def process(self, readable_file):
        path = readable_file.metadata.path
        index = -1
        try:
            with readable_file.open() as fh:
                for index, record in enumerate(schemas.iter_avro(fh)):
                    yield record, f"{path}#{index}"
        except Exception as err:  # noqa: BLE001 - any decoding failure becomes a dead letter
            yield dead_letter("undecodable", f"{type(err).__name__}: {err} (after record {index})",
                              f"{path}#{index + 1}")


class ValidateReportsFn(beam.DoFn):
    """``record`` (dict), Avro message ``bytes``, or ``(either, source)`` -> timestamped :class:`Report`;
    anything malformed -> a dead letter (tag ``dead_letters``) with its reason."""

    def __init__(self, configs: dict):
        self._layouts = {name: (cfg.layout.n_bits, cfg.layout.n_bytes) for name, cfg in configs.items()}

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)  # made once: ~10 us per report otherwise

    def process(self, element):
        payload, source = element if isinstance(element, tuple) and len(element) == 2 else (element, "input")
        record = payload
        if isinstance(payload, (bytes, bytearray)):
            try:
                record = schemas.decode_message("noisy_report", bytes(payload))
            except Exception as err:  # noqa: BLE001
                yield dead_letter("undecodable", f"{type(err).__name__}: {err}", source, payload=payload)
                return
        reason, detail, report, event_ms = self._check(record)
        if reason:
            yield dead_letter(reason, detail, source, record=record)
            return
        self._valid.inc()
        yield beam.window.TimestampedValue(report, event_ms / 1000.0)

    def _check(self, record):
        if not isinstance(record, dict):
            return "undecodable", f"expected a record, got {type(record).__name__}", None, None
        name = record.get("collection")
        if not isinstance(name, str):
            return "bad_field", f"collection must be a string, got {name!r}", None, None
        if name not in self._layouts:
            return "unknown_collection", collection_detail(name), None, None
        event = schemas._to_millis(record.get("event_time"))
        if event is None:
            return "bad_timestamp", "event_time is missing", None, None
        if isinstance(event, bool) or not isinstance(event, numbers.Integral):
            return "bad_timestamp", f"event_time must be int millis, got {event!r}", None, None
        if not MIN_EVENT_MS <= event < MAX_EVENT_MS:
            return "bad_timestamp", time_detail(event), None, None
        bits = record.get("bits")
        if not isinstance(bits, (bytes, bytearray)):
            return "bad_field", f"bits must be bytes, got {type(bits).__name__}", None, None
        n_bits, n_bytes = self._layouts[name]
        if len(bits) != n_bytes:
            return "wrong_length", length_detail(name, len(bits), n_bits, n_bytes), None, None
        if has_padding(bits, n_bits):
            return "padding_bits", padding_detail(n_bits), None, None
        dims = record.get("dimensions") or {}
        if not isinstance(dims, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in dims.items()):
            return "bad_field", f"dimensions must map strings to strings, got {dims!r}", None, None
        client = record.get("client")
        if client is not None and not isinstance(client, str):
            return "bad_field", f"client must be a string or null, got {client!r}", None, None
        return None, None, Report(name, tuple(sorted(dims.items())), bytes(bits), client), int(event)


class ReadNoisyReportFiles(ReportSource):
    """Avro files matching a glob, record by record -> ``records`` as ``(record, source)``;
    unreadable files -> ``dead_letters``."""

    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = pattern

    def read(self, pbegin):
        from apache_beam.io import fileio
        outs = (pbegin
                | "Match" >> fileio.MatchFiles(self.pattern, empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW)
                | "Open" >> fileio.ReadMatches()
                | "Decode" >> beam.ParDo(ReadAvroFileFn()).with_outputs(TAG, main=RECORDS))
        return {RECORDS: outs[RECORDS], TAG: outs[TAG]}

