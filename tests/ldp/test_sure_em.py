"""The joint chosen by SURE among EM's iterates and the MLE (ldp/sure_em.py): exact checks of the
derivatives SURE rests on, its unbiasedness by seeded simulation, and the choice's contract."""
from itertools import combinations

import numpy as np
import pytest

from ldp_marginals.ldp import Channel, ChannelSet
from ldp_marginals.ldp.consistent import joint_mle, marginal_of_joint
from ldp_marginals.ldp.sure_em import SURE_MAX_BITS, _Risk, joint_sure_em, published_gram
from tests.ldp.test_hadamard import population
from tests.stats import assert_mean_close


def _channel(d, eps):
    ch = ChannelSet.uniform(Channel.symmetric_from_epsilon(eps), d)
    mats = [ch[i].matrix() for i in range(d)]
    a = np.ones((1, 1))
    for m in mats:
        a = np.kron(m, a)
    return mats, a


def _joint(bits):
    code = (bits.astype(np.int64) << np.arange(bits.shape[1])).sum(axis=1)
    return np.bincount(code, minlength=1 << bits.shape[1]) / len(bits)


def _noisy_counts(bits, eps, rng):
    flip = rng.random(bits.shape) < 1.0 / (np.exp(eps) + 1.0)
    return _joint(bits ^ flip) * len(bits)


def _em(y, a, steps):
    joint = np.full(a.shape[1], 1.0 / a.shape[1])
    for _ in range(steps):
        joint = joint * (a.T @ (y / (a @ joint)))
    return joint


def test_published_gram_counts_the_sets_two_cells_agree_on():
    d, sets = 4, [(0, 1), (1, 2, 3), (2,)]
    m = np.vstack([np.array([[marginal_of_joint(np.eye(16)[z], d, s)[b] for z in range(16)] for b in range(1 << len(s))])
                   for s in sets])
    np.testing.assert_array_equal(published_gram(d, sets), m.T @ m)


def test_em_derivatives_along_the_probes_are_those_of_em_itself():
    """J times the probes, carried along EM's steps by the chain rule, against central differences of
    EM's t-step map in y (exact algebra up to the differences' O(h^2))."""
    d = 4
    mats, a = _channel(d, 0.8)
    counts = _noisy_counts(population(2000, d=d, seed=1), 0.8, np.random.default_rng(2))
    risk = _Risk(counts, mats, [(0, 1, 2)])
    assert risk.probes.shape == (16, 16)                    # 2^d <= SURE_PROBES: the unit vectors, exact
    y, h = counts / counts.sum(), 1e-6
    for t, joint, jv in risk.em(60):
        np.testing.assert_allclose(joint, _em(y, a, t), atol=1e-14)
        if t in (10, 37, 60):
            for k in (0, 5, 15):
                v = risk.probes[:, k]
                diff = (_em(y + h * v, a, t) - _em(y - h * v, a, t)) / (2 * h)
                np.testing.assert_allclose(jv[:, k], diff, atol=1e-6)


def test_mle_derivatives_along_sum_zero_directions_are_those_of_the_mle():
    """The implicit derivative on the MLE's positive cells against central differences of joint_mle
    (sum-zero directions: the noisy histogram's frequencies sum to one), at a window whose MLE has zero
    cells."""
    d = 4
    mats, a = _channel(d, 0.5)
    counts = _noisy_counts(population(1500, d=d, seed=6), 0.5, np.random.default_rng(3))
    risk = _Risk(counts, mats, [(0, 1, 2)])
    fit, _ = joint_mle({tuple(range(d)): counts}, lambda i: mats[i], d, tol=1e-12)
    assert (fit == 0).sum() >= 2                             # the active set matters
    jv = risk.mle_jv(fit)
    n, h = counts.sum(), 1e-6
    for k in (1, 6, 11):
        v = risk.probes[:, k] - 1.0 / 16                       # sum zero
        plus, _ = joint_mle({tuple(range(d)): counts + n * h * v}, lambda i: mats[i], d, tol=1e-12)
        minus, _ = joint_mle({tuple(range(d)): counts - n * h * v}, lambda i: mats[i], d, tol=1e-12)
        want = jv[:, k] - jv @ np.full(16, 1.0 / 16)           # J v, v = e_k - 1/16
        np.testing.assert_allclose(want, (plus - minus) / (2 * h), atol=1e-5)


@pytest.mark.statistical
@pytest.mark.parametrize("d, steps", [(4, 23), (5, 60)])
def test_sure_is_an_unbiased_estimate_of_the_tables_squared_error(d, steps):
    """Over seeded windows of one population, SURE of an EM iterate (exact trace at d = 4, Hutchinson's
    probes at d = 5) and the iterate's true squared error of the 2-way tables have the same mean,
    within the spread of their difference (tests/stats.py's z band)."""
    bits = population(3000, d=d, seed=4)
    mats, a = _channel(d, 1.0)
    sets = list(combinations(range(d), 2))
    gram = published_gram(d, sets)
    truth = _joint(bits)
    gaps = []
    for w in range(300):
        counts = _noisy_counts(bits, 1.0, np.random.default_rng([11, d, w]))
        risk = _Risk(counts, mats, sets)
        t, joint, jv = next((t, j, v) for t, j, v in risk.em(steps) if t >= steps)
        err = joint - truth
        gaps.append(risk(joint, jv) - err @ gram @ err)
    gaps = np.array(gaps)
    assert_mean_close(gaps, 0.0, gaps.var(ddof=1))


