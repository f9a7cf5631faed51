"""The client sample of ``reports_per_client`` (c): the extremes over clients take, per client, the OR
(AND) over exactly its c reports of smallest rank, a keyed hash of (collection, client, event ms) blind
to the bits; a client with fewer reports is left out. The estimand is the number of clients (of those
with at least c reports) whose OR (AND) over their c sampled reports' true bits is 1; the estimate must
be unbiased for it, in any order and any split of the reports."""
import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import ReportAggregator, client_key, sampled_clients
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.sets import SetFamily
from tests.stats import assert_mean_close

N_BITS, C = 3, 3
KEY = client_key("sampled")


def _aggregator(c=C, channel=(0.1, 0.9)):
    return ReportAggregator(SetFamily(N_BITS, 1), ChannelSet([Channel(*channel)] * N_BITS), (),
                            (("or", (0, 1, 2)), ("and", (0, 1))), None, KEY, c)


def _population(rng, n_clients=300, most=10):
    """Each client 1..``most`` reports with random event times and true bits (the bits of one client's
    reports correlated: its own rate), fixed across the replicates."""
    sizes = rng.integers(1, most + 1, n_clients)
    owner = np.repeat(np.arange(n_clients), sizes)
    keys = np.array([client_key(f"c{i}") for i in range(n_clients)], dtype=np.uint64)[owner]
    ms = 1_767_225_600_000 + rng.integers(0, 86_400_000, owner.size)
    rate = rng.uniform(0.05, 0.6, n_clients)[owner]
    truth = (rng.random((owner.size, N_BITS)) < rate[:, None]).astype(np.uint8)
    return owner, keys, ms, truth


def _estimand(owner, ranks, truth, c=C):
    """Per extreme, the number of clients with >= c reports whose OR (AND) over the true bits of their c
    reports of smallest rank is 1, and those clients' count."""
    or_total = and_total = kept = 0
    for o in np.unique(owner):
        idx = np.flatnonzero(owner == o)
        if idx.size < c:
            continue
        pick = idx[np.argsort(ranks[idx], kind="stable")[:c]]
        kept += 1
        or_total += int(truth[pick][:, [0, 1, 2]].any())
        and_total += int(truth[pick][:, [0, 1]].all())
    return np.array([or_total, and_total]), kept


def _noisy(rng, truth, p=0.1, q=0.9):
    return (rng.random(truth.shape) < np.where(truth == 1, q, p)).astype(np.uint8)


@pytest.mark.statistical
def test_the_sampled_or_and_and_over_clients_are_unbiased_for_the_or_and_over_c_reports():
    rng = np.random.default_rng(47)
    owner, keys, ms, truth = _population(rng, n_clients=1000)
    ranks = report_ranks(KEY, keys, ms)
    want, kept = _estimand(owner, ranks, truth)
    agg = _aggregator()
    estimates, variances = [], []
    for _ in range(400):
        acc = agg.add_packed(agg.create(), pack_bits(_noisy(rng, truth)), keys, None, ranks)
        sample = sampled_clients([acc], C)
        assert sample.keys.size == kept and sample.short == np.unique(owner).size - kept
        sums = agg.client_sums(acc)
        estimates.append([s for s, _ in sums])
        variances.append([v for _, v in sums])
    # the variance fields are unbiased for the estimate's variance: their mean sets the band
    assert_mean_close(np.array(estimates), want, np.mean(variances, axis=0))


def test_the_sample_is_the_same_in_any_order_and_split_and_reads_no_bits():
    rng = np.random.default_rng(3)
    owner, keys, ms, truth = _population(rng, n_clients=200)
    noisy = pack_bits(_noisy(rng, truth))
    ranks = report_ranks(KEY, keys, ms)
    agg = _aggregator()
    whole = agg.add_packed(agg.create(), noisy, keys, None, ranks)
    order = rng.permutation(owner.size)
    parts = np.array_split(order, 7)
    accs = [agg.add_packed(agg.create(), noisy[p], keys[p], None, ranks[p]) for p in parts]
    merged = agg.merge(accs)
    for a, b in zip(agg.client_sums(whole), agg.client_sums(merged)):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-9)
    assert np.array_equal(sampled_clients([whole], C).keys, sampled_clients([merged], C).keys)
    # other bits, the same ranks: the same clients and the same reports sampled (by rank only)
    other = agg.add_packed(agg.create(), pack_bits(_noisy(rng, truth)), keys, None, ranks)
    assert np.array_equal(np.sort(other.sample_rank), np.sort(whole.sample_rank))


