"""``ldp-marginals run``: the batch or streaming job from the command line, with a summary of what
was counted and what was dead-lettered."""
from __future__ import annotations

import argparse
import difflib
import glob
import json
import logging
import os
import re
import sys
import threading
import time
from dataclasses import replace

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, StandardOptions

from ldp_marginals.ldp.aggregate import accumulator_shape
from ldp_marginals.ldp.versioned import shape_changes
from ldp_marginals.pipelines.cli import EXIT_CODES
from ldp_marginals.pipelines.inputs import check_report_files
from ldp_marginals.pipelines.job import WATERMARK_DELAY_SECONDS, JobOptions, build
from ldp_marginals.pipelines.progress import Progress, job_counters
from ldp_marginals.pipelines.release_ledger import (
    NEW_LEDGER,
    SharedDevices,
    WriteReleaseFn,
    check_dimensions,
    check_no_ledger,
    check_rollups,
    check_unit,
    earlier_releases,
    publish_ledger,
)
from ldp_marginals.pipelines.sources import KAFKA_TIMESTAMP_POLICIES, make_source
from ldp_marginals.pipelines.stopping import (
    START_AFRESH,
    JobStopped,
    StopRequested,
    resume_command,
    signals_stop,
    stop_job,
    wait_for,
)
from ldp_marginals.schemas.config import configs_from_text, parse_window
from ldp_marginals.schemas.dead_letters import (
    CLIENT_ROWS_WITHHELD_BY_LEDGER,
    DAMAGED_BLOCK,
    LOST,
    LOST_UNKNOWN,
    OVER_DEVICE_BOUND,
    REPORTS_WITHHELD_BY_LEDGER,
    OVER_KEY_BOUND,
    VALID,
    reports_dead_lettered,
    totals_by_reason,
)
from ldp_marginals.schemas.outputs import COLLECTIONS_FILE, MANIFEST_FILE, STATE_SHAPE_FILE, SUMMARY_FILE, new_run_id
from ldp_marginals.transforms.bigquery import METHODS, BigQuerySink
from ldp_marginals.transforms.estimate import RELEASES
from ldp_marginals.transforms.manifest import abandon_run, finish_run, start_run, write_dir
from ldp_marginals.transforms.publication.state import LAYOUTS, STATE_LAYOUT
from ldp_marginals.transforms.sinks import FileSink, Sinks


def _option(parser, name: str, **kwargs) -> None:
    """``--a-b`` also spelled ``--a_b``: Dataflow flex templates pass parameters by their metadata
    names, which are snake_case."""
    spellings = [name] + (["--" + name[2:].replace("-", "_")] if "-" in name[2:] else [])
    parser.add_argument(*spellings, **kwargs)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    _option(parser, "--config", action="append", required=True,
            help="collection config (JSON or YAML, local or gs://...); repeat for several collections")
    _option(parser, "--input", help="glob of Avro report files (batch)")
    _option(parser, "--output", required=True,
            help="output directory (local path or gs://...): windowed Avro and Parquet files, manifest and summary")
    _option(parser, "--streaming", action="store_true", help="streaming mode (with --subscription or --kafka-topic)")
    _option(parser, "--subscription", help="Pub/Sub subscription of Avro-encoded reports: projects/P/subscriptions/S")
    _option(parser, "--pubsub-timestamp-attribute",
            help="message attribute holding the report's event time (millis or RFC 3339); default: publish time")
    _option(parser, "--kafka-topic", help="Kafka topic of Avro-encoded reports")
    _option(parser, "--kafka-bootstrap",
            help="Kafka bootstrap servers (default: the broker `make cluster-up` started, found in .jvm/run/cluster.json)")
    _option(parser, "--kafka-timestamp-policy", default="CreateTime", choices=KAFKA_TIMESTAMP_POLICIES,
            help="event time of a Kafka record (default CreateTime: the producer's timestamp)")
    _option(parser, "--kafka-consumer-config", action="append", metavar="KEY=VALUE",
            help="Kafka consumer property (security, group.id); repeatable")
    _option(parser, "--kafka-max-records", type=int, metavar="N",
            help="stop after N records (a replay of a known stream; default: read for ever)")
    _option(parser, "--kafka-expansion-service", metavar="HOST:PORT",
            help="a running Java expansion service for Kafka IO (default: the one `make cluster-up` started, "
                 "found in .jvm/run/cluster.json, or Beam's jar)")
    _option(parser, "--kafka-java-boot", metavar="PATH",
            help="Java SDK harness boot binary on the workers: run the Kafka reader as a process there "
                 "(Flink on Kubernetes) instead of in Docker")
    _option(parser, "--bigquery-dataset", metavar="[PROJECT:]DATASET",
            help="also write each output kind to the BigQuery table DATASET.<kind>")
    _option(parser, "--bigquery-method", default="STREAMING_INSERTS", choices=METHODS,
            help="how rows reach BigQuery (default STREAMING_INSERTS)")
    _option(parser, "--window", metavar="fixed:S|sliding:S:P|global",
            help="override every collection's window (seconds)")
    _option(parser, "--allowed-lateness-seconds", type=float,
            help="override every collection's allowed lateness (streaming)")
    _option(parser, "--watermark-delay-seconds", type=float, default=WATERMARK_DELAY_SECONDS, metavar="S",
            help="streaming: windows close S seconds after the source's watermark passes their end, so that "
                 "reports a collector held for up to its batching delay, from devices whose clocks run "
                 f"behind, are on time (default {WATERMARK_DELAY_SECONDS:g}: a batching delay of up to 60 s)")
    _option(parser, "--savepoint-on-stop", action="store_true",
            help="streaming on Flink (with --flink_master): on Ctrl-C or SIGTERM stop the job with a savepoint "
                 "instead of cancelling it (it is then resumed from the savepoint, not its last checkpoint)")
    _option(parser, "--flink-rest", metavar="HOST:FIRST-LAST",
            help="Flink inside Beam's job server (--flink-master=[local], the local cluster's): the REST ports "
                 "its Flink serves on (the local cluster prints them), so that Ctrl-C or SIGTERM cancels the job "
                 "there too (Beam's cancel ends only the job server's wait)")
    _option(parser, "--dead-letter-seconds", type=int, default=60, metavar="S",
            help="streaming: write the dead letters gathered so far every S seconds of processing time "
                 "(default 60)")
    _option(parser, "--detach", action="store_true",
            help="submit the job and return without waiting (Dataflow, Flink)")
    _option(parser, "--per-element", action="store_true",
            help="batch: read files record by record instead of the block fast path (for comparison)")
    _option(parser, "--progress-seconds", type=float, default=10.0, metavar="S",
            help="print reports counted and dead-lettered so far on stderr every S seconds (0: never; default 10)")
    _option(parser, "--allow-empty", action="store_true",
            help="batch: run (and count 0 reports) when --input matches no file, instead of refusing")
    _option(parser, NEW_LEDGER, action="store_true",
            help="batch: start a new release ledger under --output instead of respecting what earlier runs "
                 "there published (a reader who kept their outputs can then difference this run's against "
                 "them: docs/design.md, 'The release ledger')")


