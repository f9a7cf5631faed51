"""Subset RR as a channel kind (ldp/subset_reports.py): the wire format bit by bit, the job's accumulator
against the mechanism's own, merging and versioned state, and the window's marginals (exact with expected
counts; equal to the all-ones cell of the table whose covariance tests/ldp/test_subset_rr.py checks by
simulation; seeded coverage)."""

import numpy as np
import pytest

from ldp_marginals.ldp.subset_reports import (
    SubsetAggregator,
    SubsetFormat,
    encode_reports,
    sets_per_report,
    table_cells,
    window_marginals,
)
from ldp_marginals.ldp.subset_rr import SubsetAccumulator, SubsetRR, estimate_subset, randomize_subset
from ldp_marginals.ldp.versioned import accumulator_from_bytes, accumulator_to_bytes
from tests.ldp.test_hadamard import histogram, population
from tests.ldp.test_subset_rr import simulated_estimates
from tests.stats import assert_coverage


def test_wire_format_bit_by_bit():
    fmt = SubsetFormat(SubsetRR(7, 3, 4.0))                 # width 6: 7 mask bits + 6 pattern bits = 13 bits
    assert (fmt.mechanism.width, fmt.n_bits, fmt.n_bytes) == (6, 13, 2)
    # subset {0, 1, 2, 4, 5, 6} = 0b1110111; pattern 1 at bits 1 and 5: the 2nd and 5th chosen positions,
    # so pattern bits 8 and 11 of the report: 0b0000100101110111
    assert fmt.pack([0b1110111], [0b0100010]).tolist() == [[0b01110111, 0b00001001]]
    three = SubsetFormat(SubsetRR(5, 2, 1.0, width=3))     # 8 bits, 1 byte: subset {1, 3, 4}, pattern 1 on 4
    assert three.pack([0b11010], [0b10000]).tolist() == [[0b10011010]]


