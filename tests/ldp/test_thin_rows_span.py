"""An exact rank check of the subset-RR thin-row rule (ldp/thin_rows.py) within ONE window (task a-attack,
issue 47 review): every published marginal and table cell is a linear function of the reports' noisy
patterns grouped by their subset (a report of subset t adds 1 to the all-ones count of every published set
S within t whose bits it sent as 1, and to one cell of every published table T within t). The rule must
leave no nonzero combination of published rows supported on the reports of subsets that hold together 1 to
min_reports - 1 reports. OPEN on main at 3e51ad3 (closed on a-attack by the family rule of
ldp/thin_rows.py): tables whose subsets overlap cancel each other down to one subset (the seeded
population below: 3 reports isolated at min_reports 5; through the command in
tests/pipelines/test_attacks_issue47.py). The check finds leaks when the rule is off (mutation below)."""
import itertools

import numpy as np
import pytest

from ldp_marginals.ldp.thin_rows import subset_thin_sets


def _rank(a):
    return 0 if a.size == 0 else int(np.linalg.matrix_rank(a))


def isolated_groups(mat, col_units: list, counts: dict, m: int, max_size: int | None = None) -> list:
    """The attack of the span tests: every group (of at most ``max_size`` units, default any number) of thin
    units (``counts`` maps a unit to its reports, in the order groups are formed; thin: 0 < reports < m) that
    together hold fewer than ``m`` reports and that the published rows ``mat`` isolate: taking the group's
    columns (``col_units``: the unit of each column) out drops the rank by more than the group's size, so some
    combination of the rows is supported on the group and is not a combination of its counts (which the rows
    hold). Returns ``[(group, its reports)]``."""
    full = _rank(mat)
    small = [u for u, n in counts.items() if 0 < n < m]
    out = []
    for size in range(1, min(len(small), max_size or len(small)) + 1):
        for group in itertools.combinations(small, size):
            if sum(counts[u] for u in group) < m:
                keep = [j for j, u in enumerate(col_units) if u not in group]
                if full - _rank(mat[:, keep]) > len(group):
                    out.append((group, sum(counts[u] for u in group)))
    return out


def _leaks(d, w, k, n_t, m, tables, rule=True, counted=None, extra=()) -> list:
    """Groups of subsets holding 1..m-1 reports on which a combination of published rows (and of every
    subset's count) is supported, beyond the group's own counts. ``counted``: the rule reads n_K of sets of
    at most this many bits only, and the width (as the job does: the window counts up to max_order);
    None: of every set. ``extra``: the kind's extra sets (issue 48 item 1): their subsets above max_order are
    published marginals too, and the rule reads their counts (as the job: ``counted`` the family's members)."""
    from ldp_marginals.ldp.sets import SetFamily
    types = list(itertools.combinations(range(d), w))
    cols = [(t, p) for t in types for p in range(1 << w)]
    family = SetFamily(d, k, extra)
    sets = [s for s in family if s]

    def drawn(s):
        return sum(n_t[t] for t in types if set(s) <= set(t))
    known = {} if counted is None else {"known_order": counted, "width": w, "counted": family.__contains__}
    thin = subset_thin_sets(drawn, sets, list(tables), m, **known) if rule else {}
    rows = [[float(set(s) <= set(t) and all((p >> t.index(b)) & 1 for b in s)) for t, p in cols]
            for s in sets if s not in thin and drawn(s) > 0]
    for table in tables:
        if table in thin or drawn(table) == 0:
            continue
        for cell in range(1 << len(table)):
            rows.append([float(set(table) <= set(t) and all(((p >> t.index(b)) & 1) == ((cell >> i) & 1)
                                                            for i, b in enumerate(table))) for t, p in cols])
    # each subset's number of reports is metadata (n_K is read back from a row's variance): add the count of
    # every subset, so a combination that is only a count is not a leak; a leak is a combination supported on
    # the group that is not a combination of the group's counts
    rows += [[float(t == u) for t, _ in cols] for u in types]
    a = np.array(rows).reshape(len(rows), len(cols))
    return isolated_groups(a, [t for t, _ in cols], {t: n_t[t] for t in types}, m)


