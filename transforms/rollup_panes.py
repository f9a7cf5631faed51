"""The Beam adapter of a window's rollup rows in streaming
(:class:`~ldp_marginals.transforms.publication.rollup_panes.Rollups`), keyed by (collection, window):
the clock's expectation and the keys' parts at the window's close meet here, and the published rollup
rows go out as rows by kind and pane files, as the panes' do. The state (a status and a bag of parts)
is versioned records, cleared when the window closes."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.coders import BytesCoder
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec

from ldp_marginals.transforms.pane_outputs import pane_outputs
from ldp_marginals.transforms.publication import rollup_panes


class RollupsFn(beam.DoFn):
    """``((collection, window), expectation | part)`` (:func:`~ldp_marginals.transforms.panes.window_key_name`) -> rollup rows by kind (tagged) and pane files
    (tagged ``panes``)."""

    STATUS = ReadModifyWriteStateSpec("rollups", BytesCoder())
    PARTS = BagStateSpec("parts", BytesCoder())

    def __init__(self, config, row_outputs: bool):
        self.config = config
        self.row_outputs = row_outputs   # False: rows only in their pane files

    def process(self, element, status=beam.DoFn.StateParam(STATUS), parts=beam.DoFn.StateParam(PARTS)):
        _, data = element
        agg = self.config.aggregator
        stored = status.read()
        now = rollup_panes.status_from_bytes(stored) if stored else rollup_panes.RollupStatus()
        step = rollup_panes.Rollups(self.config).on_message(
            now, rollup_panes.message_from_bytes(data, agg),
            lambda: (rollup_panes.message_from_bytes(d, agg) for d in parts.read()))   # folded one at a time
        if step.done:
            status.clear()
            parts.clear()
        else:
            if step.parts is not None:
                parts.clear()
                for p in step.parts:
                    parts.add(rollup_panes.message_to_bytes(p, agg))
            if step.append_part is not None:
                parts.add(data)
            status.write(rollup_panes.status_to_bytes(now))
        for pane in step.panes:
            yield from pane_outputs(pane, self.row_outputs)
