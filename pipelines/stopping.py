"""Stopping the job ``ldp-marginals run`` started, on Ctrl-C (SIGINT) or SIGTERM, on every runner.

While the command waits for its job, both signals raise :class:`StopRequested` in its main thread;
:func:`stop_job` then stops the job it started and says in one line what happened and how to resume:

- Flink with its REST address known (``--flink_master=HOST:PORT``, Beam's own option, which the job
  server receives too): the job, found by its name (``--job_name``, which the command sets to the
  run's id), is cancelled through Flink's REST API, or with ``--savepoint-on-stop`` cancelled right
  after a savepoint (:func:`savepoint_stop` says why not ``flink stop``). Resuming takes the savepoint, or after a cancellation the job's last
  retained checkpoint (Flink keeps it with ``execution.checkpointing.externalized-checkpoint-retention:
  RETAIN_ON_CANCELLATION``, as the local cluster and deploy/flink do): ``--savepoint_path=<it>``.
  Beam's own cancel cannot be used alone there: a job server submitting to a remote Flink cancels
  only its wait, and the job keeps running (and restarting, once the submitting process's LOOPBACK
  worker is gone).
- Flink inside Beam's job server (``--flink-master=[local]``) with its REST addresses given
  (``--flink-rest=HOST:FIRST-LAST``: each job there runs in a Flink of its own, which serves its REST
  API on the first free port of the range the job server's Flink configuration sets): the job, found
  by its name on those ports, is cancelled through that API. Beam's cancel alone is not enough there
  either: it ends the job server's wait, and the job ran on (seen: still RUNNING after Beam's job
  service said CANCELLED; with checkpoints, RESTARTING over and over once the submitting process had
  gone), holding the slots. Nothing there can be resumed (Beam 2.62's job server applies
  ``--savepoint_path`` only with a remote Flink).
- any other runner (the DirectRunner, Dataflow): Beam's cancel, and a wait until the runner says the
  job has ended. Nothing there can be resumed.

The run's streaming manifest records the stop (``stopped``: when, how, what to resume from), so a
later run into the same ``--output`` can name the command that resumes it
(:func:`ldp_marginals.pipelines.run.check_output_unused`).
"""
from __future__ import annotations

import contextlib
import json
import shlex
import signal
import sys
import threading
import time
import urllib.request

from ldp_marginals.schemas.outputs import MANIFEST_FILE

STOP_TIMEOUT_S = 120.0
ACTIVE_FLINK = ("CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "CANCELLING", "FAILING", "SUSPENDED",
                "RECONCILING")


class StopRequested(BaseException):
    """SIGINT or SIGTERM arrived while the command ran its job (a BaseException, like
    KeyboardInterrupt: no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class JobStopped(Exception):
    """The job was stopped on a signal; ``str()`` is the one line to print, ``exit_code`` 128 + signal."""

    def __init__(self, line: str, signum: int):
        super().__init__(line)
        self.exit_code = 128 + signum


@contextlib.contextmanager
def signals_stop():
    """SIGINT and SIGTERM raise :class:`StopRequested` inside the block (in the main thread only:
    elsewhere Python delivers no signal, and the block runs unchanged); the handlers before are
    restored after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        quiet_the_runner()   # from the signal on: the job's end is the command's one line to tell
        raise StopRequested(signum)

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def signals_ignored():
    """While the job is being stopped, further signals wait (a second Ctrl-C must not leave it half
    stopped); the stop is bounded by :data:`STOP_TIMEOUT_S`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)


def wait_for(result, done: threading.Event) -> None:
    """Wait for the job behind ``result`` in a thread of its own, so that the main thread, which
    signals interrupt, only waits on ``done``; re-raise what the job's wait raised."""
    failure = []

    def target():
        try:
            result.wait_until_finish()
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            failure.append(err)
        finally:
            done.set()

    threading.Thread(target=target, name="ldp-marginals-wait", daemon=True).start()
    while not done.wait(0.5):
        pass
    if failure:
        raise failure[0]


# -- Flink's REST API ------------------------------------------------------------------------------
def flink_rest(flink_master: str | None) -> str | None:
    """Flink's REST address from ``--flink_master`` (``host:port`` or a URL), None when it names none
    (``[auto]``, ``[local]``, unset)."""
    if not flink_master or flink_master.startswith("["):
        return None
    return flink_master if "://" in flink_master else f"http://{flink_master}"


