"""Nothing lost, nothing false: every damaged input, on both readers, is accounted for exactly
(counted + dead-lettered + lost in damaged ranges = what the file holds), and the two readers
give identical rows and dead letters."""
import io
import json
import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldp_marginals import schemas
from ldp_marginals.pipelines.run import run
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import KINDS, SCHEMA_OF
from ldp_marginals.transforms.avro_blocks import ReportBlock, iter_report_batches
from ldp_marginals.transforms.avro_container import Damage, _Stream, iter_container, read_header
from tests.configs import SMALL_CONFIG
from tests.faults.damage import blocks_of, cases, container, records

CONFIG = dict(SMALL_CONFIG, extremes=[e for e in SMALL_CONFIG["extremes"] if e.get("over") != "client"],
              min_reports=1, window={"type": "fixed", "size_seconds": 3600},
              dimensions={"case": {"max_values": 100}, "v": {"max_values": 3}})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both readers over one directory of every damaged case: their outputs and summaries."""
    cfg = parse_config(CONFIG)
    root = tmp_path_factory.mktemp("faults")
    (root / "in").mkdir()
    all_cases = cases(cfg)
    for case in all_cases:
        (root / "in" / f"{case.name}.avro").write_bytes(case.data)
    (root / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    out = {}
    for path in ("fast", "per_element"):
        argv = ["--config", str(root / "config.yaml"), "--input", str(root / "in" / "*.avro"),
                "--output", str(root / path)] + (["--per-element"] if path == "per_element" else [])
        summary = run(argv)
        rows = {kind: [r for f in sorted((root / path / kind).glob("*.avro"))
                       for r in schemas.read_avro(f, SCHEMA_OF[kind])] for kind in KINDS}
        out[path] = (summary, rows)
    return all_cases, out


def case_of(dead: dict) -> str:
    return re.search(r"/([a-z0-9_]+)\.avro[@#]", dead["source"]).group(1)


def lost_in(dead: dict) -> int:
    """Reports a damaged_block dead letter says were lost (0 when its count is unreadable)."""
    partial = re.search(r"so records (\d+) to (\d+) are lost", dead["detail"])
    if partial:
        return int(partial.group(2)) - int(partial.group(1)) + 1
    declared = re.search(r"the block declared (\d+) records", dead["detail"])
    return int(declared.group(1)) if declared else 0


def test_both_readers_give_identical_rows_and_dead_letters(runs):
    _, out = runs
    (fast_summary, fast), (slow_summary, slow) = out["fast"], out["per_element"]
    for kind in ("marginals", "tables", "extremes", "withheld"):
        assert sorted(map(schemas.to_json_line, fast[kind])) == sorted(map(schemas.to_json_line, slow[kind])), kind
    key = lambda d: schemas.to_json_line(dict(d, source=d["source"].rsplit("/", 1)[-1]))  # noqa: E731
    assert sorted(map(key, fast["dead_letters"])) == sorted(map(key, slow["dead_letters"]))
    assert fast_summary == slow_summary


def test_every_case_is_accounted_for_exactly(runs):
    all_cases, out = runs
    summary, rows = out["fast"]
    counted = {}
    for r in rows["marginals"] + rows["withheld"]:
        if r.get("columns", [0]) == [0]:
            counted[r["dimensions"].get("case")] = counted.get(r["dimensions"].get("case"), 0) + r["n_reports"]
    for case in all_cases:
        dead = [d for d in rows["dead_letters"] if case_of(d) == case.name]
        per_record = [d for d in dead if d["reason"] != "damaged_block"]
        lost = sum(lost_in(d) for d in dead if d["reason"] == "damaged_block")
        assert all(d["reports"] == lost_in(d) for d in dead if d["reason"] == "damaged_block"), case.name
        reasons = {d["reason"] for d in dead}
        assert reasons == case.reasons if case.exact else case.reasons <= reasons, case.name
        if case.name == "header":  # nothing readable, and the loss is reported as of unknown size
            assert counted.get(case.name, 0) == 0 and "record count is unreadable" in dead[0]["detail"]
            continue
        assert counted.get(case.name, 0) + len(per_record) + lost == case.written, case.name
    held = sum(c.written for c in all_cases if c.name != "header")
    assert (summary["reports_counted"] + summary["reports_dead_lettered"] + summary["reports_in_damaged_ranges"]
            == held)
    assert summary["damaged_ranges_of_unknown_size"] == 1


def test_per_record_faults_cost_that_record_alone(runs):
    all_cases, out = runs
    _, rows = out["fast"]
    by_case = {}
    for d in rows["dead_letters"]:
        by_case.setdefault(case_of(d), []).append(d)
    for name, detail in (("utf8_dims_first", "dimensions is not valid UTF-8"),
                         ("utf8_dims_2000", "dimensions is not valid UTF-8"),
                         ("utf8_collection", "collection is not valid UTF-8"),
                         ("utf8_client", "client is not valid UTF-8")):
        (d,) = by_case[name]
        assert d["reason"] == "undecodable" and d["detail"] == detail and d["bits_length"] == 1
    for name in ("huge_time", "old_schema_huge_time"):
        (d,) = by_case[name]
        assert d["reason"] == "bad_timestamp" and d["event_time"] is None and d["collection"] == "app"
        assert d["detail"] == f"event_time {2 ** 62} is outside [1970, 2100)"
    # a writer whose event_time is a double: every record is refused (the contract is int millis), the
    # NaN one's like the others (the detail names the type, never the value)
    assert {d["reason"] for d in by_case["nan_time"]} == {"bad_timestamp"} and len(by_case["nan_time"]) == 3000
    assert {d["detail"] for d in by_case["nan_time"]} == {"event_time must be int millis, got float"}


def test_damaged_ranges_name_the_bytes_and_the_records(runs):
    all_cases, out = runs
    _, rows = out["fast"]
    cut = {c.name: c for c in all_cases}["truncated_deflate"]
    (d,) = [d for d in rows["dead_letters"] if case_of(d) == "truncated_deflate"]
    start = int(d["source"].rsplit("@", 1)[1])
    assert d["detail"] == (f"bytes [{start}, {len(cut.data)}) skipped: the file ends inside the block; "
                           f"the block declared {lost_in(d)} records")


# Random damage, checked on the walk both readers share (fast: no pipeline per example).

def _clean_file():
    cfg = parse_config(CONFIG)
    return container(records(cfg, "random", 21)[:600], codec="null")


CLEAN = _clean_file()
HEADER_END = read_header(_Stream(io.BytesIO(CLEAN))).end
BLOCKS = blocks_of(CLEAN)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(HEADER_END, len(CLEAN) - 1), st.integers(1, 24), st.integers(1, 255))
def test_random_damage_costs_only_the_blocks_it_touches(at, width, xor):
    damaged = bytearray(CLEAN)
    for i in range(at, min(at + width, len(damaged))):
        damaged[i] ^= xor
    items = list(iter_report_batches(io.BytesIO(bytes(damaged)), min_records=1))
    # the items tile the file after the header: intact blocks and damaged ranges, in order (a block
    # whose first records decoded is followed by the Damage of the same bytes, for the rest)
    spans = [(it.starts[0][1], it.end) if isinstance(it, ReportBlock) else (it.start, it.end) for it in items]
    for (a, b), (c, d) in zip(spans, spans[1:]):
        assert a < b and (b == c or (a, b) == (c, d))
    assert spans[0][0] == HEADER_END and spans[-1][1] == len(CLEAN)
    # every block the damage did not touch comes back whole, with its records as written
    original = {}
    for it in iter_report_batches(io.BytesIO(CLEAN), min_records=1):
        original[it.starts[0][1]] = [it.record(i) for i in range(len(it))]
    got = {it.starts[0][1]: it for it in items if isinstance(it, ReportBlock)}
    for start, end, count in BLOCKS:
        if end <= at or start >= at + width:
            assert start in got and [got[start].record(i) for i in range(count)] == original[start]
    # and whatever was read is accounted: a damaged range says what it lost, or that it cannot know
    for it in items:
        if isinstance(it, Damage):
            assert it.records_lost is None or it.records_lost >= 0


def test_every_codec_reads_and_a_damaged_header_loses_only_its_file():
    cfg = parse_config(CONFIG)
    recs = records(cfg, "codecs", 30)[:300]
    for codec in ("null", "deflate", "bzip2", "xz"):
        items = list(iter_container(io.BytesIO(container(recs, codec=codec))))
        assert sum(b.count for b in items) == 300 and not any(isinstance(b, Damage) for b in items), codec


def test_dimensions_are_declared_bounded_and_dead_letters_stay_small(runs):
    _, out = runs
    _, rows = out["fast"]
    dead = [d for d in rows["dead_letters"] if case_of(d) in ("undeclared", "too_long")]
    # a dead letter names the declared dimensions only: no device id, none of the 50,000 keys, no 5 MB value
    assert len(dead) == 3001 and all(len(schemas.to_json_line(d)) < 1024 for d in dead)
    assert all(set(d["dimensions"]) <= {"case", "v"} and "d0" not in d["detail"] for d in dead)
    assert {d["detail"] for d in dead if d["reason"] == "undeclared_dimension"} == {
        "a dimension name of 9 characters is not declared for collection 'app' (declared: ['case', 'v'])",
        "a dimension name of 2 characters is not declared for collection 'app' (declared: ['case', 'v'])"}
    (long_value,) = [d for d in dead if d["reason"] == "dimension_too_long"]
    assert long_value["detail"] == "dimension 'v' has a value of 5,000,000 characters, over max_length=64"
    assert long_value["dimensions"] == {"case": "too_long"}
    # six values of v in one window, max_values=3: the three largest and __other__, all reports counted
    many = [r for r in rows["marginals"] if r["dimensions"].get("case") == "many_values" and r["columns"] == [0]]
    values = sorted(r["dimensions"]["v"] for r in many)
    assert len(values) == 4 and "__other__" in values
    assert sum(r["n_reports"] for r in many) == 3000
    # no withheld row or output anywhere lists an undeclared key
    assert not any("device_id" in r["dimensions"] for kind in ("marginals", "withheld") for r in rows[kind])


def test_messages_fail_alone_with_the_reason_of_their_fault():
    """Pub/Sub and Kafka payloads: an absurd timestamp is a bad_timestamp, bytes that are not UTF-8
    or not a report are undecodable, and the good messages around them are counted."""
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from ldp_marginals.pipelines.job import JobOptions, build
    cfg = parse_config(CONFIG)
    good = [dict(r, dimensions={}) for r in records(cfg, "messages", 40)[:20]]
    messages = [schemas.encode_message("noisy_report", r) for r in good]
    messages.append(schemas.encode_message("noisy_report", dict(good[0], event_time=2 ** 62)))
    messages.append(schemas.encode_message("noisy_report", dict(good[0], collection="ap#")).replace(b"ap#", b"ap\xc3"))
    messages.append(b"\x01\x02not a report")
    with BeamTestPipeline() as p:
        outs = build(p, beam.Create([(m, "pubsub") for m in messages]), None, JobOptions({cfg.name: cfg}))
        assert_that(outs["dead_letters"] | beam.Map(lambda d: d["reason"]),
                    equal_to(["bad_timestamp", "undecodable", "undecodable"]), label="reasons")
        counted = (outs["marginals"] | beam.Filter(lambda r: r["columns"] == [0])
                   | beam.Map(lambda r: r["n_reports"]) | beam.WindowInto(beam.window.GlobalWindows())
                   | beam.CombineGlobally(sum))
        assert_that(counted, equal_to([20]), label="counted")


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=12))
def test_the_compiled_utf8_check_agrees_with_python(data):
    """The block reader checks client tokens with a compiled loop and the per-element reader with
    Python's codec: they must agree on every byte string, or the readers would disagree."""
    import numpy as np

    from ldp_marginals.transforms.avro_kernels import utf8_ok
    try:
        data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    assert utf8_ok(np.frombuffer(data, np.uint8), np.array([0]), np.array([len(data)]))[0] == valid


