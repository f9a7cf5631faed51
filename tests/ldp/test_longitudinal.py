"""Epsilon over time, against exact enumeration: for small layouts, the largest log-likelihood ratio
over every pair of inputs and every sequence of T reports' output bits equals the stated epsilon_T,
never exceeds epsilon_infinity, and epsilon_1 is the local epsilon of the effective channel."""
import math
from itertools import product

import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.encoding import Feature, Layout
from ldp_marginals.ldp.longitudinal import (
    epsilon_infinity,
    epsilon_one,
    epsilon_reports,
    longitudinal_epsilon,
)
from ldp_marginals.ldp.memoized import ClientChannels
from ldp_marginals.ldp.privacy import local_dp_epsilon

LAYOUT = Layout((Feature.boolean("a"), Feature.categorical("os", ["x", "y", "z"]), Feature.numeric("m", 0, 4)))
INST = ChannelSet((Channel(0.5, 0.75), Channel(0.3, 0.8), Channel(0.2, 0.6), Channel(0.25, 0.7), Channel(0.1, 0.55)))
PERM = (Channel(0.25, 0.75), Channel(0.2, 0.9), Channel(0.35, 0.7), Channel(0.1, 0.6), Channel(0.3, 0.8))
MEMOIZED = ClientChannels(INST, PERM)
MIXED = ClientChannels(INST, (None, PERM[1], PERM[2], PERM[3], None))   # the boolean and the numeric draw afresh
INPUTS = [{"a": a, "os": o, "m": m} for a in (False, True) for o in "xyz" for m in (0.0, 1.0, 4.0)]


def sequence_log_laws(channels: ClientChannels, n_reports: int) -> np.ndarray:
    """Brute force: ln P(all output bits of n reports | input), one row per input of INPUTS, one
    column per output sequence, summing over every permanent state a device can hold."""
    rows = []
    d = LAYOUT.n_bits
    patterns = np.array(list(product((0, 1), repeat=d)))            # one report's outputs
    for values in INPUTS:
        x = np.concatenate([np.atleast_1d(f.encode(values[f.name], 0.0)) if f.kind != "numeric" else [0]
                            for f in LAYOUT.features])
        u = values["m"] / 4.0
        law = np.zeros(len(patterns) ** n_reports)
        memo = [i for i in range(d) if channels.permanent[i] is not None]
        # a device's permanent state: its permanent bits, and (numeric bit memoized) its encoded bit
        for perm_bits in product((0, 1), repeat=len(memo)):
            for e in ((0, 1) if 4 in memo else (None,)):
                weight = 1.0 if e is None else (u if e else 1 - u)
                p_one = np.empty(d)
                for i in range(d):
                    inst, perm = channels.instantaneous[i], channels.permanent[i]
                    xi = e if i == 4 and e is not None else x[i]
                    if perm is not None:
                        b = perm_bits[memo.index(i)]
                        weight *= (perm.q if xi else perm.p) if b else 1 - (perm.q if xi else perm.p)
                        p_one[i] = inst.q if b else inst.p
                    elif i == 4:                                   # numeric drawn afresh per report
                        p_one[i] = u * inst.q + (1 - u) * inst.p
                    else:
                        p_one[i] = inst.q if xi else inst.p
                report = np.prod(np.where(patterns == 1, p_one, 1 - p_one), axis=1)
                seq = report
                for _ in range(n_reports - 1):
                    seq = np.outer(seq, report).ravel()
                law += weight * seq
        rows.append(np.log(law))
    return np.array(rows)


@pytest.mark.parametrize("channels", [MEMOIZED, MIXED], ids=["memoized", "mixed"])
@pytest.mark.parametrize("n_reports", [1, 2, 3])
def test_the_largest_log_likelihood_ratio_is_the_stated_epsilon(channels, n_reports):
    logs = sequence_log_laws(channels, n_reports)
    largest = float((logs.max(axis=0) - logs.min(axis=0)).max())
    assert largest == pytest.approx(epsilon_reports(LAYOUT, channels, n_reports), rel=1e-9)
    assert largest <= epsilon_infinity(LAYOUT, channels) + 1e-9
    if n_reports == 1:
        assert largest == pytest.approx(local_dp_epsilon(LAYOUT, channels.effective), rel=1e-9)
        assert epsilon_one(LAYOUT, channels) == pytest.approx(largest, rel=1e-9)


def test_epsilon_grows_to_epsilon_infinity_when_every_bit_memoizes():
    eps = [epsilon_reports(LAYOUT, MEMOIZED, n) for n in (1, 2, 5, 20, 100, 2000)]
    inf = epsilon_infinity(LAYOUT, MEMOIZED)
    assert all(a < b for a, b in zip(eps, eps[1:]))
    assert eps[-1] <= inf + 1e-9 and eps[-1] == pytest.approx(inf, rel=1e-6)
    assert inf == pytest.approx(local_dp_epsilon(LAYOUT, ChannelSet(PERM)), rel=1e-12)
    assert math.isinf(epsilon_infinity(LAYOUT, MIXED))


def test_rappors_stated_figures():
    """RAPPOR's epsilon_1 = h ln(q*(1-p*)/(p*(1-q*))) and epsilon_inf = 2h ln((1-f/2)/(f/2)) at
    f = 0.5, p = 0.5, q = 0.75: a one-hot value is h = 1 (the note's h = 2 figures are twice these)."""
    layout = Layout((Feature.categorical("v", ["a", "b", "c", "d"]),))
    chans = ClientChannels.rappor(0.5, 0.5, 0.75, 4)
    eff = chans.effective[0]
    assert epsilon_one(layout, chans) == pytest.approx(math.log(eff.q * (1 - eff.p) / (eff.p * (1 - eff.q))))
    assert epsilon_infinity(layout, chans) == pytest.approx(2 * math.log(0.75 / 0.25))
    assert 2 * epsilon_one(layout, chans) == pytest.approx(1.07, abs=0.005)          # the note's h = 2 figures
    assert 2 * epsilon_infinity(layout, chans) == pytest.approx(4.39, abs=0.005)


def test_epsilon_per_day_and_month_from_a_report_rate():
    layout = Layout((Feature.boolean("a"),))
    plain = ClientChannels.plain(ChannelSet.uniform(Channel.symmetric_from_epsilon(math.log(3)), 1))
    hourly = longitudinal_epsilon(layout, plain, 24)
    assert hourly.one == pytest.approx(math.log(3))
    assert math.isinf(hourly.infinity)
    assert hourly.per_day == pytest.approx(24 * math.log(3)) and hourly.per_month == pytest.approx(720 * math.log(3))
    rare = longitudinal_epsilon(layout, plain, 0.1)                       # at most 1 a day, 3 a month
    assert rare.per_day == pytest.approx(math.log(3)) and rare.per_month == pytest.approx(3 * math.log(3))
    memo = longitudinal_epsilon(layout, ClientChannels.rappor(0.5, 0.5, 0.75, 1), 24)
    assert memo.one < memo.per_day <= memo.per_month <= memo.infinity + 1e-12
    assert memo.describe()["epsilon_infinity"] == pytest.approx(math.log(3))
    assert hourly.describe()["epsilon_infinity"] is None
    with pytest.raises(ValueError, match="reports_per_day must be > 0"):
        longitudinal_epsilon(layout, plain, 0)
