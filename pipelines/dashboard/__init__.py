"""``ldp-marginals dashboard``: the job's outputs as one HTML page (Plotly, embedded, no network),
served on localhost, or written to a file to share.

    ldp-marginals dashboard --estimates out/demo/estimates --serve 8050
    ldp-marginals dashboard --estimates out/demo/estimates --out out/demo/dashboard.html

Served, the page asks the server for the view of each selection (collection, key, window, the
marginals charted, the span of the charts: :mod:`ldp_marginals.pipelines.dashboard.view`), which
reads only the Parquet files of that selection from the run that owns the directory (its manifest)
and ``collections.json``; new windows are picked up as they land (:mod:`.server`). A written page
holds a bounded part (:func:`~ldp_marginals.pipelines.dashboard.export.static_views`: the latest
complete window of each collection and key, the charts over the windows before it) and says so
(:mod:`.export`). Both are the same page (:mod:`.page`). Importing this package does not import
Beam.
"""
from __future__ import annotations

import argparse
import os
import sys

from ldp_marginals.pipelines.dashboard.export import write
from ldp_marginals.pipelines.dashboard.server import exposure_warning, make_server
from ldp_marginals.pipelines.dashboard.view import DEFAULT_SPAN, SPANS


def add_dashboard_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--estimates", required=True, help="the job's output directory")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="write one self-contained HTML file")
    where.add_argument("--serve", type=int, metavar="PORT", help="serve the page on localhost:PORT")
    parser.add_argument("--host", default="127.0.0.1", help="interface to serve on (default: localhost only)")
    parser.add_argument("--marginal", action="append", default=None, metavar="LABELS",
                        help="a set to chart over time, as comma-separated bit labels (repeat); "
                             "default: the first ten 1-way marginals (the page has a picker)")
    parser.add_argument("--span", type=int, choices=SPANS, default=DEFAULT_SPAN,
                        help=f"--out: the windows the static page's charts span, ending at the latest complete window "
                             f"(default {DEFAULT_SPAN}; the served page lets you choose)")
    parser.add_argument("--refresh-seconds", type=float, default=5.0, help="served page: how often to look for new windows")


def main(args) -> None:
    marginals = [[label.strip() for label in m.split(",") if label.strip()] for m in args.marginal or []] or None
    if args.refresh_seconds <= 0:
        raise ValueError(f"--refresh-seconds must be > 0, got --refresh-seconds={args.refresh_seconds}")
    if args.out:
        print(f"dashboard written to {os.path.abspath(write(args.estimates, args.out, marginals, args.span))}")
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

