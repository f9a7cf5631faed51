"""``ldp-marginals read OUT KIND``: a run's rows of one kind printed (CSV, JSON lines) or written to a file
(CSV, JSON lines, Parquet), selected as :func:`ldp_marginals.read` selects them. By default only final
rows: the windows that closed, each key's answer once; a window a stopped streaming run never closed, or
one still open, is left out and counted on stderr (``--no-final-only`` reads its latest pane, which says
``window_state``). In CSV and JSON, times are ISO 8601 in UTC (``2026-01-01T00:00:00Z``, what
``--windows`` takes), ``dimensions`` a JSON object, lists JSON arrays and non-finite numbers empty (CSV)
or null (JSON)."""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import sys

import pyarrow as pa

from ldp_marginals.pipelines.read import ESTIMATORS, NEVER_CLOSED, OPEN, WINDOW_STATE, read
from ldp_marginals.schemas.outputs import DEAD_LETTERS, KINDS, TABLES

FORMATS = ("csv", "json", "parquet")


def add_read_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output_dir", metavar="OUT", help="a run's --output directory")
    parser.add_argument("kind", metavar="KIND", choices=sorted(set(KINDS) | {TABLES}),
                        help=f"what to read: {', '.join(sorted(KINDS))}")
    parser.add_argument("--collection", action="append", default=None,
                        help="a collection to read (repeatable; default: all)")
    parser.add_argument("--windows", nargs="+", default=None, metavar="START",
                        help="one window start, or the first and last starts (inclusive), in UTC, e.g. "
                             "2026-01-01T00:00 2026-01-01T06:00 (default: every window)")
    parser.add_argument("--dimension", action="append", default=None, metavar="NAME=VALUE",
                        help="a dimension value to select (repeatable): the rollup over exactly these dimensions "
                             "where the collection publishes it, else every key holding them; --dimension '' "
                             "alone selects the window's total (or the key without dimensions)")
    parser.add_argument("--exact", action="store_true",
                        help="only the key or rollup that is exactly the --dimension values")
    parser.add_argument("--estimator", choices=sorted(ESTIMATORS), default=None,
                        help="tables only: consistent (default) or unbiased cells")
    parser.add_argument("--final-only", action=argparse.BooleanOptionalAction, default=True,
                        help="only the windows that closed (their final pane); --no-final-only adds the latest "
                             "pane of windows still open or cut short by a stop (window_state says which)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="csv, json (JSON lines) or parquet (default: the --output file's extension, else csv)")
    parser.add_argument("--output", default=None, metavar="FILE", help="write to FILE (default: standard output)")


def parse_dimensions(values: list | None) -> dict | None:
    """``--dimension NAME=VALUE`` arguments -> a dict (``''`` alone: ``{}``), or None when none is given."""
    if values is None:
        return None
    if values == [""]:
        return {}
    out = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"--dimension must be NAME=VALUE, got --dimension={v!r}")
        if name in out:
            raise ValueError(f"--dimension names each dimension once, got {name!r} twice")
        out[name] = value
    return out


def _format(args) -> str:
    if args.format is not None:
        return args.format
    if args.output:
        for fmt, ext in (("parquet", ".parquet"), ("json", ".json"), ("json", ".jsonl"), ("csv", ".csv")):
            if args.output.endswith(ext):
                return fmt
    return "csv"


def _iso(ms: int) -> str:
    t = dt.datetime.fromtimestamp(ms // 1000, tz=dt.timezone.utc)
    return f"{t:%Y-%m-%dT%H:%M:%S}" + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")


def plain_rows(table: pa.Table) -> list:
    """The rows as plain values: times as ISO strings in UTC, maps as dicts, non-finite floats None."""
    columns = {}
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_timestamp(field.type):
            values = [None if v is None else _iso(v) for v in column.cast(pa.int64()).to_pylist()]
        elif pa.types.is_map(field.type):
            values = [None if v is None else dict(v) for v in column.to_pylist()]
        else:
            values = [None if isinstance(v, float) and not math.isfinite(v) else v for v in column.to_pylist()]
        columns[field.name] = values
    names = list(columns)
    return [dict(zip(names, values)) for values in zip(*columns.values())]


def _bytes_safe(value):
    if isinstance(value, (bytes, bytearray)):
        import base64
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def write_csv(table: pa.Table, fh) -> None:
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in plain_rows(table):
        writer.writerow(["" if v is None else json.dumps(v, sort_keys=True) if isinstance(v, (dict, list))
                         else str(v).lower() if isinstance(v, bool) else _bytes_safe(v) for v in row.values()])


def write_json(table: pa.Table, fh) -> None:
    for row in plain_rows(table):
        fh.write(json.dumps({k: _bytes_safe(v) for k, v in row.items()}, sort_keys=False) + "\n")


def _left_out(args, selection: dict) -> str | None:
    """With --final-only: how many windows and keys have no final pane, and why (stderr), or None."""
    if not args.final_only or args.kind == DEAD_LETTERS:
        return None
    latest = read(args.output_dir, args.kind, **selection, final_only=False)
    states = latest.column(WINDOW_STATE).to_pylist()
    starts = latest.column("window_start").cast(pa.int64()).to_pylist()
    dims = [json.dumps(sorted(dict(d or []).items())) for d in latest.column("dimensions").to_pylist()]
    cut = {(s, d) for s, d, w in zip(starts, dims, states) if w == NEVER_CLOSED}
    open_ = {(s, d) for s, d, w in zip(starts, dims, states) if w == OPEN}
    if not cut and not open_:
        return None
    parts = ([f"{len(cut)} never closed (the run was stopped before they closed)"] if cut else []) + \
            ([f"{len(open_)} still open (the run is running)"] if open_ else [])
    return (f"left out windows and keys with no final pane: {', '.join(parts)}; --no-final-only reads their "
            "latest pane")


def main(args) -> None:
    windows = None
    if args.windows is not None:
        if len(args.windows) > 2:
            raise ValueError(f"--windows takes one start or a first and a last start, got {len(args.windows)}: "
                             f"{args.windows}")
        windows = args.windows[0] if len(args.windows) == 1 else tuple(args.windows)
    selection = {"collection": args.collection, "windows": windows, "dimensions": parse_dimensions(args.dimension),
                 "exact": args.exact}
    if args.estimator is not None:
        selection["estimator"] = args.estimator
    if args.kind == DEAD_LETTERS and not args.final_only:
        raise ValueError("--no-final-only is for estimate kinds; dead letters have no panes")
    table = read(args.output_dir, args.kind, **selection, final_only=args.final_only and args.kind != DEAD_LETTERS)
    fmt = _format(args)
    if fmt == "parquet":
        if not args.output:
            raise ValueError("--format parquet needs --output FILE (Parquet is not for a terminal)")
        import pyarrow.parquet as pq
        pq.write_table(table, args.output, compression="zstd")
    else:
        fh = open(args.output, "w", newline="", encoding="utf-8") if args.output else sys.stdout
        try:
            (write_csv if fmt == "csv" else write_json)(table, fh)
        finally:
            if args.output:
                fh.close()
    note = _left_out(args, selection)
    if args.output:
        print(f"wrote {table.num_rows:,} rows of {args.kind} to {args.output}", file=sys.stderr)
    if note:
        print(note, file=sys.stderr)
