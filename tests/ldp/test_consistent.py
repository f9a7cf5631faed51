"""Consistent, non-negative tables (ldp/consistent.py): exact checks of both methods, and the
coverage of their intervals by seeded simulation."""
from itertools import combinations

import numpy as np
import pytest

from ldp_marginals.ldp import Channel, ChannelSet, CooccurrenceAccumulator, SetFamily, estimate_tmdh, marginal_table
from ldp_marginals.ldp.consistent import (
    consistent_group_tables, consistent_intervals, consistent_tables, joint_mle, lower_from_tables, marginal_of_joint,
    project_group_tables, project_tables,
)
from ldp_marginals.ldp.randomizer import randomize_bits
from ldp_marginals.ldp.sure_em import joint_sure_em
from ldp_marginals.ldp.tables import noisy_histogram
from tests.ldp.test_hadamard import histogram, population
from tests.stats import assert_coverage


def _raw(bits, eps, seed, order=3, top=None):
    d = bits.shape[1]
    ch = ChannelSet.uniform(Channel.symmetric_from_epsilon(eps), d)
    fam = SetFamily.all_up_to(d, top or order)
    acc = CooccurrenceAccumulator(fam).add_bits(randomize_bits(bits, ch, np.random.default_rng(seed)))
    return ch, estimate_tmdh(acc, ch)


def test_projection_leaves_valid_tables_alone_and_fixes_negative_ones():
    bits = population(600, d=5)
    fam = SetFamily.all_up_to(5, 3)
    truth = np.array([histogram(bits, s) for s in fam.members(3)])
    same, _ = project_tables(truth, fam, 3)
    np.testing.assert_allclose(same, truth, atol=1e-12)      # already in the set: its own projection
    ch, est = _raw(bits, 0.5, seed=1)
    raw = np.array([marginal_table(est, s).frequencies for s in fam.members(3)])
    assert (raw < 0).any()
    fixed, it = project_tables(raw, fam, 3)
    assert it < 100000 and (fixed >= 0).all()
    np.testing.assert_allclose(fixed.sum(axis=1), 1.0, atol=1e-9)
    pairs = [tuple(r) for r in fam.members(2)]
    for s in pairs:                                          # every 3-way table holding a pair agrees on it
        views = []
        for row, big in enumerate(fam.members(3)):
            if set(s) <= set(big):
                drop = tuple(2 - j for j in range(3) if big[j] not in s)
                views.append(fixed[row].reshape(2, 2, 2).sum(axis=drop).reshape(-1))
        np.testing.assert_allclose(np.ptp(views, axis=0), 0.0, atol=1e-8)
    np.testing.assert_allclose(lower_from_tables(fixed, fam, 3, 2)[pairs.index(s)], views[0], atol=1e-8)
    # closer to the truth than the raw tables, in the norm it projects in (the set holds the truth)
    assert np.linalg.norm(fixed - truth) <= np.linalg.norm(raw - truth)


def test_joint_mle_is_the_truth_on_expected_histograms_and_non_negative_on_noisy_ones():
    bits = population(2000, d=4, seed=3)
    ch = ChannelSet.uniform(Channel.symmetric_from_epsilon(1.0), 4)
    joint = histogram(bits, (0, 1, 2, 3))
    big = np.array([[1.0]])
    for i in range(4):                                        # expected noisy histogram: (x) C_i applied to the joint
        big = np.kron(ch[i].matrix(), big)
    expected = big @ joint * len(bits)
    fit, _ = joint_mle({(0, 1, 2, 3): expected}, lambda i: ch[i].matrix(), 4, tol=1e-8)
    np.testing.assert_allclose(fit, joint, atol=1e-6)
    np.testing.assert_allclose(marginal_of_joint(fit, 4, (1, 3)), histogram(bits, (1, 3)), atol=1e-6)
    # the composite likelihood of the 2-way histograms has the same maximum on expected data
    pairs = {s: big_table(ch, joint, s) * len(bits) for s in combinations(range(4), 2)}
    fit2, _ = joint_mle(pairs, lambda i: ch[i].matrix(), 4, tol=1e-8)
    for s in pairs:
        np.testing.assert_allclose(marginal_of_joint(fit2, 4, s), histogram(bits, s), atol=1e-6)
    _, est = _raw(bits, 0.5, seed=2, top=4)
    fit, _ = joint_mle({(0, 1, 2, 3): noisy_histogram(est, (0, 1, 2, 3))}, lambda i: ch[i].matrix(), 4)
    assert (fit >= 0).all() and fit.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="use project_tables for d > 16"):
        joint_mle({(0,): [1, 1]}, lambda i: ch[0].matrix(), 17)


