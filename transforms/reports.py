"""Reading and validating noisy reports: every input ends up counted or dead-lettered with a reason."""
from __future__ import annotations

import numbers
from typing import NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from ldp_marginals import schemas
from ldp_marginals.ldp.encoding import has_padding
from ldp_marginals.ldp.windows import MAX_EVENT_MS, MIN_EVENT_MS

DEAD_LETTER = "dead_letter"
NAMESPACE = "ldp_marginals"


class Report(NamedTuple):
    """A validated report, timestamped with its event time in the pipeline."""

    collection: str
    dimensions: tuple   # sorted (name, value) pairs: hashable and deterministic as a key
    bits: bytes
    client: str | None


def dead_letter(reason: str, detail: str, source: str, record=None, payload: bytes | None = None) -> dict:
    """A DeadLetter row (schemas/dead_letter.avsc)."""
    record_json = None
    if record is not None:
        record_json = schemas.to_json_line(record) if isinstance(record, dict) else repr(record)
    return {"reason": reason, "detail": detail, "source": source, "record_json": record_json,
            "payload": None if payload is None else bytes(payload)}


def time_detail(event) -> str:
    return f"event_time {event} is outside [1970, 2100)"


def length_detail(name: str, got: int, n_bits: int, n_bytes: int) -> str:
    return f"{got} bytes, the layout of {name!r} has {n_bits} bits = {n_bytes} bytes"


def padding_detail(n_bits: int) -> str:
    return f"a bit past bit {n_bits - 1} is set"


def collection_detail(name) -> str:
    return f"no config for collection {name!r}"


def _count(reason: str):
    Metrics.counter(NAMESPACE, f"dead_letter.{reason}").inc()


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
            _count("undecodable")
            yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
                "undecodable", f"{type(err).__name__}: {err} (after record {index})", f"{path}#{index + 1}"))


class ValidateReportsFn(beam.DoFn):
    """``record`` (dict), Avro message ``bytes``, or ``(either, source)`` -> timestamped :class:`Report`;
    anything malformed -> a dead letter (tag ``dead_letter``) with its reason."""

    def __init__(self, configs: dict):
        self._layouts = {name: (cfg.layout.n_bits, cfg.layout.n_bytes) for name, cfg in configs.items()}

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, "reports.valid")  # made once: ~10 us per report otherwise

    def process(self, element):
        payload, source = element if isinstance(element, tuple) and len(element) == 2 else (element, "input")
        record = payload
        if isinstance(payload, (bytes, bytearray)):
            try:
                record = schemas.decode_message("noisy_report", bytes(payload))
            except Exception as err:  # noqa: BLE001
                _count("undecodable")
                yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(
                    "undecodable", f"{type(err).__name__}: {err}", source, payload=payload))
                return
        reason, detail, report, event_ms = self._check(record)
        if reason:
            _count(reason)
            yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead_letter(reason, detail, source, record=record))
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


class ReadNoisyReportFiles(beam.PTransform):
    """Avro files matching a glob -> ``(record, source)``; unreadable files -> dead letters."""

    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = pattern

    def expand(self, pbegin):
        from apache_beam.io import fileio
        return (pbegin
                | "Match" >> fileio.MatchFiles(self.pattern)
                | "Open" >> fileio.ReadMatches()
                | "Decode" >> beam.ParDo(ReadAvroFileFn()).with_outputs(DEAD_LETTER, main="records"))

