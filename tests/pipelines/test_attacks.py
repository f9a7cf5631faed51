"""The issues' attacks, rerun through the job's public builder as a red team would, with every output
in hand. Each found a published combination that depended on one client or report (or carried a
report's content outside the guard); each now finds nothing. The general argument is the
exact-algebra property test on the engine (tests/transforms/test_publication_rule.py); these check
the wiring, and show on the engine without a guard that each combination does isolate its target."""
import glob
import json
import pathlib

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing import test_stream
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from ldp_marginals.ldp.aggregate import client_key
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.schemas import read_avro
from ldp_marginals.schemas.bigquery import to_row
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.engine import batch_window
from ldp_marginals.transforms.sinks import FileSink
from tests.collect import Collected
from tests.pipelines.test_streaming import START, record, run_stream

CLIENT_OR = {"name": "any_client", "op": "or", "bits": ["a", "b"], "over": "client"}
REPORT_OR = {"name": "any_report", "op": "or", "bits": ["a", "b"]}


def spec(**changes):
    base = {"collection": "red", "features": [{"name": "a", "type": "boolean"}, {"name": "b", "type": "boolean"}],
            "channel": {"p": 0.25, "q": 0.75}, "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600},
            "min_reports": 5, "extremes": [REPORT_OR, CLIENT_OR]}
    base.update(changes)
    return base


def by(cfg, second, client, bits=b"\x01", **dims):
    return dict(record(cfg, second, bits, **dims), client=client)


def client_rows(got):
    return [(f.window, f.pane, f.timing, r["dimensions"].get("ver"), r["n"]) for f in got["panes"]
            if f.kind == "extremes" for r in f.rows if r["name"] == "any_client"]


def test_a_client_in_two_slices_of_a_sliding_window_is_refused_at_the_door():
    """Attack 1: W[0,2h) - W[-1h,1h) - W[1h,3h) of the client-OR sum was T's cross term alone. Client
    extremes on overlapping windows are now a config error."""
    with pytest.raises(ValueError, match="need fixed or global windows"):
        parse_config(spec(window={"type": "sliding", "size_seconds": 7200, "period_seconds": 3600}))


def test_a_cap_merging_a_clients_two_values_publishes_one_client_row():
    """Attack 2: T's reports in values B and C (five clients each), listed in one pane and merged into
    __other__ in the next, gave __other__ - B - C = T's cross term. Now the cap is sticky: B and C, kept
    on time, keep their own keys when D and E outweigh them late (D and E find no room: __other__), so
    no pane ever merges B and C; each key's client row comes once, in the final pane."""
    cfg = parse_config(spec(dimensions={"ver": {"max_values": 2}}, allowed_lateness_seconds=600, min_reports=2))
    on_time = ([by(cfg, i, f"b{i}", ver="B") for i in range(4)] + [by(cfg, 5, "T", ver="B")]
               + [by(cfg, 10 + i, f"c{i}", ver="C") for i in range(4)] + [by(cfg, 15, "T", ver="C")])
    late = [by(cfg, 20 + i, f"d{i % 3}", ver=v) for i in range(12) for v in ("D", "E")]   # D, E outweigh B, C
    stream = (test_stream.TestStream().advance_watermark_to(START).add_elements(on_time)
              .advance_watermark_to(START + 3601).add_elements(late).advance_watermark_to_infinity())
    got, _ = run_stream(stream, cfg)
    keys = {}   # capped key -> the values of ver its panes list
    for f in got["panes"]:
        keys.setdefault(dict(f.key)["ver"], set()).update(r["dimensions"]["ver"] for r in f.rows)
    assert keys == {"B": {"B"}, "C": {"C"}, "__other__": {"__other__"}}   # B and C are never merged
    n = {dict(f.key)["ver"]: list(f.rows)[0]["n_reports"] for f in got["panes"] if f.kind == "marginals"}
    assert n == {"B": 5, "C": 5, "__other__": 24}   # each key's latest pane: D and E under __other__
    rows = client_rows(got)
    assert {timing for _, _, timing, _, _ in rows} == {"closed"}
    assert sorted(ver for *_, ver, _ in rows) == ["B", "C", "__other__"]   # once per key
    assert got["withheld"] == []


