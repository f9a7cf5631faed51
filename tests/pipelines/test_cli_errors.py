"""Errors a person can act on: one line naming the file, the field or the option and its value,
exit code 2 (1 for a run that started and could not finish), no traceback."""
import errno
import os
import re

import pytest
import yaml
from apache_beam.io.filesystems import FileSystems

from ldp_marginals.pipelines import cli
from ldp_marginals.pipelines.simulate import simulate_population, write_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.pipelines.read import read
from ldp_marginals.schemas.outputs import MANIFEST_FILE, SUMMARY_FILE, OutputError
from tests.configs import SMALL_CONFIG


@pytest.fixture
def workdir(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(SMALL_CONFIG))
    (tmp_path / "in").mkdir()
    cfg = parse_config(SMALL_CONFIG)
    write_population(cfg, simulate_population(cfg, 200, seed=1), str(tmp_path / "in" / "r.avro"))
    return tmp_path


# a run's progress lines (pipelines/progress.py, every --progress-seconds, 10 by default), printed when the
# run lasts that long: on a loaded machine (the suite runs in parallel) a run that then fails did
PROGRESS = re.compile(r"\[\d{2,}:\d{2}\] counted [\d,]+ reports; dead-lettered [\d,]+(; .*)?")


def one_line_error(capsys, argv, code=2) -> str:
    assert cli.main(argv) == code
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not PROGRESS.fullmatch(line)]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def test_missing_or_wrong_config_files(workdir, capsys):
    missing = workdir / "nope.yaml"
    err = one_line_error(capsys, ["run", "--config", str(missing), "--input", "x", "--output", str(workdir / "o")])
    assert f"--config {missing}: cannot read it" in err
    bad = workdir / "bad.yaml"
    bad.write_text(yaml.safe_dump(dict(SMALL_CONFIG, channel={"epsilom": 3})))
    err = one_line_error(capsys, ["run", "--config", str(bad), "--input", "x", "--output", str(workdir / "o")])
    assert f"{bad}: channel has unknown keys ['epsilom']" in err
    err = one_line_error(capsys, ["simulate", "--config", str(bad), "--reports", "5", "--out", str(workdir / "s")])
    assert f"{bad}: channel has unknown keys" in err


def test_inputs_that_match_nothing(workdir, capsys):
    out = str(workdir / "o")
    err = one_line_error(capsys, ["run", "--config", str(workdir / "c.yaml"), "--input", str(workdir / "in/*.avr"),
                                  "--output", out])
    assert err.endswith(f"--input {workdir}/in/*.avr: the glob matches no file (add --allow-empty to run on none)")
    err = one_line_error(capsys, ["run", "--config", str(workdir / "c.yaml"), "--input", str(workdir / "in/x.avro"),
                                  "--output", out])
    assert "the path matches no file" in err
    assert cli.main(["run", "--config", str(workdir / "c.yaml"), "--input", str(workdir / "in/*.avr"),
                     "--output", out, "--allow-empty"]) == 0
    assert "counted 0 reports" in capsys.readouterr().out


def test_misspelled_options_and_unwritable_outputs(workdir, capsys):
    args = ["run", "--config", str(workdir / "c.yaml"), "--input", str(workdir / "in/*.avro")]
    # the README's example: the misspelling alone (argparse would say --output is missing), and beside --output
    for extra in (["--outptu", str(workdir / "o")], ["--outptu=" + str(workdir / "o")],
                  ["--outptu", str(workdir / "o"), "--output", str(workdir / "o")]):
        err = one_line_error(capsys, args + extra)
        assert err == "ldp-marginals run: error: unrecognized option --outptu: did you mean --output? (see " \
                      "ldp-marginals run --help)", extra
    assert cli.main(args + ["--out", str(workdir / "o")]) == 0   # argparse's abbreviation of --output is no typo
    assert "counted 200 reports" in capsys.readouterr().out
    err = one_line_error(capsys, args + ["--output", str(workdir / "o"), "--per_elemnt"])
    assert "did you mean --per_element?" in err
    (workdir / "a_file").write_text("")
    err = one_line_error(capsys, args + ["--output", str(workdir / "a_file" / "o")])
    assert f"--output {workdir}/a_file/o: not a writable directory" in err


def test_every_option_has_help_and_run_help_names_beam(capsys):
    from ldp_marginals.pipelines.run import run_parser
    parser, subcommands = cli.build_parser()
    assert set(subcommands) == {"run", "simulate", "client-config", "produce", "collect", "calibrate", "plan", "compare", "read",
                                "demo", "dashboard"}
    for p in [parser, run_parser(), *subcommands.values()]:
        for action in p._actions:
            if action.option_strings:
                assert action.help and action.help.strip(), (p.prog, action.option_strings)
    assert "Any other option goes to Beam" in run_parser().format_help()
    # the formats the job writes (JSON lines are gone: README, Outputs)
    (output_help,) = [a.help for a in run_parser()._actions if "--output" in a.option_strings]
    assert output_help == ("output directory (local path or gs://...): windowed Avro and Parquet files, manifest "
                           "and summary")
    # every command says what it does in whole sentences, and shows its defaults
    helps = {name: " ".join(p.format_help().split()) for name, p in subcommands.items()}
    helps["run"] = " ".join(run_parser().format_help().split())
    assert "with a summary of what was counted and what was dead-lettered." in helps["run"]
    for name, text in helps.items():
        description = text.split("options:")[0].split(":", 1)[1] if name != "run" else text
        assert ". " in description or description.rstrip().endswith("."), name
    assert "(default: 3.0)" in helps["calibrate"] and "(default: 0.01)" in helps["calibrate"]
    assert "UTC" in helps["compare"] and "UTC" in helps["dashboard"]


