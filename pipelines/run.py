"""``ldp-marginals run``: the batch or streaming job from the command line, with a summary of what
was counted and what was dead-lettered."""
from __future__ import annotations

import argparse
import json
import os

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipelines.job import JobOptions, build
from pipelines.sources import make_source
from schemas.config import load_configs
from transforms.reports import NAMESPACE
from transforms.sinks import FileSink


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", action="append", required=True,
                        help="collection config (JSON or YAML); repeat for several collections")
    parser.add_argument("--input", help="glob of Avro report files (batch)")
    parser.add_argument("--output", required=True, help="output directory (local path or gs://...)")
    parser.add_argument("--streaming", action="store_true", help="streaming mode (with --subscription or --kafka-topic)")
    parser.add_argument("--subscription", help="Pub/Sub subscription of Avro-encoded reports")
    parser.add_argument("--kafka-topic", help="Kafka topic of Avro-encoded reports")
    parser.add_argument("--kafka-bootstrap", help="Kafka bootstrap servers")
    parser.add_argument("--per-element", action="store_true",
                        help="batch: read files record by record instead of the block fast path (for comparison)")


def load_all_configs(paths) -> dict:
    configs = {}
    for path in paths:
        for name, cfg in load_configs(path).items():
            if name in configs:
                raise ValueError(f"collection {name!r} is configured twice (in {path})")
            configs[name] = cfg
    return configs


def summarize(result) -> dict:
    """Counters of the finished job: reports counted, dead letters by reason."""
    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    totals = {}
    for c in counters:
        value = c.committed if c.committed is not None else c.attempted
        totals[c.key.metric.name] = totals.get(c.key.metric.name, 0) + (value or 0)
    dead = {k.split(".", 1)[1]: v for k, v in totals.items() if k.startswith("dead_letter.") and v}
    valid = totals.get("reports.valid", 0)
    late = dead.get("late", 0)
    return {"reports_counted": valid - late, "reports_dead_lettered": sum(dead.values()),
            "dead_letters_by_reason": dict(sorted(dead.items()))}


COLLECTIONS_FILE = "collections.json"


def write_collections(output_dir: str, configs: dict) -> str:
    """``<output>/collections.json``: each collection's bits, channels, epsilon and guard, so that
    readers of the outputs (the dashboard) need not find the config files. The directory exists
    once the job's :class:`FileSink` is made."""
    path = FileSystems.join(output_dir, COLLECTIONS_FILE)
    with FileSystems.create(path) as fh:
        fh.write(json.dumps([configs[name].describe() for name in sorted(configs)], indent=2).encode())
    return path


def run(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="ldp-marginals run", description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    args, beam_args = parser.parse_known_args(argv)
    configs = load_all_configs(args.config)
    source = make_source(args, configs)
    options = PipelineOptions(beam_args)
    options.view_as(StandardOptions).streaming = args.streaming
    sink = FileSink(args.output, streaming=args.streaming)
    write_collections(args.output, configs)
    pipeline = beam.Pipeline(options=options)
    build(pipeline, source, sink, JobOptions(configs, streaming=args.streaming))
    result = pipeline.run()
    result.wait_until_finish()
    summary = summarize(result)
    print(f"counted {summary['reports_counted']} reports; dead-lettered {summary['reports_dead_lettered']}"
          + (f" {summary['dead_letters_by_reason']}" if summary["dead_letters_by_reason"] else ""))
    if "://" not in args.output:
        with open(os.path.join(args.output, "summary.json"), "w") as fh:
            json.dump(summary, fh, indent=2)
    return summary
