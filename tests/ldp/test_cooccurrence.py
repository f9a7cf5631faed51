import pickle

import numpy as np
import pytest

from ldp_marginals.ldp import cooccurrence as cooc
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator, count_bits, count_packed
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.sets import SetFamily


def brute_counts(bits, family):
    return np.array([bits[:, list(s)].all(axis=1).sum() if s else bits.shape[0] for s in family])


def test_canonical_order_and_index_round_trip():
    fam = SetFamily.all_up_to(4, 2)
    assert list(fam) == [(), (0,), (1,), (2,), (3,), (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    for i, s in enumerate(fam):
        assert fam.index(s) == i and fam[i] == s
    assert fam.index([3, 1]) == fam.index((1, 3))
    assert (0, 1, 2) not in fam
    with pytest.raises(ValueError, match=r"set \[0, 1, 2\] was not counted \(max_order=2\)"):
        fam.index((0, 1, 2))
    with pytest.raises(ValueError, match=r"set bits must be in \[0, 4\), got set=\(4,\)"):
        fam.index((4,))
    with pytest.raises(ValueError, match=r"max_order must be <= n_bits=4, got max_order=5"):
        SetFamily(4, 5)


def test_explicit_sets_are_downward_closed():
    fam = SetFamily(6, 1, extra=[(5, 2, 0), (1, 3)])
    assert (0, 2, 5) in fam and (0, 5) in fam and (2, 5) in fam and (1, 3) in fam
    assert (0, 1) not in fam
    for m in range(fam.top_order + 1):
        sub = fam.subset_indices(m)
        assert (sub >= 0).all()
        assert np.array_equal(sub[:, -1], np.arange(fam.order_slice(m).start, fam.order_slice(m).stop))
    assert pickle.loads(pickle.dumps(fam)) == fam
    assert len(pickle.dumps(fam)) < 300  # pickled as its specification


@pytest.mark.parametrize("n, d, family", [
    (1000, 7, SetFamily.all_up_to(7, 3)),
    (333, 9, SetFamily.all_up_to(9, 4)),
    (500, 10, SetFamily(10, 2, extra=[(0, 4, 7, 9), (1, 2, 3)])),
    (100, 5, SetFamily.all_up_to(5, 1)),
    (0, 5, SetFamily.all_up_to(5, 3)),
])
def test_counts_equal_brute_force(n, d, family):
    rng = np.random.default_rng(n + d)
    bits = (rng.random((n, d)) < rng.random(d)).astype(np.uint8)
    assert np.array_equal(count_bits(bits, family), brute_counts(bits, family))
    assert np.array_equal(count_packed(pack_bits(bits), family), brute_counts(bits, family))


def test_chunk_boundaries_do_not_change_counts(monkeypatch):
    rng = np.random.default_rng(5)
    bits = (rng.random((1001, 8)) < 0.6).astype(np.uint8)
    fam = SetFamily.all_up_to(8, 3)
    expected = brute_counts(bits, fam)
    monkeypatch.setattr(cooc, "_GRAM_ROWS", 64)
    monkeypatch.setattr(cooc, "_SLICE_ROWS", 72)  # not a multiple of 64: exercises word padding
    assert np.array_equal(count_bits(bits, fam), expected)


def test_the_docstring_states_the_chunk_size_the_code_uses():
    """The module's docstring gives the Gram kernel's chunk of rows: the one the code uses, below the
    2**24 that float32 exactness allows."""
    rows = cooc._GRAM_ROWS
    assert rows & (rows - 1) == 0 and rows < 2 ** 24
    assert f"per chunk of at most 2**{rows.bit_length() - 1} rows" in " ".join(cooc.__doc__.split())


def test_accumulator_merge_of_shards_equals_one_pass():
    rng = np.random.default_rng(11)
    bits = (rng.random((2000, 6)) < 0.4).astype(np.uint8)
    fam = SetFamily.all_up_to(6, 3)
    whole = CooccurrenceAccumulator(fam).add_bits(bits)
    cuts = np.sort(rng.choice(2000, 4, replace=False))
    shards = [CooccurrenceAccumulator(fam).add_packed(pack_bits(part)) for part in np.split(bits, cuts)]
    first_before = shards[0].counts.copy()
    second_before = shards[1].counts.copy()
    merged = shards[0]
    for other in (s for s in shards[1:]):  # a generator, as Beam may pass
        merged.merge(other)
    assert merged == whole and merged.n == 2000
    assert not np.array_equal(first_before, merged.counts)  # the first was modified ...
    assert np.array_equal(second_before, shards[1].counts)  # ... and only the first
    restored = pickle.loads(pickle.dumps(whole))
    assert restored == whole and restored.count((0, 2)) == whole.count((2, 0))


def test_accumulator_validation():
    acc = CooccurrenceAccumulator(SetFamily.all_up_to(4, 2))
    with pytest.raises(ValueError, match=r"cannot merge accumulators of different set families"):
        acc.merge(CooccurrenceAccumulator(SetFamily.all_up_to(4, 3)))
    with pytest.raises(ValueError, match=r"bits must have shape \(n, 4\), got shape=\(3, 5\)"):
        acc.add_bits(np.zeros((3, 5), np.uint8))
    with pytest.raises(ValueError, match=r"counts must have shape \(11,\), got shape=\(3,\)"):
        CooccurrenceAccumulator(SetFamily.all_up_to(4, 2), [1, 2, 3])
    assert CooccurrenceAccumulator(SetFamily.all_up_to(4, 2)).n == 0


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
def test_compiled_and_numpy_kernels_agree(monkeypatch, compiled):
    monkeypatch.setattr(cooc, "USE_COMPILED", compiled)
    rng = np.random.default_rng(21)
    bits = (rng.random((3000, 12)) < 0.5).astype(np.uint8)
    for fam in (SetFamily.all_up_to(12, 4), SetFamily(12, 2, extra=[(0, 5, 9, 11), (2, 3, 4)])):
        assert np.array_equal(count_bits(bits, fam), brute_counts(bits, fam))
