"""The seam between a source and the job: every source of the product returns the same three
tagged outputs, each possibly empty.

- ``records``: NoisyReport records (dicts), Avro messages (bytes), or ``(either, source label)``;
- ``partials``: timestamped :class:`Partial` accumulators pre-aggregated by a reader;
- ``dead_letters``: DeadLetter rows for input the source could not read.

The product's sources subclass :class:`ReportSource`. Any other PTransform that yields records or
messages (``beam.Create``, ``TestStream``, an embedding user's reader) is wrapped by
:func:`as_source`, so the job never guesses the shape of what a source returned.
"""
from __future__ import annotations

from typing import NamedTuple

import apache_beam as beam

from ldp_marginals.transforms.dead_letters import TAG as DEAD_LETTERS

RECORDS, PARTIALS = "records", "partials"
SOURCE_TAGS = (RECORDS, PARTIALS, DEAD_LETTERS)


class Partial(NamedTuple):
    """A pre-aggregated accumulator of one collection, dimensions and window slice."""

    collection: str
    dimensions: tuple
    accumulator: object   # ldp_marginals.ldp.aggregate.WindowAccumulator


class ReportSource(beam.PTransform):
    """Base of the product's sources: ``expand`` returns ``{records, partials, dead_letters}``.

    Subclasses implement :meth:`read`, returning the outputs they have; the ones they lack are
    empty PCollections.
    """

    def read(self, pbegin) -> dict:
        raise NotImplementedError

    given = frozenset()  # the outputs read() returned (set by expand); the others are empty

    def expand(self, pbegin):
        outs = dict(self.read(pbegin))
        unknown = sorted(set(outs) - set(SOURCE_TAGS))
        if unknown:
            raise ValueError(f"a source's outputs must be among {list(SOURCE_TAGS)}, got {unknown}")
        self.given = frozenset(outs)
        for tag in SOURCE_TAGS:
            if tag not in outs:  # an empty PCollection, with stage names that never move (Create's do)
                outs[tag] = pbegin | f"No[{tag}]" >> beam.Impulse() | f"Empty[{tag}]" >> beam.FlatMap(_nothing)
        return outs


def _nothing(_):
    return ()


class _PlainSource(ReportSource):
    """A PTransform from the pipeline root to records or messages, as a :class:`ReportSource`."""

    def __init__(self, transform: beam.PTransform):
        super().__init__()
        self.transform = transform

    def read(self, pbegin):
        return {RECORDS: pbegin | "Read" >> self.transform}


def as_source(source: beam.PTransform) -> ReportSource:
    """``source`` itself if it is one of the product's sources, else wrapped as one."""
    if isinstance(source, ReportSource):
        return source
    if not isinstance(source, beam.PTransform):
        raise ValueError(f"source must be a PTransform, got source={source!r}")
    return _PlainSource(source)