def _read_text(path: str) -> str:
    try:
        with FileSystems.open(path) as fh:
            data = fh.read()
    except Exception as err:  # noqa: BLE001 - local and remote filesystems raise their own kinds
        raise ValueError(f"--config {path}: cannot read it ({type(err).__name__}: {err})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"--config {path}: not UTF-8 text ({err})") from None


def load_all_configs(paths, window: str | None = None, allowed_lateness_seconds: float | None = None) -> dict:
    """Configs of every file (local or any Beam filesystem), with the job-wide overrides applied."""
    configs = {}
    for path in paths:
        for name, cfg in configs_from_text(_read_text(path), path).items():
            if name in configs:
                raise ValueError(f"collection {name!r} is configured twice (in {path})")
            configs[name] = cfg
    if allowed_lateness_seconds is not None and not allowed_lateness_seconds >= 0:
        raise ValueError(f"allowed_lateness_seconds must be >= 0, got allowed_lateness_seconds={allowed_lateness_seconds!r}")
    overrides = {}
    if window is not None:
        overrides["window"] = parse_window(window)
    if allowed_lateness_seconds is not None:
        overrides["allowed_lateness_seconds"] = float(allowed_lateness_seconds)
    out = {name: replace(cfg, **overrides) for name, cfg in configs.items()}
    for cfg in out.values() if "window" in overrides else ():   # the enforced month follows the window
        fault = cfg.promise_fault()
        if fault:
            raise ValueError(f"--window {window}: collection {cfg.name!r}: {fault}")
    return out


# runners that replay a streaming job from its checkpoints and honour stable input (Flink's)
STABLE_INPUT_RUNNERS = ("PortableRunner", "FlinkRunner")


class FlinkJobOptions(PipelineOptions):
    """Three of the Java Flink runner's options, declared here so that they reach the job server (and
    Kafka IO's expansion service) with their Java types: undeclared, Python passes every value as a
    string, and Java refuses a string where it wants a list (``filesToStage``)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--checkpointing_interval", type=int, default=None,
                            help="Flink: milliseconds between checkpoints (none by default)")
        parser.add_argument("--files_to_stage", action="append", default=None,
                            help="Flink: the jars to submit with the job (repeat the option); by default the "
                                 "job server's whole classpath")
        parser.add_argument("--savepoint_path", default=None,
                            help="Flink: resume from this savepoint or retained checkpoint (a session cluster: "
                                 "the job server applies it only with a remote --flink_master)")


def state_shapes(configs: dict) -> dict:
    """What a streaming job's state must match to be resumed, by collection: the layout of its state
    (:data:`~ldp_marginals.transforms.publication.state.STATE_LAYOUT`), the counted sets and extremes
    (:func:`~ldp_marginals.ldp.aggregate.accumulator_shape`), the window (its slices and statuses
    are keyed by window bounds), the rollups, if any (their step keeps state of its own), and under the
    report unit with device bounds its ``unit`` (the same open state as the device unit's, whose released
    atoms counted devices, not reports: neither resumes as the other; the key is absent otherwise, so the
    shapes of the jobs written before it are unchanged)."""
    return {name: dict(accumulator_shape(cfg.aggregator), window=cfg.window.describe(), layout=STATE_LAYOUT,
                       # a collection with rollups keeps a step more (a window's rollups): not resumable without it
                       **({"rollups": [list(r) for r in cfg.rollups]} if cfg.rollups else {}),
                       **({"unit": cfg.unit} if cfg.device is not None and not cfg.counts_devices else {}))
            for name, cfg in sorted(configs.items())}


def write_state_shapes(output_dir: str, configs: dict) -> str:
    """``<output>/state_shape.json``: what :func:`check_resumable` checks a resumed job against."""
    path = FileSystems.join(output_dir, STATE_SHAPE_FILE)
    with FileSystems.create(path) as fh:
        fh.write(json.dumps(state_shapes(configs), indent=1).encode())
    return path


def check_resumable(output_dir: str, configs: dict, savepoint: str) -> None:
    """Refuse, before anything runs, to resume from ``savepoint`` a job whose config would give its
    state another shape than the job that wrote it (recorded under ``output_dir`` at its start):
    otherwise the panes step would fail on its first element, and Flink would restart it for ever."""
    path = FileSystems.join(output_dir, STATE_SHAPE_FILE)
    if not FileSystems.exists(path):
        raise ValueError(f"--savepoint_path={savepoint} resumes a streaming job, but {path} (written at the start "
                         "of the job that took the savepoint) is missing: resume into that job's --output, whose "
                         "state shape is checked against this config")
    with FileSystems.open(path) as fh:
        saved = json.loads(fh.read())
    want = state_shapes(configs)
    if set(saved) != set(want):
        raise ValueError(f"the savepoint's job had collections {sorted(saved)}, this config has {sorted(want)}: "
                         "a collection added or removed changes the job's state; start without --savepoint_path "
                         "(into a new --output), or with the config that wrote it")
    for name in sorted(want):
        layout = saved[name].get("layout", 1)
        if layout != STATE_LAYOUT:
            raise ValueError(f"collection {name!r} cannot resume from --savepoint_path={savepoint}: the savepoint's "
                             f"job kept its streaming state in layout {layout} ({LAYOUTS.get(layout, 'unknown')}), "
                             f"this release keeps it in layout {STATE_LAYOUT} ({LAYOUTS[STATE_LAYOUT]}), and "
                             "Flink cannot map the one onto the other. Stop the running job with a drain (flink stop "
                             "--drain: every open window closes and publishes), then start this release without "
                             "--savepoint_path into a new --output, reading the stream from where the drained job "
                             "stopped")
        changes = shape_changes(saved[name], want[name])
        if changes:
            raise ValueError(f"collection {name!r} cannot resume from --savepoint_path={savepoint}: its state has "
                             f"another shape ({changes}); start without the savepoint (into a new --output), or "
                             "with the config that wrote it")


def needs_stable_input(args, options: PipelineOptions) -> bool:
    """Streaming on Flink with checkpoints: the file writers then wait for checkpointed input, so a
    restore never leaves a file of a rolled-back timeline (:mod:`ldp_marginals.transforms.sinks`)."""
    runner = options.view_as(StandardOptions).runner or ""
    interval = options.view_as(FlinkJobOptions).checkpointing_interval
    return bool(args.streaming and runner.rsplit(".", 1)[-1] in STABLE_INPUT_RUNNERS and interval and interval > 0)


def make_sink(args, stable_input: bool = False):
    """Files under ``--output`` always; BigQuery tables too with ``--bigquery-dataset`` (its refused
    rows become dead-letter files under ``--output``), all recorded in the run ``args.run_id`` (a batch
    run's under its staging folder until it publishes them: :func:`~ldp_marginals.transforms.manifest.finish_run`)."""
    out = write_dir(args.output, args.run_id, args.streaming)
    files = FileSink(out, streaming=args.streaming, dead_letter_seconds=args.dead_letter_seconds,
                     stable_input=stable_input, run_id=args.run_id)
    if not args.bigquery_dataset:
        return files
    return Sinks(files, BigQuerySink(args.bigquery_dataset, out, args.bigquery_method, args.streaming,
                                     dead_letter_seconds=args.dead_letter_seconds, run_id=args.run_id))


def resumed_run_id(output_dir: str, savepoint: str) -> str:
    """The id of the streaming run a savepoint resumes (its manifest under ``output_dir``): its
    entries carry on, so readers see the windows closed before the savepoint too. ``savepoint``
    names what resumes it in the error (``--savepoint_path=...``, or Dataflow's ``--update``)."""
    path = FileSystems.join(output_dir, MANIFEST_FILE)
    try:
        with FileSystems.open(path) as fh:
            manifest = json.loads(fh.read())
        return manifest["run_id"]
    except Exception:  # noqa: BLE001 - missing, unreadable, not a manifest: one answer
        raise ValueError(f"{savepoint} resumes a streaming job, but {path} (written at the start of the job it "
                         "resumes) is missing or unreadable: resume into that job's --output") from None


def check_output_unused(output_dir: str, argv) -> None:
    """A new streaming run into ``output_dir`` that holds a run's manifest would hide that run's rows
    from every reader: refuse it, naming the command that resumes the run when its stop recorded a
    savepoint or checkpoint (:mod:`ldp_marginals.pipelines.stopping`)."""
    path = FileSystems.join(output_dir, MANIFEST_FILE)
    if not FileSystems.exists(path):
        return
    try:
        with FileSystems.open(path) as fh:
            manifest = json.loads(fh.read())
    except Exception:  # noqa: BLE001 - a manifest that cannot be read is still another run's
        manifest = {}
    run = f"run {manifest.get('run_id', '?')}"
    if manifest.get("mode") != "streaming":
        raise ValueError(f"--output {output_dir} holds the outputs of {manifest.get('mode', 'another')} {run}: a "
                         "streaming run there would hide them; give another --output")
    stopped = manifest.get("stopped") or {}
    if stopped.get("resume_from"):
        raise ValueError(f"--output {output_dir} holds streaming {run}, {stopped.get('how', 'stopped')} by "
                         f"{stopped.get('signal', 'a signal')}: resume it with: "
                         f"{resume_command(argv, stopped['resume_from'])} (or give another --output)")
    if stopped:   # the stop's own line said it cannot be resumed: say the same, not --savepoint_path
        raise ValueError(f"--output {output_dir} holds streaming {run}, {stopped.get('how', 'stopped')} by "
                         f"{stopped.get('signal', 'a signal')} with nothing to resume from ("
                         f"{stopped.get('why_not') or 'no savepoint or checkpoint was recorded'}): a new run there "
                         f"would hide its rows; {START_AFRESH}")
    raise ValueError(f"--output {output_dir} holds streaming {run}, which may still be running, or ended without "
                     "ldp-marginals run stopping it: a new run there would hide its rows; resume it from its savepoint "
                     "or last retained checkpoint with --savepoint_path=PATH, or give another --output")


def job_name(options: PipelineOptions, run_id: str) -> str | None:
    """The job's name on Flink, by which a stop finds it: ``--job_name`` if given, else (Flink through
    Beam's job server or FlinkRunner) ``ldp-marginals-<run id>``, set in ``options``."""
    cloud = options.view_as(GoogleCloudOptions)
    if cloud.job_name:
        return cloud.job_name
    runner = (options.view_as(StandardOptions).runner or "").rsplit(".", 1)[-1]
    if runner not in STABLE_INPUT_RUNNERS:
        return None
    cloud.job_name = f"ldp-marginals-{run_id.lower()}"
    return cloud.job_name


def make_pipeline(argv=None, expansion_service=None):
    """The job's pipeline as the command line asks, built but not run: ``(pipeline, args, configs)``,
    ``args.run_id`` the run's id (:func:`prepare_outputs` before running it).
    ``expansion_service`` replaces Kafka's Java expansion service (tests)."""
    parser = run_parser()
    check_not_misspelled(parser, sys.argv[1:] if argv is None else argv)   # before a required option is missed
    args, beam_args = parser.parse_known_args(argv)
    configs = load_all_configs(args.config, args.window, args.allowed_lateness_seconds)
    if args.input and "://" not in args.input and not os.path.dirname(args.input):
        # Beam's local file system matches a bare glob (rep_*.avro) against nothing: name the folder
        args.input = os.path.join(".", args.input)
    if args.input and not args.streaming:
        check_input(args.input, args.allow_empty)
    check_output(args.output)
    if args.dead_letter_seconds < 1:
        raise ValueError(f"--dead-letter-seconds must be >= 1, got --dead-letter-seconds={args.dead_letter_seconds!r}")
    if not args.progress_seconds >= 0:
        raise ValueError(f"--progress-seconds must be >= 0, got --progress-seconds={args.progress_seconds!r}")
    if not args.watermark_delay_seconds >= 0:
        raise ValueError("--watermark-delay-seconds must be >= 0, "
                         f"got --watermark-delay-seconds={args.watermark_delay_seconds!r}")
    options = PipelineOptions(beam_args)
    options.view_as(StandardOptions).streaming = args.streaming
    if expansion_service is None:   # before the checks of the Flink options it may supply
        use_local_cluster(args, options)
    savepoint = options.view_as(FlinkJobOptions).savepoint_path
    if savepoint:
        if not args.streaming:
            raise ValueError(f"--savepoint_path resumes a streaming job, got --savepoint_path={savepoint} "
                             "without --streaming")
        check_resumable(args.output, configs, savepoint)
    if args.savepoint_on_stop:
        from apache_beam.options.pipeline_options import FlinkRunnerOptions
        from ldp_marginals.pipelines.stopping import flink_rest
        if not (args.streaming and flink_rest(options.view_as(FlinkRunnerOptions).flink_master)):
            raise ValueError("--savepoint-on-stop stops a streaming job through Flink's REST API: give --streaming "
                             "and --flink_master=HOST:PORT (its REST address)")
        if not options.view_as(FlinkJobOptions).checkpointing_interval:
            raise ValueError("--savepoint-on-stop needs --checkpointing_interval=MS: the files are then written from "
                             "checkpointed input only, so nothing the stop cuts off reaches them")
    if args.flink_rest:
        from ldp_marginals.pipelines.stopping import embedded_rests
        embedded_rests(args.flink_rest)   # a malformed one refused now, not at the stop
    args.argv = list(argv) if argv is not None else sys.argv[2:]   # the command, for the line that resumes it
    # Dataflow's --update replaces a running job and carries its state, as a savepoint does: the run goes on
    update = args.streaming and options.view_as(GoogleCloudOptions).update
    args.resuming = bool(savepoint or update)
    resumer = f"--savepoint_path={savepoint}" if savepoint else "--update"
    args.resumed_from = resumer if args.resuming else None   # the progress lines say their counts restart
    args.run_id = resumed_run_id(args.output, resumer) if args.resuming else new_run_id()
    args.job_name = job_name(options, args.run_id)
    # the release ledger: what earlier batch runs into --output published (None: streaming, no ledger)
    args.earlier = earlier_releases(args.output, args.streaming, args.new_ledger)
    check_rollups(configs, args.earlier)
    check_unit(configs, args.earlier)
    check_dimensions(configs, args.earlier)
    pipeline = beam.Pipeline(options=options)
    source = make_source(args, configs, expansion_service)
    sink = make_sink(args, needs_stable_input(args, options))
    # rows one by one only for BigQuery; the files are written from the pane files
    outputs = build(pipeline, source, sink, JobOptions(configs, streaming=args.streaming,
                                                       row_outputs=bool(args.bigquery_dataset),
                                                       watermark_delay_seconds=args.watermark_delay_seconds,
                                                       ledger=args.earlier))
    if RELEASES in outputs:
        outputs[RELEASES] | "WriteReleases" >> beam.ParDo(WriteReleaseFn(args.output, args.run_id))
    return pipeline, args, configs


def use_local_cluster(args, options: PipelineOptions) -> list:
    """Take from the cluster ``make cluster-up`` recorded (:mod:`~ldp_marginals.pipelines.local_services`)
    what the command does not name, and say on stderr which were taken and from where: for a Kafka job, the
    expansion service (unless a Java boot binary is named) and the bootstrap servers; for a job sent to the
    recorded job server, on a session cluster the jar it stages and, streaming, the REST address
    (``--flink_master``, so that a stop cancels the job there and names its last retained checkpoint) and
    checkpoints (``--checkpointing_interval``, :data:`~ldp_marginals.pipelines.local_services.CHECKPOINT_MS`:
    something to resume from), on the job server's embedded Flink, streaming, its REST ports
    (``--flink-rest``). Returns the options taken (``["--kafka-expansion-service=localhost:8097", ...]``)."""
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions

    from ldp_marginals.pipelines.local_services import CHECKPOINT_MS, find_cluster
    expansion_wanted = bool(args.kafka_topic and not args.kafka_expansion_service and not args.kafka_java_boot)
    kafka_wanted = expansion_wanted or bool(args.kafka_topic and not args.kafka_bootstrap)
    endpoint = options.view_as(PortableOptions).job_endpoint
    if not (kafka_wanted or endpoint):
        return []
    cluster, why = find_cluster()
    if cluster is None:
        if why:
            print(f"ldp-marginals run: {why}", file=sys.stderr)
        return []
    taken = []
    if expansion_wanted:
        args.kafka_expansion_service = cluster.expansion_service
        taken.append(f"--kafka-expansion-service={cluster.expansion_service}")
    if args.kafka_topic and not args.kafka_bootstrap:
        args.kafka_bootstrap = cluster.bootstrap
        taken.append(f"--kafka-bootstrap={cluster.bootstrap}")
    if endpoint == cluster.job_endpoint:
        flink, job = options.view_as(FlinkRunnerOptions), options.view_as(FlinkJobOptions)
        if cluster.staged_jar and not job.files_to_stage:
            job.files_to_stage = [cluster.staged_jar]   # not the job server's ~190 jars, uploaded with every job
            taken.append(f"--files_to_stage={cluster.staged_jar}")
        if args.streaming and cluster.flink_master and flink.flink_master in (None, "", "[auto]"):
            flink.flink_master = cluster.flink_master   # Ctrl-C cancels the job there, naming its last checkpoint
            taken.append(f"--flink_master={cluster.flink_master}")
            if not job.checkpointing_interval:
                job.checkpointing_interval = CHECKPOINT_MS   # a retained checkpoint to resume from
                taken.append(f"--checkpointing_interval={CHECKPOINT_MS}")
        if args.streaming and not args.flink_rest and cluster.embedded_rest:
            args.flink_rest = cluster.embedded_rest   # so that Ctrl-C cancels the job in the job server's Flink too
            taken.append(f"--flink-rest={cluster.embedded_rest}")
    if taken:
        print(f"ldp-marginals run: using the local cluster recorded in {cluster.path} (make cluster-up): "
              f"{' '.join(taken)}", file=sys.stderr)
    return taken


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ldp-marginals run", description=" ".join(__doc__.split("\n\n")[0].split()).replace("``", ""),
        epilog="Any other option goes to Beam: --runner, --direct_running_mode=multi_processing, Dataflow's "
               "--project/--region/--temp_location, Flink's --flink_master, ... An option that is a near miss "
               "of one above is refused as a typo. Exit codes: "
               + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items()) + ".")
    add_run_arguments(parser)
    return parser


