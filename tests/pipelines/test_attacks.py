"""The issue's attacks, rerun through the job's public builder as a red team would, with every output
in hand. Each found a published combination that depended on one client (or carried a report's
content outside the guard); each now finds nothing. The general argument is the exact-algebra
property test on the engine (tests/transforms/test_publication_rule.py); these check the wiring."""
import glob
import json
import pathlib

import apache_beam as beam
import pytest
from apache_beam.testing import test_stream
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.schemas import read_avro
from ldp_marginals.schemas.bigquery import to_row
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.sinks import FileSink
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
    __other__ in the next, gave __other__ - B - C = T's cross term. Client rows now come once per window
    and key, in the final pane, under that pane's cap: B and C are never published beside __other__."""
    cfg = parse_config(spec(dimensions={"ver": {"max_values": 2}}, allowed_lateness_seconds=600, min_reports=2))
    on_time = ([by(cfg, i, f"b{i}", ver="B") for i in range(4)] + [by(cfg, 5, "T", ver="B")]
               + [by(cfg, 10 + i, f"c{i}", ver="C") for i in range(4)] + [by(cfg, 15, "T", ver="C")])
    late = [by(cfg, 20 + i, f"d{i % 3}", ver=v) for i in range(12) for v in ("D", "E")]   # D, E outweigh B, C
    stream = (test_stream.TestStream().advance_watermark_to(START).add_elements(on_time)
              .advance_watermark_to(START + 3601).add_elements(late).advance_watermark_to_infinity())
    got, _ = run_stream(stream, cfg)
    listed = [sorted({r["dimensions"]["ver"] for r in f.rows}) for f in got["panes"] if f.kind == "marginals"]
    assert listed[0] == ["B", "C"] and listed[-1] == ["D", "E", "__other__"]   # the cap did merge B and C
    rows = client_rows(got)
    assert {timing for _, _, timing, _, _ in rows} == {"closed"}
    assert sorted(ver for *_, ver, _ in rows) == ["D", "E"]   # once per key, never B or C
    # __other__ (B and C) holds one client of several reports, T: its client row is withheld
    assert [(r["dimensions"], r["statistic"]) for r in got["withheld"]] == [({"ver": "__other__"}, "client_extremes")]


def test_saturation_across_panes_is_not_published():
    """Attack 3: five clients with OR = 1 on time, then four of them again plus T, late: the late pane
    minus the on-time pane of the client-OR sum was T's bit. Now the client row is published once, at
    the close, and only when min_reports clients sent several reports (here four did: withheld)."""
    cfg = parse_config(spec(allowed_lateness_seconds=300))
    stream = (test_stream.TestStream().advance_watermark_to(START)
              .add_elements([by(cfg, i, f"c{i}", b"\x03") for i in range(5)])
              .advance_watermark_to(START + 3601)
              .add_elements([by(cfg, 20 + i, f"c{i}", b"\x03") for i in range(4)] + [by(cfg, 30, "T", b"\x00")])
              .advance_watermark_to_infinity())
    got, _ = run_stream(stream, cfg)
    marginals = [(f.timing, f.rows[0]["n_reports"]) for f in got["panes"] if f.kind == "marginals"]
    assert marginals == [("on_time", 5), ("late", 10)]   # the marginals move by a whole increment
    assert client_rows(got) == []
    (held,) = got["withheld"]
    assert (held["statistic"], held["cause"]) == ("client_extremes", "privacy")


def test_a_client_row_minus_the_report_rows_would_single_out_its_only_repeat_client():
    """Found beside the issue's attacks: with an extreme over reports on the same bits (or marginals that
    rebuild it), the client row minus the report row leaves only the clients that sent several reports.
    One such client: withheld; five: published."""
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
