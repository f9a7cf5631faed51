"""The collector (``ldp-marginals collect``) without a broker: its app keys, its refusals (the job's
own reasons, no report content in them), its bound per device token, and that it answers 200 only
once Kafka acknowledged every report, over a stub of kafka-python's producer that acknowledges,
fails or holds each record as a test says. The real broker: tests/cluster/test_collector.py."""
from __future__ import annotations

import asyncio
import io
import json
import logging
import threading

import fastavro
import pytest

from ldp_marginals import schemas
from ldp_marginals.pipelines.admission import AppKeys, TokenRate, screen_body
from ldp_marginals.pipelines.collect import Collector, make_app
from ldp_marginals.pipelines.ledger import HEADER, AckingProducer, Ledger
from ldp_marginals.schemas.config import parse_config
from tests.configs import SMALL_CONFIG
from tests.pipelines.test_same_answers import reports as population

KEY = "k3y-" + "0123456789abcdef" * 2          # the test app's key
OTHER = "other-" + "fedcba9876543210" * 2
CFG = parse_config(SMALL_CONFIG)
CONFIGS = {CFG.name: CFG}
GOOD = population(CFG)[:-6]
FAULTS = population(CFG)[-6:]   # one of each fault, in this order:
FAULT_REASONS = ["unknown_collection", "wrong_length", "bad_timestamp", "padding_bits", "undeclared_dimension",
                 "bad_field"]


class StubKafka:
    """kafka-python's ``KafkaProducer`` as the collector uses it: ``send`` returns a future that this
    stub settles as ``mode`` says: ``"ack"`` at once, ``"fail"`` with a timeout error, ``"hold"``
    until :meth:`release`; ``plan`` overrides the mode record by record."""

    def __init__(self, mode: str = "ack", plan: list | None = None):
        self.mode, self.plan = mode, list(plan or [])
        self.records, self.acked, self.held = [], [], []
        self.lock = threading.Lock()

    def send(self, topic, value, timestamp_ms, headers):
        from kafka.errors import KafkaTimeoutError
        from kafka.future import Future
        future = Future()
        mode = self.plan.pop(0) if self.plan else self.mode
        with self.lock:
            self.records.append((value, dict(headers)))
        if mode == "ack":
            self.acked.append(value)
            future.success(None)
        elif mode == "fail":
            future.failure(KafkaTimeoutError("stub broker: no answer"))
        else:
            self.held.append((future, value))
        return future

    def release(self):
        for future, value in self.held:
            self.acked.append(value)
            future.success(None)
        self.held = []

    def flush(self):
        pass

    def close(self):
        pass


def acked_reports(stub) -> list:
    return [r for value in stub.acked for r in fastavro.reader(io.BytesIO(value))]


def container(records) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schemas.load_schema("noisy_report"), records, codec="null")
    return buf.getvalue()


def single(record) -> bytes:
    return schemas.encode_message("noisy_report", record)


class Run:
    """A collector over a stub, served by aiohttp's test server; ``post`` returns ``(status, json,
    headers)``."""

    def __init__(self, stub=None, ack_seconds=5.0, batch_reports=500, batch_seconds=0.01, rate=None, **screen):
        self.stub = stub or StubKafka()
        self.producer = AckingProducer("stub:9092", "t", max_reports=batch_reports, max_seconds=batch_seconds,
                                       kafka_producer=self.stub)
        self.collector = Collector(CONFIGS, AppKeys({"app": KEY, "other": OTHER}), self.producer,
                                   rate if rate is not None else TokenRate(6, 20), Ledger(3600, 1000), ack_seconds, 100_000,
                                   **screen)

    async def __aenter__(self):
        from aiohttp.test_utils import TestClient, TestServer
        self.client = TestClient(TestServer(make_app(self.collector, 1 << 16)))
        await self.client.start_server()
        return self

    async def __aexit__(self, *exc):
        await self.client.close()
        self.collector.close()

    async def post(self, body: bytes, key: str | None = KEY, request_id: str | None = "req-0001",
                   content_type: str = "application/octet-stream"):
        headers = {"Content-Type": content_type}
        if key is not None:
            headers["Authorization"] = key if key.startswith("Basic ") else f"Bearer {key}"
        if request_id is not None:
            headers["Idempotency-Key"] = request_id
        resp = await self.client.post("/v1/reports", data=body, headers=headers)
        return resp.status, await resp.json(), resp.headers


