"""The batch fast path: whole Avro blocks of reports decoded to arrays, validated with numpy and
pre-aggregated per (collection, dimensions, window slice) inside the reader
(:mod:`~ldp_marginals.transforms.preaggregate`), so Beam moves a few accumulators per file instead
of one element per report.

Blocks of another writer schema go record by record to
:class:`~ldp_marginals.transforms.reports.ValidateReportsFn`; malformed reports become dead letters
with the same reasons and details on both paths.

A large file spreads over workers: each file is cut into byte ranges of ``split_bytes`` that are
read apart at the Avro sync markers (:mod:`~ldp_marginals.transforms.avro_container`), after a
reshuffle that hands the splits to whichever worker is free.
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from ldp_marginals.schemas.dead_letters import NAMESPACE, VALID
from ldp_marginals.transforms.avro_container import Damage
from ldp_marginals.transforms.dead_letters import TAG, damaged
from ldp_marginals.transforms.preaggregate import FLUSH_ROWS, Preaggregator, screen_block, timestamped_partials
from ldp_marginals.transforms.reports import read_file, record_or_dead_letter
from ldp_marginals.transforms.source import PARTIALS, RECORDS, ReportSource


SPLIT_BYTES = 16 << 20   # a split per 16 MiB of file


def splits_of(metadata, split_bytes: int = SPLIT_BYTES):
    """A matched file's ``FileMetadata`` -> ``(path, start, end)`` byte ranges that cover it (one for
    an empty file: its damage must still be reported once)."""
    size = max(int(metadata.size_in_bytes), 1)
    for start in range(0, size, split_bytes):
        yield metadata.path, start, min(start + split_bytes, size)


class ReadAndPreaggregateFn(beam.DoFn):
    """``(path, start, end)``, a split of an Avro file -> ``partials`` (timestamped :class:`Partial`),
    per-record ``records`` for blocks of another writer schema, and ``dead_letters`` rows."""

    def __init__(self, configs: dict):
        self.configs = configs

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)

    def process(self, split):
        path, start, end = split
        self._pre = Preaggregator(self.configs)
        for block in read_file(path, start, end):
            if isinstance(block, Damage):
                yield damaged(path, block)
            elif block.records is not None:  # another writer schema: the per-record path decides
                for i in range(len(block)):
                    for out in record_or_dead_letter(block, i, path):
                        yield out if isinstance(out, beam.pvalue.TaggedOutput) else beam.pvalue.TaggedOutput(
                            RECORDS, out)
            else:
                yield from screen_block(block, self.configs, self._pre, lambda i, b=block: b.source(path, i))
                if self._pre.buffered >= FLUSH_ROWS:
                    yield from self._flush()
        yield from self._flush()

    def _flush(self):
        for partial in timestamped_partials(self._pre, self._valid):
            yield beam.pvalue.TaggedOutput(PARTIALS, partial)


class ReadReportFilesFast(ReportSource):
    """Avro files matching a glob -> ``partials``, ``records`` and ``dead_letters``, read in splits of
    ``split_bytes``."""

    def __init__(self, pattern: str, configs: dict, split_bytes: int = SPLIT_BYTES):
        super().__init__()
        if not isinstance(split_bytes, int) or split_bytes < 1 << 10:
            raise ValueError(f"split_bytes must be an int >= 1024, got split_bytes={split_bytes!r}")
        self.pattern = pattern
        self.configs = configs
        self.split_bytes = split_bytes

    def read(self, pbegin):
        from apache_beam.io import fileio
        split_bytes = self.split_bytes
        outs = (pbegin
                | "Match" >> fileio.MatchFiles(self.pattern, empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW)
                | "Split" >> beam.FlatMap(splits_of, split_bytes)
                | "Spread" >> beam.Reshuffle()
                | "ReadBlocks" >> beam.ParDo(ReadAndPreaggregateFn(self.configs)).with_outputs(
                    RECORDS, TAG, PARTIALS))
        return {tag: outs[tag] for tag in (RECORDS, TAG, PARTIALS)}
