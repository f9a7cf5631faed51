"""Sources chosen by options: Avro files (batch), Pub/Sub or Kafka (streaming deployments)."""
from __future__ import annotations

import json
import re

import apache_beam as beam

from ldp_marginals.transforms.blocks import ReadReportFilesFast
from ldp_marginals.transforms.reports import ReadNoisyReportFiles
from ldp_marginals.transforms.source import RECORDS, ReportSource

# Beam's own check (apache_beam.io.gcp.pubsub): a project id of 6-63 characters; the same pattern is
# the flex template's (deploy/dataflow/metadata.json)
_SUBSCRIPTION = re.compile(r"^projects/[a-z][-a-z0-9:.]{4,61}[a-z0-9]/subscriptions/[^/\s]+$")


def kafka_source(topic: str, partition: int, offset: int) -> str:
    """A Kafka record's source in dead letters: where an operator finds it (``kafka:<topic>/partition/
    <partition>/offset/<offset>``; topic names hold none of ``/``, ``@``, ``#``)."""
    return f"kafka:{topic}/partition/{partition}/offset/{offset}"


def pubsub_source(subscription: str, message_id: str | None) -> str:
    """A Pub/Sub message's source in dead letters: the subscription and the message's id."""
    return f"{subscription}/message/{message_id or 'unknown'}"


class ReadPubSubReports(ReportSource):
    """Avro-encoded NoisyReport messages from a Pub/Sub subscription -> ``records`` as ``(bytes, source)``,
    the source naming the message's id (:func:`pubsub_source`).

    ``timestamp_attribute`` names the message attribute (millis since the epoch, or RFC 3339) that
    the collector sets to the report's event time, so that the watermark follows event time; without
    it the watermark follows publish time and reports published long after their event time are late.
    """

    def __init__(self, subscription: str, timestamp_attribute: str | None = None):
        super().__init__()
        if not isinstance(subscription, str) or not _SUBSCRIPTION.match(subscription):
            raise ValueError("subscription must be projects/<project id>/subscriptions/<name>, "
                             f"got subscription={subscription!r}")
        self.subscription = subscription
        self.timestamp_attribute = timestamp_attribute

    def read(self, pbegin):
        sub = self.subscription
        return {RECORDS: (pbegin
                          | "ReadPubSub" >> beam.io.ReadFromPubSub(subscription=sub, with_attributes=True,
                                                                  timestamp_attribute=self.timestamp_attribute)
                          | "Label" >> beam.Map(lambda m: (m.data, pubsub_source(sub, m.message_id))))}


KAFKA_TIMESTAMP_POLICIES = ("CreateTime", "LogAppendTime", "ProcessingTime")


def kafka_expansion_service(java_boot: str | None):
    """Beam's Java IO expansion service; with ``java_boot`` (the Java SDK harness's ``boot`` binary on
    the workers) the Kafka reader runs as a process beside the worker instead of in a Docker
    container, which is what Flink on Kubernetes needs (task manager pods run no Docker)."""
    if java_boot is None:
        return None
    from apache_beam.io.kafka import default_io_expansion_service
    return default_io_expansion_service(append_args=[
        "--defaultEnvironmentType=PROCESS",
        "--defaultEnvironmentConfig=" + json.dumps({"command": java_boot}),
        "--experiments=use_deprecated_read"])


class ReadKafkaReports(ReportSource):
    """Avro-encoded NoisyReport messages from a Kafka topic (Beam's cross-language Kafka IO) -> ``records``
    as ``(bytes, source)``, the source naming the record's topic, partition and offset
    (:func:`kafka_source`; the reader's rows with metadata: the key is dropped, never kept).

    ``timestamp_policy`` ``CreateTime`` (the default) takes the producer's record timestamp as event
    time, so the collector should set it to the report's event time. ``consumer_config`` adds Kafka
    consumer properties (security, ``group.id``). ``expansion_service`` is where the Java transform
    is expanded (default: Beam's IO expansion service jar, started on this machine).
    """

    def __init__(self, bootstrap_servers: str, topic: str, timestamp_policy: str = "CreateTime",
                 consumer_config: dict | None = None, expansion_service=None, max_records: int | None = None):
        super().__init__()
        if max_records is not None and max_records < 1:
            raise ValueError(f"max_records must be >= 1, got max_records={max_records}")
        self.max_records = max_records
        if timestamp_policy not in KAFKA_TIMESTAMP_POLICIES:
            raise ValueError(f"timestamp_policy must be one of {list(KAFKA_TIMESTAMP_POLICIES)}, "
                             f"got timestamp_policy={timestamp_policy!r}")
        self.consumer_config = {**(consumer_config or {}), "bootstrap.servers": bootstrap_servers}
        self.topic = topic
        self.timestamp_policy = timestamp_policy
        self.expansion_service = expansion_service

    def read(self, pbegin):
        from apache_beam.io.kafka import ReadFromKafka
        return {RECORDS: (pbegin
                          | "ReadKafka" >> ReadFromKafka(consumer_config=self.consumer_config, topics=[self.topic],
                                                        timestamp_policy=self.timestamp_policy,
                                                        max_num_records=self.max_records, with_metadata=True,
                                                        expansion_service=self.expansion_service)
                          | "Label" >> beam.Map(lambda r: (r.value, kafka_source(r.topic, r.partition, r.offset))))}


def _key_values(items, name: str) -> dict:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{name} takes KEY=VALUE, got {name}={item!r}")
        out[key] = value
    return out


def make_source(args, configs: dict, expansion_service=None) -> ReportSource:
    """The source the command line asks for; ValueError naming what is missing. ``expansion_service``
    overrides where Kafka's Java transform is expanded (tests use a stand-in)."""
    if args.subscription and args.kafka_topic:
        raise ValueError("give one of --subscription or --kafka-topic, got both")
    if (args.subscription or args.kafka_topic) and not args.streaming:
        raise ValueError("--subscription and --kafka-topic read streams; add --streaming")
    if args.subscription:
        return ReadPubSubReports(args.subscription, args.pubsub_timestamp_attribute)
    if args.kafka_topic:
        if not args.kafka_bootstrap:
            raise ValueError("--kafka-bootstrap is required with --kafka-topic, got --kafka-bootstrap=None")
        return ReadKafkaReports(args.kafka_bootstrap, args.kafka_topic, args.kafka_timestamp_policy,
                                _key_values(args.kafka_consumer_config, "--kafka-consumer-config"),
                                expansion_service or args.kafka_expansion_service
                                or kafka_expansion_service(args.kafka_java_boot), args.kafka_max_records)
    if args.input:
        if args.streaming:
            raise ValueError("--input reads files in batch; use --subscription or --kafka-topic with --streaming")
        if getattr(args, "per_element", False):
            return ReadNoisyReportFiles(args.input)
        return ReadReportFilesFast(args.input, configs)
    raise ValueError("one of --input, --subscription or --kafka-topic is required")
