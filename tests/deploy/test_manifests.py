"""The Dockerfiles, manifests and deployment READMEs, parsed and checked against each other and
against the environment the tests run in (one Beam version everywhere)."""
import re
import tomllib
from importlib.metadata import version

import apache_beam as beam
from apache_beam.options.pipeline_options import FlinkRunnerOptions

from deploy.local import cluster as local_cluster
from tests.deploy.commands import DEPLOY, ROOT, dockerfile, readme_commands, submit_job_args, yaml_documents

BEAM = beam.__version__
PINS = dict(line.split("#")[0].strip().split("==") for line in
            (DEPLOY / "dataflow" / "requirements.txt").read_text().splitlines()
            if line.split("#")[0].strip())
FLINK_DEPLOYMENT = yaml_documents(DEPLOY / "flink" / "flink-deployment.yaml")[0]
SUBMIT = submit_job_args()
# installed package -> source folder, as pyproject.toml maps them
PACKAGE_DIRS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def arg(name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in SUBMIT if a.startswith(f"--{name}=")]
    return value


def test_pins_are_what_the_tests_run_with():
    assert PINS["apache-beam"] == BEAM
    for name, pinned in PINS.items():
        if name == "boto3":  # the Flink image's s3:// filesystem; not needed by the tests
            continue
        assert version(name) == pinned, name


def test_dataflow_image_is_launcher_and_worker_on_the_pinned_beam():
    steps = dockerfile(DEPLOY / "dataflow" / "Dockerfile")
    froms = [a for i, a in steps if i == "FROM"]
    assert froms[-1] == f"apache/beam_python3.11_sdk:{BEAM}"
    launcher = froms[0].split(" AS ")
    assert launcher[0].startswith("gcr.io/dataflow-templates-base/python311-template-launcher-base")
    launcher_binary = "/opt/google/dataflow/python_template_launcher"
    assert f"--from={launcher[1]} {launcher_binary} {launcher_binary}" in [a for i, a in steps if i == "COPY"]
    envs = " ".join(a for i, a in steps if i == "ENV")
    assert "FLEX_TEMPLATE_PYTHON_PY_FILE=/template/main.py" in envs and "PIP_NO_DEPS=True" in envs
    copies = [a for i, a in steps if i == "COPY"]
    assert "deploy/dataflow/main.py main.py" in copies
    assert (DEPLOY / "dataflow" / "main.py").exists()
    assert_installs_the_project(steps)
    runs = " ".join(a for i, a in steps if i == "RUN")
    assert "-c /tmp/base-image.txt -r requirements.txt" in runs and "pip check" in runs
    assert steps[-1] == ("ENTRYPOINT", '["/opt/apache/beam/boot"]')


def assert_installs_the_project(steps) -> None:
    """The image copies every source folder the wheel installs, installs the project, and its smoke
    check imports every installed package by its installed name from a directory without sources."""
    copies = [a.split() for i, a in steps if i == "COPY" and not a.startswith("--from")]
    copied = {src for *sources, _ in copies for src in sources}
    # a package's folder is copied with it, or inside a copied folder (ldp_marginals itself: pipelines/root)
    assert all(any(d == c or d.startswith(c + "/") for c in copied) for d in PACKAGE_DIRS.values())
    assert "pyproject.toml" in copied
    (install,) = [a for i, a in steps if i == "RUN" and "pip install --no-cache-dir --no-deps ." in a]
    smoke = install.split("&&")[-1].strip()
    assert smoke.startswith("python -c ") and "cd /" in install
    imported = set(re.findall(r"ldp_marginals(?:\.\w+)+", smoke))
    covered = {p for p in PACKAGE_DIRS if any(i == p or i.startswith(p + ".") for i in imported)}
    assert covered == set(PACKAGE_DIRS)


def test_python_image_for_flink_matches_and_carries_the_jars_it_submits_with():
    steps = dockerfile(DEPLOY / "flink" / "Dockerfile.python")
    assert_installs_the_project(steps)
    assert [a for i, a in steps if i == "FROM"] == [f"apache/beam_python3.11_sdk:{BEAM}"]
    runs = " ".join(a for i, a in steps if i == "RUN")
    flink = FLINK_DEPLOYMENT["spec"]["flinkVersion"].removeprefix("v").replace("_", ".")
    assert f":runners:flink:{flink}:job-server:shadowJar" in runs
    assert "sdks:java:io:expansion-service:shadowJar" in runs and "openjdk-17-jre-headless" in runs
    assert arg("flink_job_server_jar") == (
        f"/root/.apache_beam/cache/jars/beam-runners-flink-{flink}-job-server-{BEAM}.jar")