def check_not_misspelled(parser: argparse.ArgumentParser, argv) -> None:
    """A flag that is neither ours (nor argparse's abbreviation of one) nor Beam's and that is a near
    miss of one of ours is a typo: refuse it rather than pass it on (Beam ignores options it does not
    know), and before argparse says that the option it meant is missing."""
    ours = sorted({o for action in parser._actions for o in action.option_strings if o.startswith("--")})
    beam_known = set(PipelineOptions([]).get_all_options(retain_unknown_options=False))
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if (not flag.startswith("--") or any(o.startswith(flag) for o in ours)
                or flag[2:].replace("-", "_") in beam_known):
            continue
        close = difflib.get_close_matches(flag, ours, n=1, cutoff=0.75)
        if close:
            raise ValueError(f"unrecognized option {flag}: did you mean {close[0]}? (see ldp-marginals run --help)")


def check_input(pattern: str, allow_empty: bool) -> None:
    """An input that matches no file is an error (a typo in a path or a glob), unless ``allow_empty``;
    so is one that matches a file that cannot hold reports (:mod:`~ldp_marginals.pipelines.inputs`)."""
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except Exception:  # noqa: BLE001 - a missing directory, a bucket we cannot list: nothing matched
        matched = []
    if not matched and not allow_empty:
        kind = "glob" if glob.has_magic(pattern) else "path"
        raise ValueError(f"--input {pattern}: the {kind} matches no file (add --allow-empty to run on none)")
    check_report_files(pattern, [m.path for m in matched])


