"""What the dashboard's view of a selection holds, read from files written as a run writes them (no
browser: tests/pipelines/test_dashboard.py draws the page)."""
import pytest

from ldp_marginals.ldp.tables import phi_from_frequencies
from ldp_marginals.pipelines.dashboard import export
from ldp_marginals.pipelines.dashboard.view import FileCache, parse_selection, view
from tests.outputs import HOUR_MS, write_run

BASE = {"collection": "c", "n_reports": 100, "estimate": 10.0, "variance": 1.0, "ci_low": 8.0, "ci_high": 12.0}


def marginal(window, dims, columns, labels, frequency):
    return dict(BASE, window_start=window[0], window_end=window[1], dimensions=dims, columns=columns, labels=labels,
                frequency=frequency)


def withheld(window, dims, n):
    return {"collection": "c", "window_start": window[0], "window_end": window[1], "dimensions": dims,
            "n_reports": n, "min_reports": 50, "reason": f"{n} reports < min_reports=50", "cause": "privacy",
            "statistic": "all"}


def test_the_default_view_opens_on_a_key_with_estimates(tmp_path):
    """A key withheld whole in the latest window (region ap, first by name) is offered in the picker,
    but the page opens on a key that has estimates there; served and static pages alike."""
    w = (0, HOUR_MS)
    eu = {"region": "eu"}
    write_run(tmp_path, [("marginals", "c", w, 0, [marginal(w, eu, [0], ["a"], 0.5)]),
                         ("withheld", "c", w, 0, [withheld(w, {"region": "ap"}, 7)])])
    data = view(str(tmp_path), parse_selection({}), FileCache(str(tmp_path)))
    assert data["keys"] == [{"region": "ap"}, {"region": "eu"}]
    assert data["dims"] == eu and [r["frequency"] for r in data["marginals"]] == [0.5]
    chosen = view(str(tmp_path), parse_selection({"dims": '{"region": "ap"}'}), FileCache(str(tmp_path)))
    assert chosen["dims"] == {"region": "ap"} and chosen["marginals"] == []   # still there when asked for
    first = next(iter(export.static_views(str(tmp_path))["views"].values()))   # what a written page opens on
    assert first["dims"] == eu


def test_the_phi_matrix_leaves_out_the_pairs_of_one_categorical_feature(tmp_path):
    """Two values of one categorical feature are never both set: their phi follows from their
    frequencies alone, so the matrix leaves it out (None); pairs of different features are phi of the
    files' frequencies."""
    w = (0, HOUR_MS)
    freq = {(0,): 0.3, (1,): 0.6, (2,): 0.4, (0, 2): 0.15, (1, 2): 0.2}
    labels = ["os=mac", "os=win", "dark"]
    rows = [marginal(w, {}, list(c), [labels[i] for i in c], f) for c, f in freq.items()]
    write_run(tmp_path, [("marginals", "c", w, 0, rows)])
    (phi,) = view(str(tmp_path), parse_selection({}), FileCache(str(tmp_path)))["correlations"]
    assert phi["labels"] == labels
    assert phi["z"][0][1] is None and phi["z"][1][0] is None
    assert phi["z"][0][2] == phi["z"][2][0] == pytest.approx(phi_from_frequencies(0.3, 0.4, 0.15))
    assert phi["z"][1][2] == pytest.approx(phi_from_frequencies(0.6, 0.4, 0.2))
    assert [phi["z"][i][i] for i in range(3)] == [1.0] * 3