def spy(collector, method: str) -> list:
    """Wrap ``collector``'s coroutine ``method`` -> the list of the argument of each call it gets."""
    calls, real = [], getattr(collector, method)

    async def counted(arg):
        calls.append(arg)
        return await real(arg)
    setattr(collector, method, counted)
    return calls


def run(coro):
    return asyncio.run(coro)


def test_only_a_known_app_key_is_let_in_and_no_key_is_ever_logged(caplog):
    async def go():
        async with Run() as c:
            assert (await c.post(single(GOOD[0]), key=None))[0] == 401
            assert (await c.post(single(GOOD[0]), key=KEY[:-1] + "X"))[:2][0] == 401
            status, body, headers = await c.post(single(GOOD[0]), key="Basic " + KEY)
            assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
            assert (await c.post(single(GOOD[0]), key=OTHER, request_id="req-other"))[0] == 200
            assert (await c.post(single(GOOD[0])))[0] == 200
            return c.stub
    caplog.set_level(logging.DEBUG, logger="ldp_marginals")
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    stub = run(go())
    assert len(acked_reports(stub)) == 2
    assert KEY not in caplog.text and OTHER not in caplog.text
    # a key is refused without being quoted; the keys parse from app=key lines
    with pytest.raises(ValueError, match="of 9 characters") as err:
        AppKeys.parse("app=short-key", "--keys f")
    assert "short-key" not in str(err.value)
    assert AppKeys.parse(f"# keys\napp={KEY}\nother = {OTHER}", "x").app_of(f"Bearer {OTHER}") == "other"
    with pytest.raises(ValueError, match="not app=key"):
        AppKeys.parse(KEY, "--keys f")


def test_a_request_needs_an_idempotency_key_and_avro_bytes():
    async def go():
        async with Run() as c:
            status, body, _ = await c.post(single(GOOD[0]), request_id=None)
            assert status == 400 and body["error"] == "bad_idempotency_key"
            assert (await c.post(single(GOOD[0]), request_id="short"))[0] == 400
            assert (await c.post(single(GOOD[0]), request_id="has space in"))[0] == 400
            assert (await c.post(single(GOOD[0]), content_type="application/json"))[0] == 415
            assert (await c.post(b""))[:2][1]["error"] == "empty_body"
            status, body, _ = await c.post(b"\x00" * (1 << 17))
            assert status == 413 and body["error"] == "body_too_large"
            assert not c.stub.records
    run(go())


def test_each_fault_is_refused_with_the_jobs_reason_and_no_report_content():
    async def go():
        async with Run() as c:
            answers = [await c.post(single(r), request_id=f"fault-{i:04d}") for i, r in enumerate(FAULTS)]
            undecodable = await c.post(b"\x02\x00not avro at all", request_id="fault-junk")
            return c.stub, answers, undecodable
    stub, answers, undecodable = run(go())
    assert [(s, b["error"], [r["reason"] for r in b["refused"]]) for s, b, _ in answers] == [
        (400, "invalid_reports", [reason]) for reason in FAULT_REASONS]
    assert undecodable[0] == 400 and undecodable[1]["refused"][0]["reason"] == "undecodable"
    assert not stub.records   # nothing refused goes to Kafka
    for (_, body, _), record in zip(answers, FAULTS):
        text = str(body)
        assert str(record["event_time"]) not in text and record["client"] not in text
        assert repr(record["bits"]) not in text and "mars" not in text
    # the same reasons as the job's own screening (one table): the collector calls it
    assert [r.reason for r in screen_body(container(FAULTS), CONFIGS)[1]] == FAULT_REASONS