def test_a_glob_without_a_folder_reads_the_current_one(workdir, capsys, monkeypatch):
    monkeypatch.chdir(workdir / "in")
    assert cli.main(["run", "--config", str(workdir / "c.yaml"), "--input", "r*.avro", "--output",
                     str(workdir / "o")]) == 0
    assert "counted 200 reports" in capsys.readouterr().out
    assert read(str(workdir / "o"), "marginals").num_rows > 0


def test_the_demo_refuses_too_few_reports(capsys):
    err = one_line_error(capsys, ["demo", "--reports", "100", "--out", "unused"])
    assert "--reports must be >= 20,000" in err and "got --reports=100" in err


def test_a_full_disk_stops_the_run_cleanly_and_a_rerun_completes(workdir, capsys, monkeypatch):
    out = workdir / "o"
    args = ["run", "--config", str(workdir / "c.yaml"), "--input", str(workdir / "in/*.avro"), "--output", str(out)]
    real_create = FileSystems.create

    def full_disk(path, *a, **k):
        if os.sep + "tables" + os.sep in path:  # the disk fills up while the tables are written
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real_create(path, *a, **k)

    monkeypatch.setattr(FileSystems, "create", staticmethod(full_disk))
    err = one_line_error(capsys, args, code=1)
    assert f"writing the outputs under {out} failed: No space left on device" in err
    assert not list(out.rglob("*.tmp")) and not (out / SUMMARY_FILE).exists()
    monkeypatch.setattr(FileSystems, "create", real_create)
    assert cli.main(args) == 0
    assert (out / SUMMARY_FILE).exists() and (out / MANIFEST_FILE).exists() and list((out / "tables").glob("*.avro"))


def test_a_full_disk_while_the_summary_is_written_leaves_no_half_written_summary(workdir, capsys, monkeypatch):
    out = workdir / "o"
    args = ["run", "--config", str(workdir / "c.yaml"), "--input", str(workdir / "in/*.avro"), "--output", str(out)]
    real_create = FileSystems.create

    def full_disk(path, *a, **k):
        if os.path.basename(path).startswith(SUMMARY_FILE):   # the disk fills up as the summary is written
            handle = real_create(path, *a, **k)
            handle.write(b'{"reports_c')
            handle.close()
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real_create(path, *a, **k)

    monkeypatch.setattr(FileSystems, "create", staticmethod(full_disk))
    err = one_line_error(capsys, args, code=1)
    assert f"writing the run's release ledger, {SUMMARY_FILE} and {MANIFEST_FILE} under {out} failed: No space left on device" in err
    assert not (out / SUMMARY_FILE).exists() and not (out / MANIFEST_FILE).exists() and not list(out.rglob("*.tmp"))
    with pytest.raises(OutputError, match="holds no complete run"):
        read(str(out), "marginals")


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    """`ldp-marginals plan --json ... | head -1`: the pipe closes while the command still writes (its
    2,080 sets, ~200 KB of JSON, outgrow the pipe's buffer); the command stops quietly."""
    import subprocess
    import sys
    config = tmp_path / "wide.yaml"
    config.write_text(yaml.safe_dump(dict(SMALL_CONFIG, features=[{"name": f"b{i}", "type": "boolean"}
                                                                  for i in range(64)],
                                          channel={"p": 0.2, "q": 0.8}, sets=[], groups=[], extremes=[])))
    proc = subprocess.Popen([sys.executable, "-m", "ldp_marginals.pipelines.cli", "plan", "--config", str(config),
                             "--reports-per-window", "1000", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()   # as `head -1` does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait() == 1 and first.startswith(b"{") and "Traceback" not in err, err


def test_streaming_sources_that_cannot_start_say_the_fix_in_one_line(workdir, capsys, monkeypatch):
    """Pub/Sub without Google credentials, Kafka IO's expansion service not answering or its jar not
    fetchable: one line naming the fix, not a Java or Google stack."""
    import socket

    from ldp_marginals.pipelines.run import startup_error
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("HOME", str(workdir))            # no gcloud application-default credentials
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(workdir / "gcloud"))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")   # no metadata server either
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    base = ["run", "--config", str(workdir / "c.yaml"), "--streaming", "--output", str(workdir / "o")]
    err = one_line_error(capsys, base + ["--subscription", "projects/my-project/subscriptions/reports"])
    assert "Pub/Sub needs Google credentials and none were found: run `gcloud auth application-default login`" in err
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    err = one_line_error(capsys, base + ["--kafka-topic", "t", "--kafka-bootstrap", "127.0.0.1:9",
                                         "--kafka-expansion-service", f"localhost:{port}"])
    assert f"--kafka-expansion-service localhost:{port}: nothing answers there" in err
    # Beam's own words when the expansion service's jar cannot be fetched (no network at run time)
    beam_said = RuntimeError("Unable to fetch remote job server jar at https://repo.maven.apache.org/maven2/org/apache/"
                             "beam/beam-sdks-java-io-expansion-service/2.62.0/beam-sdks-java-io-expansion-service-2.62.0"
                             ".jar: HTTP Error 404: Not Found. If no Internet access at runtime, stage the jar at "
                             "/root/.apache_beam/cache/jars/beam-sdks-java-io-expansion-service-2.62.0.jar")
    assert startup_error(beam_said) == (
        "Kafka IO is a Java transform and needs Beam's expansion service, whose jar could not be fetched: give "
        "--kafka-expansion-service HOST:PORT (`make cluster-up` starts one on localhost:8097), or put the jar at "
        "/root/.apache_beam/cache/jars/beam-sdks-java-io-expansion-service-2.62.0.jar")
    assert startup_error(RuntimeError("something else")) is None
