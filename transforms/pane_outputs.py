"""How a streaming step sends out a published pane: its rows by kind (when the job wants rows) and its
pane file, tagged ``panes``. The panes' step (``transforms/panes.py``) and the rollups' step
(``transforms/rollup_panes.py``, which ``panes.py`` imports) both emit through :func:`pane_outputs`."""
from __future__ import annotations

import apache_beam as beam

PANES = "panes"   # the output of pane files: one PaneFile per kind, window, capped key and pane


def pane_outputs(pane, row_outputs: bool):
    """The tagged outputs of one published ``pane`` (a PaneFile): each row under its kind when
    ``row_outputs``, then the pane file under :data:`PANES`."""
    if row_outputs:
        for row in pane.rows:
            yield beam.pvalue.TaggedOutput(pane.kind, row)
    yield beam.pvalue.TaggedOutput(PANES, pane)
