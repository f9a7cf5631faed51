"""Producing reports to Kafka as a collector does: reports batched into Avro containers (the bytes of
an Avro file, which the job reads as one message), a container sent when it holds ``max_reports``
reports or when its oldest report has waited ``max_seconds``, as one Kafka record whose timestamp is
the earliest event time it holds, and split before it outgrows what the topic takes (its
``max.message.bytes``, which bounds a record batch: the container plus Kafka's framing).

:class:`ContainerBatcher` is the batching alone (no Kafka: what a collector in another transport
would reuse); :class:`KafkaReportProducer` sends its containers with kafka-python (the ``kafka``
extra); :func:`create_topic` makes a topic. ``ldp-marginals produce`` sends Avro report files.
"""
from __future__ import annotations

import functools
import io
import threading
import time
import zlib
from typing import NamedTuple

# Kafka's defaults: a broker takes record batches of up to message.max.bytes = 1,048,588 bytes and a
# producer sends requests of up to max.request.size = 1,048,576; the producer's default stays under both
DEFAULT_MAX_BYTES = 1_000_000
# a record batch's framing around one record (a 61-byte batch header, the record's own header and
# timestamp deltas): a container is kept this much under the topic's limit
KAFKA_FRAMING = 512
DEFAULT_MAX_REPORTS = 500
DEFAULT_MAX_SECONDS = 10.0


class Encoded(NamedTuple):
    """A NoisyReport already in Avro binary (as the clients write it, docs/client.md section 3): its
    bytes, and the fields a producer reads from it (its event time, ms) and a collector bounds (its
    device token). Containers of them are framed around the bytes as they are, not re-encoded."""

    datum: bytes
    event_time: int
    client: str | None = None


class Container(NamedTuple):
    """One Kafka record's worth: an Avro container, its record timestamp and how many reports it holds."""

    value: bytes
    timestamp_ms: int
    reports: int


def encode_container(reports: list, codec: str = "deflate") -> bytes:
    """NoisyReport records (dicts, or all :class:`Encoded`) -> the bytes of one Avro object container."""
    import fastavro

    from ldp_marginals import schemas
    buf = io.BytesIO()
    if reports and isinstance(reports[0], Encoded):
        # fastavro writes the header (schema, codec, sync marker); the one block is framed here around
        # the reports' bytes: its count and size (Avro longs), the data (raw deflate), the sync marker
        header = _header(codec)
        data = b"".join(r.datum for r in reports)
        if codec == "deflate":
            packer = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
            data = packer.compress(data) + packer.flush()
        elif codec != "null":
            raise ValueError(f"codec must be 'deflate' or 'null' for encoded reports, got codec={codec!r}")
        return header + _long(len(reports)) + _long(len(data)) + data + header[-16:]
    fastavro.writer(buf, schemas.load_schema("noisy_report"), reports, codec=codec)
    return buf.getvalue()


@functools.lru_cache(maxsize=None)
def _header(codec: str) -> bytes:
    """An empty NoisyReport container written by fastavro: its header (schema, codec, sync marker),
    whose last 16 bytes are the sync marker. Made once per codec: one marker for every container of a
    process is valid Avro (a marker need only be the same within a file)."""
    import fastavro

    from ldp_marginals import schemas
    buf = io.BytesIO()
    fastavro.writer(buf, schemas.load_schema("noisy_report"), [], codec=codec)
    return buf.getvalue()


def _long(n: int) -> bytes:
    """A non-negative Avro long: zigzag (2n), then 7 bits a byte, low first."""
    z, out = n << 1, bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def earliest_ms(reports: list) -> int:
    """The record timestamp of a container: its earliest event time (ms), so that none of its reports
    is behind the record's own time."""
    if isinstance(reports[0], Encoded):
        return min(r.event_time for r in reports)
    return min(int(r["event_time"]) for r in reports)


def containers(reports: list, max_bytes: int = DEFAULT_MAX_BYTES, codec: str = "deflate") -> list:
    """:class:`Container` s holding ``reports`` in order, each at most ``max_bytes`` (a container over
    it is split in halves until each fits)."""
    if not reports:
        return []
    data = encode_container(reports, codec)
    if len(data) <= max_bytes:
        return [Container(data, earliest_ms(reports), len(reports))]
    if len(reports) == 1:
        raise ValueError(f"one report encodes to {len(data)} bytes, over max_bytes={max_bytes}")
    half = len(reports) // 2
    return containers(reports[:half], max_bytes, codec) + containers(reports[half:], max_bytes, codec)


