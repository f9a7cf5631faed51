"""The faster paths of the team's job (issue 48 item 7) give what the paths they replace gave, bit for
bit, so that nothing published changes: the sorts skipped on sorted input (``lexsort_order``,
``unique_inverse``, the client sample's ``bottom_indices``), the states of an extreme over few bits from
a table of bit patterns (``_log_states``), and a client sample's states written as a table of distinct
rows and an index (``versioned.state_table``), compiled and not. Property-based: hypothesis draws the
inputs, sorted or not, with ties."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldp_marginals.ldp import _compiled, aggregate, devices, versioned
from ldp_marginals.ldp.aggregate import ReportAggregator, _log_states, _pattern_states
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.sets import SetFamily

seeds = st.integers(0, 2**32 - 1)


def _keys(rng, n, distinct, presorted):
    owner = rng.integers(0, distinct, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    rank = rng.integers(0, max(n // 2, 1), n).astype(np.uint64)   # ties within an owner
    if presorted:
        order = np.lexsort((rank, owner))
        owner, rank = owner[order], rank[order]
    return owner, rank


def _bottom_indices_before(owner, rank, bound):   # main's bottom_indices (ldp/devices.py), verbatim
    if owner.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((rank, owner))
    own = owner[order]
    starts = np.flatnonzero(np.r_[True, own[1:] != own[:-1]])
    position = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
    return order[position < bound]


@given(seeds, st.integers(0, 300), st.integers(1, 40), st.booleans(), st.integers(1, 14))
def test_the_skipped_sorts_give_the_sorts_answers(seed, n, distinct, presorted, bound):
    rng = np.random.default_rng(seed)
    owner, rank = _keys(rng, n, distinct, presorted)
    atom = np.sort(rng.integers(0, 2, n)) if presorted else rng.integers(0, 2, n)
    for keys in ((rank, owner), (rank, atom, owner), (owner,)):
        assert np.array_equal(devices.lexsort_order(keys), np.lexsort(keys))
    if n:
        uniq, inverse = devices.unique_inverse(owner)
        want, want_inverse = np.unique(owner, return_inverse=True)
        assert np.array_equal(uniq, want) and uniq.dtype == want.dtype
        assert np.array_equal(inverse, want_inverse.reshape(-1))
    assert np.array_equal(devices.bottom_indices(owner, rank, bound), _bottom_indices_before(owner, rank, bound))


def test_the_sorted_check_tells_every_kind_of_disorder():
    a = np.array([1, 1, 2, 2], dtype=np.uint64)
    assert devices.in_lexsort_order((np.array([0, 5, 1, 1]), a))
    assert not devices.in_lexsort_order((np.array([5, 0, 1, 1]), a))     # a secondary key out of order
    assert not devices.in_lexsort_order((np.zeros(4), a[::-1]))           # the primary key out of order
    assert devices.in_lexsort_order((np.zeros(1),)) and devices.in_lexsort_order((np.zeros(0),))


@given(seeds, st.integers(1, 10), st.sampled_from(["or", "and"]), st.integers(0, 3000))
def test_states_from_the_pattern_table_are_the_states_computed_per_report(seed, m, op, extra):
    rng = np.random.default_rng(seed)
    n = (4 << m) + 1 + extra   # past the threshold: the table's path
    bits = (rng.random((n, m)) < rng.random(m)).astype(np.uint8)
    p = rng.uniform(0.0, 0.45, m)
    q = np.where(rng.random(m) < 0.2, 1.0, rng.uniform(0.55, 1.0, m))   # q = 1: zero factors, counted
    got = _log_states(op, bits, p, q)
    want = _pattern_states(op, bits, p, q)   # every report's state computed on its own (main's _log_states)
    assert got.shape == want.shape == (n, aggregate.STATE_WIDTH)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


def _states(rng, n, distinct, n_ext=2):
    table = rng.normal(size=(distinct, n_ext, aggregate.STATE_WIDTH))
    table[0, 0, 0] = -0.0   # told apart from 0.0 by its bits
    table[-1, -1, -1] = np.nan
    return table[rng.integers(0, distinct, n)]


@given(seeds, st.integers(1, 2000), st.integers(1, 50))
def test_a_state_table_gives_the_states_back_bit_for_bit_compiled_or_not(seed, n, distinct):
    rng = np.random.default_rng(seed)
    states = _states(rng, n, distinct)
    table, index = versioned._state_table(states)
    assert index.dtype == np.uint16 and table.shape[0] == np.unique(index).size
    assert np.array_equal(table[index].view(np.uint64), states.reshape(n, -1).view(np.uint64))
    if _compiled.AVAILABLE:   # without numba: a sort of the rows' bytes, the same table in the same order
        try:
            _compiled.AVAILABLE = False
            plain_table, plain_index = versioned._state_table(states)
        finally:
            _compiled.AVAILABLE = True
        assert np.array_equal(plain_table.view(np.uint64), table.view(np.uint64))
        assert np.array_equal(plain_index, index)


@pytest.mark.parametrize("compiled", [True, False])
def test_more_distinct_states_than_an_index_holds_are_written_in_full(compiled, monkeypatch):
    if compiled and not _compiled.AVAILABLE:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(_compiled, "AVAILABLE", compiled)
    states = np.arange((1 << 16) + 1, dtype=np.float64)[:, None, None] * np.ones((1, 1, aggregate.STATE_WIDTH))
    assert versioned._state_table(states) == (None, None)
    assert versioned._state_table(states[:-1])[0].shape[0] == 1 << 16


def _sampled_accumulator(seed=5, n=4000):
    rng = np.random.default_rng(seed)
    agg = ReportAggregator(SetFamily(4, 2), ChannelSet.uniform(Channel.symmetric(0.25), 4),
                           client_extremes=[("or", (0, 1)), ("and", (1, 2, 3))], client_sample=3)
    acc = agg.create()
    packed = rng.integers(0, 16, (n, 1)).astype(np.uint8)
    keys = rng.integers(0, 300, n).astype(np.uint64)
    agg.add_packed(acc, packed, keys, np.ones(n, dtype=bool), ranks=rng.integers(0, 2**63, n).astype(np.uint64))
    return agg, acc


def test_a_sample_written_as_a_table_reads_back_as_written_and_a_record_in_full_still_reads(monkeypatch):
    agg, acc = _sampled_accumulator()
    data = versioned.accumulator_to_bytes(acc, agg)
    assert b'"sample_table"' in data
    back = versioned.accumulator_from_bytes(data, agg)
    for name in ("sample_owner", "sample_rank", "clients"):
        assert np.array_equal(getattr(back, name), getattr(acc, name))
    assert np.array_equal(back.sample_states.view(np.uint64), acc.sample_states.view(np.uint64))
    assert versioned.accumulator_size(acc) == len(versioned.accumulator_to_bytes(acc))   # as the coder sizes it
    monkeypatch.setattr(versioned, "state_table", lambda states: (None, None))   # a record as before: in full
    full = versioned.accumulator_to_bytes(acc, agg)
    assert b'"sample_table"' not in full and len(full) > len(data)
    old = versioned.accumulator_from_bytes(full, agg)
    assert np.array_equal(old.sample_states.view(np.uint64), acc.sample_states.view(np.uint64))


def test_a_merge_that_keeps_a_sample_whole_shares_nothing_it_later_changes():
    agg, acc = _sampled_accumulator()
    states = acc.sample_states.copy()
    merged = agg.merge([agg.create(), acc])
    assert merged.sample_states is acc.sample_states   # kept whole: not copied
    agg2, other = _sampled_accumulator(seed=6)
    agg.merge([merged, other])   # replaces merged's arrays, writes none of them in place
    assert np.array_equal(acc.sample_states.view(np.uint64), states.view(np.uint64))


def _per_report_clients(agg, acc, bits, keys, ranks):
    """main's ``_add_clients`` (ldp/aggregate.py), verbatim: a state per report, then per client a
    bincount of each column, and the client sample cut from every report's state."""
    per_reports = np.empty((keys.size, len(agg.client_extremes), aggregate.STATE_WIDTH))
    p, q = agg.channels.p, agg.channels.q
    for e, (op, cols) in enumerate(agg.client_extremes):
        cols = list(cols)
        per_reports[:, e, :] = _log_states(op, bits[:, cols], p[cols], q[cols])
    agg._add_client_states(acc, keys, per_reports, ranks)


