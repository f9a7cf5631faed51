"""A device's day and month as the job enforces them (issue 47, item 4), against values computed by
hand: the slices a day and a month meet for fixed, sliding and global windows, times the reports a
device may add per slice (M, times K with dimensions), each epsilon_1; where bits memoize, the exact
epsilon of that many reports of one value, written out here from the two-stage law."""
import math

import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.encoding import Feature, Layout
from ldp_marginals.ldp.longitudinal import enforced_epsilon
from ldp_marginals.ldp.memoized import ClientChannels
from ldp_marginals.ldp.windows import Window
from ldp_marginals.schemas.config import parse_config

BIT = Layout((Feature.boolean("a"),))
PLAIN = ClientChannels.plain(ChannelSet.uniform(Channel.symmetric_from_epsilon(0.1), 1))   # epsilon_1 = 0.1
MEMO = ClientChannels.rappor(0.5, 0.5, 0.75, 1)   # permanent (0.25, 0.75), instantaneous (0.5, 0.75)


@pytest.mark.parametrize("window, day, month", [
    (Window("fixed", 3600), 24, 720),                 # 86400 / 3600 slices a day
    (Window("fixed", 86400), 1, 30),
    (Window("fixed", 900), 96, 2880),
    # 7 h does not divide a day: day 2 ([48 h, 72 h)) meets the slices starting at 42, 49, 56, 63 and 70 h;
    # 30 days from day 1 ([24 h, 744 h)) meet the slices of 21 h ... 742 h: 104
    (Window("fixed", 7 * 3600), 5, 104),
    (Window("fixed", 2 * 86400), 1, 16),              # 30 days from an odd day meet 16 two-day slices
    (Window("fixed", 1.5 * 86400), 2, 21),            # a day may straddle two slices of 36 h
    (Window("sliding", 86400, 3600), 24, 720),         # a sliding window's slice is its period, not its size
    (Window("sliding", 7200, 900), 96, 2880),
    (Window("global"), 1, 1),                         # one slice for all time
])
def test_slices_a_day_and_a_month(window, day, month):
    assert (window.slices_in_days(1), window.slices_in_days(30)) == (day, month)


@pytest.mark.parametrize("window, m, per_day, per_month", [
    (Window("fixed", 3600), 1, 2.4, 72.0),       # the case: 24 and 720 reports of epsilon 0.1
    (Window("fixed", 86400), 1, 0.1, 3.0),
    (Window("fixed", 86400), 3, 0.3, 9.0),
    (Window("sliding", 86400, 3600), 2, 4.8, 144.0),
    (Window("global"), 3, 0.3, 0.3),             # 3 reports ever
])
def test_without_memoization_each_published_report_spends_epsilon_1(window, m, per_day, per_month):
    e = enforced_epsilon(BIT, PLAIN, window, m)
    assert (e.per_day, e.per_month) == (pytest.approx(per_day), pytest.approx(per_month))
    assert e.describe()["reports_per_month"] == m * window.slices_in_days(30)


def _memoized_by_hand(n: int) -> float:
    """One boolean under RAPPOR f = 0.5, p = 0.5, q = 0.75 memoized: n reports with k ones have
    P(. | x) = P(b = 1 | x) 0.75^k 0.25^(n-k) + P(b = 0 | x) 0.5^n, P(b = 1 | 1) = 0.75, P(b = 1 | 0) = 0.25."""
    def law(w, k):
        return w * 0.75 ** k * 0.25 ** (n - k) + (1 - w) * 0.5 ** n
    return max(abs(math.log(law(0.75, k) / law(0.25, k))) for k in range(n + 1))


