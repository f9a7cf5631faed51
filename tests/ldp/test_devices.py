"""The bound per device (ldp/devices.py and the open accumulators of ldp/aggregate.py): at most M
reports per device, the same ones whatever the order and grouping of the merges, and state bounded
by the devices."""
import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import ReportAggregator
from ldp_marginals.ldp.versioned import ACCUMULATOR, accumulator_from_bytes, accumulator_to_bytes, unpack
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.devices import merge_tables, report_ranks, table_of
from ldp_marginals.ldp.sets import SetFamily

N_BITS = 5


def _aggregator(bound, client_extremes=()):
    return ReportAggregator(SetFamily(N_BITS, 2), ChannelSet.uniform(Channel(0.25, 0.75), N_BITS),
                            extremes=(("or", (0, 1, 2)),), client_extremes=client_extremes,
                            device_bound=bound, collection_key=12345)


def _reports(rng, n=400, devices=30):
    packed = rng.integers(0, 1 << N_BITS, (n, 1)).astype(np.uint8)
    # heavy-tailed activity: a few devices send most reports
    owners = np.minimum(rng.zipf(1.6, n) - 1, devices - 1).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return packed, owners


def _kept_by_definition(packed, owners, bound, key=12345):
    """The bottom M by (rank, bits) per device, from the definition, one report at a time."""
    ranks = report_ranks(key, owners, packed)
    out = {}
    for r in range(len(owners)):
        out.setdefault(int(owners[r]), []).append((int(ranks[r]), bytes(packed[r])))
    return sorted((dev, item) for dev, items in out.items() for item in sorted(items)[:bound])


@pytest.mark.parametrize("bound", [1, 3])
def test_each_device_keeps_its_bottom_m_by_rank_and_the_rest_is_counted(bound):
    rng = np.random.default_rng(7)
    packed, owners = _reports(rng)
    table = table_of(owners, report_ranks(12345, owners, packed), packed, bound)
    got = sorted((int(o), (int(r), bytes(b))) for o, r, b in zip(table.owner, table.rank, table.bits))
    assert got == _kept_by_definition(packed, owners, bound)
    _, per_device = np.unique(table.owner, return_counts=True)
    assert per_device.max() == bound and table.n_devices == np.unique(owners).size
    assert table.over_bound == len(owners) - table.kept > 0


def test_any_split_order_and_grouping_of_merges_keeps_the_same_reports_and_counts():
    rng = np.random.default_rng(11)
    packed, owners = _reports(rng, n=600)
    agg = _aggregator(2, client_extremes=(("or", (0, 1)),))
    whole = agg.settle(agg.add_devices(agg.create_open(), packed, owners))
    for seed in range(5):
        r = np.random.default_rng(seed)
        order = r.permutation(len(owners))
        cuts = np.sort(r.choice(np.arange(1, len(owners)), size=12, replace=False))
        parts = [agg.add_devices(agg.create_open(), packed[idx], owners[idx]) for idx in np.split(order, cuts)]
        while len(parts) > 1:   # random pairs merged, as a combine tree with fanout would
            i, j = sorted(r.choice(len(parts), size=2, replace=False))
            merged = agg.merge(iter([agg.create_open(), parts[i], parts[j]]))   # a generator, like Beam's
            parts = [p for k, p in enumerate(parts) if k not in (i, j)] + [merged]
        got = agg.settle(parts[0])
        np.testing.assert_array_equal(got.cooc.counts, whole.cooc.counts)
        np.testing.assert_array_equal(got.extreme_sums, whole.extreme_sums)   # summed in table order: exact
        np.testing.assert_array_equal(got.clients, whole.clients)
        np.testing.assert_array_equal(got.client_states, whole.client_states)
        assert (got.n, got.n_devices, got.over_bound) == (whole.n, whole.n_devices, whole.over_bound)
    assert whole.n == sum(min(2, c) for c in np.unique(owners, return_counts=True)[1])


def test_a_chatty_device_adds_at_most_m_reports_and_state_grows_with_devices_not_reports():
    agg = _aggregator(1)
    rng = np.random.default_rng(3)
    acc = agg.create_open()
    for _ in range(50):   # one device sends 50 batches of 200 reports, 9 others one report each
        agg.add_devices(acc, rng.integers(0, 32, (200, 1)).astype(np.uint8), np.full(200, 7, dtype=np.uint64))
    agg.add_devices(acc, rng.integers(0, 32, (9, 1)).astype(np.uint8), np.arange(100, 109, dtype=np.uint64))
    assert acc.devices.kept == 10 and acc.devices.bits.shape == (10, 1)
    assert acc.received == 10_009 and acc.n_devices == 10
    settled = agg.settle(acc)
    assert (settled.n, settled.over_bound, settled.received, settled.devices) == (10, 9_999, 10_009, None)


