"""Reading and validating noisy reports: every input ends up counted or dead-lettered with a reason."""
from __future__ import annotations

import io

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from ldp_marginals import schemas
from ldp_marginals.schemas.dead_letters import NAMESPACE, UNDECODABLE, VALID
from ldp_marginals.transforms.avro_blocks import iter_report_batches
from ldp_marginals.transforms.avro_container import MAGIC, Damage
from ldp_marginals.transforms.avro_messages import decode_messages
from ldp_marginals.transforms.checks import block_meta, keeps_clients, report_meta
from ldp_marginals.transforms.dead_letters import TAG, damaged, dead_letter
from ldp_marginals.transforms.preaggregate import FLUSH_ROWS, Preaggregator, screen_block, timestamped_partials
from ldp_marginals.transforms.screening import screen_record
from ldp_marginals.transforms.source import RECORDS, ReportSource


def read_file(readable_file, start: int = 0, end: int | None = None):
    """Every :class:`~ldp_marginals.transforms.avro_blocks.ReportBlock` and ``Damage`` of a matched
    file (a ``ReadableFile``, or a path), in order; with ``start`` and ``end``, of that split of it.
    The same walk feeds both readers, so they salvage the same records. An I/O error while reading
    ends the file (or split) with one more ``Damage`` from where the last intact block ended."""
    done = start
    try:
        with _open(readable_file) as fh:
            for item in iter_report_batches(fh, start=start, end=end):
                yield item
                done = item.end
    except Exception as err:  # noqa: BLE001 - a read that fails midway (I/O) loses the rest, counted
        yield Damage(done, -1, None, f"reading the file failed ({type(err).__name__}: {err})")


def _open(file):
    if isinstance(file, str):
        return FileSystems.open(file, compression_type=CompressionTypes.UNCOMPRESSED)
    return file.open()


def record_or_dead_letter(block, i: int, source: str):
    """``(record, source)`` of record i of a block, or its dead letter when its strings are not UTF-8."""
    try:
        record = block.record(i)
    except UnicodeDecodeError:
        yield dead_letter(UNDECODABLE, block.fault(i), block.source(source, i), block_meta(block, i, {}))
        return
    yield record, block.source(source, i)


def records_of(items, source: str):
    """``(record, source)`` per record of a container walk's items (a file's or a message's), a dead
    letter per damaged byte range and per record that does not decode."""
    for item in items:
        if isinstance(item, Damage):
            yield damaged(source, item)
            continue
        for i in range(len(item)):
            yield from record_or_dead_letter(item, i, source)


class ReadAvroFileFn(beam.DoFn):
    """A matched Avro file -> ``(record, source)`` per record it holds, a dead letter per record
    whose strings are not UTF-8 (``undecodable``) and per damaged byte range (``damaged_block``)."""

    def process(self, readable_file):
        yield from records_of(read_file(readable_file), readable_file.metadata.path)


DEFAULT_SOURCE = "input"  # the source of a message or record that comes without one
MESSAGE_BATCH = 4096  # single-report messages decoded by one compiled call (and at the end of each bundle)


