"""The dashboard's server (``ldp-marginals dashboard --serve``): the page at ``/``, Plotly at
``/plotly.js`` and the view of each selection at ``/view.json``
(:mod:`ldp_marginals.pipelines.dashboard.view`), each view built once per state of the directory,
gzipped, with an ETag; it answers only requests whose Host header names the address it is bound
to. Importing this module does not import Beam.
"""
from __future__ import annotations

import errno
import gzip
import hashlib
import http.server
import json
import os
import socket
import sys
import threading
import urllib.parse
from collections import OrderedDict

from ldp_marginals.pipelines.dashboard.page import check_dir, check_marginals, finite, render
from ldp_marginals.pipelines.dashboard.view import FileCache, parse_selection, view
from ldp_marginals.schemas.outputs import ESTIMATE_KINDS, RUNS_DIR


LOOPBACK = ("127.0.0.1", "localhost", "::1")
IDLE_SECONDS = 10.0  # a connection that sends nothing (idle, or a half-open request) is closed after this


def directory_signature(estimates_dir: str) -> tuple:
    """What changes when the job writes: the names, sizes and modification times of the manifest
    and of the streaming run's entries (a file the page reads is written before its entry). Listing
    the folders costs far less than reading the files."""
    entries = []
    runs = os.path.join(estimates_dir, RUNS_DIR)
    folders = [estimates_dir] + [os.path.join(runs, run, kind) for run in (os.listdir(runs) if os.path.isdir(runs) else [])
                                 for kind in ESTIMATE_KINDS]
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                for e in it:
                    if e.is_file():
                        st = e.stat()
                        entries.append((e.path, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            continue
    return tuple(sorted(entries))


class _Views:
    """Views by selection, gzipped, each built once per state of the directory: its ETag is a hash
    of :func:`directory_signature` and the selection, so an unchanged view costs a listing of the
    folders and a 304. A selection has at most one build at a time: requests that come while it
    builds get the view built before (with its own ETag) instead of waiting or building again, so a
    directory that changes with every file a job writes costs one build per selection at a time."""

    def __init__(self, estimates_dir: str, keep: int = 64):
        self.estimates_dir, self.keep = estimates_dir, keep
        self.files = FileCache(estimates_dir)
        self.lock = threading.Lock()
        self.latest, self.building = OrderedDict(), {}   # by selection: (etag, body); a build's Event

    def etag(self, selection: dict) -> str:
        state = repr((directory_signature(self.estimates_dir), sorted(selection.items(), key=str)))
        return '"' + hashlib.sha1(state.encode()).hexdigest()[:20] + '"'

    def get(self, selection: dict, tag: str | None = None) -> tuple:
        """``(etag, gzipped JSON)`` of the view of ``selection`` (``tag``: its :meth:`etag`, when the
        caller has it already); the view built before while a newer one is being built."""
        tag = tag or self.etag(selection)
        key = repr(sorted(selection.items(), key=str))
        while True:
            with self.lock:
                last = self.latest.get(key)
                if last is not None and (last[0] == tag or key in self.building):
                    self.latest.move_to_end(key)
                    return last
                waiting = self.building.get(key)
                if waiting is None:
                    self.building[key] = threading.Event()
                    break
            waiting.wait()   # the selection's first build: nothing older to give
        try:
            data = view(self.estimates_dir, selection, self.files)
            body = gzip.compress(json.dumps(finite(data), allow_nan=False).encode(), compresslevel=6, mtime=0)
            with self.lock:
                self.latest[key] = (tag, body)
                self.latest.move_to_end(key)
                while len(self.latest) > self.keep:
                    self.latest.popitem(last=False)
            return tag, body
        finally:
            with self.lock:
                self.building.pop(key).set()


def allowed_hosts(host: str, port: int) -> set:
    """The Host headers the server answers: the address it is bound to (and, on loopback, the other
    loopback names), with its port. Anything else is a DNS-rebinding attempt or a mistake."""
    names = set(LOOPBACK) if host in LOOPBACK else {host}
    return {f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names}


def exposure_warning(host: str) -> str | None:
    """A warning when the server is bound beyond this machine's loopback names."""
    if host in LOOPBACK:
        return None
    return (f"warning: serving on {host}, beyond localhost: anyone who can reach that address sees the "
            "dashboard (published aggregates, but usually kept private); use --host 127.0.0.1 to keep it local")


def make_server(estimates_dir: str, port: int, host: str = "127.0.0.1", marginals: list | None = None,
                refresh_seconds: float = 5.0) -> http.server.ThreadingHTTPServer:
    """A server of the page at ``/``, of Plotly at ``/plotly.js`` (the page loads it after its first
    view is drawn) and of the view of a selection at ``/view.json?collection=..&
    dims=..&window=..&sets=..&span=..&versus=..`` (:func:`ldp_marginals.pipelines.dashboard.view.parse_selection`),
    gzipped when the client accepts it, with an ETag (304 when unchanged). It answers only requests
    whose Host header names the address it is bound to, closes connections idle for
    ``IDLE_SECONDS``, and lets clients hang up without a word in its log."""
    check_dir(estimates_dir)
    check_marginals(estimates_dir, marginals)
    from plotly.offline import get_plotlyjs
    page = render(None, view_url="view.json", refresh_seconds=refresh_seconds, plotly_url="plotly.js").encode("utf-8")
    page_gz = gzip.compress(page, compresslevel=9, mtime=0)
    page_tag = '"' + hashlib.sha1(page).hexdigest()[:20] + '"'
    plotly = get_plotlyjs().encode("utf-8")
    plotly_gz = gzip.compress(plotly, compresslevel=9, mtime=0)
    plotly_tag = '"' + hashlib.sha1(plotly).hexdigest()[:20] + '"'
    views = _Views(estimates_dir)
    chosen = [list(m) for m in marginals] if marginals else None
    hosts = set()

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = IDLE_SECONDS
        protocol_version = "HTTP/1.1"   # keep-alive: a page's polls reuse one connection

        def do_GET(self):  # noqa: N802 - http.server's name
            if (self.headers.get("Host") or "").lower() not in hosts:
                self.send_error(421, "misdirected request: unknown Host")
                return
            path, _, query = self.path.partition("?")
            if path in ("/", "/index.html"):
                self._send(page_tag, page_gz, "text/html; charset=utf-8")
            elif path == "/plotly.js":   # the same bytes while the server runs: cached, not revalidated
                self._send(plotly_tag, plotly_gz, "text/javascript; charset=utf-8", "max-age=86400")
            elif path == "/view.json":
                try:
                    fields = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
                    selection = parse_selection(fields)
                except ValueError as err:
                    self.send_error(400, str(err))
                    return
                if selection["sets"] is None:
                    selection["sets"] = chosen
                tag = views.etag(selection)
                if self._fresh(tag):
                    return
                tag, body = views.get(selection, tag)
                self._send(tag, body, "application/json")
            else:
                self.send_error(404, "not found")

        def _fresh(self, tag: str) -> bool:
            """A 304 when the client holds ``tag`` already."""
            if tag not in [t.strip() for t in (self.headers.get("If-None-Match") or "").split(",")]:
                return False
            self.send_response(304)
            self.send_header("ETag", tag)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True

        def _send(self, tag: str, gz: bytes, kind: str, cache: str = "no-cache"):
            if self._fresh(tag):
                return
            zipped = "gzip" in (self.headers.get("Accept-Encoding") or "")
            body = gz if zipped else gzip.decompress(gz)
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if zipped:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
            self.send_header("ETag", tag)
            self.send_header("Cache-Control", cache)   # no-cache: revalidate every time, the ETag makes it cheap
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):  # quiet: one line per request is noise on a dashboard
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        def handle_error(self, request, client_address):
            """A client that hung up (closed tab, timeout) is no error of the server's: no traceback."""
            if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                return
            super().handle_error(request, client_address)

    try:
        server = Server((host, port), Handler)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise ValueError(f"--serve {port}: the port is taken on {host}; choose another port") from None
        raise ValueError(f"--host {host}: cannot serve there ({err.strerror or err})") from None
    hosts |= allowed_hosts(host, server.server_address[1])
    # the first page asks for the default view: build it now, while the browser loads the page
    threading.Thread(target=views.get, args=(dict(parse_selection({}), sets=chosen),), daemon=True).start()
    return server