def test_container_messages_give_the_rows_of_the_same_reports_in_a_file(tmp_path):
    """A message may hold one report or an Avro container of many; mixed in one stream they give
    exactly the rows the batch file path gives on the same reports, and a damaged container costs
    only its damaged blocks."""
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

    from ldp_marginals.pipelines.job import JobOptions, build
    from ldp_marginals.transforms.blocks import ReadReportFilesFast
    from ldp_marginals.transforms.sinks import FileSink
    cfg = parse_config(CONFIG)
    recs = records(cfg, "containers", 50)[:1520]
    messages = [container(recs[i:i + 500]) for i in range(0, 1500, 500)]
    messages += [schemas.encode_message("noisy_report", r) for r in recs[1500:]]
    more = records(cfg, "containers", 51)[:400]
    cut_at = len(container(more)) * 2 // 3
    messages.append(container(more)[:cut_at])  # a container cut short: its intact blocks still count
    kept = sum(count for _, end, count in blocks_of(container(more)) if end <= cut_at)
    assert 0 < kept < 400
    (tmp_path / "in").mkdir()
    schemas.write_avro(tmp_path / "in" / "same.avro", "noisy_report", recs + more[:kept])
    outputs = {}
    for name, source in (("files", ReadReportFilesFast(str(tmp_path / "in" / "*.avro"), {cfg.name: cfg})),
                         ("messages", beam.Create([(m, "pubsub") for m in messages]))):
        with BeamTestPipeline() as p:
            build(p, source, FileSink(str(tmp_path / name)), JobOptions({cfg.name: cfg}))
        outputs[name] = {kind: sorted(schemas.to_json_line(r) for f in (tmp_path / name / kind).glob("*.avro")
                                      for r in schemas.read_avro(f, SCHEMA_OF[kind]))
                         for kind in KINDS}
    for kind in ("marginals", "tables", "extremes", "withheld"):
        assert outputs["messages"][kind] == outputs["files"][kind], kind
    assert outputs["files"]["marginals"] and outputs["files"]["dead_letters"] == []
    (damage,) = [json.loads(d) for d in outputs["messages"]["dead_letters"]]
    assert damage["reason"] == "damaged_block" and damage["source"].startswith("pubsub@")


