"""Recovery on a Flink session cluster as deployed (a JobManager and two TaskManagers of one slot
each, of their own processes, and a pool of Python workers, one per TaskManager).

A crash: with checkpoints every second, a TaskManager (a process that runs half the job's operators
and holds their state) is killed mid-stream, once the job has read the stream's first part and a
checkpoint taken since has completed, and before the last reports were sent (they are sent while it
is down); a new TaskManager starts and the JobManager restarts
the job from its last complete checkpoint (the Kafka offsets and the panes step's state with it).
When every window has closed, the outputs equal the batch path's on every report sent: no report
lost, none counted twice, each dead letter once, and no pane file half-written or left over from
the timeline the crash cut off (the file writers take only checkpointed input: ``transforms.sinks``).

An upgrade: the job is stopped with a savepoint mid-stream and submitted again from it; the outputs
equal the batch path's. A config that would give the state another shape is refused before the job
is submitted, naming what changed.

Pace. The stream's watermark is Kafka IO's (``streams``): the topic has a held partition, empty, so
that no window closes, and no report is late, however fast or slow the job, the producer and the
restarts run, until the test sends that partition its one message once every report has been
produced (``streams.close_windows``): then every window closes. The reports are from an hour ago.
(Stamped 20 s ahead, with the watermark the clock, a run at load 20 timed out waiting 90 s for the
first window's on-time pane, and counted reports as late: the job read them after the clock had closed
their window.) What the job has read is Flink's count of the records its Kafka source emitted, not an
output: at a checkpoint, Beam's Flink runner finishes the open bundle of each operator and holds its
outputs in the operator's state until the operator's next element or the next rise of its watermark,
and the held partition keeps the watermark of the source subtask that reads it from rising, so the
last bundle's outputs (the damaged message's dead letter among them) stay there until the test sends
more. (Waiting for that dead letter instead, the upgrade test stalled whenever a checkpoint, not the
bundle's timer, finished that bundle: the job had read all 803 messages, checkpoints kept completing,
and the only dead letters out were the faults', written as the bundle ran.) The final pane then checks that
those held outputs were restored, from the checkpoint or the savepoint, once."""
import json
import os
import random

import pytest

from ldp_marginals.pipelines.run import make_pipeline
from ldp_marginals.pipelines.simulate import DEFAULT_START_MS
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.pipelines.read import read_rows
from ldp_marginals.schemas.outputs import DEAD_LETTERS, ESTIMATE_KINDS, MARGINALS, WITHHELD, kind_dir, split_pane
from tests.cluster import streams
from tests.cluster.test_kafka_streaming import STREAM, WINDOW_S, closed
from tests.pipelines.test_same_answers import container, reports

pytestmark = [pytest.mark.flink, pytest.mark.kafka, streams.CANCELLED_WORKER_THREADS]

CRASH = dict(STREAM, allowed_lateness_seconds=5)
# privacy.unit: device, one report per device and window in one key of the window: the reports' two
# regions share most of their devices, so the bound across a slice's keys binds
DEVICE = dict(CRASH, privacy={"unit": "device", "max_reports_per_device": 1, "max_keys_per_device": 1})


def window_of(i: int, t0: int) -> tuple:
    return t0 + i * WINDOW_S * 1000, t0 + (i + 1) * WINDOW_S * 1000


def pane_files(out: str) -> dict:
    """``{(kind, stem without the pane): sorted pane indices}`` of every Avro file written."""
    found = {}
    for kind in ESTIMATE_KINDS + (DEAD_LETTERS,):
        folder = kind_dir(out, kind)
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            parts = split_pane(name)
            if parts and name.endswith(".avro"):
                found.setdefault((kind, parts[0]), []).append(parts[1])
    return {k: sorted(v) for k, v in found.items()}


DAMAGED = [(b"\x00\x01not avro", 0)]


def start_stream(cluster, tmp_path, topic: str, seed: int, configs: tuple = (CRASH,)):
    """``topic``, empty (with a held partition: ``streams.close_windows``), and the job's arguments (one
    collection a config) -> ``(argv, output, begin)``. ``begin()``, called once the job runs: reports
    of a few 10 s windows from an hour ago, each collection's the same population, a window at a time,
    shuffled within each (in time order under privacy.unit: device); all but the second half of the
    last window's (returned, to be sent later) produced with one damaged message -> ``(t0, last window
    index, records, held back, messages produced)``."""
    (tmp_path / "c.json").write_text(json.dumps(list(configs)))
    streams.produce(cluster.bootstrap, topic, [], held=True)
    out = str(tmp_path / "stream")
    argv = ["--config", str(tmp_path / "c.json"), "--streaming", "--kafka-topic", topic,
            "--kafka-bootstrap", cluster.bootstrap, "--kafka-consumer-config", "auto.offset.reset=earliest",
            "--kafka-expansion-service", cluster.expansion_service, "--dead-letter-seconds", "1",
            # the windows close when the test says (streams): no batching delay to wait for
            "--watermark-delay-seconds", "0",
            "--output", out] + cluster.pipeline_args(checkpoint_ms=1000)
    return argv, out, lambda: _begin(cluster, topic, seed, configs)


