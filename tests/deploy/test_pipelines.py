"""The deployments' pipelines, built from the very commands and manifests in deploy/ and translated
to Beam's portable pipeline proto without submitting them (no cloud, Flink or Maven here)."""
import argparse
import importlib.util
import json
import re

import pytest
import yaml
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

from ldp_marginals.pipelines.run import add_run_arguments, make_pipeline
from ldp_marginals.pipelines.sources import kafka_expansion_service
from tests.configs import SMALL_CONFIG
from tests.deploy.commands import DEPLOY, commands_starting, flag_values, submit_job_args
from tests.deploy.kafka_standin import KAFKA_URN, KafkaExpansionStandIn, decode_config

DATAFLOW_README = DEPLOY / "dataflow" / "README.md"
METADATA = json.loads((DEPLOY / "dataflow" / "metadata.json").read_text())
KINDS = ("marginals", "tables", "consistent_tables", "extremes", "conditionals", "means", "withheld", "dead_letters")

# The top-level stage names, in order. A Dataflow update or a Flink savepoint maps state by these
# names: changing one breaks in-place updates of running jobs (Dataflow then needs
# --transform-name-mappings). Change this list only together with deploy/dataflow/README.md.
STABLE_STAGES = (["ReadReports", "ValidateReports", "SplitByCollection", "Estimate[app]"]
                 + [f"All[{k}]" for k in KINDS if k != "dead_letters"] + ["All[panes]", "All[dead_letters]"])
FILE_STAGES = [s for k in KINDS for s in (["PaneDeadLetters"] if k == "dead_letters" else [f"Panes[{k}]"])
               + [f"Write[{k}]"]]
# on Flink with checkpoints the pane files reach their (stable-input) writers through a reshuffle
STABLE_FILE_STAGES = [s for k in KINDS for s in (["PaneDeadLetters"] if k == "dead_letters"
                                                 else [f"Panes[{k}]", f"Stage[{k}]"]) + [f"Write[{k}]"]]
BIGQUERY_STAGES = [f"BigQuery[{k}]" for k in KINDS]
# stage -> key coder of every stage of the job that holds state or timers (sinks excluded)
# the job's stateful stages, each keyed by a string: the clock by collection, the atoms by key, the
# panes by capped key (transforms/panes.py); they see pre-aggregated partials, never reports
OUR_STATE = {f"Estimate[app]/Panes/{stage}": "beam:coder:string_utf8:v1"
             for stage in ("Clock/ParDo(ClockFn)", "Atoms", "Panes/ParDo(PanesFn)")}


def stages_under(proto, parent: str) -> list:
    """The names of a composite's direct stages, without the parent's prefix."""
    t = by_name(proto)[parent]
    return [proto.components.transforms[s].unique_name.removeprefix(parent + "/") for s in t.subtransforms]


