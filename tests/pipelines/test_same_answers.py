"""The same reports give the same answers however they arrive: batch files, batch single-report
messages, batch container messages, and the streaming job's last panes (issue 13, part 6). Counts
and TMDH rows are exact; extremes agree to 1e-9 relative (per-client log sums add in another
order); dead letters are the same (reason, detail) multiset."""
import io

import apache_beam as beam
import fastavro
import pytest
from apache_beam.testing import test_stream
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from ldp_marginals import schemas
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, EXTREMES
from ldp_marginals.transforms.blocks import ReadReportFilesFast
from tests.collect import Collected
from tests.configs import SMALL_CONFIG
from tests.pipelines.test_streaming import streaming_pipeline

FLOATS = ("estimate", "frequency", "variance", "ci_low", "ci_high", "frequency_low", "frequency_high", "display_estimate",
          "display_frequency", "display_low", "display_high")


def reports(config):
    """A population over three windows and two regions, with clients, plus one of each fault."""
    records = []
    for seed, region in ((5, "eu"), (6, "us")):
        pop = simulate_population(config, 700, seed=seed, span_seconds=2.05 * 3600, reports_per_client=4)
        records += list(report_records(config, pop, {"region": region}))
    good = records[0]
    records += [dict(good, collection="nope"), dict(good, bits=b"\x00\x00"), dict(good, event_time=-1),
                dict(good, bits=b"\xff"), dict(good, dimensions={"planet": "mars"}), dict(good, client="x" * 200)]
    return records


def container(records) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schemas.load_schema("noisy_report"), records, codec="deflate")
    return buf.getvalue()


def canonical(rows_by_kind) -> dict:
    """Rows by kind, sorted, floats split off (compared with a tolerance for extremes)."""
    out = {}
    for kind in ESTIMATE_KINDS:
        rows = []
        for r in rows_by_kind[kind]:
            key = {k: v for k, v in r.items() if k not in FLOATS}
            rows.append((schemas.to_json_line(key), tuple(r[k] for k in FLOATS if k in r)))
        out[kind] = sorted(rows)
    return out


def run_batch(source, config):
    got = Collected()
    with BeamTestPipeline() as p:
        outs = build(p, source, None, JobOptions({config.name: config}))
        for kind, pcoll in outs.items():
            pcoll | got.into(kind)
    return got


def run_streaming(stream, config):
    got = Collected()
    with streaming_pipeline() as p:
        outs = build(p, stream, None, JobOptions({config.name: config}, streaming=True))
        for kind, pcoll in outs.items():
            pcoll | got.into(kind)
    return got


def batch_and_streaming(records, config, singles: int = 1500) -> tuple:
    """``(batch, streaming)``: what the batch job over ``records`` (one message each) and the streaming
    job collect (:class:`~tests.collect.Collected`), the stream's first ``singles`` records single messages
    and the rest one container, every one on time."""
    messages = [schemas.encode_message("noisy_report", r) for r in records]
    batch = run_batch(beam.Create(messages), config)
    stream = (test_stream.TestStream().advance_watermark_to(0).add_elements(messages[:singles])
              .add_elements([container(records[singles:])]).advance_watermark_to_infinity())
    return batch, run_streaming(stream, config)


def latest_panes(got) -> dict:
    """The rows of each window and capped key's latest pane, by kind (the streaming job's answer at the end)."""
    latest = {}
    for f in got["panes"]:
        key = (f.kind, f.window, f.key)
        if key not in latest or f.pane > latest[key].pane:
            latest[key] = f
    return {kind: [r for (k, _, _), f in latest.items() if k == kind for r in f.rows] for kind in ESTIMATE_KINDS}