def test_a_client_with_fewer_than_c_reports_or_a_tie_at_the_c_th_rank_is_left_out():
    agg = _aggregator(c=2)
    keys = np.array([1, 1, 2, 3, 3, 3, 4, 4, 4], dtype=np.uint64)
    ranks = np.array([5, 9, 1, 2, 7, 7, 3, 4, 8], dtype=np.uint64)   # client 3: its 2nd and 3rd ranks tie
    acc = agg.add_packed(agg.create(), np.zeros((9, 1), np.uint8), keys, None, ranks)
    sample = sampled_clients([acc], 2)
    assert sample.keys.tolist() == [1, 4] and sample.short == 2
    # left out: client 2 (one report), client 3 (all three), client 4's third report
    assert sample.left_out == [3]
    assert (sample.states[:, :, 6] == 2).all()


def test_compositions_shared_by_too_few_clients_are_left_out_with_their_reports():
    agg = _aggregator(c=2)
    a = agg.add_packed(agg.create(), np.zeros((8, 1), np.uint8), np.array([1, 1, 2, 2, 3, 3, 4, 4], np.uint64),
                       None, np.arange(8, dtype=np.uint64))
    b = agg.add_packed(agg.create(), np.zeros((2, 1), np.uint8), np.array([5, 5], np.uint64), None,
                       np.arange(2, dtype=np.uint64))
    c_ = agg.add_packed(agg.create(), np.zeros((2, 1), np.uint8), np.array([6, 7], np.uint64), None,
                        np.arange(2, dtype=np.uint64))
    # atoms: A holds clients 1-4 (2 each) and 6's and 7's first; B client 5 (2); C 6's and 7's second
    a6 = agg.add_packed(agg.create(), np.zeros((2, 1), np.uint8), np.array([6, 7], np.uint64), None,
                        np.array([0, 0], dtype=np.uint64))
    atoms = [agg.merge([a, a6]), b, c_]
    sample = sampled_clients(atoms, 2, min_clients=3)
    assert sample.keys.tolist() == [1, 2, 3, 4] and sample.split == 3
    assert sample.left_out == [2, 1, 2]


def test_the_sample_crosses_a_process_in_the_versioned_record_and_another_c_is_refused():
    from ldp_marginals.ldp.versioned import accumulator_from_bytes, accumulator_to_bytes
    rng = np.random.default_rng(5)
    owner, keys, ms, truth = _population(rng, n_clients=50)
    agg = _aggregator()
    acc = agg.add_packed(agg.create(), pack_bits(_noisy(rng, truth)), keys, None, report_ranks(KEY, keys, ms))
    back = accumulator_from_bytes(accumulator_to_bytes(acc, agg), agg)
    for name in ("sample_owner", "sample_rank", "sample_states"):
        assert np.array_equal(getattr(back, name), getattr(acc, name))
    assert agg.client_sums(back) == agg.client_sums(acc)
    assert np.array_equal(accumulator_from_bytes(accumulator_to_bytes(acc)).sample_states, acc.sample_states)
    plain = _aggregator(c=None)   # a state without a sample: refused, naming what changed
    old = plain.add_packed(plain.create(), pack_bits(_noisy(rng, truth)), keys, None)
    with pytest.raises(ValueError, match="reports_per_client"):
        accumulator_from_bytes(accumulator_to_bytes(old, plain), agg)
    with pytest.raises(ValueError, match="reports_per_client"):
        accumulator_from_bytes(accumulator_to_bytes(acc, agg), _aggregator(c=2))


def test_reports_per_client_is_checked_and_defaults_to_the_device_bound():
    from ldp_marginals.schemas.config import parse_config
    base = {"collection": "x", "features": [{"name": "a", "type": "boolean"}], "channel": {"p": 0.25, "q": 0.75},
            "max_order": 1, "window": {"type": "fixed", "size_seconds": 60}, "min_reports": 5,
            "extremes": [{"name": "e", "op": "or", "bits": ["a"], "over": "client"}]}
    assert parse_config(base).client_sample is None
    assert parse_config(dict(base, reports_per_client=3)).client_sample == 3
    assert parse_config(dict(base, privacy={"unit": "device", "max_reports_per_device": 4})).client_sample == 4
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="reports_per_client"):
            parse_config(dict(base, reports_per_client=bad))
    with pytest.raises(ValueError, match="reports_per_client must be at most privacy.max_reports_per_device=2"):
        parse_config(dict(base, reports_per_client=3, privacy={"unit": "device", "max_reports_per_device": 2}))
    with pytest.raises(ValueError, match="has none"):
        parse_config(dict(base, extremes=[], reports_per_client=3))
