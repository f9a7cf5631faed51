"""What the collector (:mod:`ldp_marginals.pipelines.collect`) checks before a report goes to Kafka,
without HTTP or Kafka: the sender's app key, the request's idempotency key, the bound on requests per
device token, and the reports themselves, screened by the job's own table
(:mod:`ldp_marginals.transforms.screening`), so that the collector accepts what the job counts and
refuses with the reason the job's dead letter would give.

Nothing here keeps or returns report content: a refusal says the report's index, its reason and a
detail that names lengths, types and the config's names, never bits, tokens, dimension values or
times.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import time
from typing import NamedTuple

from ldp_marginals import schemas
from ldp_marginals.pipelines.produce import Encoded
from ldp_marginals.schemas.dead_letters import BAD_TIMESTAMP, DAMAGED_BLOCK, REASONS, UNDECODABLE
from ldp_marginals.transforms.avro_blocks import iter_report_batches
from ldp_marginals.transforms.avro_container import MAGIC, Damage
from ldp_marginals.transforms.avro_kernels import CLIENT_LEN, CLIENT_OFF, EVENT_MS, RECORD_END, RECORD_START
from ldp_marginals.transforms.avro_messages import decode_messages
from ldp_marginals.transforms.screening import Fault, screen_record, screen_rows

KEYS_ENV = "LDP_COLLECTOR_KEYS"   # the app keys, when no --keys file is given
MIN_KEY_CHARS = 32                # an app key: at least 32 characters (e.g. 32 hex digits = 128 bits)
IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9._:-]{8,128}")
APP_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class AppKeys:
    """Per-app keys: ``{app name: key}``, kept only as SHA-256 digests (a key is never logged, printed
    or kept in clear after loading). A request names its app by its key alone
    (``Authorization: Bearer <key>``): :meth:`app_of` looks the digest up."""

    def __init__(self, keys: dict):
        if not keys:
            raise ValueError("keys must name at least one app, got none (--keys FILE or $" + KEYS_ENV + ")")
        self._apps = {}
        for app, key in keys.items():
            if not APP_NAME.fullmatch(app):
                raise ValueError(f"an app name is 1-64 of [A-Za-z0-9._-], got app={app!r}")
            if len(key) < MIN_KEY_CHARS or not key.isprintable() or " " in key:
                raise ValueError(f"the key of app {app!r} must be at least {MIN_KEY_CHARS} printable characters "
                                 f"without spaces, got one of {len(key)} characters")   # never the key itself
            digest = _digest(key)
            if digest in self._apps:
                raise ValueError(f"apps {self._apps[digest]!r} and {app!r} have the same key")
            self._apps[digest] = app

    @property
    def apps(self) -> list:
        return sorted(self._apps.values())

    def app_of(self, authorization: str | None) -> str | None:
        """The app whose key the ``Authorization`` header carries (``Bearer <key>``), or None."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        return self._apps.get(_digest(authorization[len("Bearer "):].strip()))

    @classmethod
    def parse(cls, text: str, where: str) -> AppKeys:
        """``app=key`` pairs, one per line or separated by commas; ``#`` starts a comment."""
        keys = {}
        entries = [e for line in text.splitlines() for e in line.split("#", 1)[0].split(",")]
        for n, line in enumerate(entries, 1):
            line = line.strip()
            if not line:
                continue
            app, eq, key = line.partition("=")
            if not eq:
                raise ValueError(f"{where}: entry {n} is not app=key")   # the entry may hold a key: not quoted
            if app.strip() in keys:
                raise ValueError(f"{where}: app {app.strip()!r} is named twice")
            keys[app.strip()] = key.strip()
        return cls(keys)

    @classmethod
    def load(cls, path: str | None) -> AppKeys:
        """From the file ``path`` (readable by the collector's user alone, as a key file should be), or
        from the environment variable :data:`KEYS_ENV` when ``path`` is None."""
        if path is None:
            text = os.environ.get(KEYS_ENV)
            if not text:
                raise ValueError(f"--keys is not given and ${KEYS_ENV} is empty: the collector needs app keys")
            return cls.parse(text, f"${KEYS_ENV}")
        with open(path, encoding="utf-8") as fh:
            return cls.parse(fh.read(), f"--keys {path}")


def check_idempotency_key(value: str | None) -> str | None:
    """The request's ``Idempotency-Key`` if well formed (8-128 of ``[A-Za-z0-9._:-]``; a UUID is),
    else None."""
    return value if value is not None and IDEMPOTENCY_KEY.fullmatch(value) else None


class TokenRate:
    """Requests per device token (the reports' ``client`` field), a token bucket each: ``burst``
    requests at once, then ``per_minute`` a minute (the collector charges a request's first attempt,
    not its retries under the same ``Idempotency-Key``). A request takes one from the bucket of every
    token it carries, or none if any of them is empty. Buckets that have refilled are dropped every
    minute, so memory follows the tokens active in the last ``burst / per_minute`` minutes."""

    def __init__(self, per_minute: float, burst: int, clock=time.monotonic):
        if not per_minute > 0:
            raise ValueError(f"per_minute must be > 0, got per_minute={per_minute!r}")
        if not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be an integer >= 1, got burst={burst!r}")
        self.rate = per_minute / 60.0
        self.burst = burst
        self.clock = clock
        self._buckets = {}   # token -> (tokens left, when)
        self._swept = clock()

    def __len__(self) -> int:
        return len(self._buckets)

    def _level(self, token: str, now: float) -> float:
        left, when = self._buckets.get(token, (self.burst, now))
        return min(self.burst, left + (now - when) * self.rate)

    def take(self, tokens) -> float:
        """Take one request from each of ``tokens``' buckets -> 0.0; or, when one is empty, take
        nothing and return the seconds until it has one."""
        now = self.clock()
        if now - self._swept >= 60:
            self._sweep(now)
        levels = {t: self._level(t, now) for t in tokens}
        short = [level for level in levels.values() if level < 1]
        if short:
            return (1 - min(short)) / self.rate
        for token, level in levels.items():
            self._buckets[token] = (level - 1, now)
        return 0.0

    def _sweep(self, now: float) -> None:
        self._buckets = {t: v for t, v in self._buckets.items() if v[0] + (now - v[1]) * self.rate < self.burst}
        self._swept = now


