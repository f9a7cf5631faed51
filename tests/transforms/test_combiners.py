import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ldp_marginals.ldp._kernels import span_hashes
from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.extremes import ExtremeAccumulator
from ldp_marginals.pipelines.simulate import simulate_population
from ldp_marginals.transforms.combiners import CollectionCombineFn


def packed(config, n, seed):
    return simulate_population(config, n, seed=seed).noisy


def test_collection_combine_fn_merges_partials_exactly(small_config):
    fn = CollectionCombineFn(small_config)
    agg = small_config.aggregator
    data = packed(small_config, 1000, 1)
    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(len(data), 3, replace=False))
    shards = []
    for part in np.split(np.arange(len(data)), cuts):
        acc = fn.add_input(fn.create_accumulator(), agg.add_packed(agg.create(), data[part]))
        shards.append(pickle.loads(pickle.dumps(acc)))  # accumulators cross processes
    second = shards[1].cooc.counts.copy()
    merged = fn.extract_output(fn.merge_accumulators(s for s in shards))  # a generator
    assert np.array_equal(shards[1].cooc.counts, second)  # only the first accumulator is modified
    core = CooccurrenceAccumulator(small_config.family).add_packed(data)
    assert merged.cooc == core
    one_pass = agg.add_packed(agg.create(), data)
    assert np.allclose(merged.extreme_sums, one_pass.extreme_sums, rtol=1e-12)
    # the per-report extreme sums equal the core's estimator applied report by report
    bits = np.unpackbits(data, axis=1, bitorder="little")[:, :small_config.layout.n_bits]
    ext = small_config.report_extremes[0]
    cols = list(ext.bits)
    direct = sum(float(ExtremeAccumulator(ext.op).add(b[cols], small_config.channels.p[cols],
                                                      small_config.channels.q[cols]).estimate()) for b in bits)
    assert merged.extreme_sums[0, 0] == pytest.approx(direct, rel=1e-10)


def test_empty_input_gives_a_defined_output(small_config):
    fn = CollectionCombineFn(small_config)
    out = fn.extract_output(fn.create_accumulator())
    assert out.n == 0 and not out.extreme_sums.any() and out.n_clients == 0
    assert small_config.aggregator.client_sums(out) == [(0.0, 0.0)]


def test_client_states_merge_per_client_and_equal_the_core_estimator(small_config):
    """Reports of one client split across batches (and accumulators) give the same per-client
    OR state as all of its bits in one ExtremeAccumulator; the window's sum is over clients."""
    agg = small_config.aggregator
    data = packed(small_config, 600, 3)
    rng = np.random.default_rng(4)
    tokens = [f"c{i}" for i in range(40)]
    codes = rng.integers(-1, len(tokens), size=len(data))  # -1: a report without a client
    keys = np.array([client_key(tokens[c]) if c >= 0 else 0 for c in codes], dtype=np.uint64)
    named = codes >= 0
    accs = [agg.add_packed(agg.create(), data[part], keys[part], named[part])
            for part in np.array_split(np.arange(len(data)), 5)]
    merged = agg.merge([agg.create(), *[pickle.loads(pickle.dumps(a)) for a in accs]])
    whole = agg.add_packed(agg.create(), data, keys, named)
    assert merged.n_clients == whole.n_clients == len(set(codes) - {-1})
    ext = small_config.client_extremes[0]
    cols = list(ext.bits)
    bits = np.unpackbits(data, axis=1, bitorder="little")[:, :small_config.layout.n_bits]
    p, q = small_config.channels.p[cols], small_config.channels.q[cols]
    per_client = []
    for c in sorted(set(codes) - {-1}):
        state = ExtremeAccumulator(ext.op)
        for row in bits[codes == c]:
            state.add(row[cols], p, q)
        per_client.append((float(state.estimate()), float(state.variance())))
    expected = (math.fsum(e for e, _ in per_client), math.fsum(v for _, v in per_client))
    for acc in (merged, whole):
        (got,) = agg.client_sums(acc)
        assert got == pytest.approx(expected, rel=1e-9)


@given(st.lists(st.text(max_size=40), max_size=20))
def test_client_keys_are_the_compiled_hash_of_the_tokens_bytes(tokens):
    """The per-record path (client_key) and the block path (span_hashes over the token's bytes)
    give every token the same key."""
    data = [t.encode("utf-8") for t in tokens]
    buf = np.frombuffer(b"".join(data) or b"\0", dtype=np.uint8)
    offs = np.cumsum([0] + [len(d) for d in data])[:-1].astype(np.int64)
    lens = np.array([len(d) for d in data], dtype=np.int64)
    assert span_hashes(buf, offs, lens).tolist() == [client_key(t) for t in tokens]