def check_output(output: str) -> None:
    """A local output directory must be creatable and writable before the job starts."""
    if "://" in output:
        return
    probe = os.path.join(output, ".ldp-marginals-write-check")
    try:
        os.makedirs(output, exist_ok=True)
        with open(probe, "wb") as fh:
            fh.write(b"ok")
        os.remove(probe)
    except OSError as err:
        raise ValueError(f"--output {output}: not a writable directory ({err.strerror or err})") from None


def summarize(result) -> dict:
    """Counters of the finished job: reports counted, dead letters by reason."""
    counters = job_counters(result)
    totals = {}
    for c in counters:
        value = c.committed if c.committed is not None else c.attempted
        totals[c.key.metric.name] = totals.get(c.key.metric.name, 0) + (value or 0)
    dead = totals_by_reason(totals)
    return {"reports_counted": totals.get(VALID, 0),
            "reports_over_device_bound": totals.get(OVER_DEVICE_BOUND, 0),
            "reports_withheld_by_ledger": totals.get(REPORTS_WITHHELD_BY_LEDGER, 0),
            "client_rows_withheld_by_ledger": totals.get(CLIENT_ROWS_WITHHELD_BY_LEDGER, 0),
            "reports_over_key_bound": totals.get(OVER_KEY_BOUND, 0),
            "reports_dead_lettered": reports_dead_lettered(dead),
            "dead_letters_by_reason": dict(sorted(dead.items())),
            "damaged_ranges": dead.get(DAMAGED_BLOCK, 0),
            "reports_in_damaged_ranges": totals.get(LOST, 0),
            "damaged_ranges_of_unknown_size": totals.get(LOST_UNKNOWN, 0)}


