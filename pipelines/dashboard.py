"""``ldp-marginals dashboard``: one self-contained HTML page of the job's outputs (Plotly, embedded,
no network), written to a file or served on localhost with new windows picked up as they land.

    ldp-marginals dashboard --estimates out/demo/estimates --out out/demo/dashboard.html
    ldp-marginals dashboard --estimates out/demo/estimates --serve 8050

The page reads the outputs of the run that owns the directory through :func:`ldp_marginals.read`
(its manifest's Parquet files; of several panes of a window the latest) and ``collections.json``
(channels, epsilon, min_reports), which ``ldp-marginals run`` writes beside them: the layout of
:mod:`ldp_marginals.schemas.outputs`. Importing this module does not
import Beam.
"""
from __future__ import annotations

import argparse
import datetime as dt
import errno
import http.server
import json
import math
import os
import socket
import sys
import threading
from importlib import resources
from statistics import NormalDist

import numpy as np

from ldp_marginals.ldp.planning import cell_variance, frequency_variance, half_width_of, mean_variance
from ldp_marginals.ldp.tables import phi_from_frequencies
from ldp_marginals.pipelines import compare
from ldp_marginals.pipelines.read import read_file
from ldp_marginals.schemas.arrow import to_rows
from ldp_marginals.schemas.outputs import (
    COLLECTIONS_FILE,
    ESTIMATE_KINDS,
    RUNS_DIR,
    OutputError,
    load_manifest,
    manifest_files,
)


def _feature_of(label: str) -> str | None:
    """``os`` of a categorical bit label ``os=mac`` (None for a boolean's label)."""
    return label.split("=", 1)[0] if "=" in label else None


def _joint(pairs: dict, single: dict, a: int, b: int) -> float:
    """The 2-way frequency of bits a and b: estimated, or 0 for two values of one categorical
    feature (not published: zero by construction), else NaN (not counted)."""
    key = (min(a, b), max(a, b))
    if key in pairs:
        return pairs[key]
    fa, fb = _feature_of(single[a]["labels"][0]), _feature_of(single[b]["labels"][0])
    return 0.0 if fa is not None and fa == fb else float("nan")


def _correlations(marginals: list) -> list:
    """Per (collection, window, dimensions): the phi matrix of the bits whose 1- and 2-way
    marginals were estimated."""
    by_key = {}
    for r in marginals:
        key = (r["collection"], r["window_start"], r["window_end"], json.dumps(r["dimensions"], sort_keys=True))
        by_key.setdefault(key, []).append(r)
    out = []
    for (collection, start, end, dims), rows in sorted(by_key.items()):
        single = {r["columns"][0]: r for r in rows if len(r["columns"]) == 1}
        pairs = {tuple(r["columns"]): r["frequency"] for r in rows if len(r["columns"]) == 2}
        bits = sorted(single)
        if len(bits) < 2 or not pairs:
            continue
        z = [[1.0 if a == b else phi_from_frequencies(single[a]["frequency"], single[b]["frequency"],
                                                      _joint(pairs, single, a, b))
              for b in bits] for a in bits]
        out.append({"collection": collection, "window_start": start, "window_end": end,
                    "dimensions": json.loads(dims), "labels": [single[b]["labels"][0] for b in bits], "z": z})
    return out


def _check_dir(estimates_dir: str) -> None:
    if not os.path.isdir(estimates_dir):
        raise ValueError(f"estimates must be a directory of the job's outputs, got estimates={estimates_dir!r}")


def load_estimates(estimates_dir: str, marginals: list | None = None) -> dict:
    """Everything the page shows, as JSON-safe data. ``marginals``: label lists of the sets to
    chart over time (default: every 1-way marginal)."""
    _check_dir(estimates_dir)
    data, problems = _read_outputs(estimates_dir)
    data["problems"] = problems
    collections_path = os.path.join(estimates_dir, COLLECTIONS_FILE)
    data["collections"] = []
    if os.path.exists(collections_path):
        with open(collections_path) as fh:
            data["collections"] = json.load(fh)
    data["summary"] = data.pop("manifest").get("summary")
    data["correlations"] = _correlations(data["marginals"])
    data["chosen_marginals"] = [list(m) for m in marginals] if marginals else None
    info = {c["collection"]: c for c in data["collections"]}
    data["changes"] = _changes(data, info)
    data["precision"] = _precision(data, info)
    return data