def test_flink_deployment_has_the_sidecar_checkpoints_and_savepoints():
    spec = FLINK_DEPLOYMENT["spec"]
    assert FLINK_DEPLOYMENT["apiVersion"] == "flink.apache.org/v1beta1"
    assert FLINK_DEPLOYMENT["kind"] == "FlinkDeployment"
    flink = spec["flinkVersion"].removeprefix("v").replace("_", ".")
    assert flink in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
    assert "job" not in spec  # a session cluster: the job comes from submit-job.yaml
    conf = spec["flinkConfiguration"]
    # the TaskManagers' JIT compiler as the local cluster's (the tests and the bench ran with it)
    assert conf["env.java.opts.taskmanager"].split() == local_cluster.TASKMANAGER_JIT
    for key in ("execution.checkpointing.interval", "state.checkpoints.dir", "state.savepoints.dir",
                "execution.checkpointing.externalized-checkpoint-retention", "state.backend.type"):
        assert conf[key], key
    assert conf["execution.checkpointing.mode"] == "EXACTLY_ONCE"
    assert conf["execution.checkpointing.externalized-checkpoint-retention"] == "RETAIN_ON_CANCELLATION"
    # the Beam runner's own interval agrees with Flink's (60s)
    assert int(arg("checkpointing_interval")) == 1000 * int(conf["execution.checkpointing.interval"].rstrip("s"))

    containers = {c["name"]: c for c in spec["taskManager"]["podTemplate"]["spec"]["containers"]}
    assert set(containers) == {"flink-main-container", "beam-worker-pool"}
    pool = containers["beam-worker-pool"]
    assert pool["args"] == ["--worker_pool"]
    assert pool["image"].endswith(f"/ldp-marginals-python:{BEAM}")
    port = pool["ports"][0]["containerPort"]
    assert arg("environment_config") == f"localhost:{port}" and arg("environment_type") == "EXTERNAL"
    assert spec["image"].endswith(f"/ldp-marginals-flink:{BEAM}-flink{flink}")


def test_flink_image_has_flink_and_the_java_harness_the_kafka_reader_runs_in():
    steps = dockerfile(DEPLOY / "flink" / "Dockerfile.flink")
    flink = FLINK_DEPLOYMENT["spec"]["flinkVersion"].removeprefix("v").replace("_", ".")
    assert [a for i, a in steps if i == "FROM"] == [f"flink:{flink}-scala_2.12-java17"]
    assert f"--from=apache/beam_java17_sdk:{BEAM} /opt/apache/beam/ /opt/apache/beam/" in [
        a for i, a in steps if i == "COPY"]
    assert arg("kafka-java-boot") == "/opt/apache/beam/boot"
    assert "plugins/s3-fs-presto" in " ".join(a for i, a in steps if i == "RUN")


def test_submission_targets_the_deployments_rest_service_and_flink_runner():
    name = FLINK_DEPLOYMENT["metadata"]["name"]
    assert arg("runner") == "FlinkRunner"
    assert arg("flink_master") == f"http://{name}-rest:8081"  # the operator's REST service
    assert "--flink_submit_uber_jar" in SUBMIT and "--streaming" in SUBMIT and "--detach" in SUBMIT
    (job,) = yaml_documents(DEPLOY / "flink" / "submit-job.yaml")
    pod = job["spec"]["template"]["spec"]
    mount = pod["containers"][0]["volumeMounts"][0]["mountPath"]
    assert arg("config").startswith(mount + "/")
    assert pod["volumes"][0]["configMap"]["name"] == "ldp-marginals-config"


def test_readme_commands_use_the_files_that_exist():
    for readme in (DEPLOY / "dataflow" / "README.md", DEPLOY / "flink" / "README.md"):
        for command in readme_commands(readme):
            for i, word in enumerate(command):
                if word in ("-f", "--metadata-file") and command[:2] != ["kubectl", "logs"]:
                    assert (ROOT / command[i + 1]).exists(), (readme.name, command)
            if command[:2] == ["docker", "build"]:
                assert command[-1] in (".", "deploy/flink"), command  # the build context
    flink_cmds = readme_commands(DEPLOY / "flink" / "README.md")
    applied = [c[-1] for c in flink_cmds if c[:3] == ["kubectl", "apply", "-f"]]
    assert set(applied) == {"deploy/flink/flink-deployment.yaml", "deploy/flink/submit-job.yaml"}
    configmap = [c for c in flink_cmds if c[:3] == ["kubectl", "create", "configmap"]]
    assert configmap[0][3] == "ldp-marginals-config"
    assert configmap[0][4] == "--from-file=" + arg("config").rsplit("/", 1)[1]