def nothing_counted(summary: dict) -> str | None:
    """What went wrong, in a line, with a run that read input and counted none of it (every report
    dead-lettered, every file damaged), or None. The command then exits with its own code."""
    if summary.get("detached") or summary.get("reports_counted") != 0:
        return None
    dead, ranges = summary.get("reports_dead_lettered", 0), summary.get("damaged_ranges", 0)
    if not dead and not ranges:
        return None
    return ("no report was counted: " + (f"all {dead:,} were dead-lettered {summary['dead_letters_by_reason']}"
                                         if dead else "nothing was read")
            + (f", and {ranges:,} damaged byte ranges of files were skipped" if ranges else "")
            + "; the dead letters say why (kind dead_letters in the outputs)")


def write_collections(output_dir: str, configs: dict) -> str:
    """``<output>/collections.json``: each collection's bits, channels, epsilon and guard, so that
    readers of the outputs (the dashboard) need not find the config files; and ``state_shape.json``
    (:func:`write_state_shapes`). The directory exists once the job's :class:`FileSink` is made."""
    path = FileSystems.join(output_dir, COLLECTIONS_FILE)
    with FileSystems.create(path) as fh:
        fh.write(json.dumps([configs[name].describe() for name in sorted(configs)], indent=2).encode())
    write_state_shapes(output_dir, configs)
    return path


