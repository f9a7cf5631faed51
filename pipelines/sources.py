"""Sources chosen by options: Avro files (batch), Pub/Sub or Kafka (streaming deployments)."""
from __future__ import annotations

import apache_beam as beam

from transforms.blocks import ReadReportFilesFast
from transforms.reports import ReadNoisyReportFiles


class ReadPubSubReports(beam.PTransform):
    """Avro-encoded NoisyReport messages from a Pub/Sub subscription -> ``(bytes, source)``."""

    def __init__(self, subscription: str):
        super().__init__()
        self.subscription = subscription

    def expand(self, pbegin):
        sub = self.subscription
        return (pbegin
                | "ReadPubSub" >> beam.io.ReadFromPubSub(subscription=sub)
                | "Label" >> beam.Map(lambda payload: (payload, sub)))


class ReadKafkaReports(beam.PTransform):
    """Avro-encoded NoisyReport messages from a Kafka topic (Beam's cross-language Kafka IO)."""

    def __init__(self, bootstrap_servers: str, topic: str):
        super().__init__()
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic

    def expand(self, pbegin):
        from apache_beam.io.kafka import ReadFromKafka
        topic = self.topic
        return (pbegin
                | "ReadKafka" >> ReadFromKafka(consumer_config={"bootstrap.servers": self.bootstrap_servers},
                                              topics=[topic])
                | "Label" >> beam.Map(lambda kv: (kv[1], f"kafka:{topic}")))


def make_source(args, configs: dict) -> beam.PTransform:
    """The source the command line asks for; ValueError naming what is missing."""
    if args.subscription:
        return ReadPubSubReports(args.subscription)
    if args.kafka_topic:
        if not args.kafka_bootstrap:
            raise ValueError("--kafka-bootstrap is required with --kafka-topic, got --kafka-bootstrap=None")
        return ReadKafkaReports(args.kafka_bootstrap, args.kafka_topic)
    if args.input:
        if args.streaming:
            raise ValueError("--input reads files in batch; use --subscription or --kafka-topic with --streaming")
        if getattr(args, "per_element", False):
            return ReadNoisyReportFiles(args.input)
        return ReadReportFilesFast(args.input, configs)
    raise ValueError("one of --input, --subscription or --kafka-topic is required")
