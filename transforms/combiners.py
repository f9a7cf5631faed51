"""CombineFns: thin adapters over ``ldp/`` and the publication engine. Combiners contain logic,
accumulators contain data. Each declares its element types (as Beam's own combiners do) and an
accumulator coder, so what crosses a shuffle is the versioned record of
:mod:`ldp_marginals.ldp.versioned`, never a pickle (:mod:`ldp_marginals.transforms.coders`)."""
from __future__ import annotations

import itertools
import os
import typing

import apache_beam as beam
from apache_beam.typehints import with_input_types, with_output_types

from ldp_marginals.ldp.aggregate import WindowAccumulator
from ldp_marginals.transforms.coders import AccumulatorCoder
from ldp_marginals.transforms.publication.cap import add_weights

Weights = typing.Dict[str, typing.Dict[str, int]]


@with_input_types(WindowAccumulator)
@with_output_types(WindowAccumulator)
class CollectionCombineFn(beam.CombineFn):
    """Adapts :class:`ldp_marginals.ldp.aggregate.ReportAggregator` to Beam for one collection.

    Input, accumulator and output: :class:`~ldp_marginals.ldp.aggregate.WindowAccumulator` s
    (readers pre-aggregate every report, so what is combined are partial sums, never reports).
    Under ``privacy.unit: device`` partials are open (each device's kept reports): the combine keeps
    each device's bottom M over the slice and key, in any merge order, and the output is settled. So
    the bound holds, a slice and key's open partials are combined in one round (never per shard and
    then again: a shard's settled output would keep M per shard); ``open_partials`` False combines
    settled accumulators (a window's slices per capped key), which any fanout may. ``settle`` False
    leaves the output open (the bound on keys reads each key's devices first: ``transforms.device_keys``).
    """

    def __init__(self, config, open_partials: bool = True, settle: bool = True):
        self.aggregator = config.aggregator
        self.open_partials = open_partials
        self.settle = settle

    def create_accumulator(self):
        return self.aggregator.create_open() if self.open_partials else self.aggregator.create()

    def add_input(self, acc, element):
        return self.aggregator.merge([acc, element])

    def merge_accumulators(self, accumulators):
        return self.aggregator.merge(accumulators)

    def extract_output(self, acc):
        return self.aggregator.settle(acc) if self.settle else acc

    def get_accumulator_coder(self):
        return AccumulatorCoder()


@with_input_types(typing.Tuple[bool, WindowAccumulator])
@with_output_types(typing.Tuple[WindowAccumulator, WindowAccumulator])
class ReleasedHeldCombineFn(beam.CombineFn):
    """The slices of one window and capped key, each ``(released, accumulator)``, summed apart:
    accumulator and output ``(released, held)``, two accumulators (batch publication's input)."""

    def __init__(self, config):
        self.aggregator = config.aggregator

    def create_accumulator(self):
        return self.aggregator.create(), self.aggregator.create()

    def add_input(self, acc, element):
        released, part = element
        at = 0 if released else 1
        self.aggregator.merge([acc[at], part])
        return acc

    def merge_accumulators(self, accumulators):
        it = iter(accumulators)
        first = next(it)
        rest = list(it)
        for at in (0, 1):
            self.aggregator.merge([first[at]] + [acc[at] for acc in rest])
        return first

    def extract_output(self, acc):
        return acc

    def get_accumulator_coder(self):
        return beam.coders.TupleCoder([AccumulatorCoder(), AccumulatorCoder()])


@with_input_types(Weights)
@with_output_types(Weights)
class WeightsCombineFn(beam.CombineFn):
    """Values' weights (``{name: {value: reports}}``) summed: what a window's cap is decided from."""

    def create_accumulator(self):
        return {}

    def add_input(self, acc, element):
        return add_weights(acc, element)

    def merge_accumulators(self, accumulators):
        it = iter(accumulators)
        first = next(it)
        for other in it:
            add_weights(first, other)
        return first

    def extract_output(self, acc):
        return acc


class _SpreadFn(beam.DoFn):
    """``(key, value)`` -> ``((key, shard), value)``: each bundle picks one shard of ``fanout``, so a hot
    key's values are pre-combined on several workers (as Beam's ``with_hot_key_fanout``)."""

    def __init__(self, fanout: int):
        self.fanout = fanout

    def setup(self):
        # spread, not randomness: workers and their instances start at different shards
        self._bundles = itertools.count(hash((os.getpid(), id(self))) % self.fanout)

    def start_bundle(self):
        self._shard = next(self._bundles) % self.fanout

    def process(self, element):
        key, value = element
        yield (key, self._shard), value


class CombineWithHotKeyFanout(beam.PTransform):
    """``CombinePerKey(combine_fn)`` in two rounds, a key's values first combined per bundle shard on
    several workers, then the shards' results per key: Beam's ``with_hot_key_fanout``, with the element
    types declared at every step so that what crosses each shuffle is the combiner's records, never a
    pickle (Beam's own fanout loses the types, and refuses sliding windows because it windows its
    shards again: here they keep their windows). ``combine_fn`` must take its own outputs as inputs
    (its input, accumulator and output are one type, as :class:`CollectionCombineFn`'s)."""

    def __init__(self, combine_fn, fanout: int, key_type, value_type=WindowAccumulator):
        super().__init__()
        self.combine_fn, self.fanout = combine_fn, fanout
        self.key_type, self.value_type = key_type, value_type

    def expand(self, pcoll):
        keyed = typing.Tuple[self.key_type, self.value_type]
        return (pcoll
                | "Spread" >> beam.ParDo(_SpreadFn(self.fanout)).with_output_types(
                    typing.Tuple[typing.Tuple[self.key_type, int], self.value_type])
                | "PerShard" >> beam.CombinePerKey(self.combine_fn)
                | "Unspread" >> beam.Map(lambda kv: (kv[0][0], kv[1])).with_output_types(keyed)
                | "PerKey" >> beam.CombinePerKey(self.combine_fn).with_output_types(keyed))
