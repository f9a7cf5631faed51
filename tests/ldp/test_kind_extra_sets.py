"""Extra counted sets of the whole-report kinds (issue 48 item 1), by seeded simulation: with max_order 2, an
extreme over 3 bits and a conditional over 3 bits come from the table of an extra set (hadamard: the pool
holds its subsets' coefficients, sampled with stated weights; subset RR: the reports whose subset holds it),
unbiased within z standard errors of the closed-form variance and with 95% intervals covering near nominal.
Failed before: HadamardSampling and SubsetRR took no extra sets, and KindMarginals refused a table of more
than max_order bits. Power (R = 1000 replicates of N = 3000 reports): an extreme's variance 25% too small
fails the variance band (ratio 1.29 hadamard, 1.36 subset against 1 +- 0.20), a wide table projected as a
max_order one fails the bias check (mutations run by hand; the commit that set R says so)."""
import math

import numpy as np
import pytest

from ldp_marginals.ldp.channel_kind import channel_kind
from ldp_marginals.ldp.conditional import conditional
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.kind_analyses import KindMarginals
from ldp_marginals.ldp.subset_rr import SubsetRR

N, R = 3000, 1000
Z = 4.5           # |bias| band: a false alarm at about 7e-6 per check
WIDE = (0, 1, 2)


def _population(seed=2):
    """Fixed true reports (the variances are conditional on them): 4 correlated bits."""
    rng = np.random.default_rng(seed)
    z = rng.random(N) < 0.4
    return (rng.random((N, 4)) < np.where(z[:, None], 0.7, 0.15)).astype(np.uint8)


MECHANISMS = [HadamardSampling(4, 2, 2.0, sets=[WIDE]), SubsetRR(4, 2, 2.0, sets=[WIDE])]


def _replicates(mech, x):
    kind = channel_kind("subset" if isinstance(mech, SubsetRR) else "hadamard")
    agg = kind.aggregator(mech)
    rng = np.random.default_rng(17)
    out = []
    for _ in range(R):
        acc = agg.add_packed(agg.create(), kind.encode_reports(x, mech, rng))
        est = KindMarginals(agg.marginals(acc), kind.cell_variance_per_report)
        count, var = est.extreme("or", WIDE)
        c = conditional(est, (0,), (1, 2))
        out.append((count, var, c.estimate, c.variance))
    return np.array(out)


@pytest.mark.statistical
@pytest.mark.parametrize("mech", MECHANISMS, ids=["hadamard", "subset"])
def test_an_extreme_and_a_conditional_over_an_extra_set_are_unbiased_and_cover(mech):
    x = _population()
    truth_or = float(x[:, list(WIDE)].any(axis=1).sum())
    truth_cond = float((x[:, 0] & x[:, 1] & x[:, 2]).sum() / (x[:, 1] & x[:, 2]).sum())
    got = _replicates(mech, x)
    for (est, var), truth in (((got[:, 0], got[:, 1]), truth_or), ((got[:, 2], got[:, 3]), truth_cond)):
        assert np.isfinite(est).all() and (var > 0).all()
        # unbiased: the mean of R replicates within Z of its standard error, from the closed-form variance
        assert abs(est.mean() - truth) <= Z * math.sqrt(var.mean() / R), (est.mean(), truth)
        # the closed-form variance is the replicates' (chi-square band of the sample variance, R - 1 dof)
        ratio = est.var(ddof=1) / var.mean()
        assert 1 - Z * math.sqrt(2 / (R - 1)) < ratio < 1 + Z * math.sqrt(2 / (R - 1)), ratio
        # 95% normal intervals cover near nominal (binomial band)
        half = 1.959964 * np.sqrt(var)
        cover = np.mean(np.abs(est - truth) <= half)
        assert abs(cover - 0.95) <= Z * math.sqrt(0.95 * 0.05 / R), cover


def test_the_wide_table_is_the_kinds_estimate_of_its_subsets():
    """Exact, no noise: fed the expected counts, the wide table of either kind is the truth (hadamard: the
    coefficients of the subsets; subset: the projected shares), and the plain mechanism refuses it."""
    x = _population()
    from ldp_marginals.ldp.hadamard import HadamardEstimate, true_coefficients
    mech = MECHANISMS[0]
    theta = true_coefficients(x, mech.family)
    drawn = np.r_[0.0, 1e9 * mech.probabilities]
    table = HadamardEstimate(mech, N, drawn, theta).table(WIDE)
    cells = np.bincount((x[:, 0] + 2 * x[:, 1] + 4 * x[:, 2]).astype(int), minlength=8)
    assert table.estimate == pytest.approx(cells, abs=1e-6)
    plain = HadamardSampling(4, 2, 2.0)
    with pytest.raises(ValueError, match="columns must name 1..2 bits or an extra set's bits"):
        HadamardEstimate(plain, N, np.r_[0.0, 1e9 * plain.probabilities], true_coefficients(x, plain.family)).table(WIDE)
    with pytest.raises(ValueError, match=r"width must be at least the widest extra set \(3 bits"):
        SubsetRR(4, 2, 2.0, width=2, sets=[WIDE])
    assert SubsetRR(4, 2, 2.0, sets=[WIDE]).width >= 3
