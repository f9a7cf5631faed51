"""What the streaming tests on the local cluster share: a Kafka producer, report times in the past,
waiting on what the job wrote, and a job that runs until the test cancels it.

Why the past, and what a test may rely on (issue 49, item 8). Kafka IO's ``CreateTime`` policy
(Beam's ``CustomTimestampPolicyWithLimitedDelay``, max delay 0; the legacy reader the expansion
service runs) makes a partition's watermark ``min(now, the newest record time read)``, and moves a
partition that has read everything it holds (and at least one record) to the clock. So:

- reports stamped in the future close their windows as the clock passes them, whatever the job has
  read: a slow job or a slow producer then makes them late (the tests did that, and failed at load
  20); the clock caps the watermark, so no report can close a future window;
- reports stamped in the past (``past_start_ms``: an hour ago) move the watermark by data alone
  while the job has records to read, and to the clock (past every window) once it has read all. A
  report is late only if its partition held a report past its window's end plus the lateness before
  it (``in_window_order`` keeps each partition in window order), or if it was produced after the
  job had read everything and its window's lateness is over: both are the test's choice, never the
  machine's pace. A test produces the reports that must count before it submits the job (a
  partition the job catches up with while the producer still writes to it would jump to the
  clock), gives the windows that take reports produced later a lateness longer than the test can
  run (``LONG_LATENESS_S``), and closes a window of short lateness by the job having read all;
- a partition that has read no record holds the watermark at the start of time: a topic made with a
  ``held`` partition that no report goes to keeps every window open, on time, whatever the job has
  read and whenever the test produces, until ``close_windows`` sends that partition one message
  (the crash and upgrade tests, which produce while the job is down). While it holds, an output is
  no sign of what the job has read: the outputs of a bundle that a checkpoint finished wait in the
  operator's state for its next element or a rise of its watermark (test_flink_recovery's docstring),
  so such a test waits for the source's count of records read instead.

Waits have liveness bounds only (``wait_until`` returns as soon as its condition holds): a long
bound costs nothing when the machine is healthy, and no test asserts a pace."""
from __future__ import annotations

import contextlib
import os
import time

import pytest

from ldp_marginals import schemas
from ldp_marginals.pipelines.run import make_pipeline, prepare_outputs
from ldp_marginals.schemas.outputs import AVRO, SCHEMA_OF, file_stem, kind_dir, split_pane

HOUR_MS = 3_600_000
# A streaming job ends when the test cancels it: the in-process (LOOPBACK) SDK worker's gRPC threads
# then end with CANCELLED or "Multiplexer hanging up" (running_job waits for that, so it happens in the
# module that ran the job), which pytest reports as unhandled thread exceptions. Beam's threads, not ours.
# A batch job's too, when the job server closes the worker's environment between its tasks (a serial
# `make test` failed test_flink_batch on 'Exception in thread read_grpc_client_inputs', the job's rows right).
CANCELLED_WORKER_THREADS = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def produce(bootstrap: str, topic: str, messages, partitions: int = 2, create: bool = True,
            held: bool = False) -> None:
    """``(value, timestamp_ms)`` messages to ``topic`` (made with ``partitions`` partitions when
    ``create``, and one more, :data:`HELD`, when ``held``), message i to partition i % partitions, in
    the given order."""
    from kafka.admin import KafkaAdminClient, NewTopic
    if create:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(topic, num_partitions=partitions + held, replication_factor=1)])
        admin.close()
    _send(bootstrap, topic, [(value, ts, i % partitions) for i, (value, ts) in enumerate(messages)])


# The partition of a topic made with ``held``: no report goes there, so the watermark stays before every
# window (Kafka IO holds an empty partition's watermark at the start of time) until ``close_windows``
# sends it one message, a dead letter: then every window closes (see the module docstring).
HELD = 2
CLOSER = b"\x00\x01not avro: closes the windows"


def close_windows(bootstrap: str, topic: str, t0_ms: int) -> None:
    """Close every window of ``topic`` (made with ``held``): one undecodable message, stamped ``t0_ms``
    (in the past), to its held partition; once the job has read it, that partition has caught up and
    its watermark moves to the clock, past every window (one more ``undecodable`` dead letter)."""
    _send(bootstrap, topic, [(CLOSER, t0_ms, HELD)])


def _send(bootstrap: str, topic: str, messages) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=4 << 20)
    for value, ts, partition in messages:
        producer.send(topic, value=value, timestamp_ms=ts, partition=partition)
    producer.flush()
    producer.close()


def singles(records, default_ms: int | None = None) -> list:
    """One Kafka message per report, stamped with its event time (``default_ms`` for a report whose
    time is negative: a fault, which Kafka would stamp with the broker's clock)."""
    return [(schemas.encode_message("noisy_report", r), r["event_time"] if r["event_time"] >= 0 else default_ms)
            for r in records]


