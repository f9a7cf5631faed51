"""The watermark delay (issue 36, item 2) with TestStream, and the parts of a stop (item 4) and of a
refused rerun (item 3) that need no cluster: a signal raises in the command's main thread, the resume
command, a used ``--output``, and SIGTERM on a batch run of the DirectRunner (a real process). The
stops on Flink are tested on the local clusters (``tests/cluster/test_stop_and_resume.py``)."""
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
from apache_beam.testing import test_stream

from ldp_marginals import schemas
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.pipelines.run import check_output_unused
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.pipelines.stopping import (StopRequested, cancel_embedded, embedded_job, embedded_rests, flink_rest,
                                              resume_command, signals_stop, stop_job)
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import MANIFEST_FILE
from ldp_marginals.transforms.panes import engine_us, timer_us
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US
from tests.collect import Collected
from tests.configs import SMALL_CONFIG
from tests.pipelines.test_streaming import START, config, late_reports, record, stream_clock, streaming_pipeline


def run_delayed(stream, cfgs, delay_s: float):
    got = Collected()
    p = streaming_pipeline()
    outs = build(p, stream, None, JobOptions({c.name: c for c in cfgs}, streaming=True, clock=stream_clock,
                                             watermark_delay_seconds=delay_s))
    for kind, pcoll in outs.items():
        pcoll | got.into(kind)
    p.run().wait_until_finish()
    return got


def panes_of_collection(got, name: str) -> list:
    """(window start second or None, pane, timing, reports) of one collection's marginals panes."""
    out = []
    for f in got["panes"]:
        if f.kind == "marginals" and f.group == name:
            n = max(r["n_reports"] for r in f.rows)
            out.append((f.window[0] // 1000 - START if f.window else None, f.pane, f.timing, n))
    return sorted(out, key=lambda p: (p[0] or 0, p[1]))


def test_a_watermark_delay_closes_windows_that_much_later():
    cfg = config(allowed_lateness_seconds=0, window={"type": "fixed", "size_seconds": 10})
    # a global window, which closes only at the end of time: the delay must not hold it open for ever
    whole = parse_config(dict(SMALL_CONFIG, collection="whole", window={"type": "global"}, min_reports=1,
                              extremes=[], early_firing_seconds=3600))
    stream = (test_stream.TestStream()
              .advance_watermark_to(START)
              .add_elements([record(cfg, 1), record(cfg, 2), record(cfg, 12), record(whole, 3)])
              .advance_watermark_to(START + 25)     # past the ends of [0, 10) and [10, 20)
              .add_elements([record(cfg, 5)])       # held 20 s by its collector
              .advance_watermark_to(START + 45)     # past [0, 10)'s end + 30 s, not [10, 20)'s
              .add_elements([record(cfg, 15), record(cfg, 6)])
              .advance_watermark_to_infinity())
    got = run_delayed(stream, [cfg, whole], 30)
    # [0, 10) closes when the watermark passes 40: second 5 is in its pane, second 6 is late; [10, 20)
    # is still open at 45 (it closes at 50), so second 15 is in its pane
    assert panes_of_collection(got, cfg.name) == [(0, 0, "on_time", 3), (10, 0, "on_time", 2)]
    assert late_reports(got) == 1
    (late,) = [d for d in got["dead_letters"] if d["reason"] == "late"]
    assert late["event_time"] == START * 1000 and "watermark delay 30s" in late["detail"]
    assert panes_of_collection(got, "whole")[-1][-1] == 1   # the global window published at the end


def test_the_delay_moves_timers_and_fired_times_and_stops_at_the_end_of_time():
    assert timer_us(1_000_000, 30_000_000) == 31_000_000
    assert engine_us(31_000_000, 30_000_000) == 1_000_000
    assert timer_us(END_OF_TIME_US - 5, 30_000_000) == END_OF_TIME_US
    assert engine_us(END_OF_TIME_US, 30_000_000) == END_OF_TIME_US
    with pytest.raises(ValueError, match="watermark_delay_seconds must be a number >= 0, got watermark_delay_seconds=-1"):
        JobOptions({"app": config()}, streaming=True, watermark_delay_seconds=-1)


def test_resume_command_replaces_the_savepoint_and_quotes_arguments():
    argv = ["--config", "my conf.yaml", "--savepoint_path", "old", "--streaming", "--savepoint_path=older"]
    assert resume_command(argv, "file:/sp/chk-3") == (
        "ldp-marginals run --config 'my conf.yaml' --streaming --savepoint_path=file:/sp/chk-3")


def test_flink_rest_address_from_flink_master():
    assert flink_rest("localhost:8081") == "http://localhost:8081"
    assert flink_rest("https://flink:443") == "https://flink:443"
    assert flink_rest("[auto]") is None and flink_rest(None) is None


def test_flink_rest_ports_of_the_job_servers_flink():
    assert embedded_rests("localhost:8081-8083") == [f"http://localhost:{p}" for p in (8081, 8082, 8083)]
    assert embedded_rests("flink:9000") == ["http://flink:9000"] and embedded_rests(None) == []
    for bad in ("8081", "localhost:", "localhost:9-8", "localhost:a-b", "localhost:70000"):
        with pytest.raises(ValueError, match=f"--flink-rest must be HOST:PORT or HOST:FIRST-LAST, got --flink-rest='{bad}'"):
            embedded_rests(bad)


class _EmbeddedFlink(http.server.BaseHTTPRequestHandler):
    """The REST API of a job server's Flink running one job, ``jobs``: ``{id: [name, state]}``; it
    goes (as that Flink does with its job) once the job is cancelled: then every call is refused."""
    jobs = {}

    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):   # noqa: N802 - http.server's name
        if self.path == "/jobs/overview":
            self._send({"jobs": [{"jid": j, "name": n, "state": st, "start-time": 1} for j, (n, st) in self.jobs.items()]})
        else:
            self._send({"state": self.jobs[self.path.split("/")[2]][1]})

    def do_PATCH(self):   # noqa: N802
        self.jobs[self.path.split("/")[2].split("?")[0]][1] = "CANCELED"
        self._send({})
        threading.Thread(target=lambda: (self.server.shutdown(), self.server.server_close())).start()

    def log_message(self, *args):
        pass


def test_a_job_in_the_job_servers_flink_is_found_by_name_on_its_ports_and_cancelled():
    _EmbeddedFlink.jobs = {"a" * 32: ["ldp-marginals-run1", "RUNNING"]}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddedFlink)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        rests = embedded_rests(f"127.0.0.1:{port - 1}-{port}")   # no Flink on the first port
        assert embedded_job(rests, "other") == (None, None)
        rest, job = embedded_job(rests, "ldp-marginals-run1")
        assert (rest, job) == (f"http://127.0.0.1:{port}", "a" * 32)
        cancel_embedded(rest, job, timeout_s=10)   # that Flink went with its job: an end
        assert _EmbeddedFlink.jobs[job][1] == "CANCELED"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def test_a_malformed_flink_rest_is_refused_before_the_job(tmp_path):
    from ldp_marginals.pipelines.run import make_pipeline
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CONFIG))
    with pytest.raises(ValueError, match="--flink-rest must be HOST:PORT or HOST:FIRST-LAST"):
        make_pipeline(["--config", str(tmp_path / "c.json"), "--output", str(tmp_path / "o"), "--streaming",
                       "--subscription", "projects/my-project/subscriptions/s", "--flink-rest=localhost"])