def big_table(ch, joint, cols):
    """The expected noisy histogram of bits ``cols`` (fractions): (x) C_i applied to the joint's table."""
    m = np.array([[1.0]])
    for i in cols:
        m = np.kron(ch[i].matrix(), m)
    return m @ marginal_of_joint(joint, 4, cols)


def _fit_of_every_bit(ch, est, d):
    """``(joint_mle of the noisy histogram of all d bits, that histogram, the dense 2^d channel matrix)``."""
    every = tuple(range(d))
    y = noisy_histogram(est, every)
    fit, _ = joint_mle({every: y}, lambda i: ch[i].matrix(), d)
    a = np.array([[1.0]])
    for i in range(d):
        a = np.kron(ch[i].matrix(), a)
    return fit, y, a


def test_joint_mle_is_the_maximum_where_many_cells_are_zero():
    """5 bits at per-bit epsilon 0.5: about half the unbiased joint's cells are negative and the MLE
    puts many cells at exactly 0. Checked with the dense channel matrix, independently of the solver:
    the KKT conditions of the concave likelihood hold (gradient per report 1 on positive cells, at
    most 1 on zero cells), so no feasible point is better; perturbations and 20,000 plain EM steps
    from uniform do not beat it. (EM with SQUAREM clipped at 0, the earlier solver, stopped with
    zero cells whose gradient was 1-2% above 1.)"""
    bits = population(3000, d=5, seed=6)
    ch = ChannelSet.uniform(Channel.symmetric_from_epsilon(0.5), 5)
    _, est = _raw(bits, 0.5, seed=9, top=5)
    fit, y, a = _fit_of_every_bit(ch, est, 5)
    n = y.sum()
    assert (np.linalg.solve(a, y / n) < 0).sum() >= 8 and (fit == 0).sum() >= 8   # the test has something to find
    g = a.T @ (y / (a @ fit)) / n
    assert np.all(np.abs(g[fit > 0] - 1.0) <= 1e-5) and np.all(g[fit == 0] <= 1.0 + 1e-5)

    def loglik(p):
        return float(y @ np.log(a @ p))
    best = loglik(fit)
    rng = np.random.default_rng(1)
    for _ in range(200):
        other = np.maximum(fit + rng.normal(0, 1e-3, fit.size), 0.0)
        assert loglik(other / other.sum()) <= best + 1e-9
    em = np.full(32, 1 / 32)
    for _ in range(20000):
        em = em * (a.T @ (y / (a @ em))) / n
    assert loglik(em) <= best + 1e-9 and best - loglik(em) < 1.0


