"""``ldp-marginals collect``: the HTTP collector in front of Kafka (docs/collector.md).

Devices (the clients of ``clients/java`` and ``clients/typescript``) POST their reports to
``/v1/reports``: one report's Avro bytes, or an Avro object container of many (a batch). The collector
authenticates the app (``Authorization: Bearer <app key>``, :class:`~ldp_marginals.pipelines.admission.AppKeys`),
screens the reports with the job's own checks (:func:`~ldp_marginals.pipelines.admission.screen_body`),
bounds the requests per device token, and sends the reports that pass in Avro containers batched across
requests (:class:`~ldp_marginals.pipelines.ledger.AckingProducer`, the project's Kafka producer). It
answers 200 only once Kafka acknowledged every report of the request; if Kafka does not within
``--ack-seconds``, 503, and the client retries with the same ``Idempotency-Key``, which sends only
what Kafka does not hold yet (:mod:`ldp_marginals.pipelines.ledger`).

aiohttp serves HTTP on uvloop's event loop (the screening runs on it), and one thread hands reports
to the Kafka producer, whose send may block while the broker is away. Single-report requests are
screened together: those that arrive within ``--screen-seconds`` of the first (or until
``--screen-reports`` wait) in one call, since a call costs about as much for one report as for
fifty (:class:`Collector`). The decoding and screening
kernels are compiled before the collector serves (:func:`warm_up`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import time

from ldp_marginals.pipelines.admission import AppKeys, TokenRate, check_idempotency_key, screen_body, screen_singles
from ldp_marginals.pipelines.ledger import AckingProducer, Entry, Ledger, Submission, new_future, read_back
from ldp_marginals.pipelines.produce import DEFAULT_MAX_BYTES
from ldp_marginals.transforms.avro_container import MAGIC

log = logging.getLogger("ldp_marginals.collect")

PATH = "/v1/reports"
CONTENT_TYPES = ("application/octet-stream", "application/avro", "avro/binary", "application/vnd.apache.avro+binary")
MAX_LISTED = 100   # refusals listed in one answer (refused_count says how many in all)
DEFAULTS = dict(host="127.0.0.1", port=8088, max_body_bytes=1 << 20, ack_seconds=10.0, batch_reports=500,
                batch_seconds=0.01, token_per_minute=6.0, token_burst=20, dedupe_seconds=86_400.0,
                dedupe_entries=1_000_000, read_back_records=10_000, max_in_flight=500_000, backlog=4096,
                screen_seconds=0.005, screen_reports=256, max_requests=0)


class Counters:
    """What the collector has done, by outcome (``GET /metrics``): counts only, never content."""

    def __init__(self):
        self.values = {}

    def add(self, name: str, n: int = 1) -> None:
        self.values[name] = self.values.get(name, 0) + n

    def prometheus(self) -> str:
        lines = []
        for name, value in sorted(self.values.items()):
            metric, _, label = name.partition(":")
            lines.append(f'ldp_collector_{metric}{{{label}}} {value}' if label else f"ldp_collector_{metric} {value}")
        return "\n".join(lines) + "\n"


class Collector:
    """The request handling, given its parts (the tests give a producer over a stub broker).

    Single-report bodies wait up to ``screen_seconds`` after the first of them (or until
    ``screen_reports`` wait) and are screened in one call: a call's fixed cost (about 150-350 µs of
    Python and numpy on the benchmark's machine) is paid once for all of them. Screened at each pass
    of the event loop instead, single requests arriving one a pass at a moderate rate paid it each,
    and the collector's CPU per request at 80% of its maximum rate was 1.5 times that at the maximum,
    so it queued (issue 49, item 9). ``screen_seconds`` 0 screens at the next pass, as before.

    ``max_requests`` (0: no bound) bounds the new requests under way (screened, sent or waiting for
    Kafka): over it a new request is answered 503 ``overloaded`` with ``Retry-After`` at once, so a
    machine that cannot carry the load answers quickly and the devices retry later, instead of every
    request waiting longer and longer. A retry of a request under way or done is let through: it
    adds no work."""

    def __init__(self, configs: dict, keys: AppKeys, producer: AckingProducer, rate: TokenRate, ledger: Ledger,
                 ack_seconds: float, max_in_flight: int, screen_seconds: float = DEFAULTS["screen_seconds"],
                 screen_reports: int = DEFAULTS["screen_reports"], max_requests: int = DEFAULTS["max_requests"]):
        if not ack_seconds > 0:
            raise ValueError(f"ack_seconds must be > 0, got ack_seconds={ack_seconds!r}")
        if not 0 <= screen_seconds < float("inf"):
            raise ValueError(f"screen_seconds must be >= 0 and finite, got screen_seconds={screen_seconds!r}")
        if not isinstance(screen_reports, int) or screen_reports < 1:
            raise ValueError(f"screen_reports must be an integer >= 1, got screen_reports={screen_reports!r}")
        if not isinstance(max_requests, int) or max_requests < 0:
            raise ValueError(f"max_requests must be an integer >= 0, got max_requests={max_requests!r}")
        self.configs, self.keys, self.producer, self.rate, self.ledger = configs, keys, producer, rate, ledger
        self.ack_seconds, self.max_in_flight = ack_seconds, max_in_flight
        self.screen_seconds, self.screen_reports = screen_seconds, screen_reports
        self.max_requests = max_requests
        self.under_way = 0    # new requests from their screening to their answer
        self._screen_timer = None
        self.counters = Counters()
        self._sender = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ldp-collector-kafka")
        self._singles = []    # (body, future) of single-report requests waiting for their screening (one call)
        self._outbox = []     # submissions waiting for this loop pass's hand-over to the producer's thread

    async def _screen(self, body: bytes) -> tuple:
        """``(reports, refusals)`` of a body. Single-report bodies are screened together (one compiled
        decode and screen, as the job screens messages): those that arrive within ``screen_seconds`` of
        the first, at most ``screen_reports``."""
        if body[:4] == MAGIC:
            return screen_body(body, self.configs)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._singles.append((body, future))
        if len(self._singles) >= self.screen_reports:
            self._screen_singles()
        elif len(self._singles) == 1:
            self._screen_timer = (loop.call_later(self.screen_seconds, self._screen_singles) if self.screen_seconds
                                  else loop.call_soon(self._screen_singles))
        return await future

    def _screen_singles(self) -> None:
        if self._screen_timer is not None:
            self._screen_timer.cancel()
            self._screen_timer = None
        waiting, self._singles = self._singles, []
        self.counters.add("single_screenings_total")
        try:
            results = screen_singles([body for body, _ in waiting], self.configs)
        except Exception as err:  # noqa: BLE001 - a bug must not leave the requests hanging
            for _, future in waiting:
                future.set_exception(err)
            return
        for (_, future), result in zip(waiting, results):
            future.set_result(result)

    def _ship(self, submission: Submission) -> None:
        """Hand ``submission`` to the producer's thread, with the others of this loop pass."""
        self._outbox.append(submission)
        if len(self._outbox) == 1:
            asyncio.get_running_loop().call_soon(self._ship_all)

    def _ship_all(self) -> None:
        subs, self._outbox = self._outbox, []
        self._sender.submit(self._submit_all, subs)

    def _submit_all(self, subs: list) -> None:
        for sub in subs:
            try:
                self.producer.submit(sub)
            except Exception as err:  # noqa: BLE001 - those reports fail, their request answers 503
                sub.loop.call_soon_threadsafe(_fail, sub.entry.future, type(err).__name__)

    def close(self) -> None:
        self._sender.shutdown(wait=True)
        self.producer.close()

    def answer(self, status: int, body: dict, headers: dict | None = None):
        self.counters.add(f"requests_total:status=\"{status}\"")
        return status, body, headers or {}

    async def handle(self, headers, body: bytes):
        """``(status, JSON body, extra headers)`` for a POST of ``body``."""
        app = self.keys.app_of(headers.get("Authorization"))
        if app is None:
            return self.answer(401, {"error": "unauthorized", "detail": "an app key is needed: Authorization: "
                                     "Bearer <key>"}, {"WWW-Authenticate": 'Bearer realm="ldp-marginals"'})
        key = check_idempotency_key(headers.get("Idempotency-Key"))
        if key is None:
            return self.answer(400, {"error": "bad_idempotency_key", "detail": "Idempotency-Key must be 8-128 of "
                                     "[A-Za-z0-9._:-] (a UUID), one per request, the same on its retries"})
        ctype = headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype not in CONTENT_TYPES:
            return self.answer(415, {"error": "unsupported_media_type", "detail": "the body is Avro bytes: "
                                     f"Content-Type one of {list(CONTENT_TYPES)}"})
        if not body:
            return self.answer(400, {"error": "empty_body", "detail": "the body holds no report"})
        digest = hashlib.sha256(body).hexdigest()[:16]
        entry = self.ledger.get((app, key))
        if entry is not None:
            if entry.digest != digest:
                return self.answer(409, {"error": "idempotency_key_reused", "detail": "this Idempotency-Key came "
                                         "with another body: use a new key for new reports"})
            if entry.pending:
                return await self._wait(entry)
            if entry.complete:
                self.counters.add("replayed_total")
                return self.answer(200, dict(entry.answer or {"accepted": entry.total}, replayed=True))
        if self.max_requests and self.under_way >= self.max_requests:
            return self.answer(503, {"error": "overloaded", "detail": f"over {self.max_requests} requests under "
                                     "way: retry with the same Idempotency-Key"}, {"Retry-After": "1"})
        self.under_way += 1
        try:
            return await self._admit(app, key, digest, entry, body)
        finally:
            self.under_way -= 1

    async def _admit(self, app: str, key: str, digest: str, entry, body: bytes):
        """Screen ``body``, send what passes and wait for Kafka -> the answer."""
        reports, refusals = await self._screen(body)
        for r in refusals:
            self.counters.add(f"refused_total:reason=\"{r.reason}\"")
        listed = {"refused": [r.public() for r in refusals[:MAX_LISTED]], "refused_count": len(refusals)}
        if not reports:
            return self.answer(400, dict(listed, error="invalid_reports", accepted=0))
        tokens = {r.client for r in reports if r.client is not None}
        wait = self.rate.take(tokens) if tokens and entry is None else 0.0   # a retry is not a new request
        if wait:
            return self.answer(429, {"error": "rate_limited", "detail": f"over {self.rate.burst} requests at once "
                                     f"or {self.rate.rate * 60:g} a minute for a device token"},
                               {"Retry-After": str(max(1, round(wait)))})
        if self.producer.in_flight + len(reports) > self.max_in_flight:
            return self.answer(503, {"error": "overloaded", "detail": "too many reports waiting for Kafka"},
                               {"Retry-After": "1"})
        if entry is None or entry.total != len(reports):
            entry = self.ledger.add((app, key), Entry(digest, len(reports)))
        entry.answer = dict(listed, accepted=len(reports))
        missing = entry.missing()
        loop = asyncio.get_running_loop()
        submission = Submission(f"{app}/{key}", entry, missing, [reports[i] for i in missing], loop)
        new_future(entry, loop)
        self._ship(submission)
        return await self._wait(entry)

    async def _wait(self, entry: Entry):
        # the entry's future is shared by the request and its retries: each waits on a future of its own
        # (a waiter that goes away must not cancel it), settled by the entry's or by the timer
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()

        def settled(future):
            if not waiter.done():
                waiter.set_result("cancelled" if future.cancelled() else future.result())

        entry.future.add_done_callback(settled)
        timer = loop.call_later(self.ack_seconds, _fail, waiter, "timeout")
        try:
            failed = await waiter
        finally:
            timer.cancel()
            entry.future.remove_done_callback(settled)
        if failed is None and entry.complete:
            self.counters.add("accepted_reports_total", entry.total)
            return self.answer(200, entry.answer)
        self.counters.add(f"kafka_failures_total:error=\"{failed}\"")
        return self.answer(503, {"error": "kafka_unavailable", "detail": "Kafka has not acknowledged the reports: "
                                 "retry with the same Idempotency-Key"}, {"Retry-After": "1"})