def test_a_signal_raises_in_the_main_thread_inside_the_block_only():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(StopRequested) as err:
        with signals_stop():
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()   # the handler runs before pause returns
    assert err.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def write_manifest(out, **fields):
    out.mkdir(exist_ok=True)
    (out / MANIFEST_FILE).write_text(json.dumps({"run_id": "r1", **fields}))


def test_a_new_streaming_run_is_refused_where_it_would_hide_another_run(tmp_path):
    argv = ["--config", "c.yaml", "--streaming", "--output", str(tmp_path / "o")]
    check_output_unused(str(tmp_path / "o"), argv)   # nothing there: fine
    write_manifest(tmp_path / "o", mode="batch")
    with pytest.raises(ValueError, match="holds the outputs of batch run r1: a streaming run there would hide them"):
        check_output_unused(str(tmp_path / "o"), argv)
    write_manifest(tmp_path / "o", mode="streaming")
    with pytest.raises(ValueError, match="which may still be running.*--savepoint_path=PATH, or give another --output"):
        check_output_unused(str(tmp_path / "o"), argv)
    write_manifest(tmp_path / "o", mode="streaming", stopped={"signal": "SIGINT", "how": "cancelled",
                                                              "resume_from": "file:/cp/chk-9"})
    with pytest.raises(ValueError, match=r"streaming run r1, cancelled by SIGINT: resume it with: ldp-marginals run "
                                         r"--config c.yaml --streaming --output \S+ --savepoint_path=file:/cp/chk-9"):
        check_output_unused(str(tmp_path / "o"), argv)
    # a stop that kept nothing (the job server's embedded Flink): the refusal says what the stop's line said,
    # not "resume it with --savepoint_path" (issue 49, item 2: the two contradicted each other)
    write_manifest(tmp_path / "o", mode="streaming", stopped={
        "signal": "SIGINT", "how": "cancelled", "resume_from": None,
        "why_not": "the job server's embedded Flink resumes nothing"})
    with pytest.raises(ValueError) as err:
        check_output_unused(str(tmp_path / "o"), argv)
    assert "streaming run r1, cancelled by SIGINT with nothing to resume from (the job server's embedded Flink " \
           "resumes nothing)" in str(err.value)
    assert str(err.value).endswith("start again into a new --output") and "savepoint_path" not in str(err.value)