# The co-occurrence counts (every set of the 7 bits, SetFamily.all_up_to(7, 7) order) of the accuracy bench's
# GSS window at per-bit epsilon 0.5, seed [40, 25, 50, 30] (benchmarks/accuracy.py run_dataset), on which
# L-BFGS-B, joint_mle's solver before projected Newton, stopped 2.4e-3 off the KKT conditions ("relative
# reduction of f <= factr*epsmch"), so consistent_tables fell back to the projection.
BENCH_MISS = [
    33144, 16120, 18922, 16437, 19672, 16417, 19018, 16235, 9430, 8437, 9681, 8264, 9478, 8269, 9476, 11464, 9596,
    11056, 9390, 9795, 8591, 9649, 8471, 9817, 11474, 9759, 9561, 8451, 9456, 4953, 5759, 4944, 5633, 4927, 5108,
    4581, 5042, 4547, 4994, 5753, 5039, 4915, 4443, 4952, 5722, 5043, 5648, 4922, 5849, 6756, 5737, 5671, 5014, 5508,
    5140, 5859, 5117, 5107, 4597, 5042, 5823, 5135, 5776, 4964, 3021, 2717, 3016, 2689, 3018, 3466, 3038, 2977, 2700,
    2944, 2795, 3100, 2797, 2758, 2555, 2757, 3017, 2726, 3051, 2666, 3038, 3464, 3018, 3035, 2739, 2935, 3486, 3077,
    3418, 2968, 3142, 2804, 3106, 2757, 3074, 1650, 1877, 1673, 1663, 1531, 1623, 1840, 1653, 1841, 1615, 1725, 1578,
    1723, 1544, 1661, 1869, 1677, 1843, 1636, 1854, 1729, 1038, 934, 1038, 915, 1006, 973, 1027, 573,
]


def test_consistent_tables_take_the_full_joint_when_every_order_is_counted():
    bits = population(2000, d=5, seed=2)
    for top, methods in ((5, ("joint-em", "joint-mle")), (3, ("projection",))):
        _, est = _raw(bits, 1.0, seed=4, top=top)
        out = consistent_tables(est, 3)
        assert out.method in methods and out.iterations >= 1 and out.fallback is None
        if top == 5:        # the joint SURE chose for the 3-way tables
            every = tuple(range(5))
            want = joint_sure_em(noisy_histogram(est, every), lambda i: est.channels[i].matrix(), 5,
                                 list(combinations(range(5), 3)),
                                 joint_mle({every: noisy_histogram(est, every)}, lambda i: est.channels[i].matrix(), 5))
            assert want.method == out.method
            np.testing.assert_allclose(out.tables[3], [marginal_of_joint(want.joint, 5, s) for s in combinations(range(5), 3)],
                                       atol=1e-12)
        fam = est.family
        for o in (1, 2, 3):
            t = out.tables[o]
            assert t.shape == (len(fam.members(o)), 1 << o) and (t >= 0).all()
            np.testing.assert_allclose(t.sum(axis=1), 1.0, atol=1e-9)
        # a pair's table is the sum of every triple's table holding it
        pair = [tuple(r) for r in fam.members(2)].index((1, 3))
        row = [tuple(r) for r in fam.members(3)].index((1, 2, 3))
        np.testing.assert_allclose(out.tables[3][row].reshape(2, 2, 2).sum(axis=1).reshape(-1), out.tables[2][pair],
                                   atol=1e-8)
    with pytest.raises(ValueError, match="order must be <= the counted max_order=3"):
        consistent_tables(est, 4)


def _bench_miss():
    ch = ChannelSet.uniform(Channel.symmetric_from_epsilon(0.5), 7)
    acc = CooccurrenceAccumulator(SetFamily.all_up_to(7, 7))
    acc.counts[:] = BENCH_MISS
    return ch, estimate_tmdh(acc, ch)


def test_joint_mle_reaches_the_maximum_where_l_bfgs_b_stopped_short():
    """The bench's window above, 108 of its 128 cells at 0 in the maximum: the fit meets the KKT conditions
    (checked with the dense channel matrix, independently of the solver) and 5,000 EM steps from uniform
    (monotone in the likelihood) do not beat it, so it is the MLE candidate SURE weighs for consistent_tables."""
    ch, est = _bench_miss()
    fit, y, a = _fit_of_every_bit(ch, est, 7)
    n = y.sum()
    g = a.T @ (y / (a @ fit)) / n
    assert (fit == 0).sum() >= 90
    assert np.all(np.abs(g[fit > 0] - 1.0) <= 1e-5) and np.all(g[fit == 0] <= 1.0 + 1e-5)
    em = np.full(128, 1 / 128)
    for _ in range(5000):
        em = em * (a.T @ (y / (a @ em))) / n
    assert y @ np.log(a @ em) <= y @ np.log(a @ fit) + 1e-9
    chosen = joint_sure_em(y, lambda i: ch[i].matrix(), 7, list(combinations(range(7), 3)), (fit, 1))
    assert chosen.path[-1][0] == -1 and consistent_tables(est, 3).method in ("joint-em", "joint-mle")


