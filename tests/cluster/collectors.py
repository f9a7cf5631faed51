"""What the collector's broker tests, its end-to-end test and its benchmark share: the command
``ldp-marginals collect`` started as an operator starts it (its keys in a file), a client that posts
and retries as docs/collector.md tells apps to, and the topic read back."""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

from deploy.local.cluster import free_port

KEY = "bench-" + "5f1d0c3a9e7b42d8" * 2   # the tests' app key (a file's content, never an argument)


def write_keys(folder: str) -> str:
    path = os.path.join(folder, "collector.keys")
    with open(path, "w") as fh:
        fh.write(f"# app=key, one a line\ntests={KEY}\n")
    os.chmod(path, 0o600)
    return path


class Process:
    """A running collector: its URL and its process."""

    def __init__(self, proc: subprocess.Popen, url: str, log: str):
        self.proc, self.url, self.log = proc, url, log

    def output(self) -> str:
        with open(self.log) as fh:
            return fh.read()


def start(config: str, bootstrap: str, topic: str, folder: str, *args: str, port: int | None = None) -> Process:
    """``ldp-marginals collect`` in a process of its own; returns once it answers ``/healthz``."""
    port = port or free_port()
    log = os.path.join(folder, f"collector-{port}-{time.time_ns()}.log")
    cmd = [sys.executable, "-m", "ldp_marginals.pipelines.cli", "collect", "--config", config, "--kafka", bootstrap,
           "--topic", topic, "--port", str(port), "--keys", write_keys(folder), *args]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    c = Process(proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(c.url + "/healthz", timeout=2):
                return c
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(c)
                raise RuntimeError(f"the collector did not start: {c.output()[-2000:]}") from None
            time.sleep(0.2)


def stop(c: Process, timeout_s: float = 60) -> int:
    """SIGTERM (as an orchestrator stops it), then wait; its exit code."""
    if c.proc.poll() is None:
        c.proc.send_signal(signal.SIGTERM)
        try:
            c.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait()
    return c.proc.returncode


@contextlib.contextmanager
def running(config: str, bootstrap: str, topic: str, folder: str, *args: str):
    c = start(config, bootstrap, topic, folder, *args)
    try:
        yield c
    finally:
        stop(c)


def post(url: str, body: bytes, request_id: str, key: str = KEY, timeout_s: float = 30) -> tuple:
    """One POST -> ``(status, JSON answer)``; ``(None, reason)`` when no answer came."""
    req = urllib.request.Request(url + "/v1/reports", data=body, method="POST", headers={
        "Authorization": f"Bearer {key}", "Idempotency-Key": request_id, "Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")
    except OSError as err:
        return None, type(err).__name__


def post_until_accepted(url_of, body: bytes, deadline_s: float = 180, request_id: str | None = None) -> tuple:
    """What a device does: POST with one Idempotency-Key, and on a 503, a 429 or no answer, the same
    request again after a pause, until a 200 -> ``(answer, attempts)``. ``url_of()`` gives the URL
    (a collector restarted between attempts may have a new one)."""
    request_id = request_id or str(uuid.uuid4())
    deadline, attempts = time.monotonic() + deadline_s, 0
    while True:
        attempts += 1
        status, answer = post(url_of(), body, request_id)
        if status == 200:
            return answer, attempts
        if status not in (None, 429, 503) or time.monotonic() > deadline:
            raise AssertionError(f"request {request_id}: {status} {answer} after {attempts} attempts")
        time.sleep(0.5)


def read_topic(bootstrap: str, topic: str, timeout_s: float = 60) -> list:
    """Every record of ``topic`` -> ``(its reports as dicts, its headers)``, in partition order."""
    import fastavro
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        out, deadline = [], time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} took over {timeout_s} s")
            for batch in consumer.poll(timeout_ms=500).values():
                out += [(list(fastavro.reader(io.BytesIO(m.value))), dict(m.headers or ())) for m in batch]
        return out
    finally:
        consumer.close()


def identity(report: dict) -> tuple:
    """What tells two reports apart in the tests (each test report has its own event time and token)."""
    ms = report["event_time"]
    ms = ms if isinstance(ms, int) else int(ms.timestamp() * 1000)
    return report["collection"], ms, bytes(report["bits"]), report.get("client")