def test_a_batch_sends_its_valid_reports_and_lists_the_others_by_index():
    batch = GOOD[:40] + [FAULTS[1]] + GOOD[40:60] + [FAULTS[3]]

    body = container(batch)

    async def go():
        async with Run() as c:
            return c.stub, await c.post(body)
    stub, (status, answer, _) = run(go())
    assert status == 200 and answer["accepted"] == 60 and answer["refused_count"] == 2
    assert [(r["index"], r["reason"]) for r in answer["refused"]] == [(40, "wrong_length"), (61, "padding_bits")]
    assert [schemas.normalize("noisy_report", r) for r in acked_reports(stub)] == GOOD[:60]
    # every record names the request and the positions it holds
    assert [h[HEADER] for _, h in stub.records] == [b"app/req-0001 " + _digest(body) + b" 60 0-59"]


def _digest(body: bytes) -> bytes:
    import hashlib
    return hashlib.sha256(body).hexdigest()[:16].encode()


def test_requests_per_device_token_are_bounded():
    now = [0.0]
    rate = TokenRate(per_minute=6, burst=3, clock=lambda: now[0])
    token = GOOD[0]["client"]
    same = [r for r in GOOD if r["client"] == token][:1] * 5
    other = next(r for r in GOOD if r["client"] != token)

    async def go():
        async with Run(rate=rate) as c:
            got = [(await c.post(single(dict(same[0], event_time=same[0]["event_time"] + i)),
                                 request_id=f"tok-{i:04d}")) for i in range(4)]
            got.append(await c.post(single(other), request_id="tok-other"))
            now[0] += 10.0   # one request a 10 s at 6 a minute
            got.append(await c.post(single(dict(same[0], event_time=same[0]["event_time"] + 9)), request_id="tok-0009"))
            return got
    got = run(go())
    assert [s for s, _, _ in got] == [200, 200, 200, 429, 200, 200]
    assert got[3][1]["error"] == "rate_limited" and got[3][2]["Retry-After"] == "10"


def test_nothing_is_acknowledged_before_kafka_acknowledges_it():
    async def go():
        async with Run(stub=StubKafka("fail")) as c:
            failed = await c.post(container(GOOD[:100]))
        async with Run(stub=StubKafka("hold")) as c:
            task = asyncio.ensure_future(c.post(container(GOOD[:100])))
            await asyncio.sleep(0.5)
            waiting = not task.done() and len(c.stub.held) == 1
            c.stub.release()
            return failed, waiting, await task, c.collector.counters.values
    failed, waiting, held, counters = run(go())
    assert failed[0] == 503 and failed[1]["error"] == "kafka_unavailable" and failed[2]["Retry-After"] == "1"
    assert waiting and held[0] == 200 and held[1]["accepted"] == 100
    assert counters["accepted_reports_total"] == 100


def test_a_retry_sends_only_what_kafka_does_not_hold():
    # containers of 40: the first acknowledged, the second lost, the third acknowledged; the retry
    # (same Idempotency-Key and body) sends the lost 40 only, and a third try is answered from memory
    stub = StubKafka(plan=["ack", "fail", "ack"])
    body = container(GOOD[:120])

    async def go():
        async with Run(stub=stub, batch_reports=40) as c:
            first = await c.post(body)
            retry = await c.post(body)
            again = await c.post(body)
            other = await c.post(container(GOOD[:5]))
            return first, retry, again, other
    first, retry, again, other = run(go())
    assert [first[0], retry[0], again[0]] == [503, 200, 200] and again[1]["replayed"]
    assert other[0] == 409 and other[1]["error"] == "idempotency_key_reused"
    got = [schemas.normalize("noisy_report", r) for r in acked_reports(stub)]
    assert len(got) == 120 and sorted(map(repr, got)) == sorted(map(repr, GOOD[:120]))