@pytest.mark.parametrize("counted", [None, 3])
def test_overlapping_tables_isolate_no_subset(counted):
    """5 bits, width 4, max_order 3, tables (b0,b4), (b2,b4), (b1,b3,b4) resting on 10, 7 and 9 reports:
    (b2,b4) + (b1,b3,b4) - (b0,b4) on b4 = 1 is twice the 3 reports of subset (b1,b2,b3,b4)."""
    n_t = {(0, 1, 2, 3): 2, (0, 1, 2, 4): 1, (0, 1, 3, 4): 6, (0, 2, 3, 4): 3, (1, 2, 3, 4): 3}
    leaks = _leaks(5, 4, 3, n_t, 5, [(0, 4), (2, 4), (1, 3, 4)], counted=counted)
    assert not leaks, f"LEAK: published rows combine to functions of these subsets' reports alone: {leaks}"


@pytest.mark.parametrize("counted", ["every set", "up to max_order"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_populations_isolate_no_subset(seed, counted):
    """Random small populations (3-5 bits, any width and order, 0-3 tables of order >= 2, min_reports 5):
    no leak with the rule (seed 2 holds the case above); the mutation 'rule off' is found (next test). The
    rule reads the count of every set, or (as the job) of the sets of at most max_order bits and the width."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(150):
        d = int(rng.integers(3, 6))
        w = int(rng.integers(1, d))
        k = int(rng.integers(1, min(w, 3) + 1))
        n_t = {t: int(rng.choice([0, 1, 2, 3, 6, 20])) for t in itertools.combinations(range(d), w)}
        ks = [s for o in range(2, k + 1) for s in itertools.combinations(range(d), o)]
        tables = [ks[i] for i in rng.permutation(len(ks))[:int(rng.integers(0, 4))]] if ks else []
        leaks = _leaks(d, w, k, n_t, 5, tables, counted=None if counted == "every set" else k)
        if leaks:
            found.append((d, w, k, tables, leaks[0]))
    assert not found, f"LEAK in {len(found)} of 150 populations, e.g. {found[:2]}"


@pytest.mark.parametrize("seed", [0, 1])
def test_random_populations_with_extra_sets_isolate_no_subset(seed):
    """Issue 48 item 1: as above with one extra set of max_order + 1 to width bits (its subsets published as
    marginals, its table published with probability 1/2), the rule reading the counts the job keeps (every set
    of at most max_order bits and the extra set's subsets): no leak. Failed before: subset_thin_sets refused a
    published set above known_order ("every published set must be counted")."""
    rng = np.random.default_rng(100 + seed)
    found, wide, unruled = [], 0, 0
    for _ in range(100):
        d = int(rng.integers(3, 6))
        w = int(rng.integers(2, d))
        k = int(rng.integers(1, w))
        e = tuple(sorted(int(b) for b in rng.permutation(d)[:int(rng.integers(k + 1, w + 1))]))
        n_t = {t: int(rng.choice([0, 1, 2, 3, 6, 20])) for t in itertools.combinations(range(d), w)}
        ks = [s for o in range(2, k + 1) for s in itertools.combinations(range(d), o)]
        tables = [ks[i] for i in rng.permutation(len(ks))[:int(rng.integers(0, 3))]] if ks else []
        if rng.random() < 0.5:
            tables.append(e)
            wide += 1
        leaks = _leaks(d, w, k, n_t, 5, tables, counted=k, extra=[e])
        if leaks:
            found.append((d, w, k, e, tables, leaks[0]))
        unruled += bool(_leaks(d, w, k, n_t, 5, tables, rule=False, extra=[e]))   # the mutation: rule off
    assert wide >= 30 and not found, f"LEAK in {len(found)} of 100 populations, e.g. {found[:2]}"
    assert unruled >= 30   # the check has the power to see leaks here (57 of 100 at both seeds without the rule)


def test_mutation_the_check_finds_leaks_without_the_rule():
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(40):
        d = int(rng.integers(3, 6))
        w = int(rng.integers(1, d))
        k = int(rng.integers(1, min(w, 3) + 1))
        n_t = {t: int(rng.choice([0, 1, 2, 3, 6, 20])) for t in itertools.combinations(range(d), w)}
        hits += bool(_leaks(d, w, k, n_t, 5, [], rule=False))
    assert hits >= 10


# -- several atoms (task q-3): sliding windows and a window's panes sum released increments ---------------

def _atom_leaks(d, w, k, atoms: list, windows: list, m, tables, per_atom=True) -> list:
    """:func:`_leaks` over several atoms (disjoint sets of reports: ``atoms[i]`` maps each subset to its
    reports in atom i) and several published windows or panes (``windows``: tuples of atom indices each
    sums, as overlapping windows and successive panes do). A window withholds a set when the rule on the
    window's counts, or (``per_atom``, the job's rule) on one of its atoms' counts, names it. The columns
    are (atom, subset, pattern); each (atom, subset) count is metadata. A leak: a group of (atom, subset)
    cells holding 1..m-1 reports that a combination of published rows is supported on."""
    types = list(itertools.combinations(range(d), w))
    cols = [(a, t, p) for a in range(len(atoms)) for t in types for p in range(1 << w)]
    sets = [s for o in range(1, k + 1) for s in itertools.combinations(range(d), o)]

    def drawn_in(parts):
        return lambda s: sum(atoms[a][t] for a in parts for t in types if set(s) <= set(t))

    def thin_of(parts):
        thin = set(subset_thin_sets(drawn_in(parts), sets, list(tables), m, known_order=k, width=w))
        if per_atom:
            for a in parts:
                thin |= set(subset_thin_sets(drawn_in([a]), sets, list(tables), m, known_order=k, width=w))
        return thin
    rows = []
    for parts in windows:
        thin, drawn = thin_of(parts), drawn_in(parts)
        for s in sets:
            if s not in thin and drawn(s) > 0:
                rows.append([float(a in parts and set(s) <= set(t) and all((p >> t.index(b)) & 1 for b in s))
                             for a, t, p in cols])
        for table in tables:
            if table in thin or drawn(table) == 0:
                continue
            for cell in range(1 << len(table)):
                rows.append([float(a in parts and set(table) <= set(t) and all(
                    ((p >> t.index(b)) & 1) == ((cell >> i) & 1) for i, b in enumerate(table))) for a, t, p in cols])
    rows += [[float((a, t) == u) for a, t, _ in cols] for u in itertools.product(range(len(atoms)), types)]
    mat = np.array(rows).reshape(len(rows), len(cols))
    return isolated_groups(mat, [(a, t) for a, t, _ in cols],
                           {(a, t): atoms[a][t] for a in range(len(atoms)) for t in types}, m, max_size=3)


# sliding windows of two slices over three slices (and the edges), and a window's panes (prefixes)
_SLIDING_WINDOWS = [(0,), (0, 1), (1, 2), (2,)]
_PANES = [(0,), (0, 1), (0, 1, 2)]


@pytest.mark.parametrize("windows", [_SLIDING_WINDOWS, _PANES], ids=["sliding", "panes"])
def test_the_attack_through_the_command_isolates_nothing_per_atom(windows):
    """tests/pipelines/test_attacks_issue47.py's population: 4 bits, width 2, pairs; atom 0 holds 10
    reports of subset (b0, b1), atom 1 ONE, atom 2 none. Per atom: no leak; per window only: the leak."""
    types = list(itertools.combinations(range(4), 2))
    atoms = [{t: 10 if t == (0, 1) else 4 for t in types}, {t: 1 if t == (0, 1) else 6 for t in types},
             {t: 0 if t == (0, 1) else 6 for t in types}]
    assert not _atom_leaks(4, 2, 2, atoms, windows, 5, [])
    leaks = _atom_leaks(4, 2, 2, atoms, windows, 5, [], per_atom=False)
    assert ((1, (0, 1)),) in [g for g, _ in leaks], leaks


@pytest.mark.parametrize("windows", [_SLIDING_WINDOWS, _PANES], ids=["sliding", "panes"])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_atoms_isolate_no_subset(seed, windows):
    """Random small populations over 3 atoms (3-4 bits, any width and order, 0-2 tables, min_reports 5),
    published as sliding windows or as a window's panes: no leak with the rule per atom; without it (the
    rule per window only, the mutation) leaks are found (asserted below, so the check has power)."""
    rng = np.random.default_rng(seed)
    found, mutant = [], 0
    for _ in range(25):
        d = int(rng.integers(3, 5))
        w = int(rng.integers(1, d))
        k = int(rng.integers(1, min(w, 3) + 1))
        types = list(itertools.combinations(range(d), w))
        atoms = [{t: int(rng.choice([0, 1, 2, 3, 6, 20])) for t in types} for _ in range(3)]
        ks = [s for o in range(2, k + 1) for s in itertools.combinations(range(d), o)]
        tables = [ks[i] for i in rng.permutation(len(ks))[:int(rng.integers(0, 3))]] if ks else []
        leaks = _atom_leaks(d, w, k, atoms, windows, 5, tables)
        if leaks:
            found.append((d, w, k, tables, leaks[0]))
        mutant += bool(_atom_leaks(d, w, k, atoms, windows, 5, tables, per_atom=False))
    assert not found, f"LEAK in {len(found)} of 25 populations, e.g. {found[:2]}"
    assert mutant >= 3, mutant
