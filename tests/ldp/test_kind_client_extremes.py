"""Extremes over a client's reports for the whole-report kinds (ldp/kind_client_extremes.py): each report's
term is unbiased for the indicator and its variance term for the term's second moment, checked exactly
by enumerating every draw and randomization of one report (an independent brute force, not the
module's closed forms); then a window of clients through the kind's aggregator (``add_packed``,
``client_sums``) is unbiased within z * SE of the exact variance, and its intervals cover near 95%."""
from itertools import combinations, product

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.hadamard_reports import HadamardAggregator, encode_reports as hadamard_encode
from ldp_marginals.ldp.kind_client_extremes import KindClientTerms, client_reads_fault
from ldp_marginals.ldp.subset_reports import SubsetAggregator, encode_reports as subset_encode
from ldp_marginals.ldp.subset_rr import SubsetRR

EXTREMES = (("or", (0, 1)), ("and", (1, 2)), ("or", (3,)), ("and", (0,)))


def _indicator(op, bits, x):
    vals = [x[b] for b in bits]
    return float(all(v == 0 for v in vals)) if op == "or" else float(all(v == 1 for v in vals))


def hadamard_outcomes(mech, x):
    """Every (indices, parities) of one report of true bits x with its probability (m slots, each an
    independent draw and an independent symmetric RR of the coefficient's parity)."""
    t = mech.n_coefficients
    per_slot = []
    for a in range(1, t + 1):
        parity = sum(x[b] for b in mech.family[a]) % 2
        for y in (0, 1):
            per_slot.append((a, y, mech.probabilities[a - 1] * (mech.keep if y == parity else 1 - mech.keep)))
    for slots in product(per_slot, repeat=mech.slots):
        yield [s[0] for s in slots], [s[1] for s in slots], float(np.prod([s[2] for s in slots]))


def subset_outcomes(mech, x):
    """Every (subset mask, pattern) of one report with its probability: a uniform subset of width s, its
    pattern by 2^s-ary RR."""
    d, s = mech.n_bits, mech.width
    subsets = list(combinations(range(d), s))
    for sub in subsets:
        true = sum(x[b] << j for j, b in enumerate(sub))
        for sent in range(1 << s):
            prob = (mech.p if sent == true else mech.q) / len(subsets)
            mask = sum(1 << b for b in sub)
            pattern = sum(((sent >> j) & 1) << b for j, b in enumerate(sub))
            yield mask, pattern, prob


MECHS = [("hadamard", HadamardSampling(4, 2, 2.0)), ("hadamard", HadamardSampling(4, 2, 5.0, slots=2)),
         ("subset", SubsetRR(4, 2, 2.0, width=3)), ("subset", SubsetRR(4, 2, 1.0, width=2))]


@pytest.mark.parametrize("kind,mech", MECHS)
def test_each_report_term_is_unbiased_and_its_variance_term_unbiased_for_its_second_moment(kind, mech):
    """Exact, for every true vector of 4 bits: E[g] = the indicator, E[v] = E[g^2] (enumerated)."""
    terms = KindClientTerms(kind, mech, EXTREMES)
    for x in product((0, 1), repeat=4):
        outcomes = list(hadamard_outcomes(mech, x) if kind == "hadamard" else subset_outcomes(mech, x))
        probs = np.array([o[2] for o in outcomes])
        assert probs.sum() == pytest.approx(1.0, abs=1e-12)
        g, v = terms.factors(np.array([o[0] for o in outcomes]), np.array([o[1] for o in outcomes]))
        for e, (op, bits) in enumerate(EXTREMES):
            assert probs @ g[:, e] == pytest.approx(_indicator(op, bits, x), abs=1e-9), (x, op, bits)
            assert probs @ v[:, e] == pytest.approx(probs @ g[:, e] ** 2, rel=1e-9), (x, op, bits)


def exact_client_variance(kind, mech, op, bits, xs):
    """Var of one client's estimate over its reports xs, by enumeration of each report: prod E[g^2] - prod mu."""
    terms = KindClientTerms(kind, mech, [(op, bits)])
    second, mu = 1.0, 1.0
    for x in xs:
        outcomes = list(hadamard_outcomes(mech, x) if kind == "hadamard" else subset_outcomes(mech, x))
        probs = np.array([o[2] for o in outcomes])
        g, _ = terms.factors(np.array([o[0] for o in outcomes]), np.array([o[1] for o in outcomes]))
        second *= probs @ g[:, 0] ** 2
        mu *= _indicator(op, bits, x)
    return second - mu


