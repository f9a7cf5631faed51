"""ldp/thin_rows.py: which rows of the whole-report kinds rest on too few reports (issue 47 item 6), and
the two facts its rule stands on, checked exactly on simulated windows: a Hadamard window's rows
difference to each coefficient alone, and a published subset-RR table, marginalized, takes its reports
out of a lower marginal's counts (leaving the reports whose subset holds the marginal's bits only)."""
from itertools import combinations

import numpy as np
import pytest

from ldp_marginals.ldp.hadamard import HadamardSampling, randomize_hadamard
from ldp_marginals.ldp.hadamard_reports import HadamardAggregator, window_marginals
from ldp_marginals.ldp.subset_rr import SubsetAccumulator, SubsetRR, estimate_subset, randomize_subset
from ldp_marginals.ldp.thin_rows import hadamard_thin_sets, subset_thin_sets


def _subsets(s):
    return [a for r in range(len(s) + 1) for a in combinations(s, r)]


def test_hadamard_rows_difference_to_each_coefficient():
    """theta_S = sum_{a subset S} (-1)^|a| 2^|a| pi_a (Moebius inversion of pi_S = 2^-|S| sum_a (-1)^|a|
    theta_a, pi_{} = 1): from the published all-ones rows of S and its subsets, to 1e-9. So a row holding a
    thin coefficient cannot be published beside the rows of that coefficient's subsets."""
    mech = HadamardSampling(n_bits=5, max_order=3, epsilon=2.0)
    rng = np.random.default_rng(0)
    bits = (rng.random((3000, 5)) < [0.2, 0.4, 0.5, 0.7, 0.9]).astype(np.uint8)
    agg = HadamardAggregator(mech)
    acc = agg.add_packed(agg.create(), agg.format.pack(*randomize_hadamard(bits, mech, rng)))
    marg = window_marginals(agg, acc)
    fam = mech.family
    pi = {s: (marg.means[fam.index(s)] / marg.n if s else 1.0) for o in range(4) for s in combinations(range(5), o)}
    for s in [s for o in (1, 2, 3) for s in combinations(range(5), o)]:
        recovered = sum((-1) ** len(a) * 2 ** len(a) * pi[a] for a in _subsets(s))
        assert recovered == pytest.approx(marg.estimate.theta[fam.index(s)], abs=1e-9), s


def test_hadamard_a_set_is_thin_iff_a_coefficient_within_it_is():
    mech = HadamardSampling(n_bits=4, max_order=3, epsilon=1.0)
    fam = mech.family
    rng = np.random.default_rng(1)
    for _ in range(50):
        drawn = np.concatenate([[0], rng.integers(0, 30, len(fam) - 1)])
        sets = [tuple(s) for s in fam if s]
        got = hadamard_thin_sets(drawn, fam.index, sets, 10)
        want = {s for s in sets if any(0 < drawn[fam.index(a)] < 10 for a in _subsets(s) if a)}
        assert set(got) == want
        for s, thin in got.items():
            assert thin.reports == min(drawn[fam.index(a)] for a in _subsets(s) if a and 0 < drawn[fam.index(a)] < 10)


def _subset_window(n=2000, seed=2):
    mech = SubsetRR(n_bits=5, max_order=2, epsilon=2.0, width=3)
    rng = np.random.default_rng(seed)
    bits = (rng.random((n, 5)) < [0.2, 0.4, 0.5, 0.7, 0.9]).astype(np.uint8)
    subsets, patterns = randomize_subset(bits, mech, rng)
    acc = SubsetAccumulator(mech)
    acc.add(subsets, patterns)
    return mech, estimate_subset(acc), subsets, patterns


def test_subset_a_published_table_takes_its_reports_out_of_a_lower_marginal():
    """Bit 0's order-1 count of ones minus the (0, 1) table's cells with bit 0 set is exactly the ones
    sent on bit 0 by the reports whose subset holds bit 0 but not bit 1: the residual the rule counts."""
    mech, est, subsets, patterns = _subset_window()
    fam = mech.family
    ones_0 = est.counts[1][fam.index((0,)) - fam.offset(1)][1]
    table = est.counts[2][fam.index((0, 1)) - fam.offset(2)]     # cell b: bit 0 of b <-> bit 0, bit 1 <-> bit 1
    apart = (subsets & 1).astype(bool) & ~((subsets >> 1) & 1).astype(bool)
    assert ones_0 - table[0b01] - table[0b11] == int((patterns[apart] & 1).sum())
    assert 0 < apart.sum() < len(subsets)


