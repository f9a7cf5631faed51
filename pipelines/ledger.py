"""The collector's account of each request (:mod:`ldp_marginals.pipelines.collect`): which of its
reports Kafka has acknowledged, so that a request is answered 200 only once every one of its reports
is on the broker, and a client's retry (the same ``Idempotency-Key``) sends only what is not there
yet.

:class:`AckingProducer` is the project's :class:`~ldp_marginals.pipelines.produce.KafkaReportProducer`
(containers batched across requests) that also knows which requests' reports each container holds:
its containers leave in the order of the reports, so a queue of submissions maps each container to
the reports it holds. Every Kafka record carries a header, :data:`HEADER`, naming the requests and
report positions it holds; a collector that starts reads it back from the topic's last records
(:func:`read_back`), so a retry of a request acknowledged by Kafka before a restart is not sent again.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time

from ldp_marginals.pipelines.produce import KafkaReportProducer

HEADER = "ldp-requests"   # a Kafka record's header: one line per request whose reports it holds


def ranges(positions) -> str:
    """Sorted positions (a list, or a ``range`` of step 1) -> ``a-b`` ranges (inclusive), space-separated."""
    if isinstance(positions, range):
        return f"{positions.start}-{positions.stop - 1}" if positions else ""
    out, start, prev = [], None, None
    for p in positions:
        if start is None:
            start = prev = p
        elif p == prev + 1:
            prev = p
        else:
            out.append(f"{start}-{prev}")
            start = prev = p
    if start is not None:
        out.append(f"{start}-{prev}")
    return " ".join(out)


def parse_ranges(text: str) -> list:
    out = []
    for part in text.split():
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b) + 1))
    return out


class Entry:
    """One request (an app and its ``Idempotency-Key``): its body's digest, its accepted reports'
    count, which of them Kafka acknowledged, its answer, and the future of its submission under way."""

    __slots__ = ("digest", "total", "acked", "answer", "future", "when")

    def __init__(self, digest: str, total: int, answer: dict | None = None):
        self.digest = digest
        self.total = total
        self.acked = bytearray(total)
        self.answer = answer
        self.future = None
        self.when = time.monotonic()

    @property
    def pending(self) -> bool:
        return self.future is not None and not self.future.done()

    @property
    def complete(self) -> bool:
        return self.acked.count(1) == self.total

    def missing(self):
        """The positions Kafka does not hold: a ``range`` when it holds none (a request's first
        attempt), else a list."""
        if not self.acked.count(1):
            return range(self.total)
        return [i for i, a in enumerate(self.acked) if not a]


class Ledger:
    """Entries by ``(app, idempotency key)``, kept ``seconds`` and at most ``max_entries`` (the
    oldest settled ones go first): the window within which a retry is recognised."""

    def __init__(self, seconds: float, max_entries: int):
        if not seconds > 0:
            raise ValueError(f"seconds must be > 0, got seconds={seconds!r}")
        if not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be an integer >= 1, got max_entries={max_entries!r}")
        self.seconds, self.max_entries = seconds, max_entries
        self._entries = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple) -> Entry | None:
        entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry.when > self.seconds and not entry.pending:
            del self._entries[key]
            return None
        return entry

    def add(self, key: tuple, entry: Entry) -> Entry:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            old_key, old = next(iter(self._entries.items()))
            if old.pending:   # the oldest is still on its way: kept, and the ledger briefly over its size
                break
            del self._entries[old_key]
        return entry


class Submission:
    """Reports of one request on their way: ``positions`` (their places among the request's accepted
    reports), settled when every container holding one of them is acknowledged or failed."""

    __slots__ = ("name", "entry", "positions", "reports", "assigned", "outstanding", "failed", "loop")

    def __init__(self, name: str, entry: Entry, positions: list, reports: list, loop):
        self.name, self.entry, self.positions, self.reports, self.loop = name, entry, positions, reports, loop
        self.assigned = 0      # reports handed to containers
        self.outstanding = 0   # containers not yet acknowledged or failed
        self.failed = None     # the first error (its type's name)


class AckingProducer(KafkaReportProducer):
    """:class:`~ldp_marginals.pipelines.produce.KafkaReportProducer` whose :meth:`submit` settles the
    submission's future (on its event loop) once Kafka acknowledged every container holding its
    reports: with None, or with the name of the first error."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._queue = collections.deque()   # submissions whose reports are not all in containers yet
        self._acks = threading.Lock()
        self.in_flight = 0                  # reports submitted and not yet settled

    def submit(self, submission: Submission) -> None:
        with self._lock:
            with self._acks:
                self.in_flight += len(submission.reports)
            self._queue.append(submission)
            self._send(self.batcher.extend(submission.reports))

    def _record(self, container):
        covered, lines, n = [], [], container.reports
        while n:
            sub = self._queue[0]
            k = min(n, len(sub.reports) - sub.assigned)
            lines.append(f"{sub.name} {sub.entry.digest} {sub.entry.total} "
                         f"{ranges(sub.positions[sub.assigned:sub.assigned + k])}")
            covered.append((sub, sub.assigned, sub.assigned + k))
            sub.assigned += k
            n -= k
            with self._acks:
                sub.outstanding += 1
            if sub.assigned == len(sub.reports):
                self._queue.popleft()
        try:
            future = self._producer.send(self.topic, value=container.value, timestamp_ms=container.timestamp_ms,
                                         headers=[(HEADER, "\n".join(lines).encode())])
        except Exception as err:  # noqa: BLE001 - refused at once (no metadata, full buffer): those reports fail
            self._settle(covered, err)
            return None
        future.add_callback(lambda _meta: self._settle(covered, None))
        future.add_errback(lambda err: self._settle(covered, err))
        return future

    def _settle(self, covered: list, err) -> None:
        done = []
        with self._acks:
            for sub, a, b in covered:
                if err is None:
                    held = sub.positions[a:b]
                    if isinstance(held, range):
                        sub.entry.acked[held.start:held.stop] = b"\x01" * len(held)
                    else:
                        for p in held:
                            sub.entry.acked[p] = 1
                elif sub.failed is None:
                    sub.failed = type(err).__name__
                sub.outstanding -= 1
                if sub.outstanding == 0 and sub.assigned == len(sub.reports):
                    self.in_flight -= len(sub.reports)
                    done.append(sub)
        loops = {}
        for sub in done:
            loops.setdefault(sub.loop, []).append((sub.entry.future, sub.failed))
        for loop, settled in loops.items():   # one wake-up of the loop for all a container settles
            loop.call_soon_threadsafe(_resolve, settled)


