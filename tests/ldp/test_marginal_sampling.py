"""MargPS, the anchor of the accuracy benchmark (ldp/marginal_sampling.py): exact algebra and its
variance (the paper's, with the finite-population factor) checked by seeded simulation."""
from itertools import combinations

import numpy as np
import pytest

from ldp_marginals.ldp.marginal_sampling import (
    MarginalSampling,
    cell_variance,
    count_marginal_reports,
    estimate_marginals,
    lower_tables,
    randomize_marginal,
)
from tests.ldp.test_hadamard import histogram, population
from tests.stats import assert_mean_close, assert_variance_ratio, replicates_for


def test_expected_counts_give_the_truth_and_lower_tables_project():
    bits = population(1000, d=4)
    mech = MarginalSampling(4, 3, 1.5)
    truth = np.array([histogram(bits, s) for s in mech.sets])
    n_k = np.array([100.0, 250.0, 40.0, 610.0])
    expected = n_k[:, None] * (mech.q + (mech.p - mech.q) * truth)   # E[counts | n_K]
    est = estimate_marginals(expected, mech)
    np.testing.assert_allclose(est, truth, atol=1e-12)
    pairs = lower_tables(est, mech, 2)
    for row, s in enumerate(combinations(range(4), 2)):
        np.testing.assert_allclose(pairs[row], histogram(bits, s), atol=1e-12)
    np.testing.assert_allclose(lower_tables(est, mech, 3), truth, atol=1e-12)
    with pytest.raises(ValueError, match="order must be <= 3"):
        lower_tables(est, mech, 4)


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon", [1.0, 6.0])
def test_cells_unbiased_with_the_closed_form_variance(epsilon):
    """Errors standardized by the conditional variance (given each replicate's n_K) have mean 0
    and variance 1, pooled over cells and tables; without the sampling term (which dominates at
    epsilon 6) the band fails."""
    bits = population(1500, d=4, seed=2)
    mech = MarginalSampling(4, 3, epsilon)
    truth = np.array([histogram(bits, s) for s in mech.sets])
    rng = np.random.default_rng(int(epsilon))
    zs = []
    for _ in range(-(-replicates_for() // truth.size)):   # pooled: a band that catches the variance 5% off
        which, sent = randomize_marginal(bits, mech, rng)
        counts = count_marginal_reports(which, sent, mech)
        n_k = counts.sum(axis=1, keepdims=True)
        var = cell_variance(truth, n_k, len(bits), mech)
        zs.append(((estimate_marginals(counts, mech) - truth) / np.sqrt(var)).ravel())
    zs = np.array(zs)
    assert_mean_close(zs, 0.0, 1.0)
    assert_variance_ratio(zs.reshape(-1, 1), np.ones(1))
