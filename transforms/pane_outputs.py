"""How a streaming step sends out a published pane: its rows by kind (when the job wants rows) and its
pane file, tagged ``panes``. The panes' step (``transforms/panes.py``), the rollups' step
(``transforms/rollup_panes.py``, which ``panes.py`` imports) and the batch publication
(``transforms/estimate.py``) all emit through :func:`pane_outputs`, which stamps every row with its pane
(``pane_index``, ``pane_timing``, ``final``, ``rollup``: :func:`~ldp_marginals.schemas.outputs.pane_fields`),
so that the rows a sink other than files receives (BigQuery's tables hold every pane) say it too."""
from __future__ import annotations

import apache_beam as beam

from ldp_marginals.schemas.arrow import with_values
from ldp_marginals.schemas.outputs import SCHEMA_OF, pane_fields

PANES = "panes"   # the output of pane files: one PaneFile per kind, window, capped key and pane


def stamped(pane):
    """The PaneFile ``pane`` with each row stamped with its pane's fields."""
    fields = pane_fields(pane.pane, pane.beam_timing, pane.final, pane.key)
    return pane._replace(rows=with_values(SCHEMA_OF[pane.kind], pane.rows, fields))


def pane_outputs(pane, row_outputs: bool):
    """The tagged outputs of one published ``pane`` (a PaneFile): each row under its kind when
    ``row_outputs``, then the pane file under :data:`PANES`, its rows stamped with the pane."""
    pane = stamped(pane)
    if row_outputs:
        for row in pane.rows:
            yield beam.pvalue.TaggedOutput(pane.kind, row)
    yield beam.pvalue.TaggedOutput(PANES, pane)