def test_saturation_across_panes_is_not_published():
    """Attack 3: five clients with OR = 1 on time, then four of them again plus T, late: the late pane
    minus the on-time pane of the client-OR sum was T's bit. Now the client row is published once, at
    the close, and only when every group of clients alike holds min_reports (here the late increment
    splits them: four sent a report in each increment, one only on time, T only late: withheld)."""
    cfg = parse_config(spec(allowed_lateness_seconds=300))
    stream = (test_stream.TestStream().advance_watermark_to(START)
              .add_elements([by(cfg, i, f"c{i}", b"\x03") for i in range(5)])
              .advance_watermark_to(START + 3601)
              .add_elements([by(cfg, 20 + i, f"c{i}", b"\x03") for i in range(4)] + [by(cfg, 30, "T", b"\x00")])
              .advance_watermark_to_infinity())
    got, _ = run_stream(stream, cfg)
    marginals = [(f.timing, f.rows[0]["n_reports"]) for f in got["panes"] if f.kind == "marginals"]
    # the marginals move by a whole increment; the close repeats the last pane's rows (its final answer)
    assert marginals == [("on_time", 5), ("late", 10), ("closed", 10)]
    assert client_rows(got) == []
    (held,) = got["withheld"]
    assert (held["statistic"], held["cause"]) == ("client_extremes", "privacy")


def test_a_client_row_minus_the_report_rows_would_single_out_its_only_repeat_client():
    """Found beside the issue's attacks: with an extreme over reports on the same bits (or marginals that
    rebuild it), the client row minus the report row leaves only the clients that sent several reports.
    One such client: withheld; five, beside six clients of one report: published."""
    cfg = parse_config(spec())
    one = [by(cfg, i, f"s{i}") for i in range(10)] + [by(cfg, 20, "T"), by(cfg, 21, "T")]
    five = one + [by(cfg, 30 + i, f"s{i}") for i in range(4)]
    for reports, published in ((one, False), (five, True)):
        got, _ = run_stream(test_stream.TestStream().advance_watermark_to(START).add_elements(reports)
                            .advance_watermark_to_infinity(), cfg)
        assert bool(client_rows(got)) == published
        assert [r["statistic"] for r in got["withheld"]] == ([] if published else ["client_extremes"])


@pytest.mark.parametrize("clients", [True, False], ids=["client_extremes", "tokens_dropped"])
@pytest.mark.parametrize("fault", ["undeclared_dimension", "dimension_too_long", "client_too_long"])
def test_a_dead_letter_carries_no_report_content(tmp_path, fault, clients):
    """Attack 4: 1,000 good reports and one whose only fault is an undeclared dimension, an over-long
    value or an over-long client token; its dead letter carried its bits and its token, in the files and
    the BigQuery rows. Now neither, whether or not the collection keeps tokens."""
    token = "SECRET-TOKEN-" + "x" * (200 if fault == "client_too_long" else 10)
    cfg = parse_config(spec(dimensions={"ver": {"max_length": 8}}, extremes=[REPORT_OR] + ([CLIENT_OR] * clients)))
    good = [by(cfg, i % 3000, f"c{i % 300}", bytes([i % 4]), ver="1.0") for i in range(1000)]
    bad = by(cfg, 7, token, b"\x02", ver="1.0")
    if fault == "undeclared_dimension":
        bad["dimensions"] = {"ver": "1.0", "device": "SECRET-DEVICE-42"}
    elif fault == "dimension_too_long":
        bad["dimensions"] = {"ver": "SECRET-LONG-VERSION-VALUE"}
    expected = {"undeclared_dimension": "undeclared_dimension", "dimension_too_long": "dimension_too_long",
                "client_too_long": "bad_field" if clients else None}[fault]
    with BeamTestPipeline() as p:
        build(p, beam.Create(good + [bad]), FileSink(str(tmp_path)), JobOptions({cfg.name: cfg}))
    dead = [r for path in glob.glob(str(tmp_path / "dead_letters" / "*.avro")) for r in read_avro(path, "dead_letter")]
    if expected is None:   # tokens are dropped at the door: the report is counted, nothing is dead
        assert dead == []
        return
    (row,) = dead
    assert row["reason"] == expected and row["collection"] == "red"
    assert row["dimensions"] == ({"ver": "1.0"} if fault != "dimension_too_long" else {})
    assert row["client_length"] == len(token) and row["bits_length"] == 1
    written = b"".join(pathlib.Path(path).read_bytes() for path in glob.glob(str(tmp_path / "dead_letters" / "*")))
    bigquery = json.dumps(to_row("dead_letter", row))
    for secret in (token, "SECRET-DEVICE-42", "SECRET-LONG-VERSION-VALUE"):
        assert secret.encode() not in written and secret not in bigquery and secret not in row["detail"]
    assert not {"bits", "client", "record_json", "payload"} & set(row)


# -- issue 35: client rows leak through their variances and through OR with AND ---------------------
# Each attack: a combination of published fields that, on the engine without a guard (min_reports 0),
# is the same whatever every other report says and moves with the target's reports; then the job, with
# the guard at the issue's min_reports, batch and streaming, publishes no client row to combine.

