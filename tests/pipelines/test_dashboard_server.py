"""The dashboard server is safe to leave running: it answers only its own Host, drops idle and
half-open connections, builds each selection's view once per state of the directory (ETag, 304,
gzip), lets clients hang up without a traceback, and says clearly when its port is taken."""
import gzip
import http.client
import json
import socket
import threading
import time

import pytest

from ldp_marginals.pipelines.dashboard import server as dashboard_server
from ldp_marginals.schemas.outputs import COLLECTIONS_FILE
from tests.outputs import write_run


@pytest.fixture
def served(tmp_path, monkeypatch):
    monkeypatch.setattr(dashboard_server, "IDLE_SECONDS", 0.5)
    (tmp_path / COLLECTIONS_FILE).write_text("[]")
    calls = []
    real = dashboard_server.view
    monkeypatch.setattr(dashboard_server, "view", lambda *a, **k: calls.append(1) or real(*a, **k))
    server = dashboard_server.make_server(str(tmp_path), 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, tmp_path, calls
    server.shutdown()
    server.server_close()


# how long a client waits for an answer: a safety net, so that a server that never answers fails the
# test instead of hanging it; no test bounds how long an answer takes
CLIENT_TIMEOUT = 60


def request(port, path="/view.json", host=None, headers=()):
    """``(status, headers, body)``: the body as sent (gzipped when the server zipped it)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
    conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    conn.putheader("Host", f"127.0.0.1:{port}" if host is None else host)
    for name, value in headers:
        conn.putheader(name, value)
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def get(port, path="/view.json", host=None):
    status, _, body = request(port, path, host)
    return status, body


def test_only_requests_naming_the_bound_address_are_answered(served):
    server, _, _ = served
    port = server.server_address[1]
    assert get(port)[0] == 200 and get(port, host=f"localhost:{port}")[0] == 200
    for host in (f"attacker.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}", ""):
        status, _ = get(port, host=host)
        assert status == 421, host
    assert dashboard_server.allowed_hosts("10.1.2.3", 80) == {"10.1.2.3:80"}


def test_idle_and_half_open_connections_are_closed_and_others_still_served(served):
    server, _, _ = served
    port = server.server_address[1]
    idle = socket.create_connection(("127.0.0.1", port))
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"GET /data.json HTTP/1.1\r\nHost: 127.0.0.1")  # never finished
    assert get(port)[0] == 200  # the others do not block it
    assert server.RequestHandlerClass.timeout == dashboard_server.IDLE_SECONDS == 0.5   # the idle limit in force
    for sock in (idle, half):
        sock.settimeout(CLIENT_TIMEOUT)
        assert sock.recv(1024) == b""  # closed by the server: one that never closes it fails here (timeout)
        sock.close()


def test_a_view_is_built_once_per_state_of_the_directory(served):
    server, folder, calls = served
    port = server.server_address[1]
    first = get(port)[1]
    assert get(port)[1] == first and len(calls) == 1
    assert json.loads(first)["problems"] == [f"{folder} holds no complete run: manifest.json is missing (a batch run "
                                              "writes it last: the run is still writing, it failed, or this is not a "
                                              "job's output directory)"]
    row = {"collection": "c", "window_start": 0, "window_end": 1000, "dimensions": {}, "n_reports": 5,
           "columns": [0], "labels": ["a"], "estimate": 2.0, "frequency": 0.4, "variance": 1.0, "ci_low": 0.0,
           "ci_high": 4.0}
    write_run(folder, [("marginals", "c", (0, 1000), 0, [row])])
    data = json.loads(get(port)[1])
    assert len(calls) == 2 and data["problems"] == []
    (got,) = data["marginals"]
    assert {k: got[k] for k in row} == row
    assert get(port)[1] == json.dumps(data, allow_nan=False).encode() and len(calls) == 2
    # an ETag, a 304 for a client that holds it (nothing rebuilt), gzip for a client that accepts it
    status, headers, zipped = request(port, headers=[("Accept-Encoding", "gzip, deflate")])
    assert status == 200 and headers["Content-Encoding"] == "gzip" and json.loads(gzip.decompress(zipped)) == data
    tag = headers["ETag"]
    status, headers, body = request(port, headers=[("If-None-Match", tag)])
    assert (status, body, headers["ETag"]) == (304, b"", tag) and len(calls) == 2
    # another selection is another view; a bad one is a 400 naming the parameter
    assert json.loads(get(port, "/view.json?span=24")[1])["span"] == 24 and len(calls) == 3
    status, body = get(port, "/view.json?span=7")
    assert status == 400 and b"span must be one of [24, 48, 168, 720], got span=7" in body
    status, headers, page = request(port, "/", headers=[("Accept-Encoding", "gzip")])
    assert status == 200 and headers["Content-Encoding"] == "gzip" and b"Plotly" in gzip.decompress(page)
    assert request(port, "/", headers=[("If-None-Match", headers["ETag"])])[0] == 304


def test_clients_that_hang_up_cost_no_traceback(served, capfd):
    server, folder, _ = served
    port = server.server_address[1]
    for _ in range(20):   # ask for the page (1 MB gzipped) and hang up before reading it
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept-Encoding: gzip\r\n\r\n".encode())
        sock.close()   # SO_LINGER 0: a reset, as a closed tab sends
    time.sleep(0.5)
    assert get(port)[0] == 200   # still serving
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err


def test_a_taken_port_and_a_public_address_are_said_clearly(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ValueError, match=rf"--serve {port}: the port is taken on 127.0.0.1; choose another port"):
            dashboard_server.make_server(str(tmp_path), port)
    finally:
        taken.close()
    assert dashboard_server.exposure_warning("127.0.0.1") is None and dashboard_server.exposure_warning("localhost") is None
    assert dashboard_server.exposure_warning("0.0.0.0").startswith("warning: serving on 0.0.0.0, beyond localhost")


def test_while_a_view_builds_its_selection_gets_the_view_built_before(tmp_path, monkeypatch):
    """A job writing changes the directory with every file: one build per selection at a time, and
    the requests meanwhile get the previous view at once (no pile of builds, no waiting)."""
    (tmp_path / COLLECTIONS_FILE).write_text("[]")
    release, started, calls = threading.Event(), threading.Event(), []
    real = dashboard_server.view

    def slow_view(*a, **k):
        calls.append(1)
        if len(calls) == 2:   # the second build waits until the test lets it finish
            started.set()
            release.wait()
        return real(*a, **k)
    monkeypatch.setattr(dashboard_server, "view", slow_view)
    server = dashboard_server.make_server(str(tmp_path), 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        _, first_headers, first = request(port)
        row = {"collection": "c", "window_start": 0, "window_end": 1000, "dimensions": {}, "n_reports": 5,
               "columns": [0], "labels": ["a"], "estimate": 2.0, "frequency": 0.4, "variance": 1.0, "ci_low": 0.0,
               "ci_high": 4.0}
        write_run(tmp_path, [("marginals", "c", (0, 1000), 0, [row])])
        building = threading.Thread(target=request, args=(port,))
        building.start()
        assert started.wait(CLIENT_TIMEOUT)
        # the build is held until release: requests that waited for it would never be answered (and
        # fail at the client's timeout); these are answered, with the view built before, while it is held
        statuses = [request(port) for _ in range(5)]
        assert not release.is_set() and building.is_alive()
        assert all(s == 200 and h["ETag"] == first_headers["ETag"] and b == first for s, h, b in statuses)
        assert len(calls) == 2
        release.set()
        building.join()
        status, headers, body = request(port)
        assert status == 200 and headers["ETag"] != first_headers["ETag"] and json.loads(body)["marginals"]
        assert len(calls) == 2
    finally:
        release.set()
        server.shutdown()
        server.server_close()
