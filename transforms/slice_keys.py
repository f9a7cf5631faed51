"""The Beam adapter of the streaming bound on a slice's keys per device
(:mod:`ldp_marginals.transforms.publication.slices`): a stateful step keyed by (collection, slice
start) between the partials and the clock, and the keys' atoms. It only moves state in and out: a
small status, a bag of device keys the clock has not spoken for yet, and the slice's key table (per
device its K keys of smallest rank); every cell and message is a versioned record."""
from __future__ import annotations

import json

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec

from ldp_marginals.transforms.publication import slices, state


def slice_name(collection: str, start: int) -> str:
    """The state key of a collection's slice: a string, so that every runner has a deterministic coder."""
    return json.dumps([collection, int(start)], separators=(",", ":"))


class SliceKeysFn(beam.DoFn):
    """``(slice key, device keys | accept | drop)`` -> ``(key, kept)`` to the keys' atoms at the seal."""

    STATUS = ReadModifyWriteStateSpec("slice", BytesCoder())
    RAW = BagStateSpec("raw", BytesCoder())
    TABLE = ReadModifyWriteStateSpec("table", BytesCoder())

    def __init__(self, config, key_name):
        self.config = config
        self.key_name = key_name   # (collection, dims) -> the atoms' state key (transforms.panes)

    def process(self, element, status=beam.DoFn.StateParam(STATUS), raw=beam.DoFn.StateParam(RAW),
                table=beam.DoFn.StateParam(TABLE)):
        name, data = element
        start = json.loads(name)[1]
        stored = status.read()
        now = slices.status_from_bytes(stored) if stored else slices.SliceStatus()

        def read():
            cell = table.read()
            return ([state.message_from_bytes(d) for d in raw.read()],
                    slices.table_of_record(cell) if cell else slices.KeyTable())
        step = slices.SliceKeys(self.config, start).on_message(now, state.message_from_bytes(data), read)
        if step.append_raw is not None:
            raw.add(data)
        if step.raw is not None:
            raw.clear()
            for record in step.raw:
                raw.add(state.message_to_bytes(record))
        if step.table is not None:
            table.write(slices.table_record(step.table))
        if step.changed:
            status.write(slices.status_to_bytes(now))
        for dims, kept in step.kept:
            yield self.key_name(self.config.name, dims), state.message_to_bytes(kept)
