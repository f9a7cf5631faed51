from functools import reduce

import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator, count_bits
from ldp_marginals.ldp.encoding import Feature, Layout
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tables import (
    cell_patterns,
    group_table,
    kron_apply,
    marginal_table,
    noisy_histogram,
    phi_coefficient,
    project_to_simplex,
)
from ldp_marginals.ldp.tmdh import estimate_tmdh, expected_counts
from tests.simulate import noisy_histograms, reports, window_fields
from tests.stats import Z, assert_mean_close, assert_variance_ratio, replicates_for

CHANNELS = ChannelSet.from_arrays([0.1, 0.2, 0.3, 0.25, 0.05], [0.9, 0.85, 0.95, 0.6, 0.7])


def pattern_counts(bits, cols):
    code = (bits[:, list(cols)] << np.arange(len(cols))).sum(axis=1)
    return np.bincount(code, minlength=1 << len(cols)).astype(float)


def dense_reference(y, cols):
    """Vinterbo's estimator with the dense Kronecker matrix (cell b: bit j <-> cols[j])."""
    c_inv = reduce(np.kron, [CHANNELS[i].inverse_matrix() for i in reversed(cols)])
    table = c_inv @ y
    return table, c_inv @ np.diag(y) @ c_inv.T - np.diag(table)


def simulate(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.random(n)
    x = ((z[:, None] + 0.5 * rng.random((n, 5))) / 1.5 < [0.3, 0.5, 0.6, 0.4, 0.2]).astype(np.uint8)
    return x, randomize_bits(x, CHANNELS, rng)


@pytest.mark.parametrize("cols", [(0,), (1, 3), (0, 2, 4), (0, 1, 2, 3)])
def test_kronecker_table_equals_dense_reference_and_moebius_of_means(cols):
    x, y = simulate()
    fam = SetFamily.all_up_to(5, 4)
    est = estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(y), CHANNELS)
    table = marginal_table(est, cols)
    hist = pattern_counts(y, cols)
    assert np.array_equal(noisy_histogram(est, cols), hist)
    ref_table, ref_cov = dense_reference(hist, cols)
    assert np.allclose(table.estimate, ref_table, atol=1e-8)
    assert np.allclose(table.covariance, ref_cov, atol=1e-6)
    # the same table as the Moebius transform of the TMDH means (Carette Lemma A.1), cell by cell:
    # cell with ones-set J = sum over J <= S <= K of (-1)^(|S| - |J|) t_S
    k = len(cols)
    subsets = [tuple(cols[j] for j in range(k) if b >> j & 1) for b in range(1 << k)]
    moebius_of_means = [sum((-1) ** (len(s) - len(j)) * (est.mean(s) if s else est.n)
                            for s in subsets if set(j) <= set(s)) for j in subsets]
    assert np.allclose(moebius_of_means, ref_table, atol=1e-8)
    assert table.estimate.sum() == pytest.approx(4000)
    # cell covariance is the Moebius image of the TMDH covariance (same conditioning)
    tmdh_cov = np.zeros((1 << k, 1 << k))
    for a, sa in enumerate(subsets):
        for b, sb in enumerate(subsets):
            tmdh_cov[a, b] = est.covariance(sa, sb) if sa and sb else 0.0
    moebius = reduce(np.kron, [np.array([[1.0, -1.0], [0.0, 1.0]])] * k)
    assert np.allclose(moebius @ tmdh_cov @ moebius.T, table.covariance, atol=1e-6)


def test_expected_counts_give_the_true_table():
    x, _ = simulate(900, 1)
    fam = SetFamily.all_up_to(5, 3)
    truth = count_bits(x, fam)
    est = estimate_tmdh(expected_counts(truth, fam, CHANNELS), CHANNELS, fam)
    table = marginal_table(est, (1, 2, 4), labels=("a", "b", "c"))
    assert np.allclose(table.estimate, pattern_counts(x, (1, 2, 4)), atol=1e-9)
    assert table.patterns.tolist()[:3] == [[0, 0, 0], [1, 0, 0], [0, 1, 0]]
    assert table.labels == ("a", "b", "c")


