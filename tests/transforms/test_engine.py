"""The publication engine's rows, without Beam: one out-of-range policy for every estimate kind, the
two causes of holding back told apart, batch and streaming publishing through one path, each capped
key apart, and the streaming engines' panes independent of the order Beam delivers their messages."""
import math
from unittest import mock

import numpy as np
import pytest

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.pipelines.simulate import simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication import messages, panes
from ldp_marginals.transforms.publication.clock import Clock, ClockStatus
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, Entry, batch_window
from ldp_marginals.transforms.publication.messages import Weight
from ldp_marginals.transforms.publication.rows import window_rows
from tests.configs import SMALL_CONFIG
from tests.transforms import publication_model as model
from tests.transforms.local_stream import LocalStream

RICH = dict(SMALL_CONFIG, min_reports=0, channel={"mechanism": "symmetric", "epsilon": 0.4},
            features=SMALL_CONFIG["features"] + [{"name": "minutes", "type": "numeric", "low": 0, "high": 60}],
            means=[{"of": "minutes", "by": ["os"]}], conditionals=[{"of": ["beta"], "given": ["dark"]}],
            conditional_alpha=0.4)
RANGE = {"marginals": lambda r: (0.0, 1.0), "tables": lambda r: (0.0, 1.0), "conditionals": lambda r: (0.0, 1.0),
         "extremes": lambda r: (0.0, float(r["n"])), "means": lambda r: (r["low"], r["high"])}


def accumulator(cfg, n, seed, per_client=None):
    """``n`` simulated reports; with ``per_client``, clients that each sent exactly that many."""
    pop = simulate_population(cfg, n, seed=seed, span_seconds=60)
    if per_client and pop.clients is not None:
        pop.clients[:] = [f"s{seed}c{i // per_client}" for i in range(n)]
    keys = np.array([client_key(c) for c in pop.clients], dtype=np.uint64) if pop.clients is not None else None
    named = np.ones(n, bool) if keys is not None else None
    return cfg.aggregator.add_packed(cfg.aggregator.create(), pop.noisy, keys, named)


def test_every_estimate_lies_inside_its_interval_and_its_display_inside_the_possible_range():
    """Tiny, very noisy windows: estimates leave what is possible (negative counts, probabilities
    above 1, means below low). Every row keeps the unbiased estimate inside its own interval, and
    displays it projected into the possible range, flagged."""
    cfg = parse_config(RICH)
    flagged = {}
    for seed in range(40):
        for kind, row in window_rows(cfg, (), accumulator(cfg, 12, seed), (0, 60_000)):
            if kind in ("withheld", "consistent_tables"):   # consistent tables: tests/transforms/test_consistent_rows.py
                continue
            lo, hi = RANGE[kind](row)
            est = row["frequency"] if kind in ("marginals", "tables") else row["estimate"]
            low, high = ((row["frequency_low"], row["frequency_high"]) if kind in ("marginals", "tables")
                         else (row["ci_low"], row["ci_high"]))
            shown = row["display_frequency"] if kind in ("marginals", "tables") else row["display_estimate"]
            assert row["ci_low"] <= row["estimate"] <= row["ci_high"], row
            assert lo <= row["display_low"] <= shown <= row["display_high"] <= hi, row
            assert row["out_of_range"] == (not lo <= est <= hi), row
            assert (row["display_low"], shown, row["display_high"]) == (
                min(max(low, lo), hi), min(max(est, lo), hi), min(max(high, lo), hi))
            if kind in ("marginals", "tables"):
                assert row["frequency_low"] * row["n_reports"] == pytest.approx(row["ci_low"])
            flagged[kind] = flagged.get(kind, 0) + row["out_of_range"]
    assert all(flagged.get(kind) for kind in RANGE), flagged   # every kind met the policy out of range


def test_precision_and_privacy_holdbacks_are_told_apart():
    cfg = parse_config(dict(RICH, conditional_alpha=0.001, min_reports=5))
    acc = accumulator(cfg, 12, 1)
    rows = [r for kind, r in window_rows(cfg, (), acc, (0, 60_000)) if kind == "withheld"]
    assert rows and {(r["cause"], r["statistic"]) for r in rows} <= {("precision", "conditional"),
                                                                      ("precision", "mean"),
                                                                      ("privacy", "client_extremes")}
    assert all(r["n_reports"] == 12 for r in rows)
    assert any(r["cause"] == "precision" for r in rows)
    # the guard: a window below min_reports is one privacy row that counts its reports
    out = batch_window(cfg, (0, 60_000), [(0, (), accumulator(cfg, 3, 2))])[()]
    (held,) = out["withheld"]
    assert (held["cause"], held["statistic"], held["n_reports"], held["reason"]) == (
        "privacy", "all", 3, "3 reports < min_reports=5")
    assert not any(len(out[k]) for k in out if k != "withheld")


