"""``compare`` (and the dashboard's change panel, which runs the same ``pipelines.compare.changes`` on
the same ``rows_of``) answers the population's question: on stationary simulated data (two hourly
windows of the demo's collection drawn from one population) the false discovery rate of each kind
compared is at most the nominal 0.05, within a binomial band; a real change is found. The rows are
the job's own (transforms/publication/rows.py) from the job's estimator."""
import math

import numpy as np
import pytest

from ldp_marginals.ldp.compare import population_variance
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.pipelines import compare
from ldp_marginals.pipelines.demo import DEMO_CONFIG
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS, Change, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import CONDITIONALS, MEANS
from ldp_marginals.transforms.publication.rows import conditional_rows, marginal_rows, mean_rows
from tests.stats import Z

HOUR_MS = 3_600_000
FDR = 0.05


def window_rows(cfg, pop, rows, start):
    """The job's marginal, conditional and mean rows of one window of the population's reports."""
    acc = CooccurrenceAccumulator(cfg.family).add_packed(pop.noisy[rows])
    est = estimate_tmdh(acc, cfg.channels, exclusive_groups=cfg.layout.exclusive_groups)
    base = {"collection": cfg.name, "window_start": start, "window_end": start + HOUR_MS, "dimensions": {},
            "n_reports": len(rows)}
    out = {"marginals": list(marginal_rows(cfg, est, base)), "conditionals": [], "means": []}
    for kind, row in (*conditional_rows(cfg, est, base), *mean_rows(cfg, est, base)):
        if kind in (CONDITIONALS, MEANS):
            out[kind].append(row)
    return out


def discoveries(cfg, seed, delta=0.0):
    """Per kind, the sets ``compare`` calls changed between the two windows (BH at 0.05)."""
    at = DEFAULT_START_MS + HOUR_MS
    pop = simulate_population(cfg, 6000, seed=seed, span_seconds=2 * 3600, prevalences={"dark_mode": 0.3},
                              change=Change("dark_mode", 0.3 + delta, at, None) if delta else None)
    first = window_rows(cfg, pop, np.flatnonzero(pop.event_ms < at), DEFAULT_START_MS)
    second = window_rows(cfg, pop, np.flatnonzero(pop.event_ms >= at), at)
    out = {}
    for kind in ("marginals", "conditionals", "means"):
        found = compare.changes(compare.keyed(compare.rows_of(first[kind], kind)),
                                compare.keyed(compare.rows_of(second[kind], kind)), 0.95, FDR)
        out[kind] = [tuple(c["labels"]) for c in found if c["significant"]]
    return out


@pytest.mark.statistical
def test_stationary_data_keeps_the_false_discovery_rate_and_a_change_is_found():
    """150 stationary replicates (about 3,000 reports per window, per-bit epsilon 2): with every
    hypothesis null, the FDR is the share of replicates with any discovery, at most 0.05 + Z binomial
    standard errors (0.13) per kind. With the randomization variance alone (the test of "did these
    reports differ?") the marginals' share is about 0.5. A change of dark_mode from 0.30 to 0.45 is
    flagged in at least 24 of 30 replicates (so a variance inflated to pass the first part fails)."""
    cfg = parse_config(DEMO_CONFIG)
    reps = 150
    runs = [discoveries(cfg, seed=500 + r) for r in range(reps)]
    band = FDR + Z * math.sqrt(FDR * (1 - FDR) / reps)
    for kind in ("marginals", "conditionals", "means"):
        share = np.mean([bool(run[kind]) for run in runs])
        assert share <= band, (kind, share, band)
    found = [("dark_mode",) in discoveries(cfg, seed=900 + r, delta=0.15)["marginals"] for r in range(30)]
    assert sum(found) >= 24, sum(found)


def test_population_variance_is_unbiased_for_the_draw_of_the_reports():
    """Exact expectation over the binomial law of a window's noisy count (n reports drawn from a
    population with share F, each bit through symmetric randomized response, TMDH's estimate and its
    unbiased variance): E[population_variance] equals the estimate's whole variance, the
    randomization's plus F (1 - F) / n."""
    from scipy.stats import binom

    from ldp_marginals.ldp.channels import Channel, ChannelSet
    from ldp_marginals.ldp.sets import SetFamily

    ch = ChannelSet((Channel.symmetric_from_epsilon(2.0),))
    fam = SetFamily.all_up_to(1, 1)
    for n, share in ((500, 0.3), (2000, 0.05)):
        k = np.arange(n + 1)
        noisy_share = ch.p[0] + share * (ch.q[0] - ch.p[0])
        weights = binom.pmf(k, n, noisy_share)
        estimates = [estimate_tmdh(np.array([n, c], dtype=float), ch, fam) for c in k]
        freq = np.array([e.means[1] / n for e in estimates])
        own = np.array([e.variances[1] / n ** 2 for e in estimates])
        pop = np.array([population_variance(f, v, n) for f, v in zip(freq, own)])
        whole = weights @ (freq - weights @ freq) ** 2                 # Var(f) over both draws
        assert weights @ freq == pytest.approx(share, rel=1e-9)
        assert whole == pytest.approx(weights @ own + share * (1 - share) / n, rel=1e-9)
        assert weights @ pop == pytest.approx(whole, rel=1e-6)
    assert population_variance(0.2, 0.001, 1) == math.inf
    assert population_variance(1.2, 0.001, 100) == 0.001                # f outside [0, 1]: never below its own
    with pytest.raises(ValueError, match="must be numbers"):
        population_variance(float("nan"), 0.001, 100)