class Refusal(NamedTuple):
    """A report the collector will not send: its index in the request (None: the whole body) and why."""

    index: int | None
    reason: str
    detail: str

    def public(self) -> dict:
        # the table's details name lengths, types and config names only, but the timestamp's quotes the
        # report's time: the collector answers with the reason's meaning instead
        detail = REASONS[BAD_TIMESTAMP] if self.reason == BAD_TIMESTAMP else self.detail
        return {"index": self.index, "reason": self.reason, "detail": detail}


def screen_body(body: bytes, configs: dict) -> tuple:
    """A request's body -> ``(reports, refusals)``: the reports that pass the job's checks
    (:class:`~ldp_marginals.pipelines.produce.Encoded`, in the body's order) and a :class:`Refusal` for every other one. The body is one report's Avro
    bytes (docs/client.md, section 3) or an Avro object container of reports (a batch); a container
    with a damaged byte range is refused whole (``damaged_block``: which reports it held is unknown)."""
    if body[:4] == MAGIC:
        return _screen_container(body, configs)
    return screen_singles([body], configs)[0]


def screen_singles(bodies: list, configs: dict) -> list:
    """Single-report bodies (of many requests) screened together, as the job screens a batch of
    messages: one compiled decode and one vectorized screen for all -> ``(reports, refusals)`` per
    body, each of index 0."""
    out = [([], []) for _ in bodies]
    block, failed = decode_messages(list(bodies), list(range(len(bodies))))
    if block is not None:
        for row, got in _screen_block(block, configs):
            i = block.labels[row]
            if isinstance(got, Refusal):
                out[i][1].append(got._replace(index=0))
            else:
                out[i][0].append(got)
    for i, body, _ in failed:
        try:
            record = schemas.decode_message("noisy_report", body)
        except Exception as err:  # noqa: BLE001 - named by type only: its message may quote the bytes
            out[i][1].append(Refusal(0, UNDECODABLE, f"a body of {len(body):,} bytes is not a NoisyReport "
                                                     f"({type(err).__name__})"))
            continue
        out[i] = _screen_records([record], configs, 0)
    return out


def _screen_block(block, configs: dict) -> list:
    """``(row, Encoded report or Refusal)`` for every row of a decoded block, in row order; a passing
    report keeps its bytes as the client wrote them."""
    got, raw, make = [], None, tuple.__new__   # tuple.__new__: a NamedTuple without its __new__'s call
    for item in screen_rows(block, configs):
        if isinstance(item, Fault):
            got.append((item.row, Refusal(item.row, item.reason, item.detail)))
            continue
        rows = item.rows[item.passed]
        if not len(rows):
            continue
        if raw is None:
            raw = bytes(block.buf)   # one copy; a report's bytes are then slices of it
        f = block.fields[rows]
        columns = (f[:, c].tolist() for c in (RECORD_START, RECORD_END, EVENT_MS, CLIENT_OFF, CLIENT_LEN))
        got.extend((row, make(Encoded, (raw[a:b], ms, None if off < 0 else raw[off:off + n].decode("utf-8"))))
                   for row, a, b, ms, off, n in zip(rows.tolist(), *columns))
    got.sort(key=lambda pair: pair[0])
    return got


def _screen_records(records: list, configs: dict, first: int) -> tuple:
    reports, refusals = [], []
    for i, record in enumerate(records):
        if isinstance(record, Exception):
            refusals.append(Refusal(first + i, UNDECODABLE, str(record)))
            continue
        _, reason, detail = screen_record(record, configs)
        if reason:
            refusals.append(Refusal(first + i, reason, detail))
        else:
            record = schemas.normalize("noisy_report", record)
            reports.append(Encoded(schemas.encode_message("noisy_report", record), record["event_time"],
                                   record.get("client")))
    return reports, refusals


def _screen_container(body: bytes, configs: dict) -> tuple:
    reports, refusals, first = [], [], 0
    for item in iter_report_batches(io.BytesIO(body)):
        if isinstance(item, Damage):
            return [], [Refusal(None, DAMAGED_BLOCK, f"the container is damaged from byte {item.start:,} "
                                                     f"({item.why})")]
        if item.records is not None:   # another writer schema: record by record
            records = []
            for i in range(len(item)):
                try:
                    records.append(item.record(i))
                except UnicodeDecodeError:
                    records.append(ValueError(item.fault(i) or "a string is not UTF-8"))
            got, refused = _screen_records(records, configs, first)
        else:
            got, refused = [], []
            for row, one in _screen_block(item, configs):
                if isinstance(one, Refusal):
                    refused.append(one._replace(index=first + row))
                else:
                    got.append(one)
        reports += got
        refusals += refused
        first += len(item)
    return reports, refusals
