"""``ldp-marginals run`` finds the cluster ``make cluster-up`` started (issue 49 item 3): a Kafka job that names
no expansion service takes the one recorded in ``.jvm/run/cluster.json`` (and its broker, and the REST ports of
the job server's Flink when the job goes to that job server), and says so. No cluster here: the record is a
fake one whose expansion service's process is this test's own (a live process id)."""
import json
import os
import subprocess

import pytest

from ldp_marginals.pipelines import run as run_mod
from ldp_marginals.pipelines.local_services import CHECKPOINT_MS
from tests.configs import SMALL_CONFIG


class Built(Exception):
    """Raised by the stand-in source: the pipeline was about to read Kafka with these options."""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LDP_MARGINALS_CLUSTER", raising=False)
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CONFIG))
    seen = {}

    def source(args, configs, expansion_service=None):
        seen.update(expansion=args.kafka_expansion_service, bootstrap=args.kafka_bootstrap, rest=args.flink_rest)
        raise Built()
    real_pipeline = run_mod.beam.Pipeline

    def pipeline(options=None, **kw):
        seen.update(options=options.get_all_options(drop_default=True))
        return real_pipeline(options=options, **kw)
    monkeypatch.setattr(run_mod.beam, "Pipeline", pipeline)
    monkeypatch.setattr(run_mod, "make_source", source)
    return tmp_path, seen


def record(folder, expansion_pid: int, flink: str = "local") -> str:
    path = folder / ".jvm" / "run" / "cluster.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = ({"embedded_rest": "localhost:18081-18090"} if flink == "local" else
            {"rest_port": 18081, "staged_jar": str(path.parent / "staged.jar")})
    path.write_text(json.dumps({"run_dir": str(path.parent), "kafka_port": 19092, "job_port": 18099,
                                "expansion_port": 18097, "parallelism": 2, "flink": flink, **kind,
                                "pids": {"kafka": expansion_pid, "expansion": expansion_pid}}))
    return str(path)


def build(argv):
    with pytest.raises(Built):
        run_mod.make_pipeline(argv)


KAFKA = ["--config", "c.json", "--streaming", "--kafka-topic", "t", "--output", "out"]


def test_run_takes_the_recorded_cluster_and_says_which_parts(repo, capsys):
    folder, seen = repo
    path = record(folder, os.getpid())
    build(KAFKA + ["--runner=PortableRunner", "--job_endpoint=localhost:18099"])
    assert {k: seen[k] for k in ("expansion", "bootstrap", "rest")} == {
        "expansion": "localhost:18097", "bootstrap": "127.0.0.1:19092", "rest": "localhost:18081-18090"}
    err = capsys.readouterr().err
    assert f"using the local cluster recorded in {os.path.join('.jvm', 'run', 'cluster.json')}" in err
    assert "--kafka-expansion-service=localhost:18097" in err and "--kafka-bootstrap=127.0.0.1:19092" in err
    assert "--flink-rest=localhost:18081-18090" in err
    assert os.path.exists(path)


def test_what_the_command_names_wins_and_another_job_server_gets_no_rest_ports(repo, capsys):
    folder, seen = repo
    record(folder, os.getpid())
    build(KAFKA + ["--kafka-bootstrap", "b:9", "--runner=PortableRunner", "--job_endpoint=elsewhere:8099"])
    assert {k: seen[k] for k in ("expansion", "bootstrap", "rest")} == {
        "expansion": "localhost:18097", "bootstrap": "b:9", "rest": None}
    assert "--kafka-bootstrap" not in capsys.readouterr().err
    build(KAFKA + ["--kafka-bootstrap", "b:9", "--kafka-expansion-service", "x:1"])
    assert {k: seen[k] for k in ("expansion", "bootstrap", "rest")} == {"expansion": "x:1", "bootstrap": "b:9", "rest": None}
    assert "local cluster" not in capsys.readouterr().err


def test_a_record_of_a_stopped_cluster_is_not_used_and_said_so(repo, capsys):
    folder, seen = repo
    gone = subprocess.Popen(["true"])
    gone.wait()
    record(folder, gone.pid)
    build(KAFKA + ["--kafka-bootstrap", "b:9"])
    assert seen["expansion"] is None   # Beam's own expansion service, as without a record
    assert f"process {gone.pid}) is not running" in capsys.readouterr().err
    os.remove(folder / ".jvm" / "run" / "cluster.json")   # no record (cluster-down removes it): no word
    build(KAFKA + ["--kafka-bootstrap", "b:9"])
    assert seen["expansion"] is None and capsys.readouterr().err == ""


def test_a_record_named_by_the_environment(repo, capsys, monkeypatch, tmp_path_factory):
    folder, seen = repo
    elsewhere = tmp_path_factory.mktemp("repo")
    monkeypatch.setenv("LDP_MARGINALS_CLUSTER", record(elsewhere, os.getpid()))
    build(KAFKA)
    assert seen["expansion"] == "localhost:18097" and str(elsewhere) in capsys.readouterr().err


def test_a_streaming_job_on_the_recorded_session_cluster_is_stopped_there_resumably(repo, capsys):
    """``make cluster-up``'s default is a session cluster: a streaming job sent to its job server gets its REST
    address (Ctrl-C cancels the job there and names its last retained checkpoint), checkpoints (something to
    resume from) and the one jar it stages. What the
    command names wins. (On main the record gave a session cluster's job none of these: Ctrl-C said only that
    Beam's job service had cancelled it, with nothing to resume from.)"""
    folder, seen = repo
    record(folder, os.getpid(), flink="session")
    jar = str(folder / ".jvm" / "run" / "staged.jar")
    build(KAFKA + ["--runner=PortableRunner", "--job_endpoint=localhost:18099"])
    assert seen["options"]["flink_master"] == "localhost:18081"
    assert seen["options"]["checkpointing_interval"] == CHECKPOINT_MS
    assert seen["options"]["files_to_stage"] == [jar] and seen["rest"] is None
    err = capsys.readouterr().err
    assert (f"--files_to_stage={jar} --flink_master=localhost:18081 --checkpointing_interval={CHECKPOINT_MS}"
            in err), err
    build(KAFKA + ["--runner=PortableRunner", "--job_endpoint=localhost:18099", "--flink_master=elsewhere:1",
                   "--checkpointing_interval=700", "--savepoint-on-stop"])
    assert (seen["options"]["flink_master"], seen["options"]["checkpointing_interval"]) == ("elsewhere:1", 700)
    # --savepoint-on-stop needs a REST address: the record's is taken before that check
    build(KAFKA + ["--runner=PortableRunner", "--job_endpoint=localhost:18099", "--savepoint-on-stop"])
    assert seen["options"]["flink_master"] == "localhost:18081"
    # another job server gets none of them
    build(KAFKA + ["--runner=PortableRunner", "--job_endpoint=elsewhere:8099"])
    assert not {"flink_master", "checkpointing_interval", "files_to_stage"} & set(seen["options"])
