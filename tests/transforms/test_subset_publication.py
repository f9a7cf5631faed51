"""The publication rule for the channel kind subset (docs/design.md): every row a window and key publishes
is a function of its released accumulator, and that accumulator is a sum of per-report contributions,
additive over the atoms the rule releases. Exact checks: reports that differ but send the same (subset,
pattern) pairs in another order give the same accumulator and identical rows of every kind; atoms merged
give the accumulator and rows of their union. (The exact-rank model of tests/transforms/publication_model.py
does not cover this kind; these are the weaker, exact form of its premise.)"""
import numpy as np

from ldp_marginals.ldp.subset_reports import encode_reports
from ldp_marginals.schemas.config import parse_config
from tests.transforms.test_hadamard_publication import WINDOW, _acc, _rows

CONFIG = {"collection": "survey", "features": [{"name": f"q{i}", "type": "boolean"} for i in range(4)],
          "channel": {"kind": "subset", "epsilon": 2.0, "width": 3}, "max_order": 2,
          "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 50,
          "groups": [["q0", "q1"], ["q1", "q2"]]}


def _setup(n=400, seed=0):
    cfg = parse_config(CONFIG)
    rng = np.random.default_rng(seed)
    bits = (rng.random((n, 4)) < [0.2, 0.5, 0.7, 0.9]).astype(np.uint8)
    return cfg, rng, encode_reports(bits, cfg.sampling, rng)


def test_reports_sending_the_same_tables_publish_identical_rows():
    """The reports' pattern bits swapped between reports that hold the same subset (every report whose subset
    another shares changes): the counts of every table held are the same, so the rows cannot tell, in any field
    of any kind, the consistent tables included."""
    cfg, rng, packed = _setup()
    fmt = cfg.aggregator.format
    subsets, patterns = fmt.unpack(packed)
    shuffled = patterns.copy()
    for s in np.unique(subsets):
        at = np.flatnonzero(subsets == s)
        shuffled[at] = patterns[rng.permutation(at)]
    other = fmt.pack(subsets, shuffled)
    assert (other != packed).any(axis=1).mean() > 0.5
    a, b = _acc(cfg, packed), _acc(cfg, other)
    np.testing.assert_array_equal(a.cooc.counts, b.cooc.counts)
    rows = _rows(cfg, a)
    # q1's marginal is withheld, and one of the tables (q0, q1), (q1, q2): x_q1 rides on both, and the reports
    # whose subset holds q0, q1 and q2 (width 3) are not counted (max_order 2), so what the two leave apart
    # cannot be bounded (ldp/thin_rows.py, the family rule: conservative; main published both tables)
    assert sorted(rows) == ["consistent_tables", "marginals", "tables", "withheld"]
    assert len(rows["consistent_tables"]) == len(rows["tables"]) == 4 and len(rows["marginals"]) == 8
    assert rows == _rows(cfg, b)
    assert WINDOW == (rows["marginals"][0]["window_start"], rows["marginals"][0]["window_end"])


def test_the_accumulator_is_additive_over_atoms():
    """Atoms (any split of the window's reports, in any order) merged: the counts and the rows of the
    whole window."""
    cfg, rng, packed = _setup(seed=1)
    order = rng.permutation(len(packed))
    atoms = [_acc(cfg, packed[part]) for part in np.split(order, [90, 250])]
    merged = cfg.aggregator.merge(atoms)
    whole = _acc(cfg, packed)
    np.testing.assert_array_equal(merged.cooc.counts, whole.cooc.counts)
    assert merged.n == whole.n == len(packed)
    assert _rows(cfg, merged) == _rows(cfg, whole)


def test_a_window_of_every_order_gets_the_projection_and_consistent_non_negative_tables():
    """max_order = d: the kind's consistent tables are the projection of its unbiased ones (subset RR's tables
    come from different reports, so the unbiased ones need not agree on what they share; the projection
    makes them agree and non-negative)."""
    cfg = parse_config(dict(CONFIG, features=CONFIG["features"][:3], max_order=3, groups=[["q0", "q1", "q2"]],
                            channel={"kind": "subset", "epsilon": 2.0, "width": 3}))
    rng = np.random.default_rng(2)
    bits = (rng.random((300, 3)) < [0.2, 0.5, 0.7]).astype(np.uint8)
    rows = _rows(cfg, _acc(cfg, encode_reports(bits, cfg.sampling, rng)))
    fixed = rows["consistent_tables"]
    assert len(fixed) == 8 and {r["method"] for r in fixed} == {"projection"}
    freq = np.array([r["frequency"] for r in fixed])
    assert freq.min() >= 0 and abs(freq.sum() - 1) < 1e-9