def test_version_matrix_states_the_pinned_versions():
    readme = (DEPLOY / "README.md").read_text()
    row = re.search(r"\| Python \| Apache Beam \| Flink .*?\n\|[-|]+\n\| (.*?) \|\n", readme).group(1)
    python, beam_version, flink, operator, java = [c.strip() for c in row.split("|")]
    assert (python, beam_version) == ("3.11", BEAM)
    assert flink == FLINK_DEPLOYMENT["spec"]["flinkVersion"].removeprefix("v").replace("_", ".")
    assert FLINK_DEPLOYMENT["spec"]["flinkVersion"] in operator and java == "17"
    for flink_version in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS:
        assert flink_version in readme


def test_the_readmes_list_every_bigquery_table_the_job_writes():
    """The BigQuery sink writes one table per output kind: the READMEs' sentences name them all."""
    from ldp_marginals.schemas.outputs import KINDS
    for readme in (ROOT / "README.md", DEPLOY / "dataflow" / "README.md"):
        text = " ".join(readme.read_text().split())
        sentence = re.search(r"(?:the eight tables|eight tables,) (.*?)\(", text)
        assert sentence, readme
        assert sorted(re.findall(r"`([a-z_]+)`", sentence.group(1))) == sorted(KINDS), readme
    assert "JSON-lines" not in (DEPLOY / "dataflow" / "metadata.json").read_text()


def test_the_docs_say_dead_letters_hold_no_report_content():
    """The schema's promise (no report content in a dead letter) is what every README and the design
    tell an operator; none says they hold the report as received."""
    import json
    doc = json.loads((ROOT / "schemas" / "dead_letter.avsc").read_text())["doc"]
    assert "It carries no report content" in doc
    for path in (ROOT / "README.md", DEPLOY / "README.md", ROOT / "docs" / "design.md"):
        text = " ".join(path.read_text().split())
        assert re.search(r"no report content|\*\*without its content\*\*", text), path
        about = [s for s in re.split(r"(?<=[.|])\s", text) if re.search(r"[Dd]ead[ -]letters?\b", s)]
        assert not [s for s in about if re.search(r"as received|hold the (?:noisy )?reports?\b", s)], path


def test_flink_reports_metrics_to_prometheus_and_the_alert_rules_watch_counters_the_job_has():
    from ldp_marginals.schemas import dead_letters as dl
    conf = FLINK_DEPLOYMENT["spec"]["flinkConfiguration"]
    for key, value in local_cluster.PROMETHEUS_REPORTER.items():   # as the local cluster the tests scrape
        assert conf[key] == value
    port = int(conf["metrics.reporter.prom.port"])
    tm = FLINK_DEPLOYMENT["spec"]["taskManager"]["podTemplate"]
    assert tm["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    steps = dockerfile(DEPLOY / "flink" / "Dockerfile.flink")
    assert "plugins/metrics-prometheus" in " ".join(a for i, a in steps if i == "RUN")

    exported = {local_cluster.JOB_METRIC_PREFIX + name.replace(".", "_") for name in (
        dl.VALID, dl.REPORTS_PUBLISHED, dl.REPORTS_WITHHELD, dl.WINDOWS_WITHHELD,
        *(dl.counter_name(reason) for reason in dl.REASONS))}
    text = (DEPLOY / "flink" / "alert-rules.yaml").read_text()
    (rules,) = yaml_documents(DEPLOY / "flink" / "alert-rules.yaml")
    alerts = {r["alert"]: r["expr"] for group in rules["groups"] for r in group["rules"]}
    assert {"LdpMarginalsLateReports", "LdpMarginalsDeadLetters", "LdpMarginalsWithheldWindows"} <= set(alerts)
    named = set(re.findall(re.escape(local_cluster.JOB_METRIC_PREFIX) + r"\w*", text))
    for name in named:   # a whole counter's name, or (a regular expression's) prefix of some
        assert name in exported or (name.endswith("_") and any(e.startswith(name) for e in exported)), name
    for counter in ("reports_valid", "dead_letter_late", "windows_withheld", "reports_withheld", "reports_published"):
        assert local_cluster.JOB_METRIC_PREFIX + counter in named
    assert "alert-rules.yaml" in (DEPLOY / "README.md").read_text()