class ContainerBatcher:
    """Reports -> :class:`Container` s, flushed by size (``max_reports``) or by age
    (the oldest report held ``max_seconds`` by ``clock``). Not thread-safe; the producer locks."""

    def __init__(self, max_reports: int = DEFAULT_MAX_REPORTS, max_seconds: float = DEFAULT_MAX_SECONDS,
                 max_bytes: int = DEFAULT_MAX_BYTES, clock=time.time):
        if not isinstance(max_reports, int) or max_reports < 1:
            raise ValueError(f"max_reports must be an integer >= 1, got max_reports={max_reports!r}")
        if not max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0, got max_seconds={max_seconds!r}")
        if not isinstance(max_bytes, int) or max_bytes < 1024:
            raise ValueError(f"max_bytes must be an integer >= 1024, got max_bytes={max_bytes!r}")
        self.max_reports = max_reports
        self.max_seconds = max_seconds
        self.max_bytes = max_bytes
        self.clock = clock
        self._held = []
        self._since = None   # when the oldest held report was added (clock seconds)

    def __len__(self) -> int:
        return len(self._held)

    def add(self, report: dict) -> list:
        """Hold ``report``; returns the containers now due (full, or aged)."""
        if not self._held:
            self._since = self.clock()
        self._held.append(report)
        if len(self._held) >= self.max_reports:
            return self.flush()
        return self.due()

    def extend(self, reports: list) -> list:
        """Hold every one of ``reports`` -> the containers now due: what :meth:`add` one by one gives
        when the clock stands still meanwhile (the age is checked with the first), in slices."""
        if not reports:
            return []
        out, i = self.add(reports[0]), 1
        while i < len(reports):
            if not self._held:
                self._since = self.clock()
            k = min(len(reports) - i, self.max_reports - len(self._held))
            self._held.extend(reports[i:i + k])
            i += k
            if len(self._held) >= self.max_reports:
                out += self.flush()
        return out

    def due(self) -> list:
        """The held reports as containers if the oldest has waited ``max_seconds``, else nothing."""
        if self._held and self.clock() - self._since >= self.max_seconds:
            return self.flush()
        return []

    def flush(self) -> list:
        """Every held report, as containers."""
        held, self._held, self._since = self._held, [], None
        return containers(held, self.max_bytes)