def _fail(future, error: str) -> None:
    if not future.done():
        future.set_result(error)


def make_app(collector: Collector, max_body_bytes: int):
    """The aiohttp application: ``POST /v1/reports``, ``GET /healthz``, ``GET /metrics``."""
    from aiohttp import web

    async def reports(request):
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            collector.counters.add('requests_total:status="413"')
            return web.json_response({"error": "body_too_large", "detail": f"at most {max_body_bytes:,} bytes a "
                                      "request: send smaller batches"}, status=413)
        status, payload, headers = await collector.handle(request.headers, body)
        return web.json_response(payload, status=status, headers=headers)

    async def healthz(request):
        return web.json_response({"ok": True, "in_flight": collector.producer.in_flight})

    async def metrics(request):
        counters = collector.counters.prometheus()
        gauges = (f"ldp_collector_in_flight_reports {collector.producer.in_flight}\n"
                  f"ldp_collector_requests_under_way {collector.under_way}\n"
                  f"ldp_collector_ledger_entries {len(collector.ledger)}\n"
                  f"ldp_collector_rate_tokens {len(collector.rate)}\n")
        return web.Response(text=counters + gauges, content_type="text/plain")

    app = web.Application(client_max_size=max_body_bytes)
    app.router.add_post(PATH, reports)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app


