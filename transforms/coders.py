"""Beam coders for what the job moves between steps: window accumulators and partials cross a shuffle as
the versioned records of :mod:`ldp_marginals.ldp.versioned` (one header, one version number), never as
pickles. Registered for their types, so Beam picks them wherever a step declares the type
(``with_output_types``, the CombineFns' ``get_accumulator_coder``); the streaming engines' messages
travel as ``(key, bytes)``, the same records (:mod:`ldp_marginals.transforms.publication.state`).

A coder knows no collection config, so a record is decoded from the shape its header records; the
steps that keep state check it against their config when they read it back.
"""
from __future__ import annotations

import typing

import apache_beam as beam

from ldp_marginals.ldp.aggregate import WindowAccumulator
from ldp_marginals.ldp.versioned import (
    ACCUMULATOR,
    accumulator_from_bytes,
    accumulator_size,
    accumulator_to_bytes,
    pack,
    packed_size,
    unpack,
)
from ldp_marginals.transforms.source import Partial

PARTIAL = b"LDPP"   # a partial: its collection and dimensions in the header, its accumulator in the tail

# element types, for the steps' type hints
Dims = typing.Tuple[typing.Tuple[str, str], ...]
KeyedAccumulator = typing.Tuple[typing.Tuple[str, Dims], WindowAccumulator]
KeyedBytes = beam.typehints.Tuple[str, bytes]   # Beam's own hint: also set directly on tagged outputs


def _partial_header(partial: Partial) -> dict:
    return {"collection": partial.collection, "dims": [list(kv) for kv in partial.dimensions]}


def partial_to_bytes(partial: Partial) -> bytes:
    return pack(PARTIAL, _partial_header(partial), accumulator_to_bytes(partial.accumulator))


def partial_from_bytes(data: bytes) -> Partial:
    parsed = unpack(PARTIAL, bytes(data))
    if parsed is None:
        raise ValueError(f"a partial must be a record {PARTIAL.decode()}, got one starting {bytes(data[:4])!r}")
    _, header, tail = parsed
    return Partial(header["collection"], tuple(tuple(kv) for kv in header["dims"]), accumulator_from_bytes(tail))


class AccumulatorCoder(beam.coders.Coder):
    """A :class:`~ldp_marginals.ldp.aggregate.WindowAccumulator` as its versioned record."""

    def encode(self, value):
        return accumulator_to_bytes(value)

    def estimate_size(self, value):
        # exact, without writing the record: Beam sizes elements it samples by encoding them
        # otherwise, and an open accumulator under a device bound holds megabytes
        return accumulator_size(value)

    def decode(self, encoded):
        if bytes(encoded[:4]) != ACCUMULATOR:
            raise ValueError(f"an accumulator must be a record {ACCUMULATOR.decode()}, got one starting "
                             f"{bytes(encoded[:4])!r}")
        return accumulator_from_bytes(encoded)

    def is_deterministic(self):
        return True   # the same accumulator always gives the same bytes

    def to_type_hint(self):
        return WindowAccumulator


class PartialCoder(beam.coders.Coder):
    """A :class:`~ldp_marginals.transforms.source.Partial` as its versioned record."""

    def encode(self, value):
        return partial_to_bytes(value)

    def estimate_size(self, value):
        return packed_size(_partial_header(value), accumulator_size(value.accumulator))   # exact, as above

    def decode(self, encoded):
        return partial_from_bytes(encoded)

    def is_deterministic(self):
        return True

    def to_type_hint(self):
        return Partial


beam.coders.registry.register_coder(WindowAccumulator, AccumulatorCoder)
beam.coders.registry.register_coder(Partial, PartialCoder)