def dataflow_main():
    spec = importlib.util.spec_from_file_location("dataflow_main", DEPLOY / "dataflow" / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def launch_parameters(command) -> dict:
    (value,) = flag_values(command, "--parameters")
    return dict(item.split("=", 1) for item in value.split(","))


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "collections.yaml"
    path.write_text(yaml.safe_dump(SMALL_CONFIG))
    return str(path)


def stateful_stages(proto, *excluded: str) -> dict:
    """{stage: key coder URN} of every stage that holds user state or timers (outside ``excluded``)."""
    out = {}
    for t in proto.components.transforms.values():
        if t.spec.urn != "beam:transform:pardo:v1" or t.unique_name.startswith(excluded):
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
        if payload.state_specs or payload.timer_family_specs:
            (pcoll,) = [proto.components.pcollections[p] for tag, p in t.inputs.items()
                        if tag not in payload.side_inputs]
            kv = proto.components.coders[pcoll.coder_id]
            out[t.unique_name] = proto.components.coders[kv.component_coder_ids[0]].spec.urn
    return out


def top_level(proto) -> list:
    (root,) = proto.root_transform_ids
    return [proto.components.transforms[t].unique_name for t in proto.components.transforms[root].subtransforms]


def by_name(proto) -> dict:
    return {t.unique_name: t for t in proto.components.transforms.values()}


def test_every_launch_command_sets_valid_template_parameters():
    params = {p["name"]: p for p in METADATA["parameters"]}
    runs = commands_starting(DATAFLOW_README, "gcloud", "dataflow", "flex-template", "run")
    assert len(runs) == 2 and sum("--update" in c for c in runs) == 1  # launch and update
    assert len({c[4] for c in runs}) == 1  # an update names the running job
    for command in runs:
        given = launch_parameters(command)
        assert set(given) - set(params) == {"sdk_container_image"}  # the one Dataflow option
        assert {n for n, p in params.items() if not p["isOptional"]} <= set(given)
        for name, value in given.items():
            for regex in params.get(name, {}).get("regexes", []):
                assert re.match(regex, value), (name, value, regex)
        (template,) = flag_values(command, "--template-file-gcs-location")
        build = commands_starting(DATAFLOW_README, "gcloud", "dataflow", "flex-template", "build")[0]
        assert build[4] == template


def test_dataflow_pipeline_from_the_launch_command(config_file):
    """Pub/Sub -> job -> files + BigQuery, as the flex template's launcher builds it."""
    launch = next(c for c in commands_starting(DATAFLOW_README, "gcloud", "dataflow", "flex-template", "run")
                  if "--update" not in c)
    given = launch_parameters(launch)
    assert given["config"].startswith("gs://")
    given["config"] = config_file  # Cloud Storage is out of reach here; the file's contents are the test's
    argv = dataflow_main().TEMPLATE_ARGS + [f"--{k}={v}" for k, v in given.items()]
    pipeline, args, configs = make_pipeline(argv)
    assert pipeline.options.view_as(StandardOptions).streaming
    assert args.detach and args.bigquery_dataset == given["bigquery_dataset"]
    proto = pipeline.to_runner_api()

    assert top_level(proto) == STABLE_STAGES + ["WriteAll"]
    assert stages_under(proto, "WriteAll") == ["WriteFiles", "WriteBigQuery"]
    assert stages_under(proto, "WriteAll/WriteFiles") == FILE_STAGES
    assert stages_under(proto, "WriteAll/WriteBigQuery") == BIGQUERY_STAGES
    names = by_name(proto)
    read = names["ReadReports/ReadPubSub/Read"]
    assert read.spec.urn == "beam:transform:pubsub_read:v1"
    payload = beam_runner_api_pb2.PubSubReadPayload.FromString(read.spec.payload)
    assert payload.subscription == given["subscription"]
    assert payload.timestamp_attribute == given["pubsub_timestamp_attribute"]
    for kind in KINDS:
        write = names[f"WriteAll/WriteBigQuery/BigQuery[{kind}]/Write"]
        assert write.spec.urn == "beam:transform:write_to_big_query:v0"
        assert f"WriteAll/WriteBigQuery/BigQuery[{kind}]/WriteRefused" in names  # refused rows are written
    # streaming estimates are written pane by pane, without regrouping; dead letters in processing-time panes
    assert names["WriteAll/WriteFiles/Write[dead_letters]/GroupByFile"].spec.urn == "beam:transform:group_by_key:v1"
    assert stateful_stages(proto, "WriteAll") == OUR_STATE
    # every stage is named by us or by a class: no names that move with line numbers
    assert not [n for n in names if "<lambda" in n or re.search(r"\.py:\d+", n)]


def test_flink_pipeline_from_the_submission_manifest(config_file):
    """Kafka (cross-language) -> job -> files, with exactly the arguments of submit-job.yaml."""
    argv = [f"--config={config_file}" if a.startswith("--config=") else a for a in submit_job_args()]
    standin = KafkaExpansionStandIn()
    pipeline, args, configs = make_pipeline(argv, expansion_service=standin)
    options = pipeline.options.get_all_options(retain_unknown_options=True)
    assert options["runner"] == "FlinkRunner" and options["environment_type"] == "EXTERNAL"
    assert options["environment_config"] == "localhost:50000" and options["streaming"]
    assert options["checkpointing_interval"] == 60000  # declared (run.FlinkJobOptions): Java gets a number
    proto = pipeline.to_runner_api()
    # streaming on Flink with checkpoints: every file writer takes only checkpointed input
    stable = [t.unique_name for t in proto.components.transforms.values() if t.spec.urn == common_urns.primitives.PAR_DO.urn
              and beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload).requires_stable_input]
    assert sorted(n.split("/")[1] for n in stable) == sorted(f"Write[{kind}]" for kind in KINDS)

    assert top_level(proto) == STABLE_STAGES + ["WriteFiles"]
    assert stages_under(proto, "WriteFiles") == STABLE_FILE_STAGES
    assert stateful_stages(proto) == OUR_STATE
    read = by_name(proto)["ReadReports/ReadKafka"]
    assert read.spec.urn == KAFKA_URN
    sent = decode_config(read.spec.payload)
    assert standin.requests == [sent]
    assert sent["topics"] == [args.kafka_topic] == ["noisy-reports"]
    assert sent["consumer_config"] == {"bootstrap.servers": args.kafka_bootstrap, "group.id": "ldp-marginals"}
    assert sent["timestamp_policy"] == "CreateTime"
    assert sent["value_deserializer"].endswith("ByteArrayDeserializer")


def test_pubsub_and_kafka_jobs_share_every_stage_after_the_source(config_file, tmp_path):
    common = ["--streaming", f"--config={config_file}", f"--output={tmp_path}"]
    pubsub, _, _ = make_pipeline(common + ["--subscription=projects/my-project/subscriptions/r"])
    kafka, _, _ = make_pipeline(common + ["--kafka-topic=r", "--kafka-bootstrap=k:9092"],
                                expansion_service=KafkaExpansionStandIn())
    after_source = [{n for n in by_name(p.to_runner_api()) if not n.startswith("ReadReports")}
                    for p in (pubsub, kafka)]
    assert after_source[0] == after_source[1]


