"""CombineFns: thin adapters over ``ldp/``. Combiners contain logic, accumulators contain data."""
from __future__ import annotations

import apache_beam as beam


class CollectionCombineFn(beam.CombineFn):
    """Adapts :class:`ldp_marginals.ldp.aggregate.ReportAggregator` to Beam for one collection.

    Input, accumulator and output: :class:`~ldp_marginals.ldp.aggregate.WindowAccumulator` s
    (readers pre-aggregate every report, so what is combined are partial sums, never reports).
    Under ``privacy.unit: device`` partials are open (each device's kept reports): the combine keeps
    each device's bottom M over the slice and key, in any merge order, and the output is settled.
    """

    def __init__(self, config):
        self.aggregator = config.aggregator

    def create_accumulator(self):
        return self.aggregator.create_open()

    def add_input(self, acc, element):
        return self.aggregator.merge([acc, element])

    def merge_accumulators(self, accumulators):
        return self.aggregator.merge(accumulators)

    def extract_output(self, acc):
        return self.aggregator.settle(acc)