def test_sigterm_ends_a_batch_run_on_the_direct_runner_with_one_line(tmp_path):
    cfg = parse_config(SMALL_CONFIG)
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CONFIG))
    schemas.write_avro(tmp_path / "r.avro", "noisy_report",
                       report_records(cfg, simulate_population(cfg, 150_000, seed=1)))
    proc = subprocess.Popen([sys.executable, "-m", "ldp_marginals.pipelines.cli", "run", "--config",
                             str(tmp_path / "c.json"), "--input", str(tmp_path / "r.avro"), "--output",
                             str(tmp_path / "out"), "--per-element", "--progress-seconds", "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:   # the record-by-record reader takes seconds on 150,000 reports: stopped while it counts
        seen = []
        while not seen or "counted" not in seen[-1]:
            seen.append(proc.stderr.readline())
            assert seen[-1] or proc.poll() is None, "".join(seen)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if "stopped by" in line]
    assert line.startswith("ldp-marginals run: stopped by SIGTERM: ") and "did not finish" in line
    assert not (tmp_path / "out" / MANIFEST_FILE).exists()


def test_savepoint_on_stop_is_refused_where_it_cannot_work(tmp_path):
    from ldp_marginals.pipelines.run import make_pipeline
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CONFIG))
    base = ["--config", str(tmp_path / "c.json"), "--output", str(tmp_path / "o"), "--savepoint-on-stop",
            "--streaming", "--subscription", "projects/my-project/subscriptions/s"]
    with pytest.raises(ValueError, match="give --streaming and --flink_master=HOST:PORT"):
        make_pipeline(base)
    with pytest.raises(ValueError, match="--savepoint-on-stop needs --checkpointing_interval=MS"):
        make_pipeline(base + ["--flink_master=localhost:8081"])


def test_a_dataflow_update_carries_the_streaming_run_on(tmp_path):
    from ldp_marginals.pipelines.run import make_pipeline, prepare_outputs
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CONFIG))
    write_manifest(tmp_path / "o", mode="streaming")
    base = ["--config", str(tmp_path / "c.json"), "--output", str(tmp_path / "o"), "--streaming",
            "--subscription", "projects/my-project/subscriptions/s"]
    _, args, configs = make_pipeline(base + ["--update"])
    assert args.run_id == "r1"
    prepare_outputs(args, configs)   # not refused: the run goes on
    _, args, configs = make_pipeline(base)
    with pytest.raises(ValueError, match="holds streaming run r1"):
        prepare_outputs(args, configs)


class _CancelledJob:
    """A PipelineResult whose job service says CANCELLED once cancelled."""
    state = "RUNNING"

    def cancel(self):
        self.state = "CANCELLED"


@pytest.mark.parametrize("submitted, warned", [(["--runner=PortableRunner", "--job_endpoint=localhost:8099"], True),
                                               (["--runner=DirectRunner"], False)])
def test_a_cancel_without_flink_rest_says_the_job_servers_flink_may_still_run_it(tmp_path, submitted, warned):
    from types import SimpleNamespace

    from apache_beam.options.pipeline_options import PipelineOptions

    args = SimpleNamespace(streaming=True, detach=False, savepoint_on_stop=False, flink_rest=None,
                           output=str(tmp_path), run_id="r")
    stopped = stop_job(_CancelledJob(), args, PipelineOptions(submitted), [], signal.SIGINT, "job-1")
    line = str(stopped)
    assert "the job was cancelled (CANCELLED)" in line
    assert ("Flink behind the job server may still run it" in line and "--flink_master" in line
            and "--flink-rest" in line) == warned


def test_a_cancel_with_flink_rest_where_no_such_job_runs_says_so_without_the_hint(tmp_path):
    """--flink-rest given, no Flink there running the job (here: nothing listening on the port): the line
    says so, and does not tell the user to give the --flink-rest they gave."""
    from types import SimpleNamespace

    from apache_beam.options.pipeline_options import PipelineOptions

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = SimpleNamespace(streaming=True, detach=False, savepoint_on_stop=False, flink_rest=f"127.0.0.1:{port}",
                           output=str(tmp_path), run_id="r")
    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=localhost:8099"])
    line = str(stop_job(_CancelledJob(), args, options, [], signal.SIGINT, "job-1"))
    assert f"the job server's Flink at --flink-rest=127.0.0.1:{port} ran no active job named job-1" in line
    assert "may still run it" not in line and "give --flink-rest" not in line


def test_from_the_signal_on_only_the_main_thread_writes_to_stderr(monkeypatch, capsys):
    # a fresh-clone make test failed both Ctrl-C tests on the cluster: Beam's SDK worker printed
    # "Channel closed prematurely" tracebacks to stderr from its own thread, past the disabled logging
    import logging
    import sys
    import threading

    from ldp_marginals.pipelines import stopping
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    try:
        stopping.quiet_the_runner()
        worker = threading.Thread(target=lambda: print("Traceback (most recent call last)", file=sys.stderr))
        worker.start()
        worker.join()
        print("ldp-marginals run: stopped by SIGINT", file=sys.stderr)
    finally:
        logging.disable(logging.NOTSET)
    err = capsys.readouterr().err
    assert "stopped by SIGINT" in err and "Traceback" not in err