class ValidateReportsFn(beam.DoFn):
    """Records (dicts), messages (``bytes``), or ``(either, source)`` -> timestamped
    :class:`~ldp_marginals.transforms.source.Partial` accumulators (main output), one per
    collection, dimensions and window slice of the reports seen together; anything malformed -> a
    dead letter (tag ``dead_letters``) with its reason.

    A message is one Avro-encoded NoisyReport, or an Avro object container (the bytes of an Avro
    file, starting ``Obj\x01``) of many: a container is read like a file (its damaged blocks are
    ``damaged_block`` dead letters, its records' sources ``<source>@<block offset>#<index>``).
    Single-report messages are buffered and decoded ``MESSAGE_BATCH`` at a time by the compiled
    decoder; every report is screened and pre-aggregated (:mod:`~ldp_marginals.transforms.preaggregate`)
    within the bundle, so what leaves this step are accumulators, never single reports. A partial
    is timestamped with its slice's start: it lies in exactly its reports' windows."""

    def __init__(self, configs: dict, count_valid: bool = True):
        self._configs = configs
        # batch: nothing after validation can drop a report, so a valid one is counted here; in
        # streaming the panes count the reports that are on time
        self._count_valid = count_valid

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)  # made once: ~10 us per report otherwise

    def start_bundle(self):
        self._pre = Preaggregator(self._configs)
        self._payloads, self._sources = [], []  # single-report messages not yet decoded

    def process(self, element):
        # A plain function, not a generator, and no timestamp parameter: a buffered message costs
        # Beam's cheapest invocation (this is the only step that sees every message).
        if type(element) is bytes and element[:4] != MAGIC:
            self._payloads.append(element)
            self._sources.append(DEFAULT_SOURCE)
            return self._decode_messages() if len(self._payloads) >= MESSAGE_BATCH else None
        return self._one(element)

    def _one(self, element):
        payload, source = element if isinstance(element, tuple) and len(element) == 2 else (element, DEFAULT_SOURCE)
        if isinstance(payload, (bytes, bytearray)):
            payload = bytes(payload)
            if payload[:4] == MAGIC:
                yield from self._container(payload, source)
            else:
                self._payloads.append(payload)
                self._sources.append(source)
                if len(self._payloads) >= MESSAGE_BATCH:
                    yield from self._decode_messages()
        else:
            yield from self._validated(payload, source)
        if self._pre.buffered >= FLUSH_ROWS:
            yield from self._partials()

    def finish_bundle(self):
        # outside an element: explicit windows. Dead letters of buffered messages are stamped with
        # the earliest timestamp (they live in the global window, whose panes are processing-time).
        for out in self._decode_messages():
            yield beam.pvalue.TaggedOutput(out.tag, WindowedValue(out.value, MIN_TIMESTAMP, (GlobalWindow(),)))
        for out in self._partials():
            yield WindowedValue(out.value, out.timestamp, (GlobalWindow(),))

    def _partials(self):
        return timestamped_partials(self._pre, self._valid if self._count_valid else None)

    def _decode_messages(self):
        """Decode the buffered messages in one compiled pass (dead letters are yielded, the reports
        go into the pre-aggregation)."""
        payloads, sources = self._payloads, self._sources
        self._payloads, self._sources = [], []
        if not payloads:
            return
        block, failed = decode_messages(payloads, sources)
        if block is not None:
            yield from screen_block(block, self._configs, self._pre, lambda i: block.labels[i])
        for _, payload, source in failed:  # the record-by-record decoder names the error
            try:
                record = schemas.decode_message("noisy_report", payload)
            except Exception as err:  # noqa: BLE001 - named by type only: its message may quote the bytes
                yield dead_letter(UNDECODABLE, f"a message of {len(payload):,} bytes is not a NoisyReport "
                                  f"({type(err).__name__})", source, {"record_length": len(payload)})
                continue
            yield from self._validated(record, source, len(payload))
        if self._pre.buffered >= FLUSH_ROWS:
            yield from self._partials()

    def _container(self, payload: bytes, source: str):
        for item in iter_report_batches(io.BytesIO(payload)):
            if isinstance(item, Damage):
                yield damaged(source, item)
            elif item.records is not None:  # another writer schema: record by record
                for i in range(len(item)):
                    for out in record_or_dead_letter(item, i, source):
                        if isinstance(out, beam.pvalue.TaggedOutput):
                            yield out
                        else:
                            yield from self._validated(*out)
            else:
                yield from screen_block(item, self._configs, self._pre, lambda i, b=item: b.source(source, i))

    def _validated(self, record, source: str, length: int | None = None):
        """One record on the per-record path: into the pre-aggregation, or its dead letter."""
        view, reason, detail = screen_record(record, self._configs)
        if reason:
            yield dead_letter(reason, detail, source, report_meta(record, self._configs, length))
            return
        cfg = view.cfg
        client = record.get("client") if keeps_clients(cfg) else None   # elsewhere dropped at the door
        self._pre.add_report(cfg.name, tuple(sorted((record.get("dimensions") or {}).items())),
                             int(view.event_ms[0]), bytes(record["bits"]), client)


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