def _read_outputs(estimates_dir: str) -> tuple:
    """``({kind: rows, "manifest": manifest}, problems)``: every file of the run's manifest that can
    be read; each that cannot (missing, damaged, rows not as the manifest says) is one problem
    naming it, and the page shows the rest. No manifest: no rows, and the problem says why."""
    data, problems = {kind: [] for kind in ESTIMATE_KINDS}, []
    try:
        manifest = load_manifest(estimates_dir)
    except OutputError as err:
        data["manifest"] = {}
        return data, [str(err)]
    data["manifest"] = manifest
    for kind in ESTIMATE_KINDS:
        for entry in manifest_files(manifest, kind):
            try:
                data[kind] += to_rows(read_file(estimates_dir, entry))
            except OutputError as err:
                problems.append(str(err))
    return data, problems


CHANGE_KINDS = ("marginals", "conditionals", "means")
FDR = 0.05   # the false discovery rate of the page's table of changes (as ``compare``'s default)
MAX_COMPARED_VALUES = 12   # a dimension with more values in a window: compare them with the command


def _by_key(rows: list, drop: str | None = None) -> dict:
    """``{(collection, window start, other dimensions as JSON): {dimension value: [rows]}}`` with
    ``drop`` the dimension compared, removed from the rows' dimensions so that the two values' rows
    pair up (None: every row under the value None)."""
    out = {}
    for r in rows:
        dims = dict(r["dimensions"])
        if drop is not None and drop not in dims:
            continue
        value = dims.pop(drop) if drop is not None else None
        key = (r["collection"], r["window_start"], json.dumps(dims, sort_keys=True))
        out.setdefault(key, {}).setdefault(value, []).append(dict(r, dimensions=dims))   # paired without drop
    return out


