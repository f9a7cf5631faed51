"""The marginals of a window built as a table (no dict per row): read row by row they are the
MarginalEstimate rows of the estimate, field by field; the table is what the dict path gives for
those rows; it pickles as the table; a table of another schema is refused."""
import pickle

import numpy as np
import pyarrow as pa
import pytest

from ldp_marginals.ldp.intervals import sidak_level
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.schemas.arrow import TableRows, arrow_schema, table_of, to_table
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.rows import base_row, marginal_rows
from tests.configs import SMALL_CONFIG
from tests.transforms.test_engine import accumulator


@pytest.mark.parametrize("interval", ["per_cell", "simultaneous"])
def test_marginal_rows_read_as_the_estimates_rows(interval):
    cfg = parse_config(dict(SMALL_CONFIG, min_reports=0, marginal_interval=interval))
    acc = accumulator(cfg, 300, 5)
    est = estimate_tmdh(acc.cooc, cfg.channels, exclusive_groups=cfg.layout.exclusive_groups)
    dims = (("os", "android"), ("region", "eu"))
    base = dict(base_row(cfg.name, (3_600_000, 7_200_000), dims), n_reports=acc.n)
    rows = marginal_rows(cfg, est, base)
    assert isinstance(rows, TableRows) and len(rows) == len(cfg.published_index) > 0
    m = len(cfg.published_index)
    low, high = est.intervals(cfg.level if interval == "per_cell" else sidak_level(cfg.level, m))
    for row, i in zip(rows, cfg.published_index):
        f = est.means[i] / acc.n
        assert row == {"collection": cfg.name, "window_start": 3_600_000, "window_end": 7_200_000,
                       "dimensions": {"os": "android", "region": "eu"}, "n_reports": acc.n,
                       "columns": list(cfg.family[i]), "labels": [cfg.layout.labels[b] for b in cfg.family[i]],
                       "estimate": est.means[i], "frequency": f, "variance": est.variances[i],
                       "ci_low": pytest.approx(low[i], rel=1e-12), "ci_high": pytest.approx(high[i], rel=1e-12),
                       "interval": interval, "frequency_low": pytest.approx(low[i] / acc.n, rel=1e-12),
                       "frequency_high": pytest.approx(high[i] / acc.n, rel=1e-12),
                       "display_frequency": min(max(f, 0.0), 1.0),
                       "display_low": pytest.approx(min(max(low[i] / acc.n, 0.0), 1.0), rel=1e-12),
                       "display_high": pytest.approx(min(max(high[i] / acc.n, 0.0), 1.0), rel=1e-12),
                       "out_of_range": not 0.0 <= f <= 1.0,
                       # stamped where the pane leaves its step (transforms/pane_outputs.py), not here
                       "pane_index": None, "pane_timing": None, "final": None, "rollup": None}
    # the dict path's table of the same rows is the table itself
    assert to_table("marginal_estimate", list(rows)).equals(rows.table)
    assert table_of("marginal_estimate", rows) is rows.table
    again = pickle.loads(pickle.dumps(rows))
    assert again.table.equals(rows.table) and again == rows == list(rows)


def test_no_dimensions_and_concatenation():
    cfg = parse_config(dict(SMALL_CONFIG, min_reports=0))
    acc = accumulator(cfg, 200, 2)
    est = estimate_tmdh(acc.cooc, cfg.channels, exclusive_groups=cfg.layout.exclusive_groups)
    parts = [marginal_rows(cfg, est, dict(base_row(cfg.name, (0, 60_000), ()), n_reports=acc.n)) for _ in range(2)]
    assert all(r["dimensions"] == {} for r in parts[0])
    both = TableRows.concat("marginal_estimate", parts)
    assert len(both) == 2 * len(parts[0]) and list(both) == list(parts[0]) * 2
    assert len(TableRows.concat("marginal_estimate", [])) == 0


def test_a_table_of_another_schema_is_refused():
    with pytest.raises(ValueError, match="table must have arrow_schema"):
        TableRows("marginal_estimate", pa.table({"x": np.arange(3)}))
    with pytest.raises(ValueError, match="rows must be of schema 'table_cell'"):
        table_of("table_cell", TableRows("marginal_estimate", arrow_schema("marginal_estimate").empty_table()))
