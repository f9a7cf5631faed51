"""The batch fast path: whole Avro blocks of reports decoded to arrays, validated with numpy and
pre-aggregated per (collection, dimensions, window slice) inside the reader
(:mod:`~ldp_marginals.transforms.preaggregate`), so Beam moves a few accumulators per file instead
of one element per report.

Blocks of another writer schema go record by record to
:class:`~ldp_marginals.transforms.reports.ValidateReportsFn`; malformed reports become dead letters
with the same reasons and details on both paths.
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from ldp_marginals.transforms.avro_container import Damage
from ldp_marginals.transforms.dead_letters import NAMESPACE, TAG, VALID, damaged
from ldp_marginals.transforms.preaggregate import FLUSH_ROWS, Preaggregator, screen_block, timestamped_partials
from ldp_marginals.transforms.reports import read_file, record_or_dead_letter
from ldp_marginals.transforms.source import PARTIALS, RECORDS, ReportSource


class ReadAndPreaggregateFn(beam.DoFn):
    """A matched Avro file -> ``partials`` (timestamped :class:`Partial`), per-record ``records``
    for blocks of another writer schema, and ``dead_letters`` rows."""

    def __init__(self, configs: dict):
        self.configs = configs

    def setup(self):
        self._valid = Metrics.counter(NAMESPACE, VALID)

    def process(self, readable_file):
        self._pre = Preaggregator(self.configs)
        path = readable_file.metadata.path
        for block in read_file(readable_file):
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
    """Avro files matching a glob -> ``partials``, ``records`` and ``dead_letters``."""

    def __init__(self, pattern: str, configs: dict):
        super().__init__()
        self.pattern = pattern
        self.configs = configs

    def read(self, pbegin):
        from apache_beam.io import fileio
        outs = (pbegin
                | "Match" >> fileio.MatchFiles(self.pattern, empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW)
                | "Open" >> fileio.ReadMatches()
                | "ReadBlocks" >> beam.ParDo(ReadAndPreaggregateFn(self.configs)).with_outputs(
                    RECORDS, TAG, PARTIALS))
        return {tag: outs[tag] for tag in (RECORDS, TAG, PARTIALS)}