def test_a_retry_while_kafka_has_not_answered_waits_for_the_first_send():
    stub = StubKafka("hold")
    body = container(GOOD[:50])

    async def go():
        async with Run(stub=stub, ack_seconds=0.3) as c:
            first = await c.post(body)              # no answer from Kafka within 0.3 s: 503
            retry = asyncio.ensure_future(c.post(body))
            await asyncio.sleep(0.1)
            stub.release()                          # the first send's acknowledgement comes
            return first, await retry
    first, retry = run(go())
    assert first[0] == 503 and retry[0] == 200
    assert len(stub.records) == 1 and len(acked_reports(stub)) == 50   # sent once


def test_single_reports_that_arrive_together_are_screened_in_one_call():
    # issue 49, item 9: a screening call costs about as much for one report as for fifty, so single
    # requests wait for each other (screen_seconds, at most screen_reports of them). Each request here
    # is posted once the one before it has reached the screening and the event loop has turned, so
    # screening at each turn (before) took 20 calls. The timer is a minute: the 20th request screens
    # all 20 at once, however slow the machine; a lone request is screened when its (short) timer
    # fires. No time is asserted.
    reports = GOOD[:21]
    many = TokenRate(1e9, 10 ** 9)

    async def go():
        async with Run(rate=many, screen_seconds=60.0, screen_reports=20) as c:
            arrived = spy(c.collector, "_screen")
            posts = []
            for i, r in enumerate(reports[:20]):
                posts.append(asyncio.ensure_future(c.post(single(r), request_id=f"one-{i:04d}")))
                while len(arrived) <= i and not posts[-1].done():
                    await asyncio.sleep(0.001)
                for _ in range(3):
                    await asyncio.sleep(0)
            together = await asyncio.gather(*posts)
            together_calls = c.collector.counters.values["single_screenings_total"]
        async with Run(rate=many, screen_seconds=0.05, screen_reports=20) as c:
            alone = await c.post(single(reports[20]), request_id="alone-0001")
            alone_calls = c.collector.counters.values["single_screenings_total"]
        return together, together_calls, c.stub, alone, alone_calls
    together, together_calls, stub, alone, alone_calls = run(go())
    assert [s for s, _, _ in together] == [200] * 20 and all(a["accepted"] == 1 for _, a, _ in together)
    assert together_calls == 1
    assert alone[0] == 200 and alone_calls == 1
    assert [schemas.normalize("noisy_report", r) for r in acked_reports(stub)] == [reports[20]]


@pytest.mark.parametrize("bad", [{"screen_seconds": -0.001}, {"screen_seconds": float("inf")}, {"screen_reports": 0},
                                 {"screen_reports": 2.5}])
def test_the_screening_hold_is_validated(bad):
    name, value = next(iter(bad.items()))
    with pytest.raises(ValueError, match=f"{name}={value!r}"):
        Run(**bad)


def test_over_max_requests_under_way_a_new_request_is_answered_503_at_once():
    # issue 49, item 9: a machine that cannot carry the load answers at once instead of queueing.
    # Two batches held by Kafka fill max_requests=2: a third is answered 503 overloaded while they
    # wait, a retry of a held one waits with it; once Kafka answers, new requests are let in again.
    stub = StubKafka("hold")

    async def go():
        async with Run(stub=stub, max_requests=2, batch_reports=10) as c:
            waits = spy(c.collector, "_wait")
            bodies = [container(GOOD[10 * i:10 * i + 10]) for i in range(3)]
            held = [asyncio.ensure_future(c.post(bodies[i], request_id=f"held-{i:04d}")) for i in range(2)]
            while len(stub.held) < 2 and not any(t.done() for t in held):
                await asyncio.sleep(0.01)
            under_way = c.collector.under_way
            refused = await c.post(bodies[2], request_id="third-001")
            retry = asyncio.ensure_future(c.post(bodies[0], request_id="held-0000"))
            while len(waits) < 3 and not retry.done():   # the retry waits with the first
                await asyncio.sleep(0.01)
            stub.release()
            answers = await asyncio.gather(*held, retry)
            stub.mode = "ack"
            later = await c.post(bodies[2], request_id="third-001")
            return under_way, refused, answers, later, c.collector.under_way
    under_way, refused, answers, later, after = run(go())
    assert under_way == 2
    assert refused[0] == 503 and refused[1]["error"] == "overloaded" and refused[2]["Retry-After"] == "1"
    assert [a[0] for a in answers] == [200, 200, 200] and all(a[1]["accepted"] == 10 for a in answers)
    assert later[0] == 200 and later[1]["accepted"] == 10 and after == 0
    assert len(acked_reports(stub)) == 30   # the two held batches and the third's retry, each once