def embedded_rests(spec: str | None) -> list:
    """The REST addresses ``--flink-rest`` names (``HOST:PORT`` or ``HOST:FIRST-LAST``) -> their URLs."""
    if not spec:
        return []
    host, _, ports = spec.rpartition(":")
    first, _, last = ports.partition("-")
    if not (host and first.isdigit() and (not last or last.isdigit()) and int(first) <= int(last or first) <= 65535):
        raise ValueError(f"--flink-rest must be HOST:PORT or HOST:FIRST-LAST, got --flink-rest={spec!r}")
    return [f"http://{host}:{port}" for port in range(int(first), int(last or first) + 1)]


def embedded_job(rests: list, name: str) -> tuple:
    """The Flink (of ``rests``, those that answer) that runs an active job named ``name`` -> ``(its REST
    URL, the job's id)``, or ``(None, None)``."""
    for rest in rests:
        try:
            job = flink_job(rest, name, timeout_s=0)
        except OSError:   # no Flink on that port (urllib's URLError is an OSError)
            continue
        if job is not None:
            return rest, job
    return None, None


def cancel_embedded(rest: str, job: str, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Cancel ``job`` in a job server's embedded Flink and wait until it has ended: that Flink goes
    with its job, so a REST API that no longer answers is an end too."""
    _call(rest, f"/jobs/{job}?mode=cancel", method="PATCH")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            state = _call(rest, f"/jobs/{job}")["state"]
        except OSError:
            return
        if state not in ACTIVE_FLINK:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"Flink job {job} is still {state} {timeout_s:.0f} s after it was stopped")
        time.sleep(0.5)


def _call(rest: str, path: str, body: dict | None = None, method: str | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(rest + path, data=data, headers={"Content-Type": "application/json"},
                                 method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def flink_job(rest: str, name: str, timeout_s: float = 60.0) -> str | None:
    """The id of the newest active Flink job named ``name`` (a job just submitted may take a while to
    appear); None when none appears within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = [j for j in _call(rest, "/jobs/overview")["jobs"] if j["name"] == name and j["state"] in ACTIVE_FLINK]
        if jobs:
            return max(jobs, key=lambda j: j["start-time"])["jid"]
        if time.monotonic() > deadline:
            return None
        time.sleep(0.5)


def _wait_ended(rest: str, job: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        state = _call(rest, f"/jobs/{job}")["state"]
        if state not in ACTIVE_FLINK:
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"Flink job {job} is still {state} {timeout_s:.0f} s after it was stopped")
        time.sleep(0.5)


def savepoint_stop(rest: str, job: str, timeout_s: float = STOP_TIMEOUT_S, target: str | None = None) -> str:
    """Take a savepoint of ``job`` and cancel it (into ``target``, or the cluster's
    ``state.savepoints.dir``) -> the savepoint's path.

    Not Flink's stop-with-savepoint (``flink stop``, ``/jobs/<id>/stop``): Flink stops a legacy source
    before it takes that savepoint, and Beam's source wrapper (Kafka IO runs in it) emits the final
    watermark as it stops, so the job's timers fire before the savepoint and the windows whose close
    comes first close in the saved state: reports of theirs that arrive after the resume are late
    (seen here: a window's 100 reports produced while the job was down, all dead-lettered). A
    savepoint taken while the job runs, then the cancel, saves the state the job had."""
    body = {"cancel-job": True, **({"target-directory": target} if target else {})}
    trigger = _call(rest, f"/jobs/{job}/savepoints", body)["request-id"]
    deadline = time.monotonic() + timeout_s
    while True:
        status = _call(rest, f"/jobs/{job}/savepoints/{trigger}")
        if status["status"]["id"] == "COMPLETED":
            op = status["operation"]
            if "failure-cause" in op:
                cause = op["failure-cause"]
                first = (cause.get("stack-trace") or "").strip().splitlines()[:1]
                raise RuntimeError(f"the savepoint of Flink job {job} failed: {first[0] if first else cause}")
            _wait_ended(rest, job, timeout_s)
            return op["location"]
        if time.monotonic() > deadline:
            raise TimeoutError(f"the savepoint of Flink job {job} did not complete within {timeout_s:.0f} s")
        time.sleep(0.5)


def cancel(rest: str, job: str, timeout_s: float = STOP_TIMEOUT_S) -> str | None:
    """Cancel ``job`` and wait for its end -> the path of its last completed checkpoint (retained on
    cancellation where Flink is configured so), or None."""
    _call(rest, f"/jobs/{job}?mode=cancel", method="PATCH")
    _wait_ended(rest, job, timeout_s)
    latest = _call(rest, f"/jobs/{job}/checkpoints").get("latest") or {}
    completed = latest.get("completed") or {}
    return completed.get("external_path")


# -- the stop ----------------------------------------------------------------------------------------
def _beam_cancel(result, timeout_s: float = STOP_TIMEOUT_S) -> str:
    """Beam's cancel, then a wait until the runner reports an end -> the last state seen."""
    from apache_beam.runners.runner import PipelineState
    with contextlib.suppress(Exception):
        result.cancel()
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        try:
            state = result.state
        except Exception:  # noqa: BLE001 - a job service that has let go of the job: it has ended
            return "ENDED"
        if PipelineState.is_terminal(state):
            return str(state)
        time.sleep(0.3)
    return str(state)


def _job_service(options) -> bool:
    """Whether the job was submitted to a job service (``--job_endpoint``: Beam's Flink job server), where
    Beam's cancel does not reach the Flink that runs the job."""
    from apache_beam.options.pipeline_options import PortableOptions
    return bool(options.view_as(PortableOptions).job_endpoint)


def quiet_the_runner() -> None:
    """The runner's own account of a stopped job's end (a cancelled job's "JobCancellationException", the
    in-process SDK worker's threads logging "Channel closed prematurely" as the signal unwinds the main
    thread, gRPC errors in its threads) is not news: the command's one line says what happened. From the
    signal on, logging is off and the threads' gRPC errors are dropped (once, however often called)."""
    import logging
    logging.disable(logging.CRITICAL)
    if not getattr(threading.excepthook, "quiet_lost_runner", False):
        threading.excepthook = _quiet_lost_runner(threading.excepthook)
    # Beam's SDK worker prints a failed instruction's traceback straight to stderr from its own thread
    # (sdk_worker._execute: "Channel closed prematurely", "Unknown process bundle instruction id" as the
    # cancelled job lets go of it), past logging: from the signal on, only the main thread writes there
    if not isinstance(sys.stderr, _MainThreadOnly):
        sys.stderr = _MainThreadOnly(sys.stderr)


class _MainThreadOnly:
    """A stream that passes on what the main thread writes and drops the other threads' writes."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        if threading.current_thread() is threading.main_thread():
            return self._stream.write(text)
        return len(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _quiet_lost_runner(hook):
    """``hook`` except for a gRPC error in a thread: the in-process (LOOPBACK) SDK worker's threads
    end with one (CANCELLED, "Runner closed connection") when the stopped job's runner lets go of them."""
    def quiet(args):
        if not type(args.exc_value).__module__.startswith("grpc"):
            hook(args)
    quiet.quiet_lost_runner = True
    return quiet


def resume_command(argv, savepoint: str) -> str:
    """``ldp-marginals run`` with ``argv`` (any ``--savepoint_path`` dropped) and ``savepoint``."""
    kept = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--savepoint_path":
            skip = True
            continue
        if arg.startswith("--savepoint_path="):
            continue
        kept.append(arg)
    return shlex.join(["ldp-marginals", "run", *kept, f"--savepoint_path={savepoint}"])


# what both the stop's line and a later run into the same --output say of a stop that kept nothing to resume
START_AFRESH = "start again into a new --output"


def record_stop(output_dir: str, run_id: str, stop: dict) -> None:
    """Add ``stop`` to the run's streaming manifest (a later run into ``output_dir`` reads it)."""
    from apache_beam.io.filesystems import FileSystems

    from ldp_marginals.transforms.manifest import write_json_atomic
    path = FileSystems.join(output_dir, MANIFEST_FILE)
    with contextlib.suppress(Exception):   # no manifest to add to: nothing to record
        with FileSystems.open(path) as fh:
            manifest = json.loads(fh.read())
        if manifest.get("run_id") == run_id:
            manifest["stopped"] = stop
            write_json_atomic(path, manifest)


def stop_job(result, args, options, argv, signum: int, job_name: str | None) -> JobStopped:
    """Stop the job behind ``result`` (None: the runner ran it inside ``pipeline.run()``, which the
    signal interrupted) as the module docstring says -> the :class:`JobStopped` to raise."""
    from apache_beam.options.pipeline_options import FlinkRunnerOptions
    quiet_the_runner()
    why = f"stopped by {signal.Signals(signum).name}"
    rest = flink_rest(options.view_as(FlinkRunnerOptions).flink_master)
    with signals_ignored():
        if result is None:
            if args.streaming:
                return JobStopped(f"{why}: interrupted while the job was being submitted; check with the runner's "
                                  "own tools that it does not run, then run the command again", signum)
            return JobStopped(f"{why}: the batch run, in this process, did not finish (run the same command "
                              "again)", signum)
        if args.detach:
            return JobStopped(f"{why}: the job was submitted with --detach and keeps running", signum)
        resume_from, how = None, "cancelled"
        job = flink_job(rest, job_name) if rest and job_name else None
        embedded, ejob = (None, None) if rest or not job_name else embedded_job(
            embedded_rests(getattr(args, "flink_rest", None)), job_name)
        if ejob is not None:
            _beam_cancel(result, timeout_s=30)   # the job server's wait first: its job service says CANCELLED
            cancel_embedded(embedded, ejob)
            what = f"Flink job {ejob} cancelled in the job server's Flink"
        elif job is not None:
            if args.savepoint_on_stop:
                resume_from, how = savepoint_stop(rest, job), "stopped with a savepoint"
            else:
                resume_from = cancel(rest, job)
            what = f"Flink job {job} {how}"
        elif rest and job_name:
            what = f"no running Flink job named {job_name} at {rest}: the job had ended"
        else:
            what = f"the job was cancelled ({_beam_cancel(result)})"
            if _job_service(options) and getattr(args, "flink_rest", None):
                what += (f" in Beam's job service; the job server's Flink at --flink-rest={args.flink_rest} ran no "
                         f"active job named {job_name}")
            elif _job_service(options):
                # Beam's cancel ends the job service's wait; a job server's own Flink keeps the job
                # until its workers are gone (seen RESTARTING a minute later with checkpoints)
                what += (" in Beam's job service only: the Flink behind the job server may still run it (give "
                         "--flink_master=HOST:REST_PORT, the REST address `make cluster-up` prints, or on its "
                         "FLINK=local --flink-rest=HOST:FIRST-LAST, the ports it prints, to stop it there)")
        if rest and job is not None:
            _beam_cancel(result, timeout_s=30)   # the job server's wait for the job ends too
    if resume_from:
        hint = None
    elif ejob is not None:
        hint = ("the job server's embedded Flink resumes nothing (Beam 2.62 applies --savepoint_path only to a remote "
                "Flink; `make cluster-up` without FLINK=local starts a session cluster, where a stopped job resumes)")
    elif job is not None:
        hint = "Flink kept no checkpoint of it (run with --checkpointing_interval=MS, or --savepoint-on-stop)"
    elif rest:
        hint = "no savepoint was taken"
    else:
        hint = ("this runner keeps no savepoint (on a Flink session cluster give --flink_master=HOST:REST_PORT "
                "with --checkpointing_interval=MS, so that run can stop it resumably)")
    # why_not: what a later run into this --output says of a stop with nothing to resume from (the same
    # words as this line: run.check_output_unused)
    stop = {"at": int(time.time() * 1000), "signal": signal.Signals(signum).name, "how": how,
            "resume_from": resume_from, "why_not": hint}
    if args.streaming:
        record_stop(args.output, args.run_id, stop)
    if not args.streaming:
        return JobStopped(f"{why}: {what}; the batch run did not finish (run the same command again)", signum)
    if resume_from:
        return JobStopped(f"{why}: {what}; resume it with: {resume_command(argv, resume_from)}", signum)
    return JobStopped(f"{why}: {what}; it cannot be resumed: {hint}; {START_AFRESH}", signum)