def _resolve(settled: list) -> None:
    for future, failed in settled:
        if not future.done():
            future.set_result(failed)


def new_future(entry: Entry, loop: asyncio.AbstractEventLoop):
    entry.future = loop.create_future()
    return entry.future


def read_back(bootstrap: str, topic: str, records: int, ledger: Ledger, timeout_s: float = 30.0,
              **consumer_config) -> int:
    """Entries of the requests named by the last ``records`` records of each of ``topic``'s
    partitions (their :data:`HEADER`), with the positions Kafka holds, into ``ledger`` -> how many
    requests. A record without the header (another producer's) is skipped."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=int(timeout_s * 1000), **consumer_config)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return 0
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        begins = consumer.beginning_offsets(partitions)
        todo = {}
        for tp in partitions:
            if ends[tp] > begins[tp]:
                consumer.seek(tp, max(begins[tp], ends[tp] - records))
                todo[tp] = ends[tp]
        found = 0
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=500).items():
                for message in batch:
                    for name, value in message.headers or ():
                        if name == HEADER:
                            found += _note(ledger, value.decode())
                if tp in todo and consumer.position(tp) >= todo[tp]:
                    del todo[tp]
        if todo:
            raise TimeoutError(f"reading back the last {records} records of {topic} took over {timeout_s:.0f} s")
        return found
    finally:
        consumer.close()


def _note(ledger: Ledger, text: str) -> int:
    new = 0
    for line in text.splitlines():
        name, digest, total, spans = line.split(" ", 3)
        app, _, key = name.partition("/")
        entry = ledger.get((app, key))
        if entry is None or entry.digest != digest:
            entry = ledger.add((app, key), Entry(digest, int(total)))
            new += 1
        for p in parse_ranges(spans):
            entry.acked[p] = 1
    return new
