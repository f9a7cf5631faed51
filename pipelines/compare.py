"""``ldp-marginals compare``: what moved between two windows, or between two values of a dimension,
in a run's outputs: per published marginal (or conditional, ``--kind conditionals``, or mean of a
numeric feature, ``--kind means``) the change of its estimate, its standard error, z and interval,
the largest significant changes first (Benjamini-Hochberg over the sets compared). The question is
the population's (did the share change among the devices?), so each side's variance holds the draw
of its reports beside the randomization (:func:`~ldp_marginals.ldp.compare.population_variance`)."""
from __future__ import annotations

import argparse
import datetime as dt
import difflib
import json

from ldp_marginals.ldp.compare import benjamini_hochberg, change, population_variance
from ldp_marginals.pipelines.read import latest_complete, read_collections, read_rows, to_ms
from ldp_marginals.schemas.collection import ROLLED_UP


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--estimates", required=True, help="a run's output directory")
    parser.add_argument("--collection", default=None, help="the collection (default: the only one)")
    parser.add_argument("--windows", nargs=2, metavar=("FIRST", "SECOND"), default=None,
                        help="two window starts (UTC, e.g. 2026-01-01T00:00), same dimensions")
    parser.add_argument("--dimension", default=None, metavar="KEY=A,B",
                        help="two values of a dimension in one window (the latest complete, or --window)")
    parser.add_argument("--window", default=None,
                        help="a window start (UTC): the window of --dimension; alone, the window compared with the "
                             "previous window that shares no report with it (default: the latest complete window "
                             "against that one)")
    parser.add_argument("--kind", choices=("marginals", "conditionals", "means"), default="marginals",
                        help="compare marginal frequencies (default), the conditionals P(of | given) or the means "
                             "of numeric features")
    parser.add_argument("--fdr", type=float, default=0.05, help="false discovery rate of the table (default 0.05)")
    parser.add_argument("--level", type=float, default=0.95, help="level of the intervals (default 0.95)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def iso(ms: int) -> str:
    """A window start as ISO UTC, as the command prints it."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _latest_complete(estimates: str, collection: str, rows: list) -> int:
    """The latest complete window of the collection (as the dashboard's default: for sliding windows
    not the trailing ones that hold only the last periods' reports)."""
    info = next((c for c in read_collections(estimates) if c["collection"] == collection), None)
    windows = sorted({(r["window_start"], r["window_end"]) for r in rows})
    return latest_complete(windows, info)


def rows_of(rows: list, kind: str) -> list:
    """Copies of the rows of ``kind``, each with ``columns`` naming what it estimates and
    ``frequency`` and ``frequency_variance`` on the scale compared (a mean: the feature's). The
    variance is the population's (:func:`~ldp_marginals.ldp.compare.population_variance`): the
    estimate's own plus the draw of the window's reports (a marginal's over ``n_reports``, a
    conditional's over its ``given_count``; a mean's variance holds that draw already)."""
    rows = [dict(r) for r in rows]
    for r in rows:
        if kind == "marginals":  # the variance is the count's
            r["frequency_variance"] = population_variance(r["frequency"], r["variance"] / r["n_reports"] ** 2,
                                                          r["n_reports"])
            continue
        # a conditional (a frequency) or a mean (the feature's scale), with its own variance
        name = (",".join(r["of"]) + " | " + ",".join(r["given"]) if kind == "conditionals"
                else r["feature"] + (" | " + ",".join(r["given"]) if r["given"] else ""))
        r["columns"] = r["labels"] = [name]
        r["frequency"] = r["estimate"]
        r["frequency_variance"] = (population_variance(r["estimate"], r["variance"], r["given_count"])
                                   if kind == "conditionals" else r["variance"])
    return rows


def _window_start(text: str, name: str, windows: list, collection: str) -> int:
    """A window start given as a time: an error naming the nearest starts when it is not one."""
    ms = to_ms(text, name)
    starts = [s for s, _ in windows]
    if ms not in starts:
        near = sorted(starts, key=lambda s: abs(s - ms))[:2]
        raise ValueError(f"{name} {text}: not a window start of collection {collection!r} (UTC); the nearest are "
                         f"{', '.join(iso(s) for s in sorted(near))}")
    return ms


def _check_dimension(key: str, pair: list, in_window: list, rows: list, start: int) -> None:
    """A key or value with no rows is an error saying which (and the keys or values there are)."""
    keys = sorted({k for r in rows for k in r["dimensions"]})
    if key not in keys:
        close = difflib.get_close_matches(key, keys, n=1)
        raise ValueError(f"--dimension {key}=...: no dimension {key!r} in the outputs; the dimensions are {keys}"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    values = sorted({r["dimensions"][key] for r in in_window if key in r["dimensions"]})
    for value in pair:
        if value not in values:
            close = difflib.get_close_matches(value, values, n=1)
            raise ValueError(f"--dimension {key}={','.join(pair)}: no published rows with {key}={value!r} in window "
                             f"{iso(start)}; the values there are {values}"
                             + (f" (did you mean {close[0]!r}?)" if close else ""))


def compare(args) -> dict:
    if args.windows is not None and (args.dimension is not None or args.window is not None):
        raise ValueError("compare takes --windows FIRST SECOND, or --dimension KEY=A,B (with --window), or --window "
                         "alone, got --windows with " + ("--dimension" if args.dimension is not None else "--window"))
    rows = rows_of(read_rows(args.estimates, args.kind), args.kind)
    names = sorted({r["collection"] for r in rows})
    if not rows:
        raise ValueError(f"--estimates {args.estimates}: no {args.kind} there")
    collection = args.collection or (names[0] if len(names) == 1 else None)
    if collection not in names:
        raise ValueError(f"--collection must be one of {names}, got --collection={args.collection!r}")
    rows = [r for r in rows if r["collection"] == collection]
    windows = sorted({(r["window_start"], r["window_end"]) for r in rows})
    if args.windows:
        a, b = (_window_start(w, "--windows", windows, collection) for w in args.windows)
        first = keyed(r for r in rows if r["window_start"] == a)
        second = keyed(r for r in rows if r["window_start"] == b)
        what = {"windows": list(args.windows), "window_starts": [a, b]}
    elif args.dimension is None:   # a window against the previous one that shares no report with it
        b = (_window_start(args.window, "--window", windows, collection) if args.window
             else _latest_complete(args.estimates, collection, rows))
        before = [s for s, e in windows if e <= b]
        if not before:
            raise ValueError(f"window {iso(b)} has no earlier window that shares no report with it to compare with; "
                             "use --windows FIRST SECOND")
        a = before[-1]
        first = keyed(r for r in rows if r["window_start"] == a)
        second = keyed(r for r in rows if r["window_start"] == b)
        what = {"windows": [iso(a), iso(b)], "window_starts": [a, b]}
    else:
        key, _, values = args.dimension.partition("=")
        pair = values.split(",")
        if not key or len(pair) != 2:
            raise ValueError(f"--dimension must be KEY=A,B, got --dimension={args.dimension!r}")
        if ROLLED_UP in pair:   # the two sides must hold different reports
            raise ValueError(f"--dimension {args.dimension}: {key}={ROLLED_UP} is a rollup row, which holds the "
                             f"reports of every value of {key}: compare two values of {key}, got --dimension="
                             f"{args.dimension!r}")
        start = (_window_start(args.window, "--window", windows, collection) if args.window
                 else _latest_complete(args.estimates, collection, rows))
        in_window = [r for r in rows if r["window_start"] == start]
        _check_dimension(key, pair, in_window, rows, start)

        def side(value):
            return {(tuple(r["columns"]), json.dumps({k: v for k, v in r["dimensions"].items() if k != key},
                                                     sort_keys=True)): r
                    for r in in_window if r["dimensions"].get(key) == value}
        first, second = side(pair[0]), side(pair[1])
        what = {"dimension": key, "values": pair, "window_start": start}
    if not set(first) & set(second):
        raise ValueError("the two sides have no published marginal in common (check the windows or values)")
    out = changes(first, second, args.level, args.fdr)
    return {"collection": collection, "kind": args.kind, **what, "fdr": args.fdr, "level": args.level,
            "compared": len(out), "significant": sum(o["significant"] for o in out), "changes": out,
            "from_runs": [from_runs(first.values()), from_runs(second.values())]}


def from_runs(rows) -> list:
    """The earlier runs whose kept releases some of ``rows`` are (their ``from_run``; empty when every row
    is the owning run's): ``read`` marks a window and key whose rerun the release ledger withheld."""
    return sorted({r["from_run"] for r in rows if r.get("from_run")})


def keyed(rows) -> dict:
    """Rows by ``(columns, dimensions as JSON)``: what :func:`changes` pairs across two sides."""
    return {(tuple(r["columns"]), json.dumps(r["dimensions"], sort_keys=True)): r for r in rows}


def changes(first: dict, second: dict, level: float, fdr: float) -> list:
    """Per key the two sides share (rows with ``frequency`` and ``frequency_variance``, as
    :func:`rows_of` gives them): the change, its test, and whether Benjamini-Hochberg at ``fdr``
    over all of them calls it significant; the largest significant changes first."""
    out = []
    for k in sorted(set(first) & set(second)):
        r1, r2 = first[k], second[k]
        c = change(r1["frequency"], r1["frequency_variance"], r2["frequency"], r2["frequency_variance"], level)
        out.append({"labels": r1["labels"], "dimensions": json.loads(k[1]), "first": r1["frequency"],
                    "second": r2["frequency"], **c._asdict()})
    for o, r in zip(out, benjamini_hochberg([o["p_value"] for o in out], fdr)):
        o["significant"] = r
    out.sort(key=lambda o: (not o["significant"], -abs(o["z"])))
    return out


def render(res: dict) -> str:
    if "window_starts" in res:
        sides = f"window {iso(res['window_starts'][0])} against window {iso(res['window_starts'][1])}"
    else:
        a, b = res["values"]
        sides = f"{res['dimension']}={a} against {res['dimension']}={b} in window {iso(res['window_start'])}"
    def where(o):
        return ",".join(o["labels"]) + (" [" + ",".join(f"{k}={v}" for k, v in sorted(o["dimensions"].items()))
                                        + "]" if o["dimensions"] else "")
    width = max([len("set [dimensions]")] + [len(where(o)) for o in res["changes"]]) + 1   # labels never cut
    lines = [f"{res['collection']}: {sides} (UTC)",
             f"{res['significant']} of {res['compared']} {res['kind']} changed "
             f"(Benjamini-Hochberg at FDR {res['fdr']:g}; intervals at {res['level']:g})",
             f"{'set [dimensions]':{width}} {'first':>8} {'second':>8} {'change':>8} {'se':>7} {'z':>7}  interval"]
    for o in res["changes"]:
        mark = "*" if o["significant"] else " "
        lines.append(f"{mark}{where(o):{width - 1}} {o['first']:8.4f} {o['second']:8.4f} "
                     f"{o['difference']:+8.4f} {o['standard_error']:7.4f} {o['z']:+7.2f}  "
                     f"[{o['ci_low']:+.4f}, {o['ci_high']:+.4f}]")
    for side, runs in zip(("first", "second"), res.get("from_runs") or ()):
        if runs:
            lines.append(f"the {side} side is (in part) the earlier release of run {', '.join(runs)}, kept: the "
                         "release ledger withheld this run's rows there (summary.json, earlier_releases_kept)")
    lines.append("* significant: the population changed (standard errors hold the randomization and the draw of "
                 "each side's reports). Windows hold disjoint reports; overlapping sliding windows make the test "
                 "conservative.")
    return "\n".join(lines)


def main(args) -> dict:
    res = compare(args)
    print(json.dumps(res, indent=2) if args.json else render(res))
    return res