def rescale(records, origin_ms: int, t0_ms: int, window_s: int) -> list:
    """Reports of hourly windows from ``origin_ms`` moved onto ``window_s``-second windows from
    ``t0_ms``: each report keeps its window index and its place in it (ms are floored, so no report
    changes window). Reports with a negative time (the faults) stay as they are."""
    scale = HOUR_MS // (window_s * 1000)
    return [dict(r, event_time=t0_ms + (r["event_time"] - origin_ms) // scale) if r["event_time"] >= 0 else r
            for r in records]


def window_index(record, t0_ms: int, window_s: int) -> int:
    return (record["event_time"] - t0_ms) // (window_s * 1000)


# a day: longer than any test runs, so that a window of this lateness never closes by the clock while
# the test runs, and a report produced for it whenever the test gets to it is counted
LONG_LATENESS_S = 86_400
# how long a wait on the job may take before the test fails: a liveness bound, not a pace (the job
# submitted on a machine at load 20 took minutes; a healthy one takes seconds)
PATIENCE_S = 900


def past_start_ms(window_s: int, behind_s: float = 3600) -> int:
    """The first window start at least ``behind_s`` seconds before now: reports from there close their
    windows by data, not by the clock (see the module docstring)."""
    size = window_s * 1000
    return int((time.time() - behind_s) * 1000) // size * size


def in_window_order(messages: list, t0_ms: int, window_s: int) -> list:
    """``(value, timestamp_ms)`` messages in the order of their stamps' windows, the order within a
    window kept (shuffle before): produced in this order, each partition holds its messages in window
    order, so no report is late for a report read before it in its partition."""
    size = window_s * 1000
    return sorted(messages, key=lambda m: (m[1] - t0_ms) // size)


def wait_until(what: str, predicate, timeout_s: float = PATIENCE_S, poll_s: float = 0.5):
    """Poll ``predicate`` until it returns something true; fail the test naming ``what`` after
    ``timeout_s`` (a liveness bound: see the module docstring)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(poll_s)


def batch_of(tmp_path, records: list, name: str = "batch") -> tuple:
    """The DirectRunner batch job (config ``tmp_path/c.json``) on ``records``: ``(its output
    directory, its summary)``."""
    from ldp_marginals.pipelines.run import run
    schemas.write_avro(tmp_path / f"{name}.avro", "noisy_report", records)
    out = str(tmp_path / name)
    return out, run(["--config", str(tmp_path / "c.json"), "--input", str(tmp_path / f"{name}.avro"),
                     "--output", out, "--runner", "DirectRunner"])


# which pane a row came from: a stream's latest rows are its closing pane's, or an earlier pane's while a window
# still takes late reports (final false: the tests with a day's lateness), batch's its only pane's
PANE_OF_ROW = ("pane_index", "pane_timing", "final", "window_state")


def without_pane(row: dict) -> dict:
    """``row`` without the fields that say which pane it came from (its content kept)."""
    return {k: v for k, v in row.items() if k not in PANE_OF_ROW}


def assert_same_estimates(out: str, batch_out: str, every_kind: bool = True, collection: str | None = None) -> None:
    """Every estimate kind's latest panes under ``out`` are the batch rows under ``batch_out`` (but for
    which pane each came from, :func:`without_pane`): keys and counts exactly, floats to 1e-9; with ``every_kind``, every kind has rows; with
    ``collection``, that collection's rows only."""
    from ldp_marginals.pipelines.read import read_rows
    from ldp_marginals.schemas.outputs import ESTIMATE_KINDS
    from tests.cluster.test_flink_batch import split

    def rows(output, kind):
        return [without_pane(r) for r in read_rows(output, kind) if collection in (None, r["collection"])]
    compared = 0
    for kind in ESTIMATE_KINDS:
        keys_b, floats_b = split(rows(batch_out, kind))
        keys_s, floats_s = split(rows(out, kind))
        assert keys_s == keys_b and (keys_b or not every_kind), kind
        for a, b in zip(floats_s, floats_b):
            assert a == pytest.approx(b, rel=1e-9, abs=1e-12), kind
        compared += len(keys_b)
    assert compared


def reports_in_latest_panes(out: str) -> int:
    """The reports in the latest marginals pane of each window and key under ``out``."""
    import json

    from ldp_marginals.pipelines.read import read_rows
    from ldp_marginals.schemas.outputs import MARGINALS
    per_key = {(r["window_start"], json.dumps(r["dimensions"], sort_keys=True)): r["n_reports"]
               for r in read_rows(out, MARGINALS)}
    return sum(per_key.values())


def panes_of(output: str, kind: str, collection: str, window: tuple) -> dict:
    """``{stem without the pane: sorted pane indices}`` of the Avro files written for one kind,
    collection and window: one stem per capped key (empty: nothing written yet)."""
    prefix = file_stem(window, collection, 0).rpartition("_pane")[0]
    folder = kind_dir(output, kind)
    if not os.path.isdir(folder):
        return {}
    out = {}
    for name in os.listdir(folder):
        parts = split_pane(name)
        if parts and name.endswith(AVRO) and (parts[0] == prefix or parts[0].startswith(prefix + "_k")):
            out.setdefault(parts[0], []).append(parts[1])
    return {stem: sorted(panes) for stem, panes in out.items()}


def rows_of(output: str, kind: str, stem: str, pane: int) -> list:
    """The rows of one pane file (``stem`` from :func:`panes_of`)."""
    return schemas.read_avro(os.path.join(kind_dir(output, kind), f"{stem}_pane{pane:03d}{AVRO}"), SCHEMA_OF[kind])


@contextlib.contextmanager
def running_job(argv, cluster=None):
    """The job of ``ldp-marginals run argv`` submitted and left running -> its parsed arguments
    (``job_name``: its name on Flink); cancelled on leaving through Flink's REST API (Beam's cancel
    ends only the job server's wait: on a session ``cluster`` the job ran on; in the job server's own
    Flink it ran on too, with its in-process SDK worker threads, until the job server went), and
    waited for until Flink says it has ended."""
    pipeline, args, configs = make_pipeline(argv)
    prepare_outputs(args, configs)
    result = pipeline.run()
    try:
        yield args
    finally:
        with contextlib.suppress(Exception):   # a job server killed by the test cannot answer
            result.cancel()
        if cluster is not None and cluster.flink == "local" and cluster.pids.get("job_server"):
            cancel_embedded_job(cluster, args.job_name)
            worker_threads_ended()
        if cluster is not None and cluster.flink == "session":
            cluster.cancel_jobs()


# the in-process (LOOPBACK) SDK worker's threads of a job: they end, with a gRPC error, once the runner
# lets go of the cancelled job
WORKER_THREADS = ("run_worker_", "read_grpc_client_inputs", "read_state")


def worker_threads_ended(timeout_s: float = 60.0) -> None:
    """Wait until the in-process SDK worker's threads have ended (the module's test sees their errors,
    which its mark ignores, not whichever test runs next)."""
    import threading
    deadline = time.monotonic() + timeout_s
    while any(t.name.startswith(WORKER_THREADS) for t in threading.enumerate()):
        if time.monotonic() > deadline:
            pytest.fail(f"the SDK worker threads of a cancelled job still run {timeout_s:.0f} s after its cancel: "
                        + ", ".join(t.name for t in threading.enumerate() if t.name.startswith(WORKER_THREADS)))
        time.sleep(0.2)


def cancel_embedded_job(cluster, job_name: str) -> None:
    """Cancel the job named ``job_name`` in the job server's embedded Flink and wait for its end."""
    from ldp_marginals.pipelines.stopping import cancel_embedded, embedded_job, embedded_rests
    rest, job = embedded_job(embedded_rests(cluster.embedded_rest), job_name)
    if job is not None:
        cancel_embedded(rest, job)


def collect(bootstrap: str, topic: str, records: list, *, rate_per_s: float, max_seconds, max_reports: int = 500,
            max_lag_s: float = 5.0, devices: int = 200, seed: int = 0) -> list:
    """``records`` sent as collectors send them, in real time: devices report at ``rate_per_s`` in all
    (report i from device i % ``devices``), each stamping its report with its own clock, which runs
    behind the wall clock by a lag drawn once per device in [0, ``max_lag_s``]; every report goes to a
    collector, each a :class:`KafkaReportProducer` that sends a container when it holds
    ``max_reports`` reports or its oldest has waited its batching delay (``max_seconds``: one per
    collector). Collector j of n, of delay d, takes reports from ``j * d / n`` seconds on (round robin
    among those started), so the collectors' flushes are spread over their delays as independent
    collectors' are, not all at once. Returns the reports as sent (their event times set)."""
    import random

    from ldp_marginals.pipelines.produce import KafkaReportProducer
    rng = random.Random(seed)
    lag_ms = [int(rng.uniform(0, max_lag_s) * 1000) for _ in range(devices)]
    delays = list(max_seconds)
    producers = [KafkaReportProducer(bootstrap, topic, max_reports=max_reports, max_seconds=d) for d in delays]
    starts = [j * d / len(delays) for j, d in enumerate(delays)]
    sent = []
    start = time.time()
    try:
        for i, record in enumerate(records):
            due = start + i / rate_per_s
            pause = due - time.time()
            if pause > 0:
                time.sleep(pause)
            started = [p for p, s in zip(producers, starts) if s <= due - start]
            report = dict(record, event_time=int(time.time() * 1000) - lag_ms[i % devices])
            started[i % len(started)].send(report)
            sent.append(report)
    finally:
        for p in producers:
            p.close()
    return sent


def job_metrics(cluster, job_name: str) -> dict:
    """The job's counters as Flink's Prometheus reporter serves them (every process of ``cluster``,
    summed over subtasks) -> ``{counter name as Beam knows it: total}``; Flink exports a counter
    ``ldp_marginals/reports.valid`` as ``flink_taskmanager_job_task_operator_ldp_marginals_reports_valid``."""
    import re

    from deploy.local.cluster import JOB_METRIC_PREFIX as prefix
    label = 'job_name="' + re.sub(r"[^a-zA-Z0-9:_]", "_", job_name) + '"'
    totals = {}
    for text in cluster.scrape().values():
        for line in text.splitlines():
            if line.startswith(prefix) and label in line:
                name = line[len(prefix):line.index("{")]
                totals[name] = totals.get(name, 0) + float(line.rsplit(" ", 1)[1])
    return totals
