"""The device unit and epsilon over time in the config: defaults, what each new key refuses (a
ValueError naming the parameter and its value), the epsilons collections.json states, and the
sufficient-DP crowd calibrated for k*M reports per person."""
import math

import pytest

from ldp_marginals.schemas.composition import check_composition
from ldp_marginals.schemas.config import parse_config

BASE = {"collection": "d", "features": [{"name": "a", "type": "boolean"}, {"name": "b", "type": "boolean"}],
        "channel": {"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75, "memoize": True}, "max_order": 2,
        "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 10,
        "privacy": {"unit": "device", "reports_per_day": 24}}


def test_the_default_unit_is_the_report_and_device_defaults_to_one_report():
    plain = parse_config({k: v for k, v in BASE.items() if k != "privacy"} | {"channel": {"p": 0.25, "q": 0.75}})
    assert (plain.unit, plain.device, plain.repeats_per_window, plain.shared_reports) == ("report", None, 1, 0)
    cfg = parse_config(BASE)
    assert (cfg.unit, cfg.device.max_reports_per_device, cfg.repeats_per_window, cfg.shared_reports) == (
        "device", 1, 1, 0)


def test_collections_json_states_the_epsilons_over_time():
    described = parse_config(BASE).describe()
    e = described["epsilons"]
    # one memoized boolean (docs/client.md section 6): 0.336 / ln 3; two booleans add
    assert e["epsilon_1"] == pytest.approx(2 * 0.33647, abs=1e-4)
    assert e["epsilon_infinity"] == pytest.approx(2 * math.log(3))
    # hourly windows, one report of a device each: the enforced month is 720 reports, as declared here
    for figures in (e["enforced"], e["declared"]):
        assert figures["epsilon_per_day"] <= figures["epsilon_per_month"] <= e["epsilon_infinity"] + 1e-9
    assert (e["enforced"]["reports_per_day"], e["enforced"]["reports_per_month"]) == (24, 720)
    assert e["enforced"]["epsilon_per_month"] == pytest.approx(e["declared"]["epsilon_per_month"])
    assert described["unit"] == "device" and described["memoized_bits"] == ["a", "b"]
    plain = parse_config(dict(BASE, channel={"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75}))
    assert plain.describe()["epsilons"]["epsilon_infinity"] is None   # not memoized: no bound for ever
    assert plain.describe()["epsilons"]["enforced"]["epsilon_per_month"] == pytest.approx(720 * 2 * 0.33647, rel=1e-3)


@pytest.mark.parametrize("change, message", [
    ({"privacy": {"unit": "person"}}, r"privacy.unit must be one of \['report', 'device'\], got unit='person'"),
    ({"privacy": {"unit": "device", "max_reports_per_device": 0}},
     r"privacy.max_reports_per_device must be .*got .*0"),
    ({"privacy": {"unit": "device", "reports_per_day": -1}}, r"privacy.reports_per_day must be a whole number of "
                                                             r"reports in \[1, 2147483647\].*got reports_per_day=-1"),
    # the clients enforce whole reports per UTC day and refuse any other rate (docs/client.md section 3)
    ({"privacy": {"unit": "device", "reports_per_day": 0.5}}, r"privacy.reports_per_day must be a whole number "
                                                              r".*got reports_per_day=0.5"),
    ({"privacy": {"unit": "device", "reports_per_day": 24.0}}, r"privacy.reports_per_day must be a whole number "
                                                               r".*got reports_per_day=24.0"),
    ({"privacy": {"unit": "device", "reports_per_day": 2 ** 31}}, r"privacy.reports_per_day must be a whole number "
                                                                  r".*got reports_per_day=2147483648"),
    ({"privacy": {"unit": "device", "reports_per_day": 24, "model": "local", "epsilon_per_month": 2}},
     r"privacy promises epsilon_per_month=2, but the job publishes up to 720 reports of one device a month "
     r"\(720 slices of 3600 s a month x max_reports_per_device 1.*epsilon_per_month=2.197"),
    ({"channel": {"p": 0.25, "q": 0.75}, "privacy": {"model": "local", "epsilon_per_month": 5}},
     r"privacy.epsilon_per_month needs privacy.unit 'device' .*got unit='report'"),
    ({"channel": {"p": 0.25, "q": 0.75}, "privacy": {"model": "local", "unit": "device", "epsilon_per_day": 0}},
     r"privacy.epsilon_per_day must be > 0, got privacy.epsilon_per_day=0"),
    ({"privacy": {"unit": "device", "reports_per_day": 1, "model": "sufficient", "epsilon": 1,
                  "epsilon_per_month": 5}}, r"privacy.epsilon_per_month is a local promise, got model='sufficient'"),
    ({"dimensions": {"region": {}}, "privacy": {"unit": "device", "max_keys_per_device": 0}},
     r"privacy.max_keys_per_device must be .*got .*0"),
    ({"channel": {"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75, "memoize": "yes"}},
     r"memoize must be true or false, got memoize='yes'"),
])
def test_each_mistake_is_one_error_naming_the_parameter(change, message):
    spec = dict(BASE, **change)
    if spec["privacy"] is None:
        del spec["privacy"]
    with pytest.raises(ValueError, match=message):
        parse_config(spec)


def test_memoized_channels_with_several_reports_a_device_take_every_statistic():
    """Issue 48 item 3: tables, conditionals, means and extremes beside memoized channels with k*M > 1
    (refused before: their variances now carry the shared responses' term, ldp/memoized.py)."""
    extra = {"groups": [["a", "b"]], "conditionals": [{"of": ["a"], "given": ["b"]}],
             "extremes": [{"name": "any", "op": "or", "bits": ["a", "b"]}]}
    for change in ({"privacy": {"unit": "device", "max_reports_per_device": 24}},
                   {"privacy": {"unit": "device", "max_keys_per_device": 2}, "dimensions": {"region": {}}}):
        cfg = parse_config(dict(BASE, **change, **extra))
        assert cfg.shared_reports > 0 and cfg.groups and cfg.conditionals and cfg.report_extremes
        assert cfg.aggregator.shared is not None   # the extremes' variance sums carry the shared term
        for streaming in (False, True):   # the job's check in either mode (schemas/composition.py)
            check_composition(cfg, streaming)


def test_a_kept_monthly_promise_and_the_marginals_correction_at_k_times_m():
    cfg = parse_config(dict(BASE, privacy=dict(BASE["privacy"], model="local", epsilon_per_month=2.2)))
    assert cfg.epsilons().per_month <= 2.2
    sliding = parse_config(dict(BASE, window={"type": "sliding", "size_seconds": 3600, "period_seconds": 900},
                                privacy={"unit": "device", "max_reports_per_device": 2}))
    assert (sliding.repeats_per_window, sliding.shared_reports) == (8, 7)
    keys = parse_config(dict(BASE, window={"type": "sliding", "size_seconds": 3600, "period_seconds": 900},
                             dimensions={"region": {}},
                             privacy={"unit": "device", "max_reports_per_device": 2, "max_keys_per_device": 3}))
    assert (keys.repeats_per_window, keys.shared_reports) == (24, 23)   # __other__ may sum a device's 3 keys


def test_the_sufficient_crowd_is_calibrated_for_k_times_m_reports_per_device():
    spec = dict(BASE, channel={"p": 0.25, "q": 0.75}, min_reports=1,
                features=[{"name": f"f{i}", "type": "boolean"} for i in range(4)])
    one = parse_config(dict(spec, privacy={"unit": "device", "model": "sufficient", "epsilon": 1.0}),
                       check_promise=False).privacy.smallest_crowd
    three = parse_config(dict(spec, privacy={"unit": "device", "max_reports_per_device": 3, "model": "sufficient",
                                             "epsilon": 1.0}), check_promise=False).privacy.smallest_crowd
    report = parse_config(dict(spec, privacy={"model": "sufficient", "epsilon": 1.0}),
                          check_promise=False).privacy.smallest_crowd
    assert one == report and three > one


def test_the_report_unit_with_device_bounds_links_reports_and_keeps_counting_reports():
    """Issue 48: a bound per device (or memoized channels) under ``unit: report`` is the report unit with
    device bounds: reports carry the token, the job enforces the bounds (the device unit's defaults for
    a bound not given), min_reports counts reports, the memoized variance term is that of the enforced
    bound, the sufficient-DP crowd stays per report, and collections.json states it all. Refused before
    (device-bounds-need-device, memoize-needs-device)."""
    plain = {k: v for k, v in BASE.items() if k != "privacy"}
    cfg = parse_config(dict(plain, privacy={"max_reports_per_device": 24}))
    assert (cfg.unit, cfg.counts_devices, cfg.device.max_reports_per_device, cfg.device.max_keys_per_device) == (
        "report", False, 24, 1)
    assert (cfg.repeats_per_window, cfg.shared_reports, cfg.promise_repeats) == (24, 23, 1)
    described = cfg.describe()
    assert {k: described[k] for k in ("unit", "device_token", "max_reports_per_device", "max_keys_per_device")} == {
        "unit": "report", "device_token": True, "max_reports_per_device": 24, "max_keys_per_device": 1}
    assert described["epsilons"]["enforced"]["reports_per_day"] == 24 * 24   # hourly slices x M
    memoized = parse_config(plain)   # memoized, no bound given: the device unit's default, 1 a slice
    assert (memoized.unit, memoized.device.max_reports_per_device, memoized.shared_reports) == ("report", 1, 0)
    keys = parse_config(dict(plain, channel={"p": 0.25, "q": 0.75}, dimensions={"region": {}},
                             privacy={"max_keys_per_device": 2}))
    assert (keys.unit, keys.bounds_keys, keys.device.max_reports_per_device, keys.device.max_keys_per_device) == (
        "report", True, 1, 2)
    unbounded = parse_config(dict(plain, channel={"p": 0.25, "q": 0.75}))
    assert unbounded.device is None and unbounded.describe()["device_token"] is False
    for bad, message in (({"unit": "report", "max_reports_per_device": 0}, r"privacy.max_reports_per_device must be"),
                         ({"model": "local", "epsilon_per_day": 5, "max_reports_per_device": 2},
                          r"privacy.epsilon_per_day needs privacy.unit 'device'")):
        with pytest.raises(ValueError, match=message):
            parse_config(dict(plain, privacy=bad))
