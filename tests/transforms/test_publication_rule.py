"""The publication rule, property-tested on the engine itself (no Beam): random scenarios of fixed,
sliding and global windows, early firings, late data within and past the allowed lateness, a capped
dimension and extremes over clients. For each, exact linear algebra over what every published row
holds (tests/transforms/publication_model.py) finds no combination of rows that isolates fewer than
min_reports reports, or whose client terms involve fewer than min_reports clients; and every report
is published, withheld or dead-lettered, exactly once per window.

The mutation tests run the same checks on engines with the rule broken in each way it could be, and
require that the checks catch every one."""
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldp_marginals.transforms.publication import engine, rows
from tests.transforms import publication_model as model


@st.composite
def scenarios(draw, window=None, clients=None):
    window = window or draw(st.sampled_from(["fixed", "sliding", "global"]))
    if clients is None:
        clients = window != "sliding" and draw(st.booleans())
    n = draw(st.integers(1, 20))
    n_tokens = draw(st.integers(2, 5))
    values = "abc"[:draw(st.integers(1, 3))]
    reports = [(0 if window == "global" else draw(st.integers(0, 2)), draw(st.sampled_from(values)),
                draw(st.one_of(st.none(), st.sampled_from([f"t{i}" for i in range(n_tokens)]))) if clients else None)
               for _ in range(n)]
    order = draw(st.permutations(range(n)))
    events, mark = [], 0
    while order:
        first = order[0]
        batch = [j for j in order if reports[j][:2] == reports[first][:2]][:draw(st.integers(1, 4))]
        order = [j for j in order if j not in batch]
        events.append(("partial", batch))
        after = draw(st.sampled_from(["watermark", "watermark", "early", "none"]))
        if after == "watermark":
            mark += draw(st.integers(1, 2))
            events.append(("watermark", mark))
        elif after == "early":
            events.append(("early",))
    return model.Scenario(window, draw(st.integers(2, 4)), draw(st.sampled_from([0, 60, 300])),
                          draw(st.integers(1, 3)), clients, reports, events)


def violations(s: model.Scenario):
    cfg, out = model.run(s)
    return model.isolation(s, model.published(out, len(s.reports))), model.accounting(s, cfg, out)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_combination_of_published_rows_isolates_too_few_reports_or_clients(s):
    isolated, unaccounted = violations(s)
    assert isolated is None, isolated
    assert unaccounted is None, unaccounted


@st.composite
def late_clients(draw):
    """One fixed window whose few clients send reports on time and again late, in several panes."""
    n = draw(st.integers(4, 16))
    tokens = [f"t{i}" for i in range(draw(st.integers(2, 4)))]
    reports = [(0, draw(st.sampled_from("ab")), draw(st.sampled_from(tokens))) for _ in range(n)]
    cut = draw(st.integers(2, n - 1))
    events = [("partial", [j for j in range(cut) if reports[j][1] == v]) for v in "ab"]
    events = [e for e in events if e[1]] + [("watermark", 1)]
    for j in range(cut, n):
        events += [("partial", [j])] + ([("watermark", 2)] if draw(st.booleans()) else [])
    return model.Scenario("fixed", draw(st.integers(2, 3)), 300, draw(st.integers(1, 2)), True, reports, events)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(scenarios(window="fixed", clients=True), late_clients()))
def test_the_rule_holds_for_extremes_over_clients_across_panes_and_caps(s):
    """Windows whose clients send several reports, on time and late, under the cap: the same checks."""
    isolated, unaccounted = violations(s)
    assert isolated is None and unaccounted is None, (isolated, unaccounted)


def test_the_checker_sees_what_a_client_row_reveals():
    """The issue's attacks, as scenarios the checker must flag when the rule is broken by hand: a late
    report of a client already in the on-time pane, with client rows published at every pane."""
    s = model.Scenario("fixed", 2, 300, 3, True,
                       [(0, "a", "t0"), (0, "a", "t0"), (0, "a", "t1"), (0, "a", "t1"), (0, "a", "t0"), (0, "a", "t4")],
                       [("partial", [0, 1, 2, 3]), ("watermark", 1), ("partial", [4, 5]), ("watermark", 3)])
    assert violations(s) == (None, None)
    with mock.patch.object(engine, "publish", _client_rows_every_pane):
        isolated, _ = violations(s)
    assert isolated and "('c', 't0')" in isolated   # the late pane's client row minus the on-time one: t0 alone


# -- mutations: each breaks the rule one way; the checks must catch every one --------------------------

_publish = engine.publish


def _client_rows_every_pane(config, window, released, pending, *, linear, final):
    """A client's state merged across atoms: client rows in every pane, not only the final one."""
    out = _publish(config, window, released, pending, linear=linear, final=final)
    if linear and not final:
        extra = _publish(config, window, released, {}, linear=False, final=True)
        for kind, kind_rows in extra.items():
            out[kind] += [r for r in kind_rows if kind != "extremes" or r["name"] not in
                          {e["name"] for e in out[kind]}]
    return out


def _sliding_with_clients(s: model.Scenario) -> model.Scenario:
    return model.Scenario("sliding", s.min_reports, s.lateness, s.max_values, True,
                          [(r[0], r[1], r[2] or "t0") for r in s.reports], s.events)


MUTATIONS = {
    "an increment released at any size": (mock.patch.object(engine, "releasable", lambda c, a: a.n >= 1), None),
    "client states merged across panes": (mock.patch.object(engine, "publish", _client_rows_every_pane),
                                          lambda s, rng: model.late_clients_scenario(rng)),
    "client rows without the client rule": (mock.patch.object(rows, "client_rule", lambda c, a: None), None),
    "client extremes on sliding windows": (
        mock.patch("ldp_marginals.schemas.config.CollectionConfig.__post_init__", lambda self: None),
        lambda s, rng: _sliding_with_clients(s)),
    "held reports not reported": (
        mock.patch.object(engine, "held_row", lambda c, b, held, done: rows.withheld_row(c, b, 0, "")), None),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mutation_of_the_rule_is_caught(name):
    patch, transform = MUTATIONS[name]
    rng = np.random.default_rng(2026)
    caught = 0
    with patch:
        for _ in range(1000):
            s = model.random_scenario(rng)
            if transform is not None:
                s = transform(s, rng)
            isolated, unaccounted = violations(s)
            caught += bool(isolated or unaccounted)
    assert caught, f"{name}: no scenario of 1,000 was caught"