def window(kind, mech, c, n_clients, rng):
    """A window of n_clients clients of c reports each (true bits per client drawn once, one of four
    patterns), through the kind's aggregator with a client sample of c."""
    patterns = np.array([[0, 0, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 1, 1]], dtype=np.uint8)
    which = np.arange(n_clients) % 4
    x = np.repeat(patterns[which], c, axis=0)
    encode, agg_type = (hadamard_encode, HadamardAggregator) if kind == "hadamard" else (subset_encode, SubsetAggregator)
    agg = agg_type(mech, client_extremes=EXTREMES[:2], client_sample=c)
    keys = np.repeat(np.array([client_key(f"c{i}") for i in range(n_clients)], dtype=np.uint64), c)
    ranks = report_ranks(agg.collection_key, keys, np.arange(keys.size, dtype=np.int64))
    acc = agg.add_packed(agg.create(), encode(x, mech, rng), keys, np.ones(keys.size, dtype=bool), ranks)
    return agg.client_sums(acc), patterns, which


@pytest.mark.statistical
@pytest.mark.parametrize("kind,mech,c", [("hadamard", MECHS[0][1], 2), ("subset", MECHS[2][1], 2)])
def test_a_window_of_clients_is_unbiased_and_its_intervals_cover(kind, mech, c):
    """400 seeded windows of 200 clients (c reports each): the mean of each client row is within 4.5 SE of
    the truth (SE from the exact variance, by enumeration), the mean of the variance estimates within 4.5
    SE of the exact variance (SE from their spread), and 95% intervals cover within 4 SE of a binomial of
    400 (a window of 200 clients is near normal at c = 2; measured 0.973 and 0.943 for hadamard, 0.927 and
    0.955 for subset RR; at c = 3 subset RR's product is too heavy-tailed for 200 clients: 0.86 and 0.90)."""
    rng = np.random.default_rng(48)
    reps, n_clients = 400, 200
    est, var = np.empty((reps, 2)), np.empty((reps, 2))
    for r in range(reps):
        sums, patterns, which = window(kind, mech, c, n_clients, rng)
        est[r], var[r] = [s[0] for s in sums], [s[1] for s in sums]
    for e, (op, bits) in enumerate(EXTREMES[:2]):
        per = [(1 - _indicator(op, bits, p) if op == "or" else _indicator(op, bits, p),
                exact_client_variance(kind, mech, op, bits, [p] * c)) for p in patterns]
        counts = np.bincount(which, minlength=4)
        truth = sum(n * t for n, (t, _) in zip(counts, per))
        exact = sum(n * v for n, (_, v) in zip(counts, per))
        assert abs(est[:, e].mean() - truth) <= 4.5 * np.sqrt(exact / reps), (op, bits, est[:, e].mean(), truth)
        assert abs(var[:, e].mean() - exact) <= 4.5 * var[:, e].std() / np.sqrt(reps), (var[:, e].mean(), exact)
        half = 1.959964 * np.sqrt(np.maximum(var[:, e], 0))
        cover = np.mean(np.abs(est[:, e] - truth) <= half)
        assert abs(cover - 0.95) <= 4 * np.sqrt(0.95 * 0.05 / reps), (op, bits, cover)


def test_reads_rule_groups_and_unread():
    """A group of clients read alike with fewer than min_reports members, or 1..m-1 unread reads, is a
    fault; clients nothing reads (a constant term) are no group."""
    ok = np.array([[5.0]] * 3 + [[0.0]])
    assert client_reads_fault(ok, np.array([True] * 3 + [False]), [np.array([0.0, 3.0])], 3) is None
    assert "fewer than min_reports=4" in client_reads_fault(ok, np.array([True] * 3 + [False]), [np.zeros(2)], 4)
    assert "between 1 and 2 reads" in client_reads_fault(ok[:3], np.ones(3, bool), [np.array([2.0])], 3)
    assert client_reads_fault(ok[:3], np.ones(3, bool), [np.array([2.0])], 3, per_device=2) is not None
    assert client_reads_fault(ok[:3], np.ones(3, bool), [np.array([6.0])], 3, per_device=2) is None


def test_extremes_the_kind_does_not_count_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"got bits=\[0, 1, 2\]"):
        KindClientTerms("hadamard", HadamardSampling(4, 2, 2.0), [("or", (0, 1, 2))])
    with pytest.raises(ValueError, match="got kind='per_bit'"):
        KindClientTerms("per_bit", HadamardSampling(4, 2, 2.0), [("or", (0,))])