def _begin(cluster, topic: str, seed: int, configs: tuple) -> tuple:
    t0 = streams.past_start_ms(WINDOW_S)
    population = reports(parse_config(CRASH))   # collection app, and the faults (one of them of no collection)
    records, in_time_order = [], set()
    for config in configs:
        own = population if config["collection"] == CRASH["collection"] else [
            dict(r, collection=config["collection"]) for r in population if r["collection"] == CRASH["collection"]]
        if "dimensions" not in config:   # the reports without the dimension of the config's key
            own = [dict(r, dimensions={k: v for k, v in r["dimensions"].items() if k != "region"}) for r in own]
        records += own
        if "privacy" in config:   # in time order: a device's choice is the batch path's when its slice's
            in_time_order.add(config["collection"])   # reports come before the slice's first release (docs/design.md)
    records = streams.rescale(records, DEFAULT_START_MS, t0, WINDOW_S)
    random.Random(seed).shuffle(records)
    last_window = max(streams.window_index(r, t0, WINDOW_S) for r in records if r["event_time"] >= 0)
    assert last_window >= 2, "the test needs a window still open after the first has closed"
    last = [i for i, r in enumerate(records) if r["event_time"] >= 0
            and streams.window_index(r, t0, WINDOW_S) == last_window]
    later_ids = set(last[len(last) // 2:])
    later = [r for i, r in enumerate(records) if i in later_ids]
    now = [r for i, r in enumerate(records) if i not in later_ids]
    # the windows in order, each window's reports shuffled (see the module docstring's "Pace")
    now.sort(key=lambda r: (streams.window_index(r, t0, WINDOW_S),
                            r["event_time"] if r["collection"] in in_time_order else 0))
    first = streams.singles(now[:800], default_ms=t0) + [
        (container(now[i:i + 300]), max(t0, min(r["event_time"] for r in now[i:i + 300])))
        for i in range(800, len(now), 300)] + [(value, t0) for value, _ in DAMAGED]
    streams.produce(cluster.bootstrap, topic, first, create=False)
    return t0, last_window, records, later, len(first)


def kafka_records_read(cluster, job: str) -> int:
    """The records ``job``'s Kafka source has emitted, over its subtasks (Flink's ``numRecordsOut`` of
    the source operator, from each TaskManager's Prometheus endpoint; since the job's last start; a
    TaskManager that does not answer yet counts none)."""
    import urllib.request
    total = 0.0
    for part in cluster.taskmanager_parts:
        try:
            with urllib.request.urlopen(f"http://localhost:{cluster.metrics_ports[part]}/metrics", timeout=10) as resp:
                text = resp.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("flink_taskmanager_job_task_operator_numRecordsOut{") and f'job_id="{job}"' in line \
                    and 'operator_name="Source:_ReadReports_ReadKafka' in line:
                total += float(line.rsplit(" ", 1)[1])
    return int(total)


def first_part(cluster, out: str, begin) -> tuple:
    """Wait for the submitted job on the session cluster, produce the stream's first part (``begin``),
    and wait until the job's Kafka source has read all of it and a checkpoint triggered after that has
    completed (two more complete: one at a time, so the second began after the read) -> ``(the job's
    Flink id, what begin returned, the checkpoints completed)``. That checkpoint holds the whole first
    part, read and processed (the module docstring says why not wait for an output). No window has
    closed: the held partition holds them open."""
    job = streams.wait_until("the job on the session cluster", cluster.running_jobs)[0]
    *begun, produced = begin()
    streams.wait_until(f"the job's read of the first part's {produced} messages",
                       lambda: kafka_records_read(cluster, job) >= produced)
    read = cluster.completed_checkpoints(job)
    checkpoints = streams.wait_until("a checkpoint begun after the read",
                                     lambda: (n := cluster.completed_checkpoints(job)) >= read + 2 and n)
    assert not streams.panes_of(out, MARGINALS, "app", window_of(0, begun[0])), "a window closed before the test said"
    return job, tuple(begun), checkpoints


def close_all_windows(cluster, topic: str, out: str, t0: int, last_window: int, collections: tuple = ("app",)) -> None:
    """Send the held partition its message and wait until every window has closed and both undecodable
    messages' dead letters are written."""
    streams.close_windows(cluster.bootstrap, topic, t0)
    for c in collections:
        for i in range(last_window + 1):
            streams.wait_until(f"the close of {c}'s window {i}", lambda i=i: closed(out, c, window_of(i, t0)))
    streams.wait_until("the undecodable messages' dead letters", lambda: sum(
        d["reports"] for d in read_rows(out, DEAD_LETTERS) if d["reason"] == "undecodable") >= len(DAMAGED) + 1)


def dead_letters_by_reason(output: str, keep=lambda collection: True) -> dict:
    """``{reason: reports}`` of the dead letters under ``output`` whose collection ``keep`` keeps."""
    by_reason = {}
    for d in read_rows(output, DEAD_LETTERS):
        if keep(d["collection"]):
            by_reason[d["reason"]] = by_reason.get(d["reason"], 0) + d["reports"]
    return by_reason


def assert_batch_rows_once(out: str, batch: str, collection: str = "app", others: tuple = ()) -> None:
    """The stream's latest panes of ``collection`` are the batch path's rows (``batch``: its output on
    the same reports), each dead letter but those of the ``others`` collections is there once, every
    file set's panes are 0..n-1 and no temporary file is left."""
    streams.assert_same_estimates(out, batch, collection=collection)
    by_reason = dead_letters_by_reason(out, lambda c: c not in others)
    assert by_reason.pop("undecodable") == len(DAMAGED) + 1   # and the held partition's message
    assert by_reason == dead_letters_by_reason(batch, lambda c: c not in others)
    # every file set's panes are 0..n-1: none of a rolled-back timeline, none written twice under two names
    for key, panes in pane_files(out).items():
        assert panes == list(range(len(panes))), key
    leftovers = [n for kind in os.listdir(out) if os.path.isdir(os.path.join(out, kind))
                 for n in os.listdir(os.path.join(out, kind)) if n.endswith(".tmp")]
    assert not leftovers


def crash_and_restore(cluster, tmp_path, topic: str, seed: int, configs: tuple) -> tuple:
    """The crash of the module docstring on ``topic`` -> ``(output, t0, records)`` once every window closed."""
    argv, out, begin = start_stream(cluster, tmp_path, topic, seed, configs)
    collections = tuple(c["collection"] for c in configs)
    with streams.running_job(argv, cluster):
        job, (t0, last_window, records, after), checkpoints = first_part(cluster, out, begin)
        for c in collections:
            assert not closed(out, c, window_of(last_window, t0)), f"{c}'s stream ended before the crash"
        cluster.kill("taskmanager")
        streams.produce(cluster.bootstrap, topic, streams.singles(after), create=False)   # while the job is down
        cluster.start_taskmanager()
        restored = streams.wait_until("the job's restart from a checkpoint",
                                      lambda: cluster.restored_checkpoint(job))
        assert not restored["is_savepoint"] and restored["id"] >= checkpoints
        close_all_windows(cluster, topic, out, t0, last_window, collections)
    return out, t0, records


# The crash of the two tests below is one: one job of two collections, the same population in each,
# app (CRASH) and devices (DEVICES); each test's assertions read its own collection's rows.
DEVICES = dict(DEVICE, collection="devices")


@pytest.fixture(scope="module")
def crashed(session_cluster, tmp_path_factory):
    """``(output, t0, records, the batch path's output on the records, its summary)`` of the crash."""
    tmp_path = tmp_path_factory.mktemp("crash")
    out, t0, records = crash_and_restore(session_cluster, tmp_path, "crash", seed=5, configs=(CRASH, DEVICES))
    return (out, t0, records) + streams.batch_of(tmp_path, records)


def test_a_killed_taskmanager_resumes_from_the_checkpoint_and_loses_and_repeats_nothing(crashed):
    out, _, _, batch, _ = crashed
    assert_batch_rows_once(out, batch, "app", others=("devices",))


def test_the_device_bound_holds_after_a_crash_and_restore(crashed):
    """The crash above under privacy.unit: device with a dimension (M = 1, K = 1: devices of up to 11
    reports a window, most in both regions, so both bounds bind): the collection devices. Streaming
    decides a slice's keys and reports when the slice's window closes, from the state the restore
    brought back plus what came after (docs/design.md section 3). So: (a) each window's published
    reports plus those held back, over its keys, are at most its devices, one report a device in one
    key; (b) over the windows they are the devices less at most the late dead letters (none lost, none
    counted twice across the restore), and the other dead letters are batch's; (c) a window with no
    late report has batch's rows exactly, every key."""
    out, t0, records, batch, expected = crashed
    mine = DEVICES["collection"]
    devices = {}   # window start -> the tokens of its valid reports
    for r in records:
        if r["event_time"] >= t0 and r["collection"] == mine and set(r["dimensions"]) == {"region"} \
                and len(r["bits"]) == 1 and r["client"] and len(r["client"]) < 100:
            devices.setdefault(t0 + streams.window_index(r, t0, WINDOW_S) * WINDOW_S * 1000, set()).add(r["client"])
    sent = sum(len(v) for v in devices.values())
    # both bind (app, of no privacy unit, has no such reports)
    assert expected["reports_over_device_bound"] > 0 and expected["reports_over_key_bound"] > 0
    published = {}   # window start -> reports published, over its keys
    for m in read_rows(out, MARGINALS):
        if m["collection"] == mine:
            published.setdefault(m["window_start"], {})[json.dumps(m["dimensions"], sort_keys=True)] = m["n_reports"]
    published = {w: sum(keys.values()) for w, keys in published.items()}
    held = {}   # window start -> reports held back or withheld for privacy (fewer than min_reports devices)
    for w in read_rows(out, WITHHELD):
        if w["cause"] == "privacy" and w["collection"] == mine:
            held[w["window_start"]] = held.get(w["window_start"], 0) + w["n_reports"]
    kept = {w: published.get(w, 0) + held.get(w, 0) for w in devices}
    dead, late_in = dead_letters_by_reason(out, lambda c: c == mine), {}
    for d in read_rows(out, DEAD_LETTERS):
        if d["reason"] == "late" and d["collection"] == mine:
            w = t0 + (d["event_time"] - t0) // (WINDOW_S * 1000) * WINDOW_S * 1000
            late_in[w] = late_in.get(w, 0) + d["reports"]
    late = dead.pop("late", 0)
    figures = dict(devices={w - t0: len(v) for w, v in devices.items()}, published={w - t0: n for w, n in
                   published.items()}, held={w - t0: n for w, n in held.items()}, late=late)
    assert all(kept[w] <= len(devices[w]) for w in devices), figures                       # (a)
    assert sent - late <= sum(kept.values()) <= sent, figures                                  # (b)
    assert dead == dead_letters_by_reason(batch, lambda c: c == mine), (dead, figures)
    whole = [w for w in devices if not late_in.get(w)]                                       # (c)
    assert whole, figures
    rows = {o: {w: sorted(json.dumps(streams.without_pane(r), sort_keys=True) for r in read_rows(o, MARGINALS)
                          if r["window_start"] == w and r["collection"] == mine) for w in whole} for o in (out, batch)}
    differ = {w - t0: sorted(set(rows[out][w]) ^ set(rows[batch][w])) for w in whole if rows[out][w] != rows[batch][w]}
    assert not differ, (figures, differ)
    print("device crash test:", figures, "windows equal to batch:", [w - t0 for w in whole])


def test_a_job_stopped_with_a_savepoint_resumes_from_it_and_a_new_state_shape_is_refused(session_cluster,
                                                                                          tmp_path):
    cluster = session_cluster
    argv, out, begin = start_stream(cluster, tmp_path, "upgrade", seed=6)
    with streams.running_job(argv, cluster):
        job, (t0, last_window, records, later), _ = first_part(cluster, out, begin)
        savepoint = cluster.stop_with_savepoint(job)
        streams.wait_until("the job's end", lambda: job not in cluster.running_jobs())
    assert not closed(out, "app", window_of(last_window, t0)), "the stream ended before the savepoint"
    streams.produce(cluster.bootstrap, "upgrade", streams.singles(later), create=False)   # while the job is down

    # a config whose state has another shape (one more order of counted sets) is refused at once
    changed = dict(CRASH, max_order=CRASH.get("max_order", 2) + 1)
    (tmp_path / "changed.json").write_text(json.dumps(changed))
    with pytest.raises(ValueError, match=r"collection 'app' cannot resume .*max_order changed"):
        make_pipeline(["--config", str(tmp_path / "changed.json")] + argv[2:] + [f"--savepoint_path={savepoint}"])

    with streams.running_job(argv + [f"--savepoint_path={savepoint}"], cluster):
        job = streams.wait_until("the resumed job", cluster.running_jobs)[0]
        restored = streams.wait_until("the resumed job's restore", lambda: cluster.restored_checkpoint(job))
        assert restored["is_savepoint"] and restored["external_path"].endswith(os.path.basename(savepoint))
        close_all_windows(cluster, "upgrade", out, t0, last_window)
    assert_batch_rows_once(out, streams.batch_of(tmp_path, records)[0])