@pytest.mark.parametrize("bad", [-1, 1.5])
def test_max_requests_is_validated(bad):
    with pytest.raises(ValueError, match=f"max_requests={bad!r}"):
        Run(max_requests=bad)


WARM = """
import sys
from ldp_marginals.pipelines.admission import screen_body, screen_singles
from ldp_marginals.pipelines.collect import warm_up
from tests.pipelines.test_collect import CONFIGS, GOOD, container, single

def compiled():
    return {(m, n): len(f.signatures) for m, mod in list(sys.modules.items()) if m.startswith("ldp_marginals")
            for n, f in vars(mod).items() if hasattr(f, "signatures") and hasattr(f, "py_func")}

if sys.argv[1] == "warm":
    warm_up(CONFIGS)
before = compiled()
screen_singles([single(r) for r in GOOD[:50]], CONFIGS)
screen_body(container(GOOD[:100]), CONFIGS)
print(sum(before.values()), sorted(k for k, v in compiled().items() if v != before.get(k, 0)))
"""


@pytest.mark.parametrize("how", ["warm", "cold"])
def test_the_screening_kernels_are_compiled_before_the_collector_serves(how):
    # in a fresh process: after warm_up, screening requests compiles no kernel (cold: it does)
    import subprocess
    import sys
    from pathlib import Path
    done = subprocess.run([sys.executable, "-c", WARM, how], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    ready, newly = done.stdout.split(" ", 1)
    if how == "warm":
        assert int(ready) > 0 and newly.strip() == "[]"
    else:
        assert newly.strip() != "[]"


# -- issue 47 item 6: no answer, log line or dead letter names a string a report supplied --------------
MARK = "zq7MARK"   # in every report-supplied string below; it must come back nowhere


def _broken_utf8(record: dict, field_text: str) -> bytes:
    """The single-report message of ``record`` with the last character of ``field_text`` (which it holds
    once) replaced by a byte that is not UTF-8: the same length, so the record still parses."""
    raw = single(record)
    at = raw.index(field_text.encode()) + len(field_text) - 1
    return raw[:at] + b"\xff" + raw[at + 1:]


def hostile() -> tuple:
    """``(records, raw single-report bodies)``: a report-supplied string holding :data:`MARK` in each field
    a sender controls, each record refused for its own reason or accepted as it is."""
    good = GOOD[0]
    records = [
        dict(good, collection=f"{MARK}-collection"),                           # unknown_collection
        dict(good, collection=f"{MARK} not a name!"),                          # unknown_collection
        dict(good, dimensions={f"{MARK}_dimension_name": "1"}),                # undeclared_dimension
        dict(good, dimensions={f"{MARK} not a name": "1"}),                    # undeclared_dimension
        dict(good, dimensions={"region": f"{MARK}-value-" + "v" * 80}),        # dimension_too_long
        dict(good, client=f"{MARK}-token-" + "t" * 200),                       # bad_field
        dict(good, dimensions={f"{MARK}_dimension_name": "1"}, bits=b"\0\0"),  # wrong_length first
        dict(good, dimensions={"region": f"{MARK}-ok"}, client=f"{MARK}-good-token"),   # accepted
    ]
    raw = [_broken_utf8(dict(good, collection=f"{MARK}-collQ"), f"{MARK}-collQ"),
           _broken_utf8(dict(good, dimensions={f"{MARK}_keyQ": "1"}), f"{MARK}_keyQ"),
           _broken_utf8(dict(good, client=f"{MARK}-tokenQ"), f"{MARK}-tokenQ")]
    return records, raw


def other_writer(records) -> bytes:
    """A container of ``records`` by another writer schema (one more field, holding :data:`MARK`): the
    record-by-record path of the screening."""
    schema = dict(schemas.load_schema("noisy_report"))
    schema["fields"] = list(schema["fields"]) + [{"name": "note", "type": "string", "default": ""}]
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [dict(r, note=f"{MARK}-note") for r in records],
                    codec="null")
    return buf.getvalue()