def test_subset_thin_sets_counts_the_reports_a_row_rests_on_and_what_tables_leave_apart():
    mech, est, subsets, _ = _subset_window()
    fam = mech.family

    def drawn_of(s):
        return est.drawn(len(s))[fam.index(s) - fam.offset(len(s))]
    known = {"known_order": mech.max_order, "width": mech.width}   # the window counts n_K up to max_order

    def holding(s):
        return int(np.all([(subsets >> b) & 1 for b in s], axis=0).sum())
    singles, pairs = [(b,) for b in range(5)], list(combinations(range(5), 2))
    assert all(drawn_of(s) == holding(s) for s in singles + pairs)
    # no tables: thin iff 0 < n_K < min_reports
    m = sorted(holding(p) for p in pairs)[3] + 1          # four pairs below it
    got = subset_thin_sets(drawn_of, singles + pairs, [], m)
    assert set(got) == {p for p in pairs if holding(p) < m} and len(got) == 4
    # one table (0, 1), published: bit 0's row is thin iff what it leaves apart is in 1..m-1 (exact)
    apart = holding((0,)) - holding((0, 1))
    assert 0 < apart < holding((0, 1)) < holding((0,))     # of this seed: 600-odd of each
    got = subset_thin_sets(drawn_of, [(0,)], [(0, 1)], apart + 1, **known)
    assert set(got) == {(0,)} and f"leave {apart} of its {holding((0,))} reports apart" in got[(0,)].why
    assert subset_thin_sets(drawn_of, [(0,)], [(0, 1)], apart, **known) == {}
    # a thin table is not published, so it takes nothing apart: bit 0 is judged on its own reports
    assert set(subset_thin_sets(drawn_of, [(0,)], [(0, 1)], holding((0, 1)) + 1, **known)) == {(0, 1)}
    # two tables above bit 0: judged on the lower bound n_0 - n_01 - n_02 (they may overlap)
    bound = holding((0,)) - holding((0, 1)) - holding((0, 2))
    got = subset_thin_sets(drawn_of, [(0,)], [(0, 1), (0, 2)], max(bound, 0) + 1, **known)
    assert (0,) in got and "may leave fewer" in got[(0,)].why


def test_min_reports_is_validated():
    with pytest.raises(ValueError, match="min_reports"):
        subset_thin_sets(lambda s: 1, [(0,)], [], 0)
    with pytest.raises(ValueError, match="known_order=1"):
        subset_thin_sets(lambda s: 1, [(0,)], [(0, 1)], 2, known_order=1)
    with pytest.raises(ValueError, match="width"):
        subset_thin_sets(lambda s: 1, [(0,)], [], 2, width=0)
    with pytest.raises(ValueError, match="min_reports"):
        hadamard_thin_sets(np.zeros(3), lambda s: 1, [(0,)], 0.5)


def test_subset_family_rule_withholds_only_what_it_cannot_bound():
    """Tables (0, 1) and (0, 2) carry x_0 with bit 0's marginal. Width 2: no subset holds 0, 1 and 2, so every
    region is counted exactly (n_0 - n_01 - n_02, n_01, n_02): all published when each is >= min_reports, bit 0
    withheld when its own region is thin. Width 3 at max_order 2: the reports holding 0, 1 and 2 are not
    counted, so one of the tables goes (the thinner) with bit 0; with every count given, the rule is exact."""
    def count(types):   # n_K from the number of reports of each subset
        return lambda s: sum(n for t, n in types.items() if set(s) <= set(t))
    narrow = {(0, 1): 30, (0, 2): 20, (0, 3): 12, (1, 2): 9, (1, 3): 8, (2, 3): 7}
    sets = [(0,), (1,), (2,), (3,), (0, 1), (0, 2)]
    assert subset_thin_sets(count(narrow), sets, [(0, 1), (0, 2)], 10, known_order=2, width=2) == {}
    got = subset_thin_sets(count(narrow), sets, [(0, 1), (0, 2)], 13, known_order=2, width=2)
    assert set(got) == {(0,)} and "leave 12 of its 62 reports apart" in got[(0,)].why
    wide = {(0, 1, 2): 3, (0, 1, 3): 40, (0, 2, 3): 30, (1, 2, 3): 20}
    got = subset_thin_sets(count(wide), sets, [(0, 1), (0, 2)], 10, known_order=2, width=3)
    assert set(got) == {(0,), (0, 2)} and "between 0 and" in got[(0, 2)].why
    # every count given: the region of the 3 reports holding 0, 1 and 2 is exact and thin at 10, so the rule
    # still withholds (sufficient, not exact: no combination isolates that region alone); at 3 it is not thin
    assert set(subset_thin_sets(count(wide), sets, [(0, 1), (0, 2)], 10, width=3)) == {(0,), (0, 2)}
    assert subset_thin_sets(count(wide), sets, [(0, 1), (0, 2)], 3, width=3) == {}
def test_under_the_device_unit_a_row_needs_min_reports_times_the_reports_of_one_device():
    """Issue 48 item 2: min_reports counts devices, and a device adds up to R reports to a row, so n reports
    hold at least ceil(n / R) devices: with min_reports 20 and R = 2, a coefficient (hadamard) or a subset
    count (subset) of 39 reports may hold 19 devices (thin), one of 40 holds 20 (not thin). Unit report
    (R = 1): 39 is not thin. Failed before: no per_device argument (the count was compared with 20)."""
    drawn = np.array([0, 39, 40, 100])   # family index 0 is the empty set
    index_of = {(0,): 1, (1,): 2, (0, 1): 3}.__getitem__
    thin = hadamard_thin_sets(drawn, index_of, [(0,), (1,)], 20, per_device=2)
    assert set(thin) == {(0,)} and "min_reports=20 devices x 2 reports a device = 40" in thin[(0,)].why
    assert hadamard_thin_sets(drawn, index_of, [(0,), (1,)], 20) == {}
    n = {(0,): 39, (1,): 40}
    assert set(subset_thin_sets(n.__getitem__, [(0,), (1,)], [], 20, per_device=2)) == {(0,)}
    assert subset_thin_sets(n.__getitem__, [(0,), (1,)], [], 20) == {}