OR_A = {"name": "or_a", "op": "or", "bits": ["a"], "over": "client"}
AND_A = {"name": "and_a", "op": "and", "bits": ["a"], "over": "client"}
SYMMETRIC = {"p": 0.25, "q": 0.75}
ALPHA = 0.25 * 0.75 / 0.5 ** 2   # p(1-p)/(q-p)^2 = q(1-q)/(q-p)^2 on this symmetric channel


def rows_without_guard(cfg, a_bits, tokens):
    """The engine's rows of one batch window of reports with bit ``a`` as given, one client token (or
    None) each."""
    packed = np.array([[int(a)] for a in a_bits], dtype=np.uint8)
    keys = np.array([client_key(t) if t else 0 for t in tokens], dtype=np.uint64)
    named = np.array([t is not None for t in tokens])
    ranks = None   # a client sample (reports_per_client) ranks report i as stamped at i ms
    if cfg.client_sample is not None:
        ranks = report_ranks(client_key(cfg.name), keys, np.arange(len(tokens), dtype=np.int64))
    acc = cfg.aggregator.add_packed(cfg.aggregator.create(), packed, keys, named, ranks)
    return batch_window(cfg, (0, 3_600_000), [(0, (), acc)])[()]


def field(out, name, what):
    (row,) = [r for r in out["extremes"] if r["name"] == name]
    return row[what]


def marginal_a(out):
    (row,) = [r for r in out["marginals"] if r["columns"] == [0]]
    return row["estimate"]


def isolates(spec_, tokens, targets, combination, seed=0):
    """Whether ``combination`` of the unguarded rows is a function of the reports ``targets`` alone:
    the same when every other report's bit changes, different when some target's bit does."""
    cfg = parse_config(dict(spec_, min_reports=0))
    base = np.random.default_rng(seed).integers(0, 2, len(tokens))

    def value(flipped):
        bits = base.copy()
        bits[flipped] ^= 1
        return combination(rows_without_guard(cfg, bits, tokens))

    others = [j for j in range(len(tokens)) if j not in targets]
    return value([]) == pytest.approx(value(others), abs=1e-9) and any(
        abs(value([]) - value([j])) > 1e-6 for j in targets)


def guarded_outputs(spec_, tokens, streaming):
    """The job's outputs (batch, or streaming with every report on time) at the spec's min_reports."""
    cfg = parse_config(spec_)
    records = [dict(record(cfg, i, bytes([i % 2])), client=t) for i, t in enumerate(tokens)]
    if streaming:
        got, _ = run_stream(test_stream.TestStream().advance_watermark_to(START).add_elements(records)
                            .advance_watermark_to_infinity(), cfg)
        return {kind: got[kind] for kind in ("marginals", "extremes", "withheld")}
    got = Collected()
    with BeamTestPipeline() as p:
        outs = build(p, beam.Create(records), None, JobOptions({cfg.name: cfg}))
        for kind in ("marginals", "extremes", "withheld"):
            outs[kind] | got.into(kind)
    return {kind: got[kind] for kind in ("marginals", "extremes", "withheld")}


def client_spec(extremes, channel=SYMMETRIC, min_reports=4):
    return {"collection": "red", "features": [{"name": "a", "type": "boolean"}, {"name": "b", "type": "boolean"}],
            "channel": channel, "max_order": 1, "window": {"type": "fixed", "size_seconds": 3600},
            "min_reports": min_reports, "extremes": extremes}


def assert_client_rows_withheld(out):
    assert out["marginals"], "the window's other rows stand"
    assert [r["name"] for r in out["extremes"]] == []
    (held,) = [r for r in out["withheld"] if r["statistic"] == "client_extremes"]
    assert held["cause"] == "privacy" and held["reason"].startswith("client extremes withheld")


FOUR_OF_TWO = [f"c{i // 2}" for i in range(8)]


@pytest.mark.parametrize("target", [[None], ["T"], ["T", "T", "T"]], ids=["no_client", "one_report", "three_reports"])
def test_a_client_rows_variance_plus_a_marginal_is_not_published(target):
    """The variance of an OR over clients plus p(1-p)/(q-p)^2 times the marginal of its bit: on a
    symmetric channel a client of two reports adds a variance linear in its reports, so the sum is a
    function of the reports outside the four two-report clients: the target (a report without a
    client, or a client of one or three reports). min_reports 4: four clients sent two reports, which
    the rule before this one took as enough."""
    tokens = FOUR_OF_TWO + target
    spec_ = client_spec([OR_A])
    targets = list(range(8, len(tokens)))
    assert isolates(spec_, tokens, targets, lambda out: field(out, "or_a", "variance") + ALPHA * marginal_a(out))
    for streaming in (False, True):
        assert_client_rows_withheld(guarded_outputs(spec_, tokens, streaming))