def test_an_open_accumulator_survives_its_state_bytes_and_pickle():
    import pickle
    rng = np.random.default_rng(5)
    packed, owners = _reports(rng)
    agg = _aggregator(2)
    acc = agg.add_devices(agg.create_open(), packed, owners)
    for back in (accumulator_from_bytes(accumulator_to_bytes(acc, agg), agg), pickle.loads(pickle.dumps(acc))):
        more = agg.add_devices(agg.create_open(), packed[:50], owners[:50] + np.uint64(1))
        a = agg.settle(agg.merge([back, more]))
        b = agg.settle(agg.merge([agg.add_devices(agg.create_open(), packed, owners),
                                  agg.add_devices(agg.create_open(), packed[:50], owners[:50] + np.uint64(1))]))
        np.testing.assert_array_equal(a.cooc.counts, b.cooc.counts)
        assert a.over_bound == b.over_bound
    settled = agg.settle(acc)
    back = accumulator_from_bytes(accumulator_to_bytes(settled, agg), agg)
    assert back.devices is None and (back.n_devices, back.over_bound) == (settled.n_devices, settled.over_bound)


def test_without_a_bound_the_state_bytes_carry_no_device_section():
    agg = ReportAggregator(SetFamily(N_BITS, 2), ChannelSet.uniform(Channel(0.25, 0.75), N_BITS))
    _, header, _ = unpack(ACCUMULATOR, accumulator_to_bytes(agg.create(), agg))
    assert "devices" not in header and agg.create_open().devices is None
    bound = _aggregator(1)
    _, header, _ = unpack(ACCUMULATOR, accumulator_to_bytes(bound.create_open(), bound))
    assert header["devices"]["open"] and header["shape"]["max_reports_per_device"] == 1


def test_open_and_settled_do_not_mix_silently():
    agg = _aggregator(1)
    with pytest.raises(ValueError, match="open accumulator merges only open ones"):
        agg.merge([agg.create_open(), agg.create()])
    with pytest.raises(ValueError, match="device_bound must be None or an int >= 1, got device_bound=0"):
        _aggregator(0)


def test_merge_tables_of_one_table_is_that_table():
    rng = np.random.default_rng(1)
    packed, owners = _reports(rng, n=20)
    t = table_of(owners, report_ranks(1, owners, packed), packed, 1)
    assert merge_tables([t], 1) is t


@pytest.mark.parametrize("bound", [1, 3])
@pytest.mark.parametrize("tied", [False, True])
def test_the_compiled_selection_equals_the_sort(bound, tied, monkeypatch):
    """The compiled pass (its table grown from 16 slots past 100 owners) keeps what the sort keeps, in the
    same order; with ranks forced into ties (which real ranks have with probability 2^-64), the earlier
    report first, as the stable sort."""
    from ldp_marginals.ldp import _compiled, devices
    rng = np.random.default_rng(9)
    packed, owners = _reports(rng, n=3000, devices=500)
    ranks = report_ranks(3, owners, packed)
    if tied:
        ranks = ranks % np.uint64(3)
    compiled = devices._select(owners, ranks, bound)
    monkeypatch.setattr(_compiled, "AVAILABLE", False)
    plain = devices._select(owners, ranks, bound)
    assert np.unique(owners).size > 100 and compiled[2].size < owners.size
    for a, b in zip(compiled, plain):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("key", [0, 12345, -5, (1 << 64) - 1, (1 << 63) + 7])
def test_the_compiled_ranks_equal_their_numpy_definition(key, monkeypatch):
    from ldp_marginals.ldp import _compiled
    rng = np.random.default_rng(4)
    for width in (1, 4, 33):
        owners = rng.integers(0, 1 << 64, 500, dtype=np.uint64)
        packed = rng.integers(0, 256, (500, width), dtype=np.uint8)
        compiled = report_ranks(key, owners, packed)
        monkeypatch.setattr(_compiled, "AVAILABLE", False)
        plain = report_ranks(key, owners, packed)
        monkeypatch.setattr(_compiled, "AVAILABLE", True)
        assert compiled.dtype == plain.dtype == np.uint64
        np.testing.assert_array_equal(compiled, plain)
