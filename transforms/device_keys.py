"""The bound on the keys a device adds to per slice (``privacy.max_keys_per_device``), batch: the Beam
side of :func:`~ldp_marginals.ldp.devices.keys_over_bound`.

Input: the open accumulators of one collection's slices and keys (each device's kept reports, in
slice windows). Each key sends only its devices' 64-bit keys to its collection and slice (one
small shuffle, never reports); there each device keeps the K keys of smallest key rank, and each key
learns which of its devices are past their bound. A second shuffle joins that list with the key's
accumulator, which drops those devices (their reports counted in ``reports.over_key_bound``) and is
settled. What crosses both shuffles is bytes: device keys little-endian, accumulators as their
versioned records (:mod:`ldp_marginals.ldp.versioned`).
"""
from __future__ import annotations

import typing

import apache_beam as beam
import numpy as np

from ldp_marginals.ldp.devices import key_id, keys_over_bound
from ldp_marginals.ldp.versioned import accumulator_from_bytes, accumulator_to_bytes
from ldp_marginals.schemas.dead_letters import OVER_KEY_BOUND
from ldp_marginals.transforms import coders
from ldp_marginals.transforms.dead_letters import count

KEY = typing.Tuple[str, coders.Dims]
Members = typing.Tuple[str, typing.Tuple[coders.Dims, bytes]]
Tagged = typing.Tuple[KEY, typing.Tuple[int, bytes]]
ACC, DROP = 0, 1   # the join's two sides: a key's accumulator, the devices it must drop


def _members(kv):
    (collection, dims), acc = kv
    return collection, (dims, acc.devices.devices.astype("<u8").tobytes())


def _over_bound(kv, config):
    """``(collection, [(dims, device keys)])`` of one slice -> per key with devices past their bound
    ``((collection, dims), (DROP, device keys))``."""
    collection, members = kv
    members = sorted(members)
    dropped = keys_over_bound(config.aggregator.collection_key,
                              [(key_id(dims), np.frombuffer(devices, dtype="<u8").astype(np.uint64))
                               for dims, devices in members], config.device.max_keys_per_device)
    for (dims, _), over in zip(members, dropped):
        if over.size:
            yield (collection, dims), (DROP, over.astype("<u8").tobytes())


def _bounded(kv, config):
    """A key's accumulator and the devices it drops -> ``((collection, dims), settled accumulator)``."""
    key, tagged = kv
    aggregator = config.aggregator
    accs = [accumulator_from_bytes(data, aggregator) for tag, data in tagged if tag == ACC]
    drops = [np.frombuffer(data, dtype="<u8").astype(np.uint64) for tag, data in tagged if tag == DROP]
    acc = accs[0] if len(accs) == 1 else aggregator.merge([aggregator.create_open(), *accs])
    if drops:
        acc, reports = aggregator.without_devices(acc, np.unique(np.concatenate(drops)))
        if reports:
            count(OVER_KEY_BOUND, reports)
    return key, aggregator.settle(acc)


class BoundKeys(beam.PTransform):
    """``((collection, dims), open accumulator)`` per slice -> ``((collection, dims), settled
    accumulator)`` per slice, each device in at most ``max_keys_per_device`` of the slice's keys."""

    def __init__(self, config):
        super().__init__()
        self.config = config

    def expand(self, slices):
        cfg = self.config
        drops = (slices
                 | "Members" >> beam.Map(_members).with_output_types(Members)
                 | "PerSlice" >> beam.GroupByKey()
                 | "OverBound" >> beam.FlatMap(_over_bound, cfg).with_output_types(Tagged))
        accs = slices | "Tag" >> beam.Map(
            lambda kv: (kv[0], (ACC, accumulator_to_bytes(kv[1], cfg.aggregator)))).with_output_types(Tagged)
        return ((accs, drops)
                | "Both" >> beam.Flatten()
                | "Join" >> beam.GroupByKey()
                | "Drop" >> beam.Map(_bounded, cfg).with_output_types(coders.KeyedAccumulator))
