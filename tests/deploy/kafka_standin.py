"""A stand-in for Beam's Java IO expansion service, for building the Kafka pipeline in the fast tests.

The real service runs in the tests marked ``kafka`` (``tests/cluster``, JVM parts resolved by ``make
jvm``); these fast tests build the pipeline without a JVM. The stand-in answers the same Expand
request in-process: it records the configuration our pipeline sends for Kafka's
URN (decoded from the schema-encoded payload, as the Java side decodes it) and expands the
transform to a Python placeholder that produces rows with the record's metadata (topic, partition,
offset, timestamp, key, value) like the real reader with metadata. What it
cannot check is that the Java side accepts the configuration: the ``kafka`` tests do.
"""
from __future__ import annotations

import typing

import apache_beam as beam
from apache_beam.io.kafka import ReadFromKafka
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import external_transforms_pb2
from apache_beam.runners.portability.expansion_service import ExpansionServiceServicer
from apache_beam.typehints.schemas import named_tuple_from_schema

KAFKA_URN = ReadFromKafka.URN_WITH_METADATA


class KafkaRecord(typing.NamedTuple):
    """The fields of Kafka IO's rows with metadata that the job reads (and the key, which it drops)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: typing.Optional[bytes]
    value: bytes


class _KafkaPlaceholder(beam.PTransform):
    def expand(self, pbegin):
        return (pbegin | beam.Impulse()
                | beam.FlatMap(lambda _: []).with_output_types(KafkaRecord))


def decode_config(payload: bytes) -> dict:
    """The schema-encoded configuration of an external transform -> {field: value}."""
    from apache_beam.coders import RowCoder
    config = external_transforms_pb2.ExternalConfigurationPayload.FromString(payload)
    row = RowCoder(config.schema).decode(config.payload)
    named_tuple_from_schema(config.schema)  # the schema itself must be a valid Beam schema
    return {name: getattr(row, name) for name in row._fields}


class KafkaExpansionStandIn:
    """Has ``Expand`` (what ExternalTransform calls); ``requests`` keeps each decoded Kafka config."""

    def __init__(self):
        self.requests = []
        # the expanded transform's environment names the stand-in, so no one mistakes it for Java's
        self._servicer = ExpansionServiceServicer(PipelineOptions(
            ["--environment_type=PROCESS", '--environment_config={"command": "kafka-expansion-standin"}']))

    def Expand(self, request, context=None):  # noqa: N802 - the gRPC method's name
        if request.transform.spec.urn != KAFKA_URN:
            raise ValueError(f"stand-in expands {KAFKA_URN} only, got {request.transform.spec.urn}")
        self.requests.append(decode_config(request.transform.spec.payload))
        standin = request.__class__()
        standin.CopyFrom(request)
        standin.transform.spec.urn = _PLACEHOLDER_URN
        standin.transform.spec.payload = b""
        response = self._servicer.Expand(standin, context)
        if not response.error:  # like Java's: the composite keeps Kafka's URN and configuration
            response.transform.spec.CopyFrom(request.transform.spec)
            for env in response.components.environments.values():
                del env.dependencies[:]   # nothing to stage: the placeholder never runs
        return response


_PLACEHOLDER_URN = "ldp_marginals:test:kafka_placeholder:v1"


@beam.PTransform.register_urn(_PLACEHOLDER_URN, None)
def _from_runner_api(unused_ptransform, unused_payload, unused_context):
    return _KafkaPlaceholder()