def _changes(data: dict, info: dict) -> list:
    """What the page's change table can show: per collection, window and key, for marginals,
    conditionals and means, the change of each estimate against the previous published window of
    the key and against every other value of each dimension in the same window (dimensions with up
    to :data:`MAX_COMPARED_VALUES` values), computed as ``ldp-marginals compare`` computes it
    (``selected - versus``; Benjamini-Hochberg at :data:`FDR` over each kind's estimates)."""
    out = []

    def add(kind, collection, selected_rows, versus_rows, dims, start, versus, label):
        level = info.get(collection, {}).get("level", 0.95)
        found = compare.changes(compare.keyed(compare.rows_of(versus_rows, kind)),
                                compare.keyed(compare.rows_of(selected_rows, kind)), level, FDR)
        out.append({"collection": collection, "dimensions": dims, "kind": kind, "window_start": start,
                    "versus": versus, "versus_label": label, "fdr": FDR, "changes": found})

    for kind in CHANGE_KINDS:
        by_window = {}
        for (collection, start, dims), rows in _by_key(data[kind]).items():
            by_window.setdefault((collection, dims), {})[start] = rows[None]
        for (collection, dims), windows in sorted(by_window.items()):
            starts = sorted(windows)
            for before, after in zip(starts, starts[1:]):
                add(kind, collection, windows[after], windows[before], json.loads(dims), after, "previous",
                    _iso(before))
        keys = sorted({k for r in data[kind] for k in r["dimensions"]})
        for dim in keys:
            for (collection, start, rest), values in sorted(_by_key(data[kind], dim).items()):
                if len(values) > MAX_COMPARED_VALUES:
                    continue
                for a, b in ((a, b) for a in sorted(values) for b in sorted(values) if a != b):
                    add(kind, collection, values[a], values[b], dict(json.loads(rest), **{dim: a}), start,
                        f"{dim}={b}", f"{dim}={b}")
    return out


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _precision(data: dict, info: dict) -> list:
    """Per published 1-way marginal, table cell and mean over all reports: the half-width
    ``ldp-marginals plan`` gives at the window's reports (worst case) beside the measured one, both
    on the published scale (frequency, or the feature's) and at the level of the row's interval."""
    out = []

    def add(r, kind, label, planned_variance, measured):
        level = _row_level(r) if r.get("interval") == "simultaneous" else info[r["collection"]]["level"]
        out.append({"collection": r["collection"], "dimensions": r["dimensions"], "window_start": r["window_start"],
                    "kind": kind, "label": label, "n_reports": r["n_reports"],
                    "planned": half_width_of(planned_variance, level), "measured": measured,
                    "interval": r.get("interval", "per_cell")})

    for r in data["marginals"]:
        c = info.get(r["collection"])
        if c and len(r["columns"]) == 1:
            p, q = np.array(c["p"])[r["columns"]], np.array(c["q"])[r["columns"]]
            add(r, "marginals", r["labels"][0], frequency_variance(p, q, r["n_reports"]),
                (r["ci_high"] - r["ci_low"]) / 2 / r["n_reports"])
    for r in data["tables"]:
        c = info.get(r["collection"])
        if c:
            p, q = np.array(c["p"]), np.array(c["q"])
            # a categorical value's bit (label 'os=mac') and a boolean's 'true' must be 1, a boolean's 'false' 0
            ones = [b for b in r["columns"] if "=" in c["labels"][b]
                    or r["cell"][r["group"].index(c["labels"][b])] == "true"]
            zeros = [b for b in r["columns"] if b not in ones]
            add(r, "tables", ", ".join(f"{g}={v}" for g, v in zip(r["group"], r["cell"])),
                cell_variance(p[ones], q[ones], p[zeros], q[zeros], r["n_reports"]),
                (r["ci_high"] - r["ci_low"]) / 2 / r["n_reports"])
    for r in data["means"]:
        c = info.get(r["collection"])
        if c and not r["given"]:
            bit = c["labels"].index(r["feature"])
            add(r, "means", f"mean({r['feature']})",
                mean_variance(c["p"][bit], c["q"][bit], r["low"], r["high"], r["n_reports"]),
                half_width_of(r["variance"], c["level"]))
    return out


def _row_level(r: dict) -> float:
    """The level of a row's (symmetric normal) interval: from its half-width and variance."""
    half = (r["ci_high"] - r["ci_low"]) / 2
    return 2 * NormalDist().cdf(half / math.sqrt(r["variance"])) - 1 if r["variance"] > 0 else float("nan")