def test_memoized_reports_of_one_value_spend_their_exact_epsilon_never_above_epsilon_infinity():
    one = _memoized_by_hand(1)
    e = enforced_epsilon(BIT, MEMO, Window("global"), 3)       # at most 3 reports ever
    assert e.one == pytest.approx(one) and e.infinity == pytest.approx(math.log(3))
    assert e.per_day == e.per_month == pytest.approx(_memoized_by_hand(3))
    assert _memoized_by_hand(3) < min(3 * one, math.log(3))    # below both bounds, not one of them
    daily = enforced_epsilon(BIT, MEMO, Window("fixed", 86400), 1)
    assert (daily.per_day, daily.per_month) == (pytest.approx(one), pytest.approx(_memoized_by_hand(30)))
    hourly = enforced_epsilon(BIT, MEMO, Window("fixed", 3600), 1)   # 720 reports: all but epsilon_infinity
    assert math.log(3) - 1e-6 < hourly.per_month <= math.log(3) and hourly.per_month < 720 * one


BASE = {"collection": "c", "features": [{"name": "a", "type": "boolean"}],
        "channel": {"mechanism": "symmetric", "epsilon": 0.1}, "max_order": 1,
        "window": {"type": "fixed", "size_seconds": 86400}, "min_reports": 5,
        "privacy": {"unit": "device", "max_reports_per_device": 3, "max_keys_per_device": 2}}


def test_a_device_adds_m_reports_to_each_of_k_keys_a_slice_with_dimensions_and_m_without():
    without = parse_config(BASE).describe()["epsilons"]["enforced"]
    assert (without["reports_per_slice"], without["epsilon_per_day"], without["epsilon_per_month"]) == (
        3, pytest.approx(0.3), pytest.approx(9.0))
    keys = parse_config(dict(BASE, dimensions={"region": {}})).describe()["epsilons"]["enforced"]
    assert (keys["reports_per_slice"], keys["epsilon_per_day"], keys["epsilon_per_month"]) == (
        6, pytest.approx(0.6), pytest.approx(18.0))
    memo = parse_config(dict(BASE, dimensions={"region": {}}, window={"type": "global"},
                             channel={"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75, "memoize": True},
                             features=[{"name": "a", "type": "boolean"}]))
    assert memo.describe()["epsilons"]["enforced"]["epsilon_per_month"] == pytest.approx(_memoized_by_hand(6))


def test_the_report_unit_states_no_figures_over_time():
    cfg = parse_config({k: v for k, v in BASE.items() if k != "privacy"})
    e = cfg.describe()["epsilons"]
    assert e["epsilon_1"] == pytest.approx(0.1) and e["enforced"] is None and e["declared"] is None


def test_a_promise_is_kept_exactly_at_its_figure_and_refused_just_above_it():
    keep = dict(BASE, privacy=dict(BASE["privacy"], model="local", epsilon_per_month=9, epsilon_per_day=0.3))
    assert parse_config(keep).privacy.epsilon_per_month == 9
    with pytest.raises(ValueError, match=r"privacy promises epsilon_per_month=8.9, but the job publishes up to 90 "
                                         r"reports of one device a month \(30 slices of 86400 s a month x "
                                         r"max_reports_per_device 3: .*epsilon_per_month=9 .*; fixed windows of 172800 s "
                                         r"\(1 slice a day, 16 a month\) give epsilon_per_day=0.3, "
                                         r"epsilon_per_month=4.8 at these bounds"):
        parse_config(dict(keep, privacy=dict(keep["privacy"], epsilon_per_month=8.9)))
    # no window keeps 0.2 a day at 3 reports a slice (global: 3 reports ever, 0.3); at one it takes 2 slices a day
    with pytest.raises(ValueError, match=r"privacy promises epsilon_per_day=0.2, .* up to 3 reports of one device "
                                         r"a day \(1 slice of 86400 s a day .*with max_reports_per_device: 1, fixed "
                                         r"windows of 43200 s \(2 slices a day\) give epsilon_per_day=0.2, "
                                         r"epsilon_per_month=6"):
        parse_config(dict(keep, privacy=dict(keep["privacy"], epsilon_per_day=0.2)))
    # calibrate reads a promise the figures break without refusing it
    assert parse_config(dict(keep, privacy=dict(keep["privacy"], epsilon_per_month=1)), check_promise=False)