def test_batch_files_messages_containers_and_streaming_agree(tmp_path):
    # every kind of row: the small config plus a numeric feature, its means and a conditional
    cfg = parse_config(dict(SMALL_CONFIG, features=SMALL_CONFIG["features"] + [
        {"name": "minutes", "type": "numeric", "low": 0, "high": 30}], channel=SMALL_CONFIG["channel"] + [
        {"p": 0.1, "q": 0.9}], means=[{"of": "minutes", "by": ["os"]}],
        conditionals=[{"of": ["beta"], "given": ["dark"]}]))
    records = reports(cfg)
    schemas.write_avro(tmp_path / "reports.avro", "noisy_report", records[:900])
    schemas.write_avro(tmp_path / "more.avro", "noisy_report", records[900:])
    messages = [schemas.encode_message("noisy_report", r) for r in records]
    containers = [container(records[i:i + 500]) for i in range(0, len(records), 500)]

    answers = {
        "files": run_batch(ReadReportFilesFast(str(tmp_path / "*.avro"), {cfg.name: cfg}), cfg),
        "messages": run_batch(beam.Create(messages), cfg),
        "containers": run_batch(beam.Create(containers), cfg),
    }
    # streaming: single messages and containers mixed, the watermark held until the end
    stream = (test_stream.TestStream()
              .advance_watermark_to(0)
              .add_elements(messages[:700])
              .add_elements(containers[2:])
              .add_elements(messages[700:1000])
              .advance_watermark_to_infinity())
    answers["streaming"] = run_streaming(stream, cfg)

    expected = canonical({k: answers["files"][k] for k in ESTIMATE_KINDS})
    assert all(expected[kind] for kind in ESTIMATE_KINDS), {k: len(v) for k, v in expected.items()}
    dead = sorted((d["reason"], d["detail"]) for d in answers["files"]["dead_letters"])
    assert [r for r, _ in dead] == sorted(["unknown_collection", "wrong_length", "bad_timestamp", "padding_bits",
                                           "undeclared_dimension", "bad_field"])
    for mode, got in answers.items():
        rows = latest_panes(got) if mode == "streaming" else {k: got[k] for k in ESTIMATE_KINDS}
        actual = canonical(rows)
        for kind in ESTIMATE_KINDS:
            assert [k for k, _ in actual[kind]] == [k for k, _ in expected[kind]], (mode, kind)
            for (_, a), (_, e) in zip(actual[kind], expected[kind]):
                if kind == EXTREMES:
                    assert a == pytest.approx(e, rel=1e-9, abs=1e-12), (mode, kind)
                else:
                    assert a == e, (mode, kind)
        assert sorted((d["reason"], d["detail"]) for d in got["dead_letters"]) == dead, mode


def test_consistent_tables_of_the_joint_agree_batch_and_streaming():
    """Every feature boolean and every order counted: the consistent tables are the joint SURE chooses
    (ldp/sure_em.py; its probes are seeded by the counts), the same rows to the bit in batch and in the
    streaming job's last panes."""
    cfg = parse_config({"collection": "flags", "features": [{"name": n, "type": "boolean"} for n in "abcde"],
                        "channel": [{"p": 0.2, "q": 0.8}, {"p": 0.15, "q": 0.9}, {"p": 0.25, "q": 0.75},
                                    {"p": 0.2, "q": 0.8}, {"p": 0.1, "q": 0.85}],
                        "max_order": 5, "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 50,
                        "groups": [["a", "b"], ["b", "c", "d"], ["e"]], "dimensions": {"region": {"max_values": 10}}})
    records = []
    for seed, region in ((7, "eu"), (8, "us")):
        pop = simulate_population(cfg, 500, seed=seed, span_seconds=1.5 * 3600, reports_per_client=2)
        records += list(report_records(cfg, pop, {"region": region}))
    messages = [schemas.encode_message("noisy_report", r) for r in records]
    batch = run_batch(beam.Create(messages), cfg)
    stream = (test_stream.TestStream().advance_watermark_to(0).add_elements(messages)
              .advance_watermark_to_infinity())
    got = run_streaming(stream, cfg)
    want = canonical({k: batch[k] for k in ESTIMATE_KINDS})["consistent_tables"]
    assert want and {r["method"] for r in batch["consistent_tables"]} <= {"joint-em", "joint-mle"}
    assert "joint-em" in {r["method"] for r in batch["consistent_tables"]}
    assert canonical(latest_panes(got))["consistent_tables"] == want