def test_consistent_tables_without_the_mle_when_it_misses_its_check(monkeypatch):
    """A fit that misses its KKT check (here made to): below SURE_MAX_BITS it is no candidate (EM's iterates
    are); above, consistent_tables returns the projection of the raw 3-way tables, as the job does, and
    says why in ``fallback``."""
    import ldp_marginals.ldp.consistent as consistent

    def missed(*args, **kwargs):
        raise RuntimeError("joint_mle: the fit misses the KKT conditions by 2.38e-03 > tol=1e-05")
    monkeypatch.setattr(consistent, "joint_mle", missed)
    _, est = _bench_miss()
    out = consistent_tables(est, 3)
    assert out.method == "joint-em" and out.fallback is None
    _, est = _raw(population(1500, d=9, seed=3), 0.5, seed=4, top=9)          # d = 9 > SURE_MAX_BITS
    out = consistent_tables(est, 3)
    assert out.method == "projection" and "misses the KKT conditions" in out.fallback
    top = SetFamily.all_up_to(9, 3)
    raw = np.array([marginal_table(est, s).frequencies for s in top.members(3)])
    assert raw.min() < 0
    np.testing.assert_allclose(out.tables[3], project_tables(raw, top, 3)[0], atol=1e-12)
    for o in (1, 2, 3):
        assert (out.tables[o] >= 0).all()
        np.testing.assert_allclose(out.tables[o].sum(axis=1), 1.0, atol=1e-9)


def test_intervals_of_consistent_tables_cover_at_their_level():
    """150 replicates x 10 tables x 8 cells at per-bit epsilon 1, where a tenth of the raw cells are
    negative: the clipped-and-stretched 95% intervals cover the true cells at 95% (binomial band)."""
    bits = population(3000, d=5, seed=8)
    fam = SetFamily.all_up_to(5, 3)
    sets = [tuple(r) for r in fam.members(3)]
    truth = np.array([histogram(bits, s) for s in sets])
    covered = []
    for rep in range(150):
        _, est = _raw(bits, 1.0, seed=100 + rep)
        tables = [marginal_table(est, s) for s in sets]
        raw = np.array([t.frequencies for t in tables])
        fixed, _ = project_tables(raw, fam, 3)
        lo, hi = zip(*[t.intervals(0.95) for t in tables])
        lo, hi = consistent_intervals(np.array(lo) / len(bits), np.array(hi) / len(bits), fixed)
        assert (lo <= fixed).all() and (fixed <= hi).all()
        covered.append((lo <= truth) & (truth <= hi))
    assert_coverage(np.array(covered).ravel(), 0.95)


def _shared_marginals(tables, shapes):
    """Per pair of tables sharing features: both tables' marginals on them (C-order cells)."""
    out = []
    for g in range(len(shapes)):
        for h in range(g + 1, len(shapes)):
            fg, fh = [f for f, _ in shapes[g]], [f for f, _ in shapes[h]]
            shared = [f for f in fg if f in fh]
            if not shared:
                continue
            views = []
            for t, names, shape in ((tables[g], fg, shapes[g]), (tables[h], fh, shapes[h])):
                arr = np.asarray(t).reshape([n for _, n in shape])
                arr = arr.sum(axis=tuple(i for i, f in enumerate(names) if f not in shared))
                order = [f for f in names if f in shared]
                views.append(np.transpose(arr, [order.index(f) for f in shared]).reshape(-1))
            out.append(views)
    return out