def test_batch_and_streaming_publish_the_same_rows_through_one_path():
    """The same slices: batch's one pane per window and capped key, and the streaming engines' on-time
    pane (final, lateness 0) after every partial arrived on time, give identical rows of every kind."""
    cfg = parse_config(dict(SMALL_CONFIG, min_reports=20, window={"type": "fixed", "size_seconds": 60},
                            dimensions={"region": {"max_values": 1}}))
    # the cap merges us and ap into __other__; every client sent two reports, so the client rule
    # publishes the client extremes (one group of clients, of at least min_reports)
    slices = [(0, (("region", r),), accumulator(cfg, n, seed, per_client=2)) for seed, (r, n) in
              enumerate([("eu", 150), ("us", 60), ("ap", 10)])]
    batch = batch_window(cfg, (0, 60_000), slices)
    stream = LocalStream(cfg, np.random.default_rng(5))
    for i, (start, dims, acc) in enumerate(slices):
        stream.partial(start, dims, cfg.aggregator.copy(acc), f"p{i}")
    stream.advance(END_OF_TIME_US)
    stream.deliver()
    assert stream.idle() and {f.timing for f in stream.panes} == {"on_time"} and {f.pane for f in stream.panes} == {0}
    streaming = {}
    for f in stream.panes:
        streaming.setdefault(f.key, {})[f.kind] = f.rows
    assert set(batch) == set(streaming) == {(("region", "eu"),), (("region", "__other__"),)}
    for key, kinds in streaming.items():
        assert {k for k, rows in batch[key].items() if len(rows)} == set(kinds)
        for kind, rows in kinds.items():
            assert _canonical(rows) == _canonical(batch[key][kind]), (key, kind)
            assert {tuple(sorted(r["dimensions"].items())) for r in rows} == {key}   # a file per capped key
    assert any(r["name"] == "active_client" for rows in batch.values() for r in rows["extremes"])


def _canonical(rows):
    return sorted(repr(sorted((k, round(v, 9) if isinstance(v, float) and math.isfinite(v) else v)
                              for k, v in r.items())) for r in rows)


def test_early_firing_is_disarmed_once_no_window_can_use_it():
    """An early firing is armed by new data in a window before its on-time pane, and disarmed when the
    watermark gives every such window its on-time pane: a drained Flink job waits for a pending
    processing-time timer and never fires it."""
    cfg = parse_config(dict(SMALL_CONFIG, min_reports=20, window={"type": "fixed", "size_seconds": 60},
                            early_firing_seconds=5))
    clock, status, bag, book = Clock(cfg), ClockStatus(), [], [None]

    def apply(step):
        nonlocal bag
        bag = [] if step.clear else bag + step.append
        book[0] = step.book or book[0]
        return step
    for i, start in enumerate((0, 60_000)):
        step = apply(clock.on_weight(status, Weight(f"p{i}", (), start, 100), lambda: book[0], lambda: bag))
        assert step.arm_early == (start == 0) and status.early_set
    step = apply(clock.on_watermark(status, 60_000_000 - 1, lambda: book[0], lambda: bag))   # the first on time
    assert not step.disarm_early and status.early_set                                        # the second still early
    step = apply(clock.on_watermark(status, 120_000_000 - 1, lambda: book[0], lambda: bag))
    assert step.disarm_early and not status.early_set


def test_watermark_timers_are_set_on_whole_milliseconds():
    """Java runners truncate timers to milliseconds: a timer at a window's last microsecond would fire
    a millisecond early and set itself again for ever."""
    from ldp_marginals.transforms.panes import _whole_ms
    assert _whole_ms(60_000_000 - 1) == 60_000_000 and _whole_ms(60_000_000) == 60_000_000
    assert _whole_ms(END_OF_TIME_US) % 1000 == 0 and _whole_ms(END_OF_TIME_US) - END_OF_TIME_US == 1


def test_a_windows_latest_pane_of_each_kind_holds_every_row_batch_publishes():
    """With allowed lateness, the on-time pane publishes the estimates and the close adds a final
    pane with nothing new released: the latest pane of each kind (what ``read`` returns) must still
    hold every row the batch run publishes, the withheld rows of cause precision among them (the
    close repeats them beside the client extremes)."""
    cfg = parse_config(dict(RICH, conditional_alpha=0.001, min_reports=5, allowed_lateness_seconds=30,
                            window={"type": "fixed", "size_seconds": 60}))
    slices = [(0, (), accumulator(cfg, 12, 1, per_client=2))]
    batch = batch_window(cfg, (0, 60_000), slices)[()]
    assert any(r["cause"] == "precision" for r in batch["withheld"])
    stream = LocalStream(cfg, np.random.default_rng(3))
    for i, (start, dims, acc) in enumerate(slices):
        stream.partial(start, dims, cfg.aggregator.copy(acc), f"p{i}")
    stream.advance(60_000 * 1000)
    stream.deliver()
    stream.advance(END_OF_TIME_US)
    stream.deliver()
    assert stream.idle()
    assert [f.timing for f in stream.panes if f.kind == "withheld"][-1] == "closed"
    latest = {}
    for f in stream.panes:
        if f.kind not in latest or f.pane > latest[f.kind].pane:
            latest[f.kind] = f
    assert {k for k, rows in batch.items() if rows} == set(latest)
    for kind, f in latest.items():
        assert _canonical(f.rows) == _canonical(batch[kind]), kind


