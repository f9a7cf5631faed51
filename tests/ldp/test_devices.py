"""The bound per device (ldp/devices.py and the open accumulators of ldp/aggregate.py): at most M
reports per device, chosen blind to their content (ranks hash the device and the event ms), the
same ones whatever the order and grouping of the merges, and state bounded by the devices."""
import json

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import ReportAggregator
from ldp_marginals.ldp.versioned import ACCUMULATOR, HEAD, accumulator_from_bytes, accumulator_to_bytes, unpack
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.devices import NO_CEILING, merge_tables, report_ranks, table_of, trimmed
from ldp_marginals.ldp.sets import SetFamily

N_BITS = 5
T0 = 1_700_000_000_000


def _aggregator(bound, client_extremes=()):
    return ReportAggregator(SetFamily(N_BITS, 2), ChannelSet.uniform(Channel(0.25, 0.75), N_BITS),
                            extremes=(("or", (0, 1, 2)),), client_extremes=client_extremes,
                            device_bound=bound, collection_key=12345)


def _reports(rng, n=400, devices=30, span_ms=60):
    """``(packed, owners, event_ms)``: times within ``span_ms`` milliseconds, so that chatty devices
    stamp several reports in one millisecond (equal ranks: the tie rule is exercised)."""
    packed = rng.integers(0, 1 << N_BITS, (n, 1)).astype(np.uint8)
    # heavy-tailed activity: a few devices send most reports
    owners = np.minimum(rng.zipf(1.6, n) - 1, devices - 1).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return packed, owners, T0 + rng.integers(0, span_ms, n)


def _kept_by_definition(owners, event_ms, bound, key=12345):
    """``{device: sorted indices of the reports it keeps}`` from the definition, one device at a time:
    the reports whose rank is below the (M+1)-th smallest rank of its reports (all with at most M)."""
    ranks = report_ranks(key, owners, event_ms)
    out = {}
    for dev in np.unique(owners):
        idx = np.flatnonzero(owners == dev)
        r = np.sort(ranks[idx])
        ceiling = r[bound] if r.size > bound else NO_CEILING
        out[int(dev)] = sorted(int(i) for i in idx[ranks[idx] < ceiling])
    return out


def _kept_of(table, owners, event_ms, key=12345):
    """The same read from a table: its candidates matched to the reports of their (device, rank). Two
    reports of a device with one rank (one millisecond) are kept both or neither, so a candidate's
    match is its whole tie group, and the table holds one candidate per report of it."""
    ranks = report_ranks(key, owners, event_ms)
    out = {int(d): set() for d in table.devices}
    pairs, counts = np.unique(np.stack([table.owner, table.rank]), axis=1, return_counts=True)
    for (o, r), c in zip(pairs.T, counts):
        idx = np.flatnonzero((owners == o) & (ranks == r))
        assert idx.size == c
        out[int(o)].update(int(i) for i in idx)
    return {d: sorted(v) for d, v in out.items()}


@pytest.mark.parametrize("bound", [1, 3])
def test_each_device_keeps_its_bottom_m_by_rank_and_the_rest_is_counted(bound):
    rng = np.random.default_rng(7)
    packed, owners, ms = _reports(rng)
    table = table_of(owners, report_ranks(12345, owners, ms), packed, bound)
    want = _kept_by_definition(owners, ms, bound)
    assert _kept_of(table, owners, ms) == {d: v for d, v in want.items()}
    _, per_device = np.unique(table.owner, return_counts=True)
    assert per_device.max() == bound and table.devices.size == np.unique(owners).size
    assert table.over_bound == len(owners) - table.kept > 0
    # ties straddling the bound were met, and left out whole (counted beyond the bound)
    assert any(len(v) < min(bound, int((owners == d).sum())) for d, v in want.items())


def test_the_kept_reports_do_not_depend_on_their_bits():
    """Whatever a device's reports say, the same of them count (on main the rank hashed the bits: the
    kept report was the one whose bits hashed lowest, the OR or the AND of a device's reports)."""
    rng = np.random.default_rng(21)
    packed, owners, ms = _reports(rng, n=2000, devices=100, span_ms=100_000)
    agg = _aggregator(2)
    kept = []
    for flip in range(4):
        bits = packed if flip == 0 else rng.integers(0, 1 << N_BITS, packed.shape).astype(np.uint8)
        table = agg.add_devices(agg.create_open(), bits, owners, ms).devices
        kept.append(_kept_of(table, owners, ms))
    assert kept[0] == kept[1] == kept[2] == kept[3]
    assert sum(len(v) for v in kept[0].values()) < len(owners)