SHAPES = ((("os", 3), ("plan", 2)), (("os", 3), ("dark", 2)), (("plan", 2), ("beta", 2), ("sync", 2)), (("x", 4),))


def test_group_projection_leaves_valid_tables_alone_and_makes_noisy_ones_consistent():
    rng = np.random.default_rng(4)
    joint = rng.dirichlet(np.ones(3 * 2 * 2 * 2 * 2)).reshape(3, 2, 2, 2, 2)   # os, plan, dark, beta, sync
    truth = [joint.sum(axis=(2, 3, 4)), joint.sum(axis=(1, 3, 4)), joint.sum(axis=(0, 2)), rng.dirichlet(np.ones(4))]
    same, _ = project_group_tables([t.reshape(-1) for t in truth], SHAPES)
    for a, b in zip(same, truth):
        np.testing.assert_allclose(a, b.reshape(-1), atol=1e-12)
    noisy = [t.reshape(-1) + rng.normal(0, 0.15, t.size) for t in truth]
    assert min(t.min() for t in noisy) < 0
    fixed, it = project_group_tables(noisy, SHAPES)
    assert it < 100000
    for t in fixed:
        assert (t >= 0).all()
        assert t.sum() == pytest.approx(1.0, abs=1e-9)
    views = _shared_marginals(fixed, SHAPES)
    assert len(views) == 2                                            # os, and plan, are shared
    for a, b in views:
        np.testing.assert_allclose(a, b, atol=1e-9)
    # the projection onto a convex set holding the truth moves no farther from it
    assert np.linalg.norm(np.concatenate(fixed) - np.concatenate([t.reshape(-1) for t in truth])) <= \
        np.linalg.norm(np.concatenate(noisy) - np.concatenate([t.reshape(-1) for t in truth]))
    with pytest.raises(ValueError, match="tables must hold 24 cells in all"):
        project_group_tables([t[:-1] for t in noisy], SHAPES)


def test_group_tables_of_a_boolean_window_counted_whole_are_marginals_of_the_chosen_joint():
    from ldp_marginals.ldp.encoding import Feature, Layout
    from ldp_marginals.ldp.tables import group_table

    bits = population(3000, d=4, seed=5)
    layout = Layout(tuple(Feature.boolean(n) for n in "abcd"))
    groups = [("a", "b"), ("b", "c", "d")]
    for top, methods in ((4, ("joint-em", "joint-mle")), (3, ("projection",))):
        _, est = _raw(bits, 0.7, seed=9, top=top)
        raw = [group_table(est, layout, g).estimate / est.n for g in groups]
        out = consistent_group_tables(est, layout, groups, raw)
        assert out.method in methods
        for t in out.tables:
            assert (t >= 0).all() and t.sum() == pytest.approx(1.0, abs=1e-9)
        shapes = [[(f, 2) for f in g] for g in groups]
        (a, b), = _shared_marginals(out.tables, shapes)
        np.testing.assert_allclose(a, b, atol=1e-8)
        if top == 4:        # the joint SURE chose for the groups' tables (bits of a, b and of b, c, d)
            y = noisy_histogram(est, (0, 1, 2, 3))
            mle = joint_mle({(0, 1, 2, 3): y}, lambda i: est.channels[i].matrix(), 4)
            chosen = joint_sure_em(y, lambda i: est.channels[i].matrix(), 4, [(0, 1), (1, 2, 3)], mle)
            assert chosen.method == out.method
            joint = chosen.joint
            # cells in group_cells order: first feature slowest, false before true
            want = joint.reshape(2, 2, 2, 2)                           # axes: d, c, b, a
            np.testing.assert_allclose(out.tables[0], want.sum(axis=(0, 1)).T.reshape(-1), atol=1e-12)
            np.testing.assert_allclose(out.tables[1], want.sum(axis=3).transpose(2, 1, 0).reshape(-1), atol=1e-12)
