"""Hadamard sampling as a channel kind (ldp/hadamard_reports.py): the wire format bit by bit, the
job's accumulator against the mechanism's own, merging and versioned state, and the window's
marginals (exact with expected counts; equal to the all-ones cell of the table whose covariance
tests/ldp/test_hadamard.py checks by simulation; seeded coverage)."""

import numpy as np
import pytest

from ldp_marginals.ldp.hadamard import (
    HadamardAccumulator,
    HadamardSampling,
    estimate_hadamard,
    randomize_hadamard,
    true_coefficients,
)
from ldp_marginals.ldp.hadamard_reports import HadamardAggregator, HadamardFormat, encode_reports, window_marginals
from ldp_marginals.ldp.versioned import accumulator_from_bytes, accumulator_to_bytes
from tests.ldp.test_hadamard import expected_accumulator, population
from tests.stats import assert_coverage


def test_wire_format_bit_by_bit():
    mech = HadamardSampling(7, 3, 1.0)                   # T = 63 coefficients: 6 index bits + 1 parity
    fmt = HadamardFormat(mech)
    assert (mech.n_coefficients, fmt.index_bits, fmt.n_bits, fmt.n_bytes) == (63, 6, 7, 1)
    # index 5 = 0b000101, least significant first, then parity 1 at bit 6: 0b1000101
    assert fmt.pack([[5]], [[1]]).tolist() == [[0x45]]
    assert fmt.pack([[63]], [[0]]).tolist() == [[0x3F]]
    # two slots of 7 bits: (1, even) at bits 0-6, (2, odd) at bits 7-13: bit 0; bit 8 and parity bit 13
    two = HadamardFormat(HadamardSampling(7, 3, 8.0, slots=2))
    assert two.pack([[1, 2]], [[0, 1]]).tolist() == [[0b00000001, 0b00100001]]


@pytest.mark.parametrize("d,k,slots", [(5, 3, 1), (7, 3, 4), (20, 3, 2), (9, 9, 1)])
def test_wire_format_round_trips(d, k, slots):
    mech = HadamardSampling(d, k, 2.0, slots=slots)
    fmt = HadamardFormat(mech)
    rng = np.random.default_rng(d)
    idx = rng.integers(1, mech.n_coefficients + 1, size=(200, slots))
    par = rng.integers(0, 2, size=(200, slots))
    packed = fmt.pack(idx, par)
    assert packed.shape == (200, fmt.n_bytes)
    got_idx, got_par = fmt.unpack(packed)
    np.testing.assert_array_equal(got_idx, idx)
    np.testing.assert_array_equal(got_par, par)
    assert not fmt.bad_index(packed).any()


def test_out_of_range_indices_are_flagged_and_refused():
    mech = HadamardSampling(5, 3, 1.0)                   # T = 25 < 2^5: indices 0 and 26..31 name nothing; bit 5 is the parity
    fmt = HadamardFormat(mech)
    raw = np.array([[0b000000], [0b011001], [0b011010], [0b111111], [0b111001]], dtype=np.uint8)
    assert fmt.bad_index(raw).tolist() == [True, False, True, True, False]
    with pytest.raises(ValueError, match=r"indices must be in \[1, 25\]"):
        fmt.pack([[26]], [[0]])
    with pytest.raises(ValueError, match="indices must be in"):
        HadamardAggregator(mech).add_packed(HadamardAggregator(mech).create(), raw[:1])
    with pytest.raises(ValueError, match="parities must be 0 or 1"):
        fmt.pack([[3]], [[2]])


def test_aggregator_counts_what_the_mechanism_counts_and_merges():
    bits = population(900, d=5, seed=2)
    mech = HadamardSampling(5, 3, 6.0, slots=3)
    agg = HadamardAggregator(mech)
    idx, par = randomize_hadamard(bits, mech, np.random.default_rng(3))
    packed = HadamardFormat(mech).pack(idx, par)
    one = agg.add_packed(agg.create(), packed)
    own = HadamardAccumulator(mech).add(idx, par)
    got = agg.coefficient_counts(one)
    assert got.n_reports == own.n_reports == 900
    np.testing.assert_array_equal(got.drawn, own.drawn)
    np.testing.assert_array_equal(got.odd, own.odd)
    shards = [agg.add_packed(agg.create(), packed[i::4]) for i in range(4)]
    merged = agg.merge(iter([agg.create()] + shards))
    np.testing.assert_array_equal(merged.cooc.counts, one.cooc.counts)
    back = accumulator_from_bytes(accumulator_to_bytes(one, agg), agg)
    np.testing.assert_array_equal(back.cooc.counts, one.cooc.counts)
    other = HadamardAggregator(HadamardSampling(5, 3, 5.0, slots=3))   # same virtual family, other epsilon
    with pytest.raises(ValueError, match="epsilon"):
        accumulator_from_bytes(accumulator_to_bytes(one, agg), other)


def test_window_marginals_are_exact_on_expected_counts_and_match_the_table_cells():
    bits = population(1500, d=5, seed=0)
    mech = HadamardSampling(5, 3, 1.0)
    theta = true_coefficients(bits, mech.family)
    drawn = np.full(len(mech.family), 1000, dtype=np.int64)
    drawn[0] = 0
    acc, odd = expected_accumulator(mech, theta, drawn)
    agg = HadamardAggregator(mech)
    window = agg.create()
    t = mech.n_coefficients
    window.cooc.counts = np.concatenate([[acc.n_reports], drawn[1:], odd[1:]])   # fractional odd: linear
    got = window_marginals(agg, window)
    n = acc.n_reports
    for i, s in enumerate(mech.family):
        truth = n * (bits[:, list(s)].all(axis=1).mean() if s else 1.0)
        assert got.means[i] == pytest.approx(truth, abs=1e-7)
    # noisy counts: every set's estimate and variance are the all-ones cell of its table
    real = HadamardAccumulator(mech).add(*randomize_hadamard(bits, mech, np.random.default_rng(9)))
    window = agg.create()
    window.cooc.counts = np.concatenate([[real.n_reports], real.drawn[1:t + 1], real.odd[1:]])
    got = window_marginals(agg, window)
    est = estimate_hadamard(real)
    for i, s in enumerate(mech.family):
        if s:
            table = est.table(s)
            assert got.means[i] == pytest.approx(table.estimate[-1], rel=1e-12)
            assert got.variances[i] == pytest.approx(table.variances[-1], rel=1e-12)
    low, high = got.intervals(0.95)
    assert np.all(low[1:] < got.means[1:]) and np.all(got.means[1:] < high[1:])


@pytest.mark.statistical
def test_window_marginals_cover_at_their_level():
    """300 seeded windows x 25 sets of 1500 reports: the 95% intervals of every all-ones count from
    the plugged-in closed-form variances cover the truth at their level (binomial band,
    tests/stats.py). A variance 20% low (or the sampling term dropped) fails it."""
    bits = population(1500, d=5, seed=0)
    mech = HadamardSampling(5, 3, 2.0)
    agg = HadamardAggregator(mech)
    truth = np.array([bits[:, list(s)].all(axis=1).sum() if s else len(bits) for s in mech.family])[1:]
    rng = np.random.default_rng(21)
    covered = []
    for _ in range(300):
        got = window_marginals(agg, agg.add_packed(agg.create(), encode_reports(bits, mech, rng)))
        low, high = got.intervals(0.95)
        covered.append((low[1:] <= truth) & (truth <= high[1:]))
    assert_coverage(np.array(covered).ravel(), 0.95)
