"""The block fast path gives exactly what the record-by-record path gives."""
import fastavro
import pytest
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from ldp_marginals import schemas
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import SCHEMA_OF
from ldp_marginals.transforms import blocks
from ldp_marginals.transforms.avro_blocks import iter_report_batches
from ldp_marginals.transforms.blocks import ReadReportFilesFast
from ldp_marginals.transforms.reports import ReadNoisyReportFiles
from ldp_marginals.transforms.sinks import FileSink
from tests.configs import SMALL_CONFIG

NO_CLIENTS = dict(SMALL_CONFIG, extremes=[e for e in SMALL_CONFIG["extremes"] if e.get("over") != "client"],
                  min_reports=40)


def mixed_records(cfg, n, seed):
    """Valid reports over a few windows and two dimension values, with malformed ones mixed in."""
    pop = simulate_population(cfg, n, seed=seed, span_seconds=3 * 3600)
    out = []
    for i, r in enumerate(report_records(cfg, pop)):
        r = dict(r, dimensions={"v": "1.0"} if i % 3 else {"v": "2.0", "arch": "arm"})
        if i % 97 == 0:
            r["bits"] = b"\xff"                      # padding bits
        elif i % 101 == 0:
            r["bits"] = b"\x01\x00"                  # wrong length
        elif i % 103 == 0:
            r["collection"] = "elsewhere"            # unknown collection
        elif i % 107 == 0:
            r["event_time"] = -1000                  # absurd timestamp
        out.append(r)
    return out


def test_fast_reader_equals_fastavro_and_falls_back_on_other_writer_schemas(tmp_path):
    cfg = parse_config(SMALL_CONFIG)
    records = mixed_records(cfg, 3000, 1)
    records[5]["client"] = "c-éé"  # non-ASCII client token
    schemas.write_avro(tmp_path / "a.avro", "noisy_report", records)
    with open(tmp_path / "a.avro", "rb") as fh:
        blocks = list(iter_report_batches(fh, min_records=1))
    assert all(b.records is None for b in blocks) and len(blocks) > 1
    got = [b.record(i) for b in blocks for i in range(len(b))]
    assert got == [schemas.normalize("noisy_report", r) for r in records]
    with open(tmp_path / "a.avro", "rb") as fh:
        batches = list(iter_report_batches(fh, min_records=1000))
    assert len(batches) < len(blocks) and batches[0].starts[0] == blocks[0].starts[0]
    assert [b.record(i) for b in batches for i in range(len(b))] == got
    # an older writer without the client field: fastavro's records, same content
    old = fastavro.parse_schema({"type": "record", "name": "NoisyReport", "namespace": "ldp_marginals", "fields": [
        f for f in schemas.raw_schema("noisy_report")["fields"] if f["name"] != "client"]})
    with open(tmp_path / "old.avro", "wb") as fh:
        fastavro.writer(fh, old, [{k: v for k, v in r.items() if k != "client"} for r in records[:50]])
    with open(tmp_path / "old.avro", "rb") as fh:
        old_blocks = list(iter_report_batches(fh, min_records=1))
    assert all(b.records is not None for b in old_blocks)
    assert sum(len(b) for b in old_blocks) == 50


@pytest.mark.parametrize("window", [{"type": "fixed", "size_seconds": 3600},
                                    {"type": "sliding", "size_seconds": 7200, "period_seconds": 1800},
                                    {"type": "global"}], ids=["fixed", "sliding", "global"])
def test_fast_path_equals_the_per_element_path(tmp_path, window, monkeypatch):
    monkeypatch.setattr(blocks, "FLUSH_ROWS", 700)  # several flushes per file, across block boundaries
    cfg = parse_config(dict(NO_CLIENTS, window=window))
    records = mixed_records(cfg, 4000, 2)
    for name, part in (("r1", records[:2500]), ("r2", records[2500:])):   # blocks of ~1 KB: many per split
        with open(tmp_path / f"{name}.avro", "wb") as fh:
            fastavro.writer(fh, schemas.load_schema("noisy_report"), part, codec="deflate", sync_interval=1000)
    pattern = str(tmp_path / "*.avro")

    results = {}
    # "split": the fast reader with the files cut into 1 KiB splits read apart (many per file);
    # "files": the job as `run` builds it for files alone (rows only in the pane files)
    for name, source, rows in (("slow", ReadNoisyReportFiles(pattern), True),
                               ("fast", ReadReportFilesFast(pattern, {"app": cfg}), True),
                               ("split", ReadReportFilesFast(pattern, {"app": cfg}, split_bytes=1024), True),
                               ("files", ReadReportFilesFast(pattern, {"app": cfg}), False)):
        out_dir = tmp_path / name
        with BeamTestPipeline() as p:
            outs = build(p, source, FileSink(str(out_dir)), JobOptions({"app": cfg}, row_outputs=rows))
            if not rows:   # the kinds' own outputs stay empty
                for kind in ("marginals", "tables", "withheld"):
                    assert_that(outs[kind], equal_to([]), label=f"Empty[{kind}]")
        results[name] = {kind: read_kind(out_dir, kind) for kind in SCHEMA_OF}
    files = results["files"]
    assert {k: v for k, v in files.items() if k != "extremes"} == {
        k: v for k, v in results["fast"].items() if k != "extremes"}
    slow, fast = results["slow"], results["fast"]
    assert slow["marginals"] and slow["dead_letters"]
    assert {d["reason"] for d in slow["dead_letters"]} == {"padding_bits", "wrong_length", "unknown_collection",
                                                          "bad_timestamp"}
    for kind in ("marginals", "tables", "withheld"):
        assert sorted(map(schemas.to_json_line, fast[kind])) == sorted(map(schemas.to_json_line, slow[kind])), kind
    dead = lambda rows: sorted(schemas.to_json_line(dict(d, source=d["source"].split("/")[-1]))  # noqa: E731
                               for d in rows)
    assert dead(fast["dead_letters"]) == dead(slow["dead_letters"])
    ext = lambda rows: sorted((r["window_start"], r["name"], r["n"], round(r["estimate"], 8),  # noqa: E731
                               round(r["variance"], 8)) for r in rows)
    assert ext(fast["extremes"]) == ext(slow["extremes"]) and slow["extremes"]
    # the splits give the whole files' rows (extremes are float sums: their order may differ)
    assert (tmp_path / "r1.avro").stat().st_size > 8 * 1024
    split = results["split"]
    assert {k: v for k, v in split.items() if k != "extremes"} == {k: v for k, v in fast.items() if k != "extremes"}
    assert ext(split["extremes"]) == ext(fast["extremes"]) == ext(files["extremes"])


def read_kind(out_dir, kind):
    return [r for path in sorted((out_dir / kind).glob("*.avro")) for r in schemas.read_avro(path, SCHEMA_OF[kind])]
