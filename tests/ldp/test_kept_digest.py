"""The digest of what a settled slice and key kept under the device bound (ldp/devices.py:
kept_digest, carried by ldp/aggregate.py's settled accumulators and ldp/versioned.py's records), which
the release ledger compares between runs (issue 47): it depends on which (device, rank) pairs are
kept and on nothing else, adds over disjoint parts, and survives the state bytes and a pickle."""
import pickle

import numpy as np

from ldp_marginals.ldp.aggregate import ReportAggregator
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.devices import kept_digest
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.versioned import accumulator_from_bytes, accumulator_to_bytes

N_BITS = 4


def _aggregator(bound=1):
    return ReportAggregator(SetFamily(N_BITS, 2), ChannelSet.uniform(Channel(0.25, 0.75), N_BITS),
                            device_bound=bound, collection_key=99)


def _settled(agg, packed, owners):
    """Each report's event ms is a test convention here: 1,767,225,600,000 plus its bits (one report,
    one time, whatever order the reports come in)."""
    packed = np.asarray(packed, dtype=np.uint8)
    acc = agg.add_devices(agg.create_open(), packed.reshape(-1, 1), np.asarray(owners, dtype=np.uint64),
                          1_767_225_600_000 + packed.astype(np.int64))
    return agg.settle(acc)


def test_the_digest_is_of_the_kept_pairs_in_any_order_and_adds_over_parts():
    rng = np.random.default_rng(3)
    owner = rng.integers(0, 2 ** 63, 50, dtype=np.uint64)
    rank = rng.integers(0, 2 ** 63, 50, dtype=np.uint64)
    d = kept_digest(owner, rank)
    order = rng.permutation(50)
    assert d.dtype == np.uint64 and d.shape == (2,)
    assert (kept_digest(owner[order], rank[order]) == d).all()
    assert (kept_digest(owner[:20], rank[:20]) + kept_digest(owner[20:], rank[20:]) == d).all()
    assert (kept_digest(owner[:0], rank[:0]) == 0).all()
    swapped = rank.copy()
    swapped[7] += np.uint64(1)   # one device keeps another rank: another digest, in both lanes
    assert (kept_digest(owner, swapped) != d).all()
    moved = owner.copy()
    moved[[3, 4]] = moved[[4, 3]]   # two devices exchange ranks: another digest
    assert (kept_digest(moved, rank) != d).any()


def test_a_settled_accumulator_carries_the_digest_of_what_it_kept():
    agg = _aggregator()
    owners = [1, 2, 3]
    acc = _settled(agg, [0b0001, 0b0010, 0b0100], owners)
    again = _settled(agg, [0b0100, 0b0010, 0b0001], owners[::-1])   # the same reports, another order
    assert acc.kept.any() and (acc.kept == again.kept).all()
    # device 1 sends one more report: whichever of its two the bound keeps, the counts stay 3 and 3
    both = _settled(agg, [0b0001, 0b0010, 0b0100, 0b1000], owners + [1])
    alone = _settled(agg, [0b1000, 0b0010, 0b0100], owners)
    assert both.n == acc.n == 3 and both.n_devices == 3
    assert (both.kept == acc.kept).all() != (both.kept == alone.kept).all()   # it tells which was kept
    merged = agg.merge([agg.create(), acc, alone])   # settled accumulators add, the digest too
    assert (merged.kept == acc.kept + alone.kept).all()


def test_the_digest_survives_the_state_bytes_and_a_pickle():
    agg = _aggregator(bound=2)
    acc = _settled(agg, [1, 2, 3, 4, 5], [7, 7, 7, 8, 9])
    for back in (accumulator_from_bytes(accumulator_to_bytes(acc, agg), agg), accumulator_from_bytes(
            accumulator_to_bytes(acc)), pickle.loads(pickle.dumps(acc))):
        assert back.kept.dtype == np.uint64 and (back.kept == acc.kept).all()
    plain = ReportAggregator(SetFamily(N_BITS, 2), ChannelSet.uniform(Channel(0.25, 0.75), N_BITS))
    assert b"kept" not in accumulator_to_bytes(plain.create(), plain)   # no bound: no device section
