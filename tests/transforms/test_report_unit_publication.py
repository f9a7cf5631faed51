"""The publication rule's exact checker (tests/transforms/publication_model.py) on the report unit with
device bounds (issue 48): the device unit's scenarios (devices of 1 to 4 reports, a bound of 1 or 2 reports
per device, slice and key, with dimensions and rollups a bound of 1 or 2 keys) with ``min_reports`` counting
reports. No combination of published fields isolates fewer than min_reports reports, every report is
published, withheld or counted past the bound, and no pane holds more than the bound of one device, in
streaming (bundles, late data, early panes) and in batch. A mutation that releases an increment without
min_reports reports is caught."""
from dataclasses import replace
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings

from tests.transforms import publication_model as model
from tests.transforms.test_publication_rule import check, scenarios


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(model.report_device_scenario))
def test_under_the_report_unit_with_device_bounds_nothing_isolates_fewer_than_min_reports_reports(s):
    check(s)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(model.report_device_rollup_scenario))
def test_rollups_under_the_report_unit_with_device_bounds_isolate_nothing(s):
    isolated, unaccounted = model.violations(s, batch=True)
    assert isolated is None and unaccounted is None, (isolated, unaccounted)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(lambda rng: replace(model.stream_device_rollup_scenario(rng), unit="report")))
def test_streaming_rollups_under_the_report_unit_with_device_bounds_isolate_nothing(s):
    check(s)


def _published_reports(s, batch):
    cfg, out = (model.run_batch if batch else model.run)(s)
    return set().union(*model.holdings(s, cfg, out).values()) if model.holdings(s, cfg, out) else set()


def test_the_scenarios_publish_what_the_device_unit_withholds():
    """The report-unit scenarios reach the case the unit decides: increments of min_reports reports or
    more from fewer than min_reports devices, published under the report unit and withheld under the
    device unit (so the checks above see rows the device unit never publishes)."""
    rng = np.random.default_rng(48)
    more = 0
    for _ in range(150):
        s = model.report_device_scenario(rng)
        for batch in (True, False):
            more += len(_published_reports(s, batch)) > len(_published_reports(replace(s, unit="device"), batch))
    assert more >= 10


def test_the_checker_catches_a_release_without_min_reports_reports():
    """The mutation: an increment released on any report (min_reports ignored under the report unit with
    device bounds); the checker finds a combination isolating fewer than min_reports reports."""
    def mutated(config, acc):
        return acc.n_devices >= max(1, config.min_reports) if config.counts_devices else acc.n >= 1
    rng = np.random.default_rng(47)
    found = 0
    with mock.patch("ldp_marginals.transforms.publication.engine.releasable", mutated), \
            mock.patch("ldp_marginals.transforms.publication.releases.releasable", mutated):
        for _ in range(60):
            s = model.report_device_scenario(rng)
            isolated, _ = model.violations(s, batch=False)
            found += isolated is not None
    assert found >= 5