def test_reports_in_one_millisecond_are_kept_both_or_neither():
    """The tie rule: a device's reports of one millisecond share a rank; a group that straddles the
    M-th place is left out whole and counted beyond the bound (no rule among them could avoid reading
    their bits)."""
    agg = _aggregator(2)
    dev = np.full(3, 99, dtype=np.uint64)
    bits = np.array([[1], [2], [3]], dtype=np.uint8)
    same = agg.settle(agg.add_devices(agg.create_open(), bits, dev, np.full(3, T0)))
    assert (same.n, same.over_bound, same.n_devices) == (0, 3, 0)
    two = agg.settle(agg.add_devices(agg.create_open(), bits[:2], dev[:2], np.full(2, T0)))
    assert (two.n, two.over_bound) == (2, 0)
    # one report alone and two in one millisecond: which survives depends on the two ranks only
    ms = np.array([T0, T0 + 1, T0 + 1])
    r = report_ranks(12345, dev, ms)
    mixed = agg.settle(agg.add_devices(agg.create_open(), bits, dev, ms))
    assert (mixed.n, mixed.over_bound) == ((1, 2) if r[0] < r[1] else (2, 1))


def test_any_split_order_and_grouping_of_merges_keeps_the_same_reports_and_counts():
    rng = np.random.default_rng(11)
    packed, owners, ms = _reports(rng, n=600)
    agg = _aggregator(2, client_extremes=(("or", (0, 1)),))
    whole = agg.settle(agg.add_devices(agg.create_open(), packed, owners, ms))
    for seed in range(5):
        r = np.random.default_rng(seed)
        order = r.permutation(len(owners))
        cuts = np.sort(r.choice(np.arange(1, len(owners)), size=12, replace=False))
        parts = [agg.add_devices(agg.create_open(), packed[idx], owners[idx], ms[idx]) for idx in np.split(order, cuts)]
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
    want = _kept_by_definition(owners, ms, 2)
    assert whole.n == sum(len(v) for v in want.values())
    assert whole.n < sum(min(2, c) for c in np.unique(owners, return_counts=True)[1])   # ties were met


def test_a_chatty_device_adds_at_most_m_reports_and_state_grows_with_devices_not_reports():
    agg = _aggregator(1)
    rng = np.random.default_rng(3)
    acc = agg.create_open()
    for b in range(50):   # one device sends 50 batches of 200 reports, 9 others one report each
        agg.add_devices(acc, rng.integers(0, 32, (200, 1)).astype(np.uint8), np.full(200, 7, dtype=np.uint64),
                        T0 + 200 * b + np.arange(200))
    agg.add_devices(acc, rng.integers(0, 32, (9, 1)).astype(np.uint8), np.arange(100, 109, dtype=np.uint64),
                    np.full(9, T0))
    assert acc.devices.kept == 10 and acc.devices.bits.shape == (10, 1)
    assert acc.received == 10_009 and acc.n_devices == 10 and acc.devices.ceiling.size == 10
    settled = agg.settle(acc)
    assert (settled.n, settled.over_bound, settled.received, settled.devices) == (10, 9_999, 10_009, None)


def test_the_cut_after_released_increments_is_blind_and_keeps_ties_whole():
    """``trimmed``: a device that already used some of its bound keeps, of its candidates, those with
    at most what is left of the bound ranking at or below them (a millisecond's reports both or
    neither), whatever their bits."""
    rng = np.random.default_rng(17)
    packed, owners, ms = _reports(rng, n=800, devices=40, span_ms=30)
    ranks = report_ranks(12345, owners, ms)
    cut_sizes = set()
    for bits in (packed, np.zeros_like(packed)):
        table = table_of(owners, ranks, bits, 3)
        used = np.ones(table.devices.size, dtype=np.int64)   # each device had 1 report released before
        cut = trimmed(table, table.devices, used, 3)
        for d in table.devices:
            cands = table.rank[table.owner == d]
            want = np.sort(cands[[(cands <= x).sum() <= 2 for x in cands]])
            np.testing.assert_array_equal(np.sort(cut.rank[cut.owner == d]), want)
            cut_sizes.add(want.size)
        assert cut.over_bound == table.seen.sum() - cut.kept
    assert cut_sizes >= {0, 2}   # a tie straddling the cut was left out whole, and pairs kept


def test_an_open_accumulator_survives_its_state_bytes_and_pickle():
    import pickle
    rng = np.random.default_rng(5)
    packed, owners, ms = _reports(rng)
    agg = _aggregator(2)
    acc = agg.add_devices(agg.create_open(), packed, owners, ms)
    for back in (accumulator_from_bytes(accumulator_to_bytes(acc, agg), agg), pickle.loads(pickle.dumps(acc))):
        np.testing.assert_array_equal(back.devices.ceiling, acc.devices.ceiling)
        assert (back.devices.ceiling < NO_CEILING).any()
        more = agg.add_devices(agg.create_open(), packed[:50], owners[:50] + np.uint64(1), ms[:50])
        a = agg.settle(agg.merge([back, more]))
        others = owners[:50] + np.uint64(1)
        b = agg.settle(agg.merge([agg.add_devices(agg.create_open(), packed, owners, ms),
                                  agg.add_devices(agg.create_open(), packed[:50], others, ms[:50])]))
        np.testing.assert_array_equal(a.cooc.counts, b.cooc.counts)
        assert a.over_bound == b.over_bound
    settled = agg.settle(acc)
    back = accumulator_from_bytes(accumulator_to_bytes(settled, agg), agg)
    assert back.devices is None and (back.n_devices, back.over_bound) == (settled.n_devices, settled.over_bound)