@pytest.mark.parametrize("channel", [{"p": 0.0, "q": 1.0}, {"p": 0.1, "q": 0.6}], ids=["noiseless", "noisy"])
def test_or_plus_and_minus_a_marginal_is_not_published(channel):
    """OR + AND over a client's two reports is the sum of their debiased bits, so OR + AND - the
    marginal leaves minus the one report without a client, noiseless or not."""
    tokens = FOUR_OF_TWO + [None]
    spec_ = client_spec([OR_A, AND_A], channel)
    combination = lambda out: (field(out, "or_a", "estimate") + field(out, "and_a", "estimate")   # noqa: E731
                               - marginal_a(out))
    assert isolates(spec_, tokens, [8], combination)
    assert_client_rows_withheld(guarded_outputs(spec_, tokens, streaming=False))


def _sample_attacks():
    """issue 35's combinations, their windows and their targets (fewer than min_reports parties)."""
    variance = lambda out: field(out, "or_a", "variance") + ALPHA * marginal_a(out)   # noqa: E731
    or_and = lambda out: (field(out, "or_a", "estimate") + field(out, "and_a", "estimate")   # noqa: E731
                          - marginal_a(out))
    two = lambda out: field(out, "or_a", "variance") + field(out, "and_a", "variance")   # noqa: E731
    realistic = ([None] * 20 + [f"s{i}" for i in range(30)] + [f"d{i // 2}" for i in range(40)]
                 + ["T3"] * 3 + ["T4"] * 4)
    out = [(f"variance {t}", client_spec([OR_A, AND_A]), FOUR_OF_TWO + t, list(range(8, 8 + len(t))), variance)
           for t in ([None], ["T"], ["T", "T", "T"])]
    out.append(("or + and", client_spec([OR_A, AND_A]), FOUR_OF_TWO + [None], [8], or_and))
    out.append(("realistic", client_spec([OR_A, AND_A], min_reports=5), realistic, list(range(90, 97)), two))
    return out


@pytest.mark.parametrize("c, shown", [(1, 5), (2, 1)])
def test_under_a_client_sample_the_issue_35_combinations_are_withheld_or_isolate_nothing(c, shown):
    """reports_per_client c = 1 or 2 on issue 35's windows: each window either withholds its client rows
    (batch and streaming), or publishes them and the attack's combination, on the engine without a
    guard, no longer depends on its targets alone (on the realistic window the heavy clients are read
    through c reports like every other kept client: variance(OR) + variance(AND) no longer singles
    them out)."""
    published = 0
    for name, spec_, tokens, targets, combination in _sample_attacks():
        spec_ = dict(spec_, reports_per_client=c)
        outs = [guarded_outputs(spec_, tokens, streaming) for streaming in (False, True)]
        rows_shown = [bool([r for r in out["extremes"] if r["name"] == "or_a"]) for out in outs]
        assert rows_shown[0] == rows_shown[1], name
        if rows_shown[0]:
            published += 1
            assert not isolates(spec_, tokens, targets, combination), name
        else:
            for out in outs:
                assert_client_rows_withheld(out)
    assert published == shown   # c = 1: every window (the left-out reports are >= min_reports parties);
    #                             c = 2: the realistic one (a lone report past c, or without a client, withholds)


def test_a_realistic_windows_two_variances_are_not_published():
    """20 reports without a client, 30 clients of one report, 20 of two, one of three and one of four,
    min_reports 5: variance(OR) + variance(AND) is a constant for every client of one or two reports
    on a symmetric channel, so the sum is a function of the two heavy clients alone, with no linear row
    needed. Batch, and streaming (the closing pane)."""
    tokens = ([None] * 20 + [f"s{i}" for i in range(30)] + [f"d{i // 2}" for i in range(40)]
              + ["T3"] * 3 + ["T4"] * 4)
    spec_ = client_spec([OR_A, AND_A], min_reports=5)
    heavy = list(range(90, 97))
    assert isolates(spec_, tokens, heavy, lambda out: field(out, "or_a", "variance") + field(out, "and_a", "variance"))
    for streaming in (False, True):
        out = guarded_outputs(spec_, tokens, streaming)
        assert_client_rows_withheld(out)
        assert sum(r["n_reports"] for r in out["marginals"] if r["columns"] == [0]) == 97