def prepare_outputs(args, configs: dict) -> None:
    """Before the job runs: a new streaming run refused where it would hide another run
    (:func:`check_output_unused`), ``collections.json`` and ``state_shape.json`` (a batch run's in its
    staging folder), and the run's start in its manifest (:func:`ldp_marginals.transforms.manifest.start_run`)."""
    if args.streaming:
        check_no_ledger(args.output)
    if args.streaming and not getattr(args, "resuming", False):
        check_output_unused(args.output, getattr(args, "argv", []))
    write_collections(write_dir(args.output, args.run_id, args.streaming), configs)
    start_run(args.output, args.run_id, args.streaming)


class JobFailed(RuntimeError):
    """The job started but could not finish (a full disk, an output that became unwritable)."""


def _os_error(err: BaseException) -> OSError | None:
    """The OSError behind a failed job, if any (Beam wraps a DoFn's exception, sometimes as text)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError):
            return err
        err = err.__cause__ or err.__context__
    return None


def _stop_in(err: BaseException) -> StopRequested | None:
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, StopRequested):
            return err
        err = err.__cause__ or err.__context__
    return None


def _stopped(result, args, pipeline, signum: int) -> JobStopped:
    """The job stopped on a signal (:func:`~ldp_marginals.pipelines.stopping.stop_job`); a batch run's
    staged outputs discarded, the previous run's left as they were."""
    stopped = stop_job(result, args, pipeline.options, args.argv, signum, args.job_name)
    if args.streaming:
        return stopped
    return JobStopped(f"{stopped}; {_discard_unfinished(args)}", signum)