def _with_header(data: bytes, edit) -> bytes:
    """``data`` (an accumulator record) with its JSON header edited by ``edit``."""
    _, version, size = HEAD.unpack_from(data)
    header = json.loads(data[HEAD.size:HEAD.size + size])
    edit(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    return HEAD.pack(ACCUMULATOR, version, len(text)) + text + data[HEAD.size + size:]


def test_a_state_ranked_by_the_old_rule_is_refused_not_merged():
    """A device table written when ranks hashed the bits (no ``rank_rule``, no ceilings) cannot mix
    with ranks of event times: refused naming the change, read with or without the config; a state's
    shape without ``rank_rule`` is refused where a resumed job compares it."""
    from ldp_marginals.ldp import versioned
    rng = np.random.default_rng(5)
    packed, owners, ms = _reports(rng, n=50)
    agg = _aggregator(2)
    data = accumulator_to_bytes(agg.add_devices(agg.create_open(), packed, owners, ms), agg)

    def old(header):
        del header["devices"]["rank_rule"]
        del header["shape"]["rank_rule"]
    for reader in (agg, None):
        with pytest.raises(ValueError, match="ranks reports by \\(device, bits\\).*rank_rule"):
            accumulator_from_bytes(_with_header(data, old), reader)
    shape = dict(versioned.accumulator_shape(agg))
    assert shape["rank_rule"] == "event_ms"
    del shape["rank_rule"]
    with pytest.raises(ValueError, match="rank_rule changed: saved rank_rule=None"):
        versioned.check_shape(shape, agg)
    with pytest.raises(ValueError, match="ranks reports by \\(device, bits\\)"):
        state = agg.create_open().devices.__getstate__()
        del state["ceiling"]
        agg.create_open().devices.__setstate__(state)


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
    packed, owners, ms = _reports(rng, n=20)
    t = table_of(owners, report_ranks(1, owners, ms), packed, 1)
    assert merge_tables([t], 1) is t


@pytest.mark.parametrize("bound", [1, 3])
@pytest.mark.parametrize("tied", [False, True])
def test_the_compiled_selection_equals_the_sort(bound, tied, monkeypatch):
    """The compiled pass (its table grown from 16 slots past 100 owners) keeps what the sort keeps, in the
    same order, with the same ceilings, from candidates and from parts' ceilings (entries past
    ``n_real``), and the tables built and merged on it are equal; with ranks forced into ties, the
    earlier report first, as the stable sort."""
    from ldp_marginals.ldp import _compiled, devices
    rng = np.random.default_rng(9)
    packed, owners, ms = _reports(rng, n=3000, devices=500, span_ms=5000)
    ranks = report_ranks(3, owners, ms)
    if tied:
        ranks = ranks % np.uint64(3)
    ceilings = rng.integers(0, 1 << 64, 200, dtype=np.uint64) % (np.uint64(3) if tied else NO_CEILING)
    more_owners = np.concatenate([owners, owners[rng.integers(0, owners.size, 200)]])
    more_ranks = np.concatenate([ranks, ceilings])

    def everything():
        parts = [table_of(owners[i::3], ranks[i::3], packed[i::3], bound) for i in range(3)]
        return (devices._below(owners, ranks, bound) + devices._below(more_owners, more_ranks, bound, owners.size)
                + tuple(vars_of(table_of(owners, ranks, packed, bound))) + tuple(vars_of(merge_tables(parts, bound))))
    compiled = everything()
    monkeypatch.setattr(_compiled, "AVAILABLE", False)
    plain = everything()
    assert np.unique(owners).size > 100 and compiled[3].size < owners.size
    assert (compiled[6] < NO_CEILING).any() and compiled[7].size < compiled[3].size   # the given ceilings cut
    for a, b in zip(compiled, plain):
        np.testing.assert_array_equal(a, b)


def vars_of(table):
    return [table.devices, table.seen, table.ceiling, table.owner, table.rank, table.bits]


@pytest.mark.parametrize("key", [0, 12345, -5, (1 << 64) - 1, (1 << 63) + 7])
def test_the_compiled_ranks_equal_their_numpy_definition(key, monkeypatch):
    from ldp_marginals.ldp import _compiled
    rng = np.random.default_rng(4)
    owners = rng.integers(0, 1 << 64, 500, dtype=np.uint64)
    for ms in (rng.integers(-(1 << 62), 1 << 62, 500), np.full(500, T0), np.arange(500)):
        compiled = report_ranks(key, owners, ms)
        monkeypatch.setattr(_compiled, "AVAILABLE", False)
        plain = report_ranks(key, owners, ms)
        monkeypatch.setattr(_compiled, "AVAILABLE", True)
        assert compiled.dtype == plain.dtype == np.uint64 and (compiled < NO_CEILING).all()
        np.testing.assert_array_equal(compiled, plain)
    with pytest.raises(ValueError, match="event_ms must have one time per device key"):
        report_ranks(key, owners, np.arange(3))