@pytest.mark.parametrize("d,k,width", [(5, 3, 3), (7, 3, 6), (20, 3, 10), (9, 2, 9), (62, 3, 3)])
def test_wire_format_round_trips(d, k, width):
    mech = SubsetRR(d, k, 2.0, width)
    fmt = SubsetFormat(mech)
    bits = np.random.default_rng(d).integers(0, 2, size=(200, d))
    sub, pat = randomize_subset(bits, mech, np.random.default_rng(d + 1))
    packed = fmt.pack(sub, pat)
    assert packed.shape == (200, fmt.n_bytes) == (200, (d + width + 7) // 8)
    got_sub, got_pat = fmt.unpack(packed)
    np.testing.assert_array_equal(got_sub, sub)
    np.testing.assert_array_equal(got_pat, pat)
    assert not fmt.bad_subset(packed).any()


def test_a_mask_of_another_width_is_flagged_and_refused():
    mech = SubsetRR(5, 2, 1.0, width=3)
    fmt = SubsetFormat(mech)                              # bits 0-4 the mask, 5-7 the pattern
    raw = np.array([[0b00000111], [0b11100111], [0b00001111], [0b00000011], [0], [0b00011111]], dtype=np.uint8)
    assert fmt.bad_subset(raw).tolist() == [False, False, True, True, True, True]
    with pytest.raises(ValueError, match="subsets must be masks of width=3"):
        fmt.pack([0b1111], [0])
    with pytest.raises(ValueError, match="patterns inside them"):
        fmt.pack([0b111], [0b1000])


def test_aggregator_counts_what_the_mechanism_counts_and_merges():
    bits = population(900, d=6, seed=2)
    mech = SubsetRR(6, 3, 4.0, width=4)
    agg = SubsetAggregator(mech)
    agg._block = 7                                          # several vectorized passes per block
    sub, pat = randomize_subset(bits, mech, np.random.default_rng(3))
    packed = SubsetFormat(mech).pack(sub, pat)
    one = agg.add_packed(agg.create(), packed)
    own = SubsetAccumulator(mech).add(sub, pat)
    got = agg.table_counts(one)
    assert got.n_reports == own.n_reports == 900
    assert one.cooc.counts.size == 1 + table_cells(mech) == 1 + 6 * 2 + 15 * 4 + 20 * 8
    for o in (1, 2, 3):
        np.testing.assert_array_equal(got.counts[o], own.counts[o])
    shards = [agg.add_packed(agg.create(), packed[i::4]) for i in range(4)]
    merged = agg.merge(iter([agg.create()] + shards))
    np.testing.assert_array_equal(merged.cooc.counts, one.cooc.counts)
    back = accumulator_from_bytes(accumulator_to_bytes(one, agg), agg)
    np.testing.assert_array_equal(back.cooc.counts, one.cooc.counts)
    other = SubsetAggregator(SubsetRR(6, 3, 3.0, width=4))   # same virtual family, other epsilon
    with pytest.raises(ValueError, match="epsilon"):
        accumulator_from_bytes(accumulator_to_bytes(one, agg), other)
    assert sets_per_report(mech) == 4 + 6 + 4


def test_window_marginals_are_exact_on_expected_counts_and_match_the_table_cells():
    bits = population(1500, d=5, seed=0)
    mech = SubsetRR(5, 3, 2.0, width=4)
    agg = SubsetAggregator(mech)
    own = SubsetAccumulator(mech)
    own.n_reports = 1500
    for o in (1, 2, 3):
        p1, q1 = mech.projected(o)
        n_k = np.arange(len(mech.family.members(o)))[:, None] * 7.0 + 50.0
        truth = np.array([histogram(bits, s) for s in mech.family.members(o)])
        own.counts[o] = n_k * (q1 + (p1 - q1) * truth)      # fractional expected counts: the estimator is linear
    window = agg.create()
    window.cooc.counts = np.concatenate([[1500.0]] + [c.ravel() for c in own.counts[1:]])
    got = window_marginals(agg, window)
    for i, s in enumerate(mech.family):
        truth = len(bits) * (bits[:, list(s)].all(axis=1).mean() if s else 1.0)
        assert got.means[i] == pytest.approx(truth, abs=1e-7)
    # noisy counts: every set's estimate and variance are the all-ones cell of its table
    window = agg.add_packed(agg.create(), encode_reports(bits, mech, np.random.default_rng(9)))
    got = window_marginals(agg, window)
    est = estimate_subset(agg.table_counts(window))
    for i, s in enumerate(mech.family):
        if s:
            table = est.table(s)
            assert got.means[i] == pytest.approx(table.estimate[-1], rel=1e-12)
            assert got.variances[i] == pytest.approx(table.covariance[-1, -1], rel=1e-12)
    low, high = got.intervals(0.95)
    assert np.all(low[1:] < got.means[1:]) and np.all(got.means[1:] < high[1:])


def test_a_table_no_subset_held_is_nan_with_infinite_variance():
    mech = SubsetRR(6, 2, 1.0, width=2)
    agg = SubsetAggregator(mech)
    packed = SubsetFormat(mech).pack([0b11], [0b01])      # one report: only {0}, {1} and {0, 1} are held
    got = window_marginals(agg, agg.add_packed(agg.create(), packed))
    held = [mech.family.index(s) for s in ((0,), (1,), (0, 1))]
    others = np.setdiff1d(np.arange(1, len(mech.family)), held)
    assert np.isfinite(got.means[held]).all() and np.isfinite(got.variances[held]).all()
    assert np.isnan(got.means[others]).all() and np.isinf(got.variances[others]).all()


@pytest.mark.statistical
def test_window_marginals_cover_at_their_level():
    """400 seeded windows x 25 sets of 1500 reports (simulated by the client's law, tests/ldp/test_subset_rr.py):
    the 95% intervals of every all-ones count from the plugged-in closed-form variances cover the truth at their
    level (binomial band, tests/stats.py). A variance 20% low fails it (the sampling term dropped does not: it is
    3-6% of the variance here; the exact match with SubsetEstimate.covariance above catches that)."""
    bits = population(1500, d=5, seed=0)
    mech = SubsetRR(5, 3, 2.0, width=4)
    agg = SubsetAggregator(mech)
    truth = np.array([bits[:, list(s)].all(axis=1).sum() for s in list(mech.family)[1:]])
    many = simulated_estimates(bits, mech, 400, np.random.default_rng(21))
    covered = []
    for w in range(400):
        window = agg.create()
        window.cooc.counts = np.concatenate([[len(bits)]] + [c[w].ravel() for c in many.counts[1:]])
        low, high = window_marginals(agg, window).intervals(0.95)
        covered.append((low[1:] <= truth) & (truth <= high[1:]))
    assert_coverage(np.array(covered).ravel(), 0.95)