def _finite(value):
    """JSON-safe: NaN and infinities (not JSON) as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _asset(name: str) -> str:
    return resources.files("ldp_marginals.pipelines").joinpath("dashboard_assets", name).read_text(encoding="utf-8")


def render(data: dict | None, data_url: str | None = None, refresh_seconds: float = 5.0) -> str:
    """The page: Plotly and the app inlined; the data inlined, or fetched from ``data_url`` every
    ``refresh_seconds`` (served mode)."""
    from plotly.offline import get_plotlyjs
    boot = {"data": data, "dataUrl": data_url, "refreshSeconds": refresh_seconds}
    # every "<" as \\u003c (the same JSON): the data can neither close nor comment out its script element
    boot_json = json.dumps(_finite(boot), allow_nan=False).replace("<", "\\u003c")
    parts = {"/*PLOTLY*/": get_plotlyjs(), "/*BOOT*/null": boot_json, "/*APP*/": _asset("app.js")}
    page = _asset("page.html")
    out = []
    for marker, content in parts.items():  # split on the template's markers, so content is never rescanned
        before, found, page = page.partition(marker)
        if not found:
            raise RuntimeError(f"dashboard template lacks {marker}")
        out += [before, content]
    return "".join(out + [page])


def check_marginals(data: dict, marginals: list | None) -> None:
    """An unknown label in ``--marginal`` is an error naming it (a page would silently omit it)."""
    numeric = {name for c in data["collections"] for name in c.get("numeric", {})}
    known = {label for c in data["collections"] for label in c.get("labels", [])} - numeric
    known |= {label for r in data["marginals"] for label in r["labels"]}
    for chosen in marginals or []:
        if set(chosen) & numeric:
            raise ValueError(f"--marginal {','.join(chosen)!r}: {sorted(set(chosen) & numeric)} are numeric features: "
                             "they publish means (shown on the page), not marginals")
        unknown = [label for label in chosen if label not in known]
        if unknown or not chosen:
            raise ValueError(f"--marginal {','.join(chosen)!r}: unknown bit label(s) {unknown}; the labels are "
                             f"{sorted(known)}")


def write(estimates_dir: str, out_path: str, marginals: list | None = None) -> str:
    data = load_estimates(estimates_dir, marginals)
    check_marginals(data, marginals)
    folder = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(folder, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as fh:
        fh.write(render(data))
    return out_path


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


class _DataCache:
    """``/data.json`` as bytes, rebuilt only when :func:`directory_signature` changes."""

    def __init__(self, estimates_dir: str, marginals):
        self.estimates_dir, self.marginals = estimates_dir, marginals
        self.lock = threading.Lock()
        self.signature, self.body = None, b""

    def get(self) -> bytes:
        with self.lock:  # one rebuild at a time; concurrent requests wait for it and share it
            signature = directory_signature(self.estimates_dir)
            if signature != self.signature:
                data = load_estimates(self.estimates_dir, self.marginals)
                self.body = json.dumps(_finite(data), allow_nan=False).encode()
                self.signature = signature
            return self.body


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
    """A server of the page at ``/`` and fresh data at ``/data.json`` (cached, rebuilt when the
    directory changes). It answers only requests whose Host header names the address it is bound
    to, and closes connections idle for ``IDLE_SECONDS``."""
    _check_dir(estimates_dir)
    page = render(None, data_url="data.json", refresh_seconds=refresh_seconds).encode("utf-8")
    cache = _DataCache(estimates_dir, marginals)
    hosts = set()

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = IDLE_SECONDS

        def do_GET(self):  # noqa: N802 - http.server's name
            if (self.headers.get("Host") or "").lower() not in hosts:
                self.send_error(421, "misdirected request: unknown Host")
                return
            if self.path in ("/", "/index.html"):
                body, kind = page, "text/html; charset=utf-8"
            elif self.path.split("?")[0] == "/data.json":
                body, kind = cache.get(), "application/json"
            else:
                self.send_error(404, "not found")
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):  # quiet: one line per request is noise on a dashboard
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        server = Server((host, port), Handler)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise ValueError(f"--serve {port}: the port is taken on {host}; choose another port") from None
        raise ValueError(f"--host {host}: cannot serve there ({err.strerror or err})") from None
    hosts |= allowed_hosts(host, server.server_address[1])
    return server


def add_dashboard_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--estimates", required=True, help="the job's output directory")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="write one self-contained HTML file")
    where.add_argument("--serve", type=int, metavar="PORT", help="serve the page on localhost:PORT")
    parser.add_argument("--host", default="127.0.0.1", help="interface to serve on (default: localhost only)")
    parser.add_argument("--marginal", action="append", default=None, metavar="LABELS",
                        help="a set to chart over time, as comma-separated bit labels (repeat); "
                             "default: every 1-way marginal")
    parser.add_argument("--refresh-seconds", type=float, default=5.0, help="served page: how often to look for new windows")


def main(args) -> None:
    marginals = [[label.strip() for label in m.split(",") if label.strip()] for m in args.marginal or []] or None
    if args.refresh_seconds <= 0:
        raise ValueError(f"--refresh-seconds must be > 0, got --refresh-seconds={args.refresh_seconds}")
    if args.out:
        print(f"dashboard written to {os.path.abspath(write(args.estimates, args.out, marginals))}")
        return
    if not 0 < args.serve < 65536:
        raise ValueError(f"--serve must be a port in 1..65535, got --serve={args.serve}")
    server = make_server(args.estimates, args.serve, args.host, marginals, args.refresh_seconds)
    warning = exposure_warning(args.host)
    if warning:
        print(warning, file=sys.stderr)
    print(f"serving the dashboard of {args.estimates} on http://{args.host}:{server.server_address[1]}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

