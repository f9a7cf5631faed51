"""CombineFns: thin adapters over ``ldp/``. Combiners contain logic, accumulators contain data."""
from __future__ import annotations

import apache_beam as beam
import numpy as np

from ldp_marginals.ldp.aggregate import WindowAccumulator
from ldp_marginals.ldp.encoding import unpack_bits
from ldp_marginals.ldp.extremes import ExtremeAccumulator


class CollectionCombineFn(beam.CombineFn):
    """Adapts :class:`ldp_marginals.ldp.aggregate.ReportAggregator` to Beam for one collection.

    Input: a report's packed bits (``bytes``), or a :class:`WindowAccumulator` pre-aggregated by a
    reader. Accumulator and output: a :class:`WindowAccumulator` (flushed on output).
    """

    def __init__(self, config):
        self.aggregator = config.aggregator

    def create_accumulator(self):
        return self.aggregator.create()

    def add_input(self, acc, element):
        if isinstance(element, WindowAccumulator):
            return self.aggregator.merge([acc, element])
        return self.aggregator.add_report(acc, element)

    def merge_accumulators(self, accumulators):
        return self.aggregator.merge(accumulators)

    def compact(self, acc):
        return self.aggregator.flush(acc)

    def extract_output(self, acc):
        return self.aggregator.flush(acc)


class ClientExtremesCombineFn(beam.CombineFn):
    """Per (key, client): one OR/AND state per client extreme over all the client's reports in the
    window (``ldp.extremes``). Output: per extreme ``(estimate, variance)`` of that client."""

    def __init__(self, config):
        self.config = config

    def create_accumulator(self):
        return [ExtremeAccumulator(e.op) for e in self.config.client_extremes]

    def add_input(self, acc, report_bits):
        bits = unpack_bits(np.frombuffer(report_bits, np.uint8), self.config.layout.n_bits)
        ch = self.config.channels
        for state, ext in zip(acc, self.config.client_extremes):
            cols = list(ext.bits)
            state.add(bits[cols], ch.p[cols], ch.q[cols])
        return acc

    def merge_accumulators(self, accumulators):
        it = iter(accumulators)
        first = next(it)
        for other in it:
            for a, b in zip(first, other):
                a.merge(b)
        return first

    def extract_output(self, acc):
        return [(float(s.estimate()), float(s.variance())) for s in acc]