HOSTILE_REASONS = ["unknown_collection", "unknown_collection", "undeclared_dimension", "undeclared_dimension",
                   "dimension_too_long", "bad_field", "wrong_length"]


def test_no_answer_or_log_line_names_a_string_the_report_supplied(caplog):
    """Issue 47 item 6: a unique marker in every string a report supplies (its collection, a dimension's
    name and value, its client token, and the same as bytes that are not UTF-8), sent alone and in a
    container: every report is refused or accepted as the job would, and the marker is in no answer body
    and no log line (the undeclared dimension's name was echoed, and a collection name no config has)."""
    records, raw = hostile()

    async def go():
        async with Run() as c:
            answers = [await c.post(single(r), request_id=f"hostile-{i:04d}") for i, r in enumerate(records)]
            answers += [await c.post(b, request_id=f"hostile-raw-{i:04d}") for i, b in enumerate(raw)]
            answers.append(await c.post(container(records), request_id="hostile-batch"))
            answers.append(await c.post(other_writer(records), request_id="hostile-other-writer"))
            return answers
    caplog.set_level(logging.INFO)   # every logger (numba's compiler debug lines quote code, not reports)
    for name in ("ldp_marginals", "aiohttp", "kafka"):
        caplog.set_level(logging.DEBUG, logger=name)
    answers = run(go())
    reasons = [[r["reason"] for r in body.get("refused", [])] for _, body, _ in answers]
    assert reasons == [[r] for r in HOSTILE_REASONS] + [[]] + [["undecodable"]] * 3 + [HOSTILE_REASONS] * 2
    assert [s for s, _, _ in answers] == [400] * 7 + [200] + [400] * 3 + [200] * 2
    for status, body, headers in answers:
        assert MARK not in json.dumps(body) and MARK not in str(dict(headers)), body
    assert caplog.records and MARK not in caplog.text   # the collector's and aiohttp's lines, every level


def test_the_jobs_dead_letters_name_no_string_the_report_supplied(tmp_path):
    """The same hostile reports through the job (batch, the records reader): each is a dead letter with its
    reason and where it is, and the marker is in none of the written dead letters (the detail named the
    undeclared dimension, the row the collection no config has)."""
    import glob

    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

    from ldp_marginals.pipelines.job import JobOptions, build
    from ldp_marginals.transforms.sinks import FileSink
    records, _ = hostile()
    with BeamTestPipeline() as p:
        build(p, beam.Create(records[:-1] + GOOD[:200]), FileSink(str(tmp_path)), JobOptions(CONFIGS))
    dead = [r for path in glob.glob(str(tmp_path / "dead_letters" / "*.avro"))
            for r in schemas.read_avro(path, "dead_letter")]
    assert sorted(d["reason"] for d in dead) == sorted(HOSTILE_REASONS)
    assert dead and all(MARK not in schemas.to_json_line(d) for d in dead), [d for d in dead if MARK in str(d)]
    for path in glob.glob(str(tmp_path / "dead_letters" / "*.json*")):   # the JSON lines beside them, if any
        with open(path, "rb") as fh:
            assert MARK.encode() not in fh.read()