def add_collect_arguments(parser) -> None:
    d = DEFAULTS
    parser.add_argument("--config", required=True, help="the job's collection configs (the reports are screened "
                                                        "with the job's own checks)")
    parser.add_argument("--kafka", required=True, help="Kafka bootstrap servers (host:port)")
    parser.add_argument("--topic", required=True, help="the topic the job reads (--kafka-topic of run)")
    parser.add_argument("--host", default=d["host"], help="the address to serve on (default %(default)s: this "
                                                           "machine only; a TLS proxy in front serves devices)")
    parser.add_argument("--port", type=int, default=d["port"], help="the port (default %(default)s)")
    parser.add_argument("--backlog", type=int, default=d["backlog"],
                        help="connections waiting to be accepted (the kernel caps it at net.core.somaxconn; default "
                             "%(default)s: thousands of devices connecting at once)")
    parser.add_argument("--keys", help="a file of app=key lines (keys of at least 32 characters); default: the "
                                       "environment variable LDP_COLLECTOR_KEYS")
    parser.add_argument("--max-body-bytes", type=int, default=d["max_body_bytes"],
                        help="a request's body at most (413 over it; default %(default)s)")
    parser.add_argument("--ack-seconds", type=float, default=d["ack_seconds"],
                        help="how long a request waits for Kafka's acknowledgement before its 503 (default %(default)s)")
    parser.add_argument("--batch-reports", type=int, default=d["batch_reports"],
                        help="reports per Avro container at most (default %(default)s)")
    parser.add_argument("--batch-seconds", type=float, default=d["batch_seconds"],
                        help="a container leaves when its oldest report has waited this long (default %(default)s)")
    parser.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_BYTES,
                        help="the topic's max.message.bytes (default %(default)s)")
    parser.add_argument("--token-per-minute", type=float, default=d["token_per_minute"],
                        help="requests a minute per device token, after the burst (default %(default)s)")
    parser.add_argument("--token-burst", type=int, default=d["token_burst"],
                        help="requests at once per device token (default %(default)s)")
    parser.add_argument("--dedupe-seconds", type=float, default=d["dedupe_seconds"],
                        help="how long a request's Idempotency-Key is remembered (default %(default)s)")
    parser.add_argument("--dedupe-entries", type=int, default=d["dedupe_entries"],
                        help="requests remembered at most (default %(default)s)")
    parser.add_argument("--read-back-records", type=int, default=d["read_back_records"],
                        help="Kafka records per partition read back at start to remember the requests they hold "
                             "(0: none; default %(default)s)")
    parser.add_argument("--max-in-flight", type=int, default=d["max_in_flight"],
                        help="reports waiting for Kafka at most (503 over it; default %(default)s)")
    parser.add_argument("--max-requests", type=int, default=d["max_requests"],
                        help="new requests under way at most (503 overloaded over it, at once; 0: no bound; "
                             "default %(default)s)")
    parser.add_argument("--screen-seconds", type=float, default=d["screen_seconds"],
                        help="single-report requests arriving within this of the first are screened in one call "
                             "(0: those of one pass of the event loop; default %(default)s)")
    parser.add_argument("--screen-reports", type=int, default=d["screen_reports"],
                        help="single-report requests screened in one call at most (default %(default)s)")