# -- the streaming engines' protocol ---------------------------------------------------------------------

def _published(s, delivery: int) -> list:
    """The pane files of the scenario's streaming run with its messages delivered in order ``delivery``."""
    s.delivery = delivery
    _, out = model.run(s)
    return sorted((f.kind, repr(f.window), f.key, f.pane, f.timing, _canonical(list(f.rows))) for f in out.panes)


def _order_matters(make, n: int = 120) -> bool:
    rng = np.random.default_rng(31)
    for _ in range(n):
        s = make(rng)
        if _published(s, 1) != _published(s, 2) or _published(s, 1) != _published(s, 3):
            return True
    return False


def test_the_panes_depend_only_on_the_clock_not_on_the_order_messages_arrive_in():
    """Beam orders no element: the same scenario with its messages delivered in three orders publishes
    the same pane files, row for row (random and client-group scenarios)."""
    assert not _order_matters(model.random_scenario)
    assert not _order_matters(model.classes_scenario, 60)


def test_a_capped_key_that_takes_contributions_as_they_arrive_is_caught():
    """The mutation the test above exists for: a capped key that adds a contribution's atoms when it
    arrives, instead of at its expectation in the clock's order, publishes what the delivery order
    gives."""
    apply = panes.Panes._apply

    def eager(self, status, inbox, atoms_):
        early = [m for m in inbox if isinstance(m, messages.Contribution)]
        for c in early:
            ws = status.windows.setdefault(c.window, panes.PaneState())
            atoms_ += [Entry(start, c.dims, atom, acc) for start, atom, acc in c.atoms]
            ws.members.add(c.dims)
        inbox = [m._replace(atoms=()) if isinstance(m, messages.Contribution) else m for m in inbox]
        return apply(self, status, inbox, atoms_)

    def on_message(self, status, message, read):
        inbox, atoms_ = read()
        return eager(self, status, list(inbox) + [message], list(atoms_))
    with mock.patch.object(panes.Panes, "on_message", on_message):
        assert _order_matters(model.random_scenario)


def test_a_partial_of_a_key_never_seen_after_its_windows_closed_is_a_dead_letter_and_let_go():
    """The clock alone knows the watermark: a partial of a new key behind every window of its slice is
    one late dead letter, and the key's atoms let its accumulator go when the drop arrives, whichever
    comes first."""
    cfg = parse_config(dict(SMALL_CONFIG, min_reports=0, window={"type": "fixed", "size_seconds": 60},
                            dimensions={"region": {}}))
    for seed in range(4):
        stream = LocalStream(cfg, np.random.default_rng(seed))
        stream.partial(0, (("region", "eu"),), accumulator(cfg, 5, 1), "a")
        stream.advance(END_OF_TIME_US)
        stream.deliver()
        step = stream.partial(0, (("region", "us"),), accumulator(cfg, 3, 2), "b")   # long after the close
        stream.deliver()
        assert [b.reports for b in step.late] == [3] and stream.counted == 5
        assert stream.idle() and stream.keys[(("region", "us"),)][1:] == [[], [], []]
        assert {f.key for f in stream.panes} == {(("region", "eu"),)}


def test_a_late_pane_takes_no_report_from_the_next_early_pane_of_another_window():
    """A late partial publishes its window's late pane at once, its key's command taking every partial
    the clock holds, of other windows too: the next early firing still commands the key in each open
    window it has new partials in (tests/transforms/test_early_panes.py: the early and on-time cases)."""
    cfg = parse_config(dict(SMALL_CONFIG, min_reports=0, window={"type": "fixed", "size_seconds": 60},
                            allowed_lateness_seconds=30, early_firing_seconds=10))
    for seed in range(4):
        stream = LocalStream(cfg, np.random.default_rng(seed))
        stream.partial(0, (), accumulator(cfg, 2, 1), "a")
        stream.advance(60_000 * 1000)                          # [0, 60) on time
        stream.partial(60_000, (), accumulator(cfg, 3, 2), "b")   # [60, 120): in the clock's bag
        stream.partial(0, (), accumulator(cfg, 1, 3), "c")        # [0, 60) late: a late pane at once
        stream.early()
        stream.deliver()
        assert stream.idle()
        assert [(f.window[0], f.timing, max(r["n_reports"] for r in f.rows)) for f in stream.panes
                if f.kind == "marginals"] == [(0, "on_time", 2), (0, "late", 3), (60_000, "early", 3)]