class KafkaReportProducer:
    """A collector's Kafka producer: :meth:`send` reports (NoisyReport dicts); they leave in
    containers (:class:`ContainerBatcher`), one Kafka record each, timestamped with its earliest event
    time, each in a record batch of its own under ``max_message_bytes`` (the topic's
    ``max.message.bytes``, which limits batches, not records: kafka-python's default batching put two
    containers of a topic's size in one batch, which the broker refused). A thread sends aged
    containers while no report comes. ``close`` (or leaving the ``with`` block) sends what is held and
    waits for the broker's acknowledgements.

    ``producer_config``: kafka-python's ``KafkaProducer`` options (security, ``acks``, ...);
    ``kafka_producer``: an object with its ``send``, ``flush`` and ``close`` in its place (the tests'
    failing broker). A subclass that must know when each container is acknowledged (the collector,
    :mod:`ldp_marginals.pipelines.collect`) overrides :meth:`_record`."""

    def __init__(self, bootstrap_servers: str, topic: str, max_reports: int = DEFAULT_MAX_REPORTS,
                 max_seconds: float = DEFAULT_MAX_SECONDS, max_message_bytes: int = DEFAULT_MAX_BYTES,
                 clock=time.time, kafka_producer=None, **producer_config):
        if not isinstance(max_message_bytes, int) or max_message_bytes < 1024 + KAFKA_FRAMING:
            raise ValueError(f"max_message_bytes must be an integer >= {1024 + KAFKA_FRAMING}, "
                             f"got max_message_bytes={max_message_bytes!r}")
        self.topic = topic
        self.batcher = ContainerBatcher(max_reports, max_seconds, max_message_bytes - KAFKA_FRAMING, clock)
        if kafka_producer is None:
            from kafka import KafkaProducer
            kafka_producer = KafkaProducer(bootstrap_servers=bootstrap_servers, batch_size=0,
                                           max_request_size=max(max_message_bytes, 1 << 20), **producer_config)
        self._producer = kafka_producer
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.sent_records = 0
        self.sent_reports = 0
        self._ager = threading.Thread(target=self._age, name="ldp-marginals-producer", daemon=True)
        self._ager.start()

    def _send(self, batch: list) -> None:
        for c in batch:
            self._record(c)
            self.sent_records += 1
            self.sent_reports += c.reports

    def _record(self, container: Container):
        """Send one container as one Kafka record (called in order, under the lock) -> kafka-python's
        future of the broker's acknowledgement."""
        return self._producer.send(self.topic, value=container.value, timestamp_ms=container.timestamp_ms)

    def _age(self) -> None:
        period = min(1.0, self.batcher.max_seconds / 4)
        while not self._stop.wait(period):
            with self._lock:
                self._send(self.batcher.due())

    def send(self, report: dict) -> None:
        with self._lock:
            self._send(self.batcher.add(report))

    def flush(self) -> None:
        """Send every held report now and wait until the broker has them."""
        with self._lock:
            self._send(self.batcher.flush())
        self._producer.flush()

    def close(self) -> None:
        self._stop.set()
        self._ager.join()
        self.flush()
        self._producer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def create_topic(bootstrap_servers: str, topic: str, partitions: int = 1, replication_factor: int = 1,
                 max_message_bytes: int | None = None) -> None:
    """Create ``topic`` (``max_message_bytes``: its ``max.message.bytes``, for containers over Kafka's
    default of about 1 MB). An existing topic is an error naming it."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError
    configs = {"max.message.bytes": str(max_message_bytes)} if max_message_bytes else {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                                      topic_configs=configs)])
    except TopicAlreadyExistsError:
        raise ValueError(f"--kafka-topic {topic}: the topic exists already") from None
    finally:
        admin.close()


def add_produce_arguments(parser) -> None:
    parser.add_argument("--kafka-bootstrap", required=True, help="Kafka bootstrap servers (host:port)")
    parser.add_argument("--kafka-topic", required=True, help="the topic the job reads (--kafka-topic of run)")
    parser.add_argument("--input", required=True, help="glob of Avro report files (as simulate writes)")
    parser.add_argument("--create-topic", action="store_true", help="create the topic first (an existing one "
                                                                    "is an error)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of a created topic")
    parser.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_BYTES,
                        help="the topic's max.message.bytes (set on it with --create-topic): containers stay "
                             f"{KAFKA_FRAMING} bytes under it; Kafka's default broker limit is about 1 MB")
    parser.add_argument("--batch-reports", type=int, default=DEFAULT_MAX_REPORTS,
                        help="reports per container at most")
    parser.add_argument("--batch-seconds", type=float, default=DEFAULT_MAX_SECONDS,
                        help="a container leaves at the latest when its oldest report has waited this long")


def main(args) -> None:
    """``ldp-marginals produce``: the reports of Avro files to a topic, in containers."""
    import glob

    import fastavro

    from ldp_marginals import schemas
    paths = sorted(glob.glob(args.input))
    if not paths:
        raise ValueError(f"--input {args.input}: matches no file")
    if args.create_topic:
        if args.partitions < 1:
            raise ValueError(f"--partitions must be >= 1, got --partitions={args.partitions}")
        create_topic(args.kafka_bootstrap, args.kafka_topic, args.partitions, max_message_bytes=args.max_message_bytes)
    with KafkaReportProducer(args.kafka_bootstrap, args.kafka_topic, max_reports=args.batch_reports,
                             max_seconds=args.batch_seconds, max_message_bytes=args.max_message_bytes) as producer:
        for path in paths:
            with open(path, "rb") as fh:
                for record in fastavro.reader(fh):
                    producer.send(schemas.normalize("noisy_report", record))
    print(f"sent {producer.sent_reports:,} reports in {producer.sent_records:,} Kafka records to {args.kafka_topic}")
