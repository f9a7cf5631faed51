"""The choice of a mechanism for a whole-report promise (ldp/mechanism_choice.py): each candidate's
worst-case table variance is the trace of its estimator's own covariance (exact algebra), the pick
at the benchmark's epsilons, and a seeded simulation in which the picked mechanism's measured error
matches its figure and beats the other's."""
import math
from itertools import combinations

import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.hadamard import (
    HadamardAccumulator, HadamardEstimate, HadamardSampling, estimate_hadamard, randomize_hadamard,
)
from ldp_marginals.ldp.mechanism_choice import best_mechanism, candidates
from ldp_marginals.ldp.planning import table_variance_per_report
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.subset_rr import SubsetAccumulator, SubsetRR, estimate_subset, randomize_subset
from ldp_marginals.ldp.tables import marginal_table
from ldp_marginals.ldp.tmdh import estimate_tmdh, expected_counts
from tests.stats import Z


def test_per_bit_figure_is_the_table_trace_at_the_worst_pattern():
    """Channels of every shape: the figure is N times the trace of the Kronecker estimator's covariance
    (tables.py, from expected counts) when every report has the worst pattern, and no pattern is worse."""
    channels = ChannelSet((Channel(0.1, 0.7), Channel(0.3, 0.9), Channel(0.25, 0.75)))
    fam = SetFamily.all_up_to(3, 3)
    n = 1000
    traces = []
    for pattern in range(8):
        x = [(pattern >> i) & 1 for i in range(3)]
        truth = np.array([n * all(x[i] for i in s) for s in fam], dtype=float)
        est = estimate_tmdh(expected_counts(truth, fam, channels), channels, fam)
        traces.append(np.trace(marginal_table(est, (0, 1, 2)).covariance) / n)
    assert table_variance_per_report(channels.p, channels.q) == pytest.approx(max(traces), rel=1e-12)
    assert np.ptp(traces) > 0.1                                # the pattern matters for these channels
    sym = Channel.symmetric_from_epsilon(0.5)
    a = sym.q
    assert table_variance_per_report([sym.p] * 3, [sym.q] * 3) == pytest.approx(
        ((a * a + (1 - a) ** 2) / (2 * a - 1) ** 2) ** 3 - 1, rel=1e-12)


def test_hadamard_figure_is_the_table_trace_at_theta_zero():
    mech = HadamardSampling(6, 3, 4.0)                       # two slots, sqrt weights
    big_n = 10 ** 9
    drawn = np.r_[0.0, big_n * mech.slots * mech.probabilities]
    est = HadamardEstimate(mech, big_n, drawn, np.r_[1.0, np.zeros(mech.n_coefficients)])
    for o in (1, 2, 3):
        cols = tuple(range(o))
        trace = np.trace(est.table(cols, truth=lambda s: 0.0).covariance) / big_n    # counts^2 -> N x frequency
        assert trace == pytest.approx(mech.table_variance_per_report(o), rel=1e-6)
    with pytest.raises(ValueError, match=r"order must be <= 3 \(max_order or the widest extra set\)"):
        mech.table_variance_per_report(4)



def test_hadamard_figure_includes_the_pool_of_extra_sets():
    """Issue 48 item 1: with an extra set of 5 bits over max_order 3, the figure of a 5-bit table (and of every
    table: the pool's growth dilutes every weight) is the trace of its covariance at theta = 0, and exceeds the
    plain mechanism's figure at order 3. Failed before: HadamardSampling took no sets."""
    plain = HadamardSampling(6, 3, 4.0)
    mech = HadamardSampling(6, 3, 4.0, sets=[(0, 1, 2, 3, 4)])
    big_n = 10 ** 9
    drawn = np.r_[0.0, big_n * mech.slots * mech.probabilities]
    est = HadamardEstimate(mech, big_n, drawn, np.r_[1.0, np.zeros(mech.n_coefficients)])
    for cols in ((0, 1, 2), (0, 1, 2, 3), (0, 1, 2, 3, 4)):
        trace = np.trace(est.table(cols, truth=lambda s: 0.0).covariance) / big_n
        assert trace == pytest.approx(mech.table_variance_per_report(len(cols)), rel=1e-6)
    assert mech.table_variance_per_report(3) > plain.table_variance_per_report(3)
    with pytest.raises(ValueError, match="columns must name 1..3 bits or an extra set's bits"):
        est.table((0, 1, 2, 5))


def test_the_pick_at_the_benchmark_epsilons():
    picks = {(d, e): best_mechanism(d, 3, e) for d in (7, 20) for e in (0.5, 1, 2, 4, 8)}
    assert [picks[(7, e)].label for e in (0.5, 1, 2, 4, 8)] == [
        "Hadamard sampling (m=1)"] * 3 + ["subset RR (s=6)", "subset RR (s=7)"]
    assert [picks[(20, e)].label for e in (0.5, 1, 2, 4, 8)] == [
        "Hadamard sampling (m=1)"] * 3 + ["subset RR (s=6)", "subset RR (s=10)"]
    every = candidates(7, 3, 8.0)
    assert [c.name for c in every] == ["subset-rr", "per-bit", "hadamard"]   # per-bit beats Hadamard at d=7, eps 8
    assert every[0].variance_per_report < every[1].variance_per_report < every[2].variance_per_report
    with pytest.raises(ValueError, match="order must be <= n_bits=2"):
        candidates(2, 3, 1.0)


@pytest.mark.statistical
def test_the_picked_mechanism_is_better_in_simulation_and_matches_its_figure():
    """d = 6 uniform bits, 3-way tables, whole-report epsilon 4 (subset RR of 5 bits is picked over
    Hadamard sampling with 2 slots): over 80 replicates of 20,000 reports the summed squared cell
    error per table, times N, matches each figure within Z standard errors of the replicates plus
    1% (the figures are limits: E[1/n] of a random count exceeds 1/E[n] by ~1/E[n]), and the picked
    one's is the smaller."""
    rng = np.random.default_rng(12)
    bits = (rng.random((20_000, 6)) < 0.5).astype(np.uint8)
    n = len(bits)
    sets = list(combinations(range(6), 3))
    truth = np.array([np.bincount((bits[:, list(s)].astype(np.int64) << np.arange(3)).sum(axis=1), minlength=8)
                      for s in sets]) / n
    pick, other = candidates(6, 3, 4.0)[:2]
    assert (pick.name, other.name) == ("subset-rr", "hadamard")

    def run(cand):
        mech = cand.mechanism
        if cand.name == "subset-rr":
            est = estimate_subset(SubsetAccumulator(mech).add(*randomize_subset(bits, mech, rng)))
        else:
            est = estimate_hadamard(HadamardAccumulator(mech).add(*randomize_hadamard(bits, mech, rng)))
        return n * ((est.frequencies(3) - truth) ** 2).sum(axis=1).mean()

    measured = {}
    for cand in (pick, other):
        errors = np.array([run(cand) for _ in range(80)])
        se = errors.std(ddof=1) / math.sqrt(len(errors))
        assert abs(errors.mean() - cand.variance_per_report) <= Z * se + 0.01 * cand.variance_per_report, (
            cand.label, errors.mean(), cand.variance_per_report)
        measured[cand.name] = errors.mean()
    assert measured["subset-rr"] < measured["hadamard"]