def _remove_unfinished(output_dir: str) -> int:
    """Remove the ``*.tmp`` files a failed run left under ``output_dir`` (never renamed, so never
    complete); returns how many."""
    removed = 0
    for folder, _, files in os.walk(output_dir):
        for name in files:
            if name.endswith(".tmp"):
                os.remove(os.path.join(folder, name))
                removed += 1
    return removed


def _discard_unfinished(args) -> str:
    """Clean up after a run that failed; returns what it left, in a few words. A batch run's staging
    folder goes (:func:`~ldp_marginals.transforms.manifest.abandon_run`), a streaming run's ``.tmp``
    files."""
    if not args.streaming:
        if abandon_run(args.output, args.run_id):
            return f"nothing of it was published: {MANIFEST_FILE} is still the previous run's, if there was one"
        return f"{MANIFEST_FILE} names its files under {write_dir(args.output, args.run_id, False)}"
    removed = _remove_unfinished(args.output) if "://" not in args.output else 0
    return f"no {MANIFEST_FILE} of it; {removed} unfinished files removed"


class _QuietTaskFailures(logging.Filter):
    """The DirectRunner logs a failed task's traceback (as an error, then a warning) before the same
    exception reaches :func:`run`, which reports it: one report, not three."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Exception at bundle", "A task failed with exception", "Giving up after"))


logging.getLogger("apache_beam.runners.direct.executor").addFilter(_QuietTaskFailures())


class _QuietStops(logging.Filter):
    """A signal's :class:`StopRequested`, raised inside a DoFn the in-process runner was running, is
    logged by Beam with its traceback on its way out; the command says what happened in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        return not (isinstance(err, StopRequested) or _stop_in(err) is not None
                    or StopRequested.__name__ in str(record.msg))


logging.getLogger("apache_beam.runners.common").addFilter(_QuietStops())


def startup_error(err: BaseException, argv=None) -> str | None:
    """One line naming the fix for a streaming source that cannot start (no Google credentials for
    Pub/Sub; Kafka IO's Java expansion service missing or not answering), or None: Beam reports
    these as Java or Google stacks of 60-120 lines."""
    chain, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        chain.append(err)
        err = err.__cause__ or err.__context__
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    if "DefaultCredentialsError" in text or "default credentials were not found" in text:
        return ("Pub/Sub needs Google credentials and none were found: run `gcloud auth application-default login`, "
                "or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file")
    if "expansion-service" in text and "Unable to fetch" in text:
        jar = re.search(r"stage the jar at (\S+\.jar)", text)
        return ("Kafka IO is a Java transform and needs Beam's expansion service, whose jar could not be fetched: "
                "give --kafka-expansion-service HOST:PORT (`make cluster-up` starts one on localhost:8097)"
                + (f", or put the jar at {jar.group(1)}" if jar else ""))
    argv = list(argv or [])
    service = next((a.split("=", 1)[1] if "=" in a else (argv[i + 1] if i + 1 < len(argv) else "")
                    for i, a in enumerate(argv) if a.split("=", 1)[0] == "--kafka-expansion-service"), None)
    if service is not None and "failed to connect to all addresses" in text:
        return (f"--kafka-expansion-service {service}: nothing answers there; start Kafka IO's expansion service "
                "(`make cluster-up` starts one on localhost:8097) or give the address of a running one")
    return None