_CLIENT_ARRAYS = ("clients", "client_states", "sample_owner", "sample_rank", "sample_states")


@given(seeds, st.integers(0, 400), st.integers(1, 60), st.booleans(), st.sampled_from([None, 1, 2, 5]),
       st.booleans())
def test_client_sums_from_bit_patterns_are_the_per_report_bincounts_bit_for_bit(seed, extra, distinct, presorted,
                                                                                sample, earlier):
    """The team's settle (issue 48 item 7): per client extreme over few bits, each client's sums from one
    compiled pass over the reports' bit patterns and states made only for the sampled reports give the
    accumulator the states per report gave, every array bit for bit; into an empty accumulator (a slice
    settled) and into one holding clients and a sample already (``earlier``)."""
    if not _compiled.AVAILABLE:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(seed)
    d = 7
    p = rng.uniform(0.0, 0.45, d)
    q = np.where(rng.random(d) < 0.2, 1.0, rng.uniform(0.55, 1.0, d))   # q = 1: zero factors, counted
    extremes = [("or", (0, 1, 2)), ("and", (4, 2)), ("or", (6,)), ("and", (0, 1, 2, 3, 4, 5))]
    agg = ReportAggregator(SetFamily(d, 1), ChannelSet(tuple(Channel(a, b) for a, b in zip(p, q))),
                           client_extremes=extremes, client_sample=sample)
    n = (4 << 6) + 1 + extra   # past the widest extreme's threshold: the patterns' path
    owner, rank = _keys(rng, n, distinct, presorted)
    bits = (rng.random((n, d)) < rng.random(d)).astype(np.uint8)
    got, want = agg.create(), agg.create()
    if earlier:
        m = 50   # below the threshold: both take the per-report path here
        before = _keys(rng, m, distinct + 3, False), (rng.random((m, d)) < 0.5).astype(np.uint8)
        for acc in (got, want):
            _per_report_clients(agg, acc, before[1], *before[0])
    agg._add_clients(got, bits, owner, None, rank)
    _per_report_clients(agg, want, bits, owner, rank)
    for name in _CLIENT_ARRAYS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name