@pytest.mark.statistical
def test_sure_of_the_unbiased_joint_is_its_squared_error_given_the_window():
    """SURE of the unbiased joint u = A^-1 y (J = A^-1, so SURE is the constant tr(P A^-1 S A^-T)) against u's
    true squared error of the 2-way tables, over seeded randomizations of one window's reports at per-bit
    epsilon 2. The tables' truth is the window's own frequencies, so S is the randomization's covariance given
    the reports; the multinomial (diag(pi) - pi pi^T) / n adds the reports' sampling variance, which the
    channel does not shrink: here it overstated the risk by ~50%."""
    d, eps = 3, 2.0
    bits = population(3000, d=d, seed=4)
    mats, a = _channel(d, eps)
    inv = np.linalg.inv(a)
    sets = list(combinations(range(d), 2))
    gram = published_gram(d, sets)
    truth = _joint(bits)
    gaps = []
    for w in range(400):
        risk = _Risk(_noisy_counts(bits, eps, np.random.default_rng([12, w])), mats, sets)
        err = risk.u - truth
        gaps.append(risk(risk.u, inv @ risk.probes) - err @ gram @ err)
    gaps = np.array(gaps)
    assert_mean_close(gaps, 0.0, gaps.var(ddof=1))


def test_the_choice_is_the_truth_without_noise_and_a_valid_joint_with_it():
    d = 5
    mats, a = _channel(d, 1.0)
    bits = population(4000, d=d, seed=8)
    truth = _joint(bits)
    sets = list(combinations(range(d), 3))
    exact = 1e12 * (a @ truth)                                  # the expected histogram of 10^12 reports
    fit = joint_sure_em(exact, lambda i: mats[i], d, sets, joint_mle({tuple(range(d)): exact}, lambda i: mats[i], d))
    assert fit.method == "joint-mle" and fit.path[-1][0] == -1
    np.testing.assert_allclose(fit.joint, truth, atol=1e-6)
    counts = _noisy_counts(bits, 1.0, np.random.default_rng(5))
    noisy = joint_sure_em(counts, lambda i: mats[i], d, sets)
    assert noisy.method == "joint-em" and noisy.iterations >= 10 and all(t > 0 for t, _ in noisy.path)
    assert (noisy.joint >= 0).all() and noisy.joint.sum() == pytest.approx(1.0, abs=1e-12)
    least = min(r for _, r in noisy.path)
    assert least <= noisy.risk <= least + 0.05 * abs(least)
    again = joint_sure_em(counts.copy(), lambda i: mats[i], d, sets)
    np.testing.assert_array_equal(again.joint, noisy.joint)     # the probes are seeded by the counts


def test_joint_sure_em_refuses_what_it_cannot_hold():
    mats, _ = _channel(3, 1.0)
    with pytest.raises(ValueError, match=f"d must be in 1..{SURE_MAX_BITS}, got d=9"):
        joint_sure_em(np.ones(512), lambda i: mats[0], 9, [(0, 1)])
    with pytest.raises(ValueError, match="counts must be 8 non-negative counts"):
        joint_sure_em(np.ones(4), lambda i: mats[i], 3, [(0, 1)])
    with pytest.raises(ValueError, match="counts must be 8 non-negative counts"):
        joint_sure_em(-np.ones(8), lambda i: mats[i], 3, [(0, 1)])
    with pytest.raises(ValueError, match=r"sets must name at least one published table, got sets=\[\]"):
        joint_sure_em(np.ones(8), lambda i: mats[i], 3, [])


def test_cells_em_drives_to_nothing_are_held_at_zero_not_subnormal():
    """A window of 20 reports over 2^8 cells: EM drives many cells toward 0 over hundreds of steps; they are
    held at exactly 0 below 1e-100 (subnormal floats made a step ~100x slower: 13 s for one such window)."""
    d = 8
    mats, _ = _channel(d, 0.5)
    rng = np.random.default_rng(8)
    bits = (rng.random((20, d)) < rng.random(d)).astype(np.uint8)
    fit = joint_sure_em(_noisy_counts(bits, 0.5, rng), lambda i: mats[i], d, list(combinations(range(d), 3)))
    assert fit.method == "joint-em" and fit.iterations >= 500
    assert (fit.joint == 0).sum() >= 50 and not ((fit.joint > 0) & (fit.joint < 1e-100)).any()
    assert fit.joint.sum() == pytest.approx(1.0, abs=1e-12)