def test_kron_apply_matches_dense_for_matrices():
    rng = np.random.default_rng(2)
    factors = [rng.random((2, 2)) for _ in range(3)]
    values = rng.random((8, 4))
    dense = reduce(np.kron, list(reversed(factors)))
    assert np.allclose(kron_apply(factors, values), dense @ values)
    assert cell_patterns(2).tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]


@pytest.mark.statistical
def test_table_cells_unbiased_with_closed_form_variance():
    x, _ = simulate(1200, 3)
    fam = SetFamily.all_up_to(5, 3)
    cols = (0, 1, 4)
    truth = pattern_counts(x, cols)
    exact = marginal_table(estimate_tmdh(expected_counts(count_bits(x, fam), fam, CHANNELS), CHANNELS, fam), cols)
    reps = replicates_for(elements=8)
    histograms = noisy_histograms(x, CHANNELS.p, CHANNELS.q, reps, np.random.default_rng(99))
    cells = window_fields(lambda bits: marginal_table(estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(bits),
                                                                    CHANNELS), cols).estimate, histograms)
    # the covariance at the expected counts is the exact covariance of the cells
    assert_mean_close(cells, truth, exact.variances)
    assert_variance_ratio(cells, exact.variances)
    sample = np.cov(cells.T)
    sd = np.sqrt((np.outer(exact.variances, exact.variances) + exact.covariance ** 2) / reps)
    assert np.all(np.abs(sample - exact.covariance) <= Z * sd)


def test_table_errors():
    fam = SetFamily.all_up_to(5, 2)
    est = estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(simulate(100)[1]), CHANNELS)
    with pytest.raises(ValueError, match=r"the table of \[0, 1, 2\] needs the count of set \[0, 1, 2\], which was not counted"):
        marginal_table(est, (0, 1, 2))


def test_group_table_of_categorical_features_has_diagonal_covariance():
    layout = Layout((Feature.categorical("os", ["mac", "win", "linux"]), Feature.boolean("beta"),
                     Feature.categorical("plan", ["free", "pro"])))
    chans = ChannelSet.uniform(Channel.optimized_unary(2.0), layout.n_bits)
    rng = np.random.default_rng(5)
    n = 3000
    os_v = rng.choice(["mac", "win", "linux"], n, p=[0.3, 0.5, 0.2])
    plan = np.where(rng.random(n) < np.where(os_v == "mac", 0.6, 0.2), "pro", "free")
    x = layout.encode_many({"os": o, "beta": bool(i % 2), "plan": pl} for i, (o, pl) in enumerate(zip(os_v, plan)))
    fam = SetFamily.all_up_to(layout.n_bits, 2)
    truth = count_bits(x, fam)
    est = estimate_tmdh(expected_counts(truth, fam, chans), chans, fam, layout.exclusive_groups)
    table = group_table(est, layout, ["os", "plan"])
    assert table.cells[0] == ("mac", "free") and len(table.cells) == 6
    for cell, value in zip(table.cells, table.estimate):
        assert value == pytest.approx(np.sum((os_v == cell[0]) & (plan == cell[1])), abs=1e-8)
    assert np.allclose(table.covariance, np.diag(table.variances), atol=1e-8)
    assert np.all(table.variances > 0)
    # the exclusive groups are taken from the layout when the estimate has none
    plain = estimate_tmdh(expected_counts(truth, fam, chans), chans, fam)
    assert np.allclose(group_table(plain, layout, ["os", "plan"]).covariance, table.covariance)
    # a group with a boolean: false and true cells, counts by inclusion-exclusion
    mixed = group_table(est, layout, ["os", "beta"])
    assert len(mixed.cells) == 6 and mixed.cells[:2] == (("mac", "false"), ("mac", "true"))
    beta = x[:, layout.bit_index("beta")].astype(bool)
    for cell, value in zip(mixed.cells, mixed.estimate):
        assert value == pytest.approx(np.sum((os_v == cell[0]) & (beta == (cell[1] == "true"))), abs=1e-8)
    assert mixed.estimate.sum() == pytest.approx(n)