def test_a_settled_device_table_takes_the_patterns_path_and_keeps_its_per_report_result(monkeypatch):
    """A whole slice settled (every kept report names its device) goes through the compiled pass and
    gives what the per-report states gave."""
    if not _compiled.AVAILABLE:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(11)
    agg = ReportAggregator(SetFamily(5, 2), ChannelSet.uniform(Channel.symmetric(0.25), 5),
                           client_extremes=[("or", (0, 1, 2)), ("and", (0, 1, 2))], device_bound=4,
                           client_sample=1)
    n = 3000
    packed = pack_bits((rng.random((n, 5)) < 0.4).astype(np.uint8))
    open_acc = agg.add_devices(agg.create_open(), packed, rng.integers(0, 400, n).astype(np.uint64),
                               rng.integers(0, 10_000, n).astype(np.int64))
    calls = []
    fast = ReportAggregator._add_client_patterns
    monkeypatch.setattr(ReportAggregator, "_add_client_patterns", lambda *a: calls.append(1) or fast(*a))
    got = agg.settle(open_acc)
    monkeypatch.setattr(ReportAggregator, "_add_client_patterns", None)   # forced off: the per-report path
    monkeypatch.setattr(_compiled, "AVAILABLE", False)
    want = agg.settle(open_acc)
    assert calls == [1]
    for name in _CLIENT_ARRAYS:
        assert np.array_equal(getattr(got, name).view(np.uint8), getattr(want, name).view(np.uint8)), name
    assert np.array_equal(got.cooc.counts, want.cooc.counts) and np.array_equal(got.kept, want.kept)