def build(args) -> tuple:
    """``(collector, app)`` from the command's arguments (the keys loaded, the ledger read back)."""
    from ldp_marginals.schemas.config import load_configs
    configs = load_configs(args.config)
    keys = AppKeys.load(args.keys)
    for name in ("max_body_bytes", "port"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.read_back_records < 0:
        raise ValueError(f"--read-back-records must be >= 0, got {args.read_back_records}")
    ledger = Ledger(args.dedupe_seconds, args.dedupe_entries)
    if args.read_back_records:
        found = read_back(args.kafka, args.topic, args.read_back_records, ledger)
        log.info("read back %d requests from the last %d records of each partition of %s", found,
                 args.read_back_records, args.topic)
    producer = AckingProducer(args.kafka, args.topic, max_reports=args.batch_reports, max_seconds=args.batch_seconds,
                              max_message_bytes=args.max_message_bytes, acks="all", enable_idempotence=True,
                              delivery_timeout_ms=120_000, max_block_ms=60_000)
    collector = Collector(configs, keys, producer, TokenRate(args.token_per_minute, args.token_burst), ledger,
                          args.ack_seconds, args.max_in_flight, args.screen_seconds, args.screen_reports, args.max_requests)
    warm_up(configs)
    return collector, make_app(collector, args.max_body_bytes)


def warm_up(configs: dict) -> None:
    """Screen made-up reports of each collection, single and in a container, before serving: the first
    screening compiles the decoding and screening kernels (numba), which took seconds on a busy machine
    and held the first requests that long. Two of each: the kernels' arrays of one row are compiled
    for another memory layout than those of more."""
    from ldp_marginals import schemas
    from ldp_marginals.pipelines.produce import Encoded, encode_container
    now = int(time.time() * 1000)
    for name, config in configs.items():
        singles = [schemas.encode_message("noisy_report", {
            "collection": name, "event_time": now + i, "bits": bytes((config.layout.n_bits + 7) // 8),
            "dimensions": {}, "client": "warm-up"}) for i in range(2)]
        screen_singles(singles, configs)
        screen_body(encode_container([Encoded(body, now) for body in singles], codec="null"), configs)


def event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop (libuv; the collect extra installs it), else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def main(args) -> None:
    """Serve until SIGINT or SIGTERM; then answer the requests under way, send what is held, and stop."""
    from aiohttp import web
    from ldp_marginals.pipelines.cli import log_level
    # the collector's own lines (ldp_marginals.collect) at INFO; kafka-python's only with -v (cli.set_verbosity)
    logging.basicConfig(level=log_level(args), format="%(asctime)s %(name)s %(message)s")
    log.setLevel(logging.INFO)
    collector, app = build(args)

    async def closing(_app):
        await asyncio.get_running_loop().run_in_executor(None, collector.close)

    app.on_cleanup.append(closing)
    started = time.time()
    print(f"collecting for apps {', '.join(collector.keys.apps)} on http://{args.host}:{args.port}{PATH} "
          f"into {args.topic} at {args.kafka}", flush=True)
    web.run_app(app, host=args.host, port=args.port, access_log=None, print=None, backlog=args.backlog,
                shutdown_timeout=args.ack_seconds + 1, loop=event_loop())
    print(f"collector stopped after {time.time() - started:.0f} s: " +
          ", ".join(f"{k} {v:,}" for k, v in sorted(collector.counters.values.items())), flush=True)