def run(argv=None) -> dict:
    """Build and run the job; wait for it and summarize its counters unless ``--detach``.

    A run that fails for lack of space or permission raises :class:`JobFailed` after removing its
    unfinished files; a batch run publishes its outputs only once it has finished, so one that fails
    or is killed leaves the previous run in ``--output`` as readers read it. A streaming
    source that cannot start is a ``ValueError`` naming the fix (:func:`startup_error`)."""
    try:
        pipeline, args, configs = make_pipeline(argv)
    except Exception as err:   # noqa: BLE001 - Kafka IO is expanded (by Java, over gRPC) while the pipeline is built
        line = startup_error(err, argv)
        if line is None:
            raise
        raise ValueError(line) from None
    started = int(time.time() * 1000)
    prepare_outputs(args, configs)
    result = None
    try:
        with Progress(0 if args.detach else args.progress_seconds, resumed_from=args.resumed_from) as progress, \
                signals_stop():
            result = pipeline.run()
            if args.detach:
                print(f"submitted; not waiting (--detach): {getattr(result, 'job_id', lambda: '')() or result}")
                return {"detached": True}
            progress.result = result
            wait_for(result, threading.Event())
    except StopRequested as stop:
        raise _stopped(result, args, pipeline, stop.signum) from None
    except Exception as err:
        stop = _stop_in(err)
        if stop is not None:   # a runner that wrapped the signal's exception in its own
            raise _stopped(result, args, pipeline, stop.signum) from None
        line = startup_error(err, argv)
        if line is not None:
            raise ValueError(line) from None
        cause = _os_error(err)
        text = str(err)
        if cause is None and "No space left on device" not in text and "Permission denied" not in text:
            raise
        left = _discard_unfinished(args)
        reason = f"{cause.strerror or cause}" if cause is not None else (
            "No space left on device" if "No space left on device" in text else "Permission denied")
        raise JobFailed(f"writing the outputs under {args.output} failed: {reason}; the run is incomplete "
                        f"({left}). Free space or fix the permissions and run again: a rerun rewrites every "
                        "output.") from None
    summary = summarize(result)
    if args.streaming:   # the release ledger is for batch runs (a streaming run into a ledger is refused)
        summary["reports_withheld_by_ledger"] = summary["client_rows_withheld_by_ledger"] = None   # batch only
        summary["earlier_releases_kept"] = summary["reports_not_published_where_kept"] = None
    print(f"counted {summary['reports_counted']} reports; dead-lettered {summary['reports_dead_lettered']}"
          + (f" {summary['dead_letters_by_reason']}" if summary["dead_letters_by_reason"] else "")
          + (f"; skipped {summary['damaged_ranges']} damaged byte ranges of files holding "
             f"{summary['reports_in_damaged_ranges']} reports"
             + (f" (and {summary['damaged_ranges_of_unknown_size']} of unknown size)"
                if summary["damaged_ranges_of_unknown_size"] else "") if summary["damaged_ranges"] else "")
          + (f"; {summary['reports_over_device_bound']} past a device's bound (counted, in no estimate)"
             if summary["reports_over_device_bound"] else "")
          + (f"; {summary['reports_over_key_bound']} to keys past a device's bound on keys (counted, in no estimate)"
             if summary["reports_over_key_bound"] else "")
          + (f"; the release ledger withheld {summary['reports_withheld_by_ledger']} reports and the client rows "
             f"of {summary['client_rows_withheld_by_ledger']} windows and keys (earlier runs into --output "
             "published them otherwise)"
             if summary["reports_withheld_by_ledger"] or summary["client_rows_withheld_by_ledger"] else ""))
    if not args.streaming:
        try:
            publish_ledger(args.output, args.run_id, args.earlier)   # before the run: killed between, it only withholds more
            finish_run(args.output, args.run_id, summary, started)   # adds the earlier releases it kept
        except SharedDevices as err:   # the ledger refused the run (a collection over another's reports)
            raise SharedDevices(f"{err}; {_discard_unfinished(args)}") from None
        except OSError as err:   # the summary or manifest could not be written: neither exists half-written
            raise JobFailed(f"writing the run's release ledger, {SUMMARY_FILE} and {MANIFEST_FILE} under {args.output} failed: "
                            f"{err.strerror or err}; the run is incomplete ({_discard_unfinished(args)}). Free "
                            "space and run again.") from None
        for kept in summary["earlier_releases_kept"]:   # a rerun never unpublishes (docs/design.md, 'The release ledger')
            print(kept["note"])
    return summary
