import pickle

import numpy as np
import pytest

from ldp_marginals.ldp import aggregate
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.extremes import ExtremeAccumulator
from ldp_marginals.pipelines.simulate import simulate_population
from ldp_marginals.transforms.combiners import ClientExtremesCombineFn, CollectionCombineFn


def reports(config, n, seed):
    return [row.tobytes() for row in simulate_population(config, n, seed=seed).noisy]


def test_collection_combine_fn_contract(small_config, monkeypatch):
    monkeypatch.setattr(aggregate, "FLUSH_REPORTS", 37)  # exercise flushes inside add and merge
    fn = CollectionCombineFn(small_config)
    data = reports(small_config, 1000, 1)
    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(len(data), 3, replace=False))
    shards = []
    for part in np.split(np.arange(len(data)), cuts):
        acc = fn.create_accumulator()
        for i in part:
            acc = fn.add_input(acc, data[i])
        shards.append(pickle.loads(pickle.dumps(acc)))  # accumulators cross processes
    second_counts, second_pending = shards[1].cooc.counts.copy(), list(shards[1].pending)
    merged = fn.extract_output(fn.merge_accumulators(s for s in shards))  # a generator
    assert np.array_equal(shards[1].cooc.counts, second_counts) and shards[1].pending == second_pending
    one_pass = fn.extract_output(fn.add_inputs(fn.create_accumulator(), data))
    core = CooccurrenceAccumulator(small_config.family).add_packed(
        np.frombuffer(b"".join(data), np.uint8).reshape(len(data), -1))
    assert merged.cooc == one_pass.cooc == core
    assert np.allclose(merged.extreme_sums, one_pass.extreme_sums, rtol=1e-12)
    # the per-report extreme sums equal the core's estimator applied report by report
    bits = np.unpackbits(np.frombuffer(b"".join(data), np.uint8).reshape(len(data), -1), axis=1,
                         bitorder="little")[:, :small_config.layout.n_bits]
    ext = small_config.report_extremes[0]
    cols = list(ext.bits)
    direct = sum(float(ExtremeAccumulator(ext.op).add(b[cols], small_config.channels.p[cols],
                                                      small_config.channels.q[cols]).estimate()) for b in bits)
    assert merged.extreme_sums[0, 0] == pytest.approx(direct, rel=1e-10)


def test_empty_input_gives_a_defined_output(small_config):
    fn = CollectionCombineFn(small_config)
    out = fn.extract_output(fn.create_accumulator())
    assert out.cooc.n == 0 and not out.extreme_sums.any()


def test_client_extremes_combine_fn(small_config):
    fn = ClientExtremesCombineFn(small_config)
    data = reports(small_config, 7, 2)
    left = fn.add_input(fn.add_input(fn.create_accumulator(), data[0]), data[1])
    right = fn.create_accumulator()
    for r in data[2:]:
        right = fn.add_input(right, r)
    merged = fn.extract_output(fn.merge_accumulators(iter([pickle.loads(pickle.dumps(left)), right])))
    whole = fn.create_accumulator()
    for r in data:
        whole = fn.add_input(whole, r)
    assert np.allclose(merged, fn.extract_output(whole), rtol=1e-12)
    assert fn.extract_output(fn.create_accumulator()) == [(0.0, 0.0)]