def _split_walk(data: bytes, split: int) -> list:
    """Every split's items of ``data`` cut into ``split``-byte ranges, joined in order."""
    out = []
    for start in range(0, max(len(data), 1), split):
        out += list(iter_container(io.BytesIO(data), start=start, end=min(start + split, max(len(data), 1))))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(HEADER_END, len(CLEAN) - 1), st.integers(0, 40), st.integers(1, 255), st.integers(17, 4000))
def test_the_splits_of_a_damaged_file_yield_exactly_what_one_walk_yields(at, width, xor, split):
    damaged = bytearray(CLEAN)
    for i in range(at, min(at + width, len(damaged))):
        damaged[i] ^= xor
    whole = list(iter_container(io.BytesIO(bytes(damaged))))
    assert _split_walk(bytes(damaged), split) == whole


def test_the_splits_of_every_damaged_case_yield_what_one_walk_yields():
    for case in cases(parse_config(CONFIG)):
        whole = list(iter_container(io.BytesIO(case.data)))
        for split in (17, 100, 1000, 5000):
            assert _split_walk(case.data, split) == whole, (case.name, split)


def test_a_split_must_be_a_range():
    with pytest.raises(ValueError, match="start=5, end=5"):
        list(iter_container(io.BytesIO(CLEAN), start=5, end=5))
