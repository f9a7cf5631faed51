"""Bad input is one clear error and a non-zero exit (issue 36): a directory, a file that is not Avro or
an Avro file of another schema given as ``--input`` is refused before anything runs (exit 2, one line
naming the file or the schema); a run that counts no report exits 3 after its summary; and the
progress line's "writing outputs: N of M" never has N > M (the counts behind it agree at the end)."""
import io
import json

import fastavro
import pytest
import yaml

from ldp_marginals.pipelines import cli
from ldp_marginals.pipelines.read import read
from ldp_marginals.pipelines.run import run
from ldp_marginals.pipelines.simulate import report_records, simulate_population, write_population
from ldp_marginals.schemas import load_schema, raw_schema
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.dead_letters import FILES_PLANNED, FILES_WRITTEN
from ldp_marginals.schemas.outputs import MANIFEST_FILE, SUMMARY_FILE, load_manifest
from ldp_marginals.transforms.dead_letters import LOCAL_TALLY
from tests.configs import SMALL_CONFIG

CLICK = {"type": "record", "name": "Click", "namespace": "com.example",
         "fields": [{"name": "user", "type": "string"}, {"name": "ts", "type": "long"}]}


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(SMALL_CONFIG))
    (tmp_path / "in").mkdir()
    cfg = parse_config(SMALL_CONFIG)
    write_population(cfg, simulate_population(cfg, 300, seed=1), str(tmp_path / "in" / "r.avro"))  # + r.avro.truth.json
    with open(tmp_path / "click.avro", "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(CLICK), [{"user": f"u{i}", "ts": i} for i in range(5000)])
    return tmp_path


def exit_and_lines(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out.strip().splitlines(), err.strip().splitlines()


def test_an_input_that_cannot_hold_reports_is_one_error_naming_it(workdir, capsys):
    run_args = ["run", "--config", str(workdir / "c.yaml"), "--output", str(workdir / "o"), "--progress-seconds", "0"]
    cases = {   # --input -> what the one line says
        str(workdir / "in"): f"--input {workdir}/in: {workdir}/in is a directory; give a glob of its report files, "
                             f"such as {workdir}/in/*.avro",
        str(workdir / "in" / "r.avro.truth.json"): f"{workdir}/in/r.avro.truth.json is not an Avro file (it starts "
                                                   "with b'{",
        str(workdir / "in" / "*"): f"{workdir}/in/r.avro.truth.json is not an Avro file",   # reports and truth
        str(workdir / "click.avro"): f"{workdir}/click.avro has the Avro schema com.example.Click (user, ts), not a "
                                     "NoisyReport's: it has no collection, event_time, bits",
    }
    for given, says in cases.items():
        code, out, err = exit_and_lines(capsys, run_args + ["--input", given])
        assert (code, out, len(err)) == (2, [], 1), (given, out, err)
        assert err[0].startswith("ldp-marginals run: error: --input ") and says in err[0], err[0]
    assert not (workdir / "o" / MANIFEST_FILE).exists() and not (workdir / "o" / "dead_letters").exists()


def test_reports_of_an_older_writer_and_damaged_files_are_not_refused(workdir, capsys):
    """Only a file that cannot hold a report is refused: an older writer's schema (no ``client``), an
    empty file and an Avro file whose header is damaged are read (damage is dead-lettered)."""
    cfg = parse_config(SMALL_CONFIG)
    contract = raw_schema("noisy_report")
    old = dict(contract, name="NoisyReportV1", fields=[f for f in contract["fields"] if f["name"] != "client"])
    records = [{k: v for k, v in r.items() if k != "client"}
               for r in report_records(cfg, simulate_population(cfg, 100, seed=2))]
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(old), records)
    (workdir / "in" / "old.avro").write_bytes(buf.getvalue())
    (workdir / "in" / "empty.avro").write_bytes(b"")
    damaged = bytearray((workdir / "in" / "r.avro").read_bytes())
    damaged[6:10] = bytes(b ^ 0xFF for b in damaged[6:10])   # inside the header, after the magic
    (workdir / "in" / "header.avro").write_bytes(bytes(damaged))
    code, out, err = exit_and_lines(capsys, ["run", "--config", str(workdir / "c.yaml"), "--input",
                                             str(workdir / "in" / "*.avro"), "--output", str(workdir / "o"),
                                             "--progress-seconds", "0"])
    assert code == 0, err
    summary = json.loads((workdir / "o" / SUMMARY_FILE).read_text())
    assert summary["reports_counted"] == 400 and summary["damaged_ranges"] == 2   # r.avro and old.avro; 2 files


def test_a_run_that_counts_no_report_exits_3_after_its_summary(workdir, capsys):
    other = dict(SMALL_CONFIG, collection="nobody")
    (workdir / "other.yaml").write_text(yaml.safe_dump(other))
    code, out, err = exit_and_lines(capsys, ["run", "--config", str(workdir / "other.yaml"), "--input",
                                             str(workdir / "in" / "*.avro"), "--output", str(workdir / "o"),
                                             "--progress-seconds", "0"])
    assert code == cli.EXIT_NOTHING_COUNTED == 3
    assert out == ["counted 0 reports; dead-lettered 300 {'unknown_collection': 300}"]
    assert err == ["ldp-marginals run: error: no report was counted: all 300 were dead-lettered "
                   "{'unknown_collection': 300}; the dead letters say why (kind dead_letters in the outputs)"]
    # the run finished: its summary and dead letters are there to read
    assert load_manifest(str(workdir / "o"))["summary"]["reports_dead_lettered"] == 300
    assert read(str(workdir / "o"), "dead_letters")["reports"].to_pylist() == [1] * 300
    # nothing to read at all (--allow-empty) is not that: 0
    code, out, _ = exit_and_lines(capsys, ["run", "--config", str(workdir / "c.yaml"), "--input",
                                           str(workdir / "none" / "*.avro"), "--output", str(workdir / "e"),
                                           "--allow-empty", "--progress-seconds", "0"])
    assert code == 0 and out == ["counted 0 reports; dead-lettered 0"]


def test_run_help_lists_the_exit_codes(capsys):
    from ldp_marginals.pipelines.run import run_parser
    text = " ".join(run_parser().format_help().split())
    for code, meaning in cli.EXIT_CODES.items():
        assert f"{code} {meaning}" in text


def test_the_file_sets_written_never_outnumber_the_planned_ones(workdir):
    """The progress line's "writing outputs: N of M" reads these counters. Dead letters' file sets
    were written without being planned ("60 of 59"): now each is planned as it reaches its writer, and
    when the run ends both counters equal the file sets of its manifest."""
    cfg = parse_config(SMALL_CONFIG)
    bad = [dict(r, collection="nobody") for r in report_records(cfg, simulate_population(cfg, 5, seed=3))]
    buf = io.BytesIO()
    fastavro.writer(buf, load_schema("noisy_report"), bad)
    (workdir / "in" / "bad.avro").write_bytes(buf.getvalue())
    run(["--config", str(workdir / "c.yaml"), "--input", str(workdir / "in" / "*.avro"), "--output",
         str(workdir / "o"), "--progress-seconds", "0"])
    totals = LOCAL_TALLY.totals()
    files = load_manifest(str(workdir / "o"))["files"]
    assert any(e["kind"] == "dead_letters" for e in files)
    assert totals[FILES_WRITTEN] == totals[FILES_PLANNED] == len(files)