def test_kafka_reader_runs_as_a_process_when_given_the_java_boot():
    assert kafka_expansion_service(None) is None  # Beam's default: a Docker environment
    service = kafka_expansion_service("/opt/apache/beam/boot")
    args = service._append_args
    assert "--defaultEnvironmentType=PROCESS" in args
    assert json.loads(args[args.index("--defaultEnvironmentType=PROCESS") + 1].split("=", 1)[1]) == {
        "command": "/opt/apache/beam/boot"}


@pytest.mark.parametrize("argv, message", [
    (["--subscription=projects/my-project/subscriptions/r"], "add --streaming"),
    (["--streaming", "--subscription=projects/x/subscriptions/r"], "subscription="),
    (["--streaming", "--subscription=projects/my-project/subscriptions/r", "--kafka-topic=t"], "got both"),
    (["--streaming", "--kafka-topic=t"], "--kafka-bootstrap"),
    (["--streaming", "--kafka-topic=t", "--kafka-bootstrap=k:1", "--kafka-consumer-config=group.id"], "KEY=VALUE"),
    (["--streaming", "--subscription=projects/my-project/subscriptions/r", "--bigquery-dataset=a b"], "dataset="),
    (["--streaming", "--subscription=projects/my-project/subscriptions/r", "--window=hourly"], "window="),
    (["--streaming", "--subscription=projects/my-project/subscriptions/r", "--window=sliding:60:120"],
     "period_seconds"),
    (["--streaming", "--subscription=projects/my-project/subscriptions/r", "--allowed-lateness-seconds=-1"],
     "allowed_lateness_seconds="),
    # the config has an extreme over clients: overlapping windows would let differences single one out
    (["--streaming", "--subscription=projects/my-project/subscriptions/r", "--window=sliding:3600:600"],
     "need fixed or global windows"),
])
def test_bad_deployment_options_are_refused_by_name(config_file, tmp_path, argv, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make_pipeline([f"--config={config_file}", f"--output={tmp_path}"] + argv,
                      expansion_service=KafkaExpansionStandIn())


def test_window_override_replaces_every_collections_window(config_file, tmp_path):
    _, _, configs = make_pipeline([f"--config={config_file}", f"--output={tmp_path}", "--streaming",
                                   "--subscription=projects/my-project/subscriptions/r",
                                   "--window=fixed:600", "--allowed_lateness_seconds=120"])
    (cfg,) = configs.values()
    assert (cfg.window.type, cfg.window.size_seconds) == ("fixed", 600)
    assert cfg.allowed_lateness_seconds == 120


def test_template_parameter_regexes_accept_only_what_the_job_accepts(config_file, tmp_path):
    """What metadata.json lets through, the job parses; what it stops, the job refuses too."""
    regex = {p["name"]: p["regexes"][0] for p in METADATA["parameters"]}
    samples = {
        "subscription": (["projects/my-project/subscriptions/reports"],
                         ["projects/x/subscriptions/r", "my-project/reports", "projects/my-project/topics/r"]),
        "bigquery_dataset": (["my-project:ldp_marginals", "my-project.ldp", "ldp"], ["my project:ldp", "a:b:c"]),
        "window": (["fixed:3600", "sliding:3600:3600"], ["fixed", "fixed:-1", "sliding:60", "hourly"]),
        "allowed_lateness_seconds": (["0", "90", "2.5"], ["-1", "soon"]),
    }
    base = [f"--config={config_file}", f"--output={tmp_path}", "--streaming"]
    default = {"subscription": "projects/my-project/subscriptions/r"}
    for name, (good, bad) in samples.items():
        for value in good:
            assert re.match(regex[name], value), (name, value)
            make_pipeline(base + [f"--{k}={v}" for k, v in {**default, name: value}.items()])
        for value in bad:
            assert not re.match(regex[name], value), (name, value)
            with pytest.raises((ValueError, SystemExit)):
                make_pipeline(base + [f"--{k}={v}" for k, v in {**default, name: value}.items()])
    # well-formed but wrong for this config: refused by the job with the reason
    assert re.match(regex["window"], "global") and re.match(regex["window"], "sliding:60:120")
    with pytest.raises(ValueError, match="early_firing_seconds"):
        make_pipeline(base + [f"--subscription={default['subscription']}", "--window=global"])
    assert re.match(regex["window"], "sliding:3600:600")   # overlapping: refused with an extreme over clients
    with pytest.raises(ValueError, match="need fixed or global windows"):
        make_pipeline(base + [f"--subscription={default['subscription']}", "--window=sliding:3600:600"])


def test_every_template_parameter_is_an_option_of_the_job():
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    spellings = {s for action in parser._actions for s in action.option_strings}
    for param in METADATA["parameters"]:
        assert f"--{param['name']}" in spellings, param["name"]