@pytest.mark.statistical
def test_mixed_group_table_variance_by_simulation():
    layout = Layout((Feature.categorical("os", ["mac", "win"]), Feature.boolean("beta"), Feature.boolean("dark")))
    chans = ChannelSet.from_arrays([0.1, 0.2, 0.15, 0.25], [0.85, 0.9, 0.8, 0.7])
    rng = np.random.default_rng(12)
    n = 1500
    os_v = rng.choice(["mac", "win"], n, p=[0.4, 0.6])
    x = layout.encode_many({"os": o, "beta": bool(rng.random() < 0.3), "dark": bool(rng.random() < 0.6)}
                           for o in os_v)
    fam = SetFamily(layout.n_bits, 2, extra=layout.group_sets(["os", "beta", "dark"]))
    exact = group_table(estimate_tmdh(expected_counts(count_bits(x, fam), fam, chans), chans, fam,
                                      layout.exclusive_groups), layout, ["os", "beta", "dark"])
    reps = replicates_for(elements=len(exact.cells))
    histograms = noisy_histograms(x, chans.p, chans.q, reps, rng)
    cells = window_fields(lambda bits: group_table(estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(bits), chans),
                                                   layout, ["os", "beta", "dark"]).estimate, histograms)
    assert_mean_close(cells, exact.estimate, exact.variances)
    assert_variance_ratio(cells, exact.variances)
    sample = np.cov(cells.T)
    sd = np.sqrt((np.outer(exact.variances, exact.variances) + exact.covariance ** 2) / reps)
    assert np.all(np.abs(sample - exact.covariance) <= Z * sd)


def test_projection_onto_the_simplex():
    out = project_to_simplex([0.5, 0.6, -0.2, 0.1])
    assert out.min() >= 0 and out.sum() == pytest.approx(1.0)
    assert np.allclose(project_to_simplex([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])  # already valid: unchanged
    # it is the Euclidean projection: no valid point is closer (checked against random valid points)
    rng = np.random.default_rng(0)
    v = np.array([0.5, 0.6, -0.2, 0.1])
    others = rng.dirichlet(np.ones(4), 5000)
    assert np.all(np.linalg.norm(others - v, axis=1) >= np.linalg.norm(out - v) - 1e-12)
    with pytest.raises(ValueError, match=r"frequencies must be a non-empty finite 1-D array, got shape=\(0,\)"):
        project_to_simplex([])


@pytest.mark.statistical
def test_phi_delta_method_variance_by_simulation():
    x, _ = simulate(3000, 8)
    fam = SetFamily.all_up_to(5, 2)
    n, sets = 3000, [(0,), (1,), (0, 1)]
    windows = replicates_for()
    histograms = noisy_histograms(x, CHANNELS.p, CHANNELS.q, windows, np.random.default_rng(77))
    t = window_fields(lambda bits: [estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(bits), CHANNELS).mean(s)
                                    for s in sets], histograms)
    phis = (n * t[:, 2] - t[:, 0] * t[:, 1]) / np.sqrt(t[:, 0] * (n - t[:, 0]) * t[:, 1] * (n - t[:, 1]))
    for histogram, value in zip(histograms[:4], phis):   # the job's phi is this function of the counts
        est = estimate_tmdh(CooccurrenceAccumulator(fam).add_bits(reports(histogram)), CHANNELS)
        assert phi_coefficient(est, 0, 1)[0] == pytest.approx(value, rel=1e-12)
    true_phi, delta = phi_coefficient(estimate_tmdh(expected_counts(count_bits(x, fam), fam, CHANNELS), CHANNELS, fam),
                                      0, 1)
    assert true_phi == pytest.approx(np.corrcoef(x[:, 0], x[:, 1])[0, 1], rel=1e-12)
    # phi is nearly unbiased (the delta method's O(1/N) bias, 10% of its sd, is allowed) and the delta
    # method's variance at the truth is its variance (simulated at this size: within 0.3%, far inside the band)
    assert abs(phis.mean() - true_phi) <= Z * np.sqrt(delta / windows) + 0.1 * np.sqrt(delta)
    assert_variance_ratio(phis, delta)
    with pytest.raises(ValueError, match=r"i and j must be different bits, got i=1, j=1"):
        phi_coefficient(est, 1, 1)
