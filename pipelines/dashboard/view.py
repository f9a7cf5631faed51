"""What the dashboard shows for one selection, read from a run's Parquet outputs through
:func:`ldp_marginals.pipelines.read.read_file` (the manifest's files, checked against it).

A selection is a collection, a key (its dimension values), a window (default: the latest complete
one, :func:`~ldp_marginals.pipelines.read.latest_complete`), the marginals charted over time
(default: every 1-way marginal), the number of windows the charts span, ending at the selected
window, and what the change table compares the selection with (``previous``: the previous window
that shares no report with it; or ``DIM=VALUE``: another value of one of the key's dimensions in
the same window). A view holds only that: the charted series over the span, the window's tables (consistent and unbiased),
correlations, changes and precision, and the lists the page's pickers offer. Files are opened by the manifest's index (the collection's
folder, the span's windows), each one at most once while it is unchanged (:class:`FileCache`).

A file that cannot be read is a problem named in the view; the view shows the rest. Rows an earlier
run published, kept because the release ledger withheld the owning run's rows of their window and
key, carry ``from_run`` (as :func:`~ldp_marginals.pipelines.read.read` gives them); the view lists
those windows and keys (``kept``), the earlier runs behind the selection (``from_run``) and, for the
selected window and key, the summary's line saying what the owning run left out (``notes``, shown on
the page).
"""
from __future__ import annotations

import json
import math
import os
import threading
from collections import OrderedDict
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ldp_marginals.ldp.planning import cell_variance, frequency_variance, half_width_of, mean_variance
from ldp_marginals.ldp.tables import phi_from_frequencies
from ldp_marginals.pipelines import compare
from ldp_marginals.pipelines.read import key_mask, latest_complete, read_collections, read_file, with_from_run
from ldp_marginals.schemas.arrow import to_rows
from ldp_marginals.schemas.collection import ROLLED_UP
from ldp_marginals.schemas.outputs import (
    CONDITIONALS,
    CONSISTENT_TABLES,
    ESTIMATE_KINDS,
    EXTREMES,
    MARGINALS,
    MEANS,
    TABLES,
    WITHHELD,
    OutputError,
    load_manifest,
    manifest_files,
)

SPANS = (24, 48, 168, 720)   # the windows a chart may span (a day, two, a week, a month of hourly windows)
DEFAULT_SPAN = 48
CHANGE_KINDS = (MARGINALS, CONDITIONALS, MEANS)
FDR = 0.05   # the false discovery rate of the page's table of changes (as ``compare``'s default)
MAX_COMPARED_VALUES = 12   # a dimension with more values in a window: compare them with the command
SERIES_KINDS = (EXTREMES, CONDITIONALS, MEANS, WITHHELD)   # charted over the span whole (few rows per window)
DEFAULT_SERIES = 10   # one-way marginals charted by default (the first by bit): one chart stays readable


class FileCache:
    """Arrow tables of the manifest's Parquet files, each read once while its entry, size and
    modification time stay the same; the least recently used are dropped past ``budget_bytes``."""

    def __init__(self, output_dir: str, budget_bytes: int = 256 << 20):
        self.output_dir, self.budget = output_dir, budget_bytes
        self.tables, self.used = OrderedDict(), 0
        self.lock = threading.Lock()

    def read(self, entry: dict) -> pa.Table:
        path = os.path.join(self.output_dir, *entry["files"]["parquet"].split("/"))
        try:
            st = os.stat(path)
            key = (path, entry["rows"], st.st_size, st.st_mtime_ns)
        except OSError:
            key = None
        with self.lock:
            if key in self.tables:
                self.tables.move_to_end(key)
                return self.tables[key]
        table = read_file(self.output_dir, entry)   # raises OutputError naming the file
        if key is not None:
            with self.lock:
                self.tables[key] = table
                self.used += table.nbytes
                while self.used > self.budget and len(self.tables) > 1:
                    _, old = self.tables.popitem(last=False)
                    self.used -= old.nbytes
        return table


def parse_selection(query: dict) -> dict:
    """A selection from a page's query (``{name: text}``); a bad value is a ``ValueError`` naming it."""
    out = {"collection": query.get("collection") or None, "dims": None, "window": None, "sets": None,
           "span": DEFAULT_SPAN, "versus": query.get("versus") or "previous"}
    for name in ("dims", "sets"):
        if query.get(name):
            try:
                out[name] = json.loads(query[name])
            except ValueError:
                raise ValueError(f"{name} must be JSON, got {name}={query[name]!r}") from None
    if out["dims"] is not None and not (isinstance(out["dims"], dict)
                                        and all(isinstance(v, str) for v in out["dims"].values())):
        raise ValueError(f"dims must map dimension names to values, got dims={query['dims']!r}")
    if out["sets"] is not None and not (isinstance(out["sets"], list) and all(
            isinstance(s, list) and all(isinstance(x, str) for x in s) for s in out["sets"])):
        raise ValueError(f"sets must be a list of label lists, got sets={query['sets']!r}")
    for name in ("window", "span"):
        if query.get(name):
            try:
                out[name] = int(query[name])
            except ValueError:
                raise ValueError(f"{name} must be an integer, got {name}={query[name]!r}") from None
    if out["span"] not in SPANS:
        raise ValueError(f"span must be one of {list(SPANS)}, got span={out['span']}")
    return out


def windows_of(manifest: dict, collection: str, kinds=ESTIMATE_KINDS) -> list:
    """``[(start, end)]`` of the collection's windows with a file of ``kinds`` (default: any, the
    withheld rows included), sorted."""
    return sorted({(e["window_start"], e["window_end"]) for kind in kinds
                   for e in manifest_files(manifest, kind) if e["group"] == collection
                   and e["window_start"] is not None})


def previous_window(windows: list, start: int) -> int | None:
    """The latest window that ends by ``start`` (shares no report with the window at ``start``)."""
    before = [s for s, e in windows if e <= start]
    return before[-1] if before else None


def _read(cache: FileCache, entries: list, problems: list) -> pa.Table | None:
    tables = []
    for e in entries:
        try:
            tables.append(with_from_run(cache.read(e), e))   # rows an earlier run published: from_run names it
        except OutputError as err:
            problems.append(str(err))
    return pa.concat_tables(tables) if tables else None


def _labels_mask(table: pa.Table, sets: list) -> pa.Array:
    joined = pc.binary_join(table.column("labels"), "\x00")
    return pc.is_in(joined, value_set=pa.array(["\x00".join(s) for s in sets], pa.string())).fill_null(False)


def _sets_of(table: pa.Table) -> list:
    """The label lists of the marginals in ``table``, by order and then by their bits."""
    if not table.num_rows:
        return []
    keys = pa.table({"j": pc.binary_join(table.column("labels"), "\x00"), "i": np.arange(table.num_rows)})
    first = keys.group_by("j").aggregate([("i", "min")]).column("i_min").to_numpy()
    picked = table.take(first)
    return [labels for _, _, labels in sorted(zip((len(c) for c in picked.column("columns").to_pylist()),
                                                  picked.column("columns").to_pylist(),
                                                  picked.column("labels").to_pylist()))]


def _rows(table: pa.Table | None, dims: dict | None = None) -> list:
    if table is None:
        return []
    if dims is not None:
        table = table.filter(key_mask(table, dims))
    return to_rows(table)


def _feature_of(label: str) -> str | None:
    """``os`` of a categorical bit label ``os=mac`` (None for a boolean's label)."""
    return label.split("=", 1)[0] if "=" in label else None


def correlations(rows: list) -> dict | None:
    """The phi matrix of one window and key's bits whose 1- and 2-way marginals were published. The
    pairs of one categorical feature's values are left out (None): a report has one value, so their
    joint is 0 by construction and their phi a function of the two frequencies alone, not a finding."""
    single = {r["columns"][0]: r for r in rows if len(r["columns"]) == 1}
    pairs = {tuple(r["columns"]): r["frequency"] for r in rows if len(r["columns"]) == 2}
    bits = sorted(single)
    if len(bits) < 2 or not pairs:
        return None

    def phi(a, b):
        if a == b:
            return 1.0
        fa, fb = _feature_of(single[a]["labels"][0]), _feature_of(single[b]["labels"][0])
        if fa is not None and fa == fb:
            return None
        joint = pairs.get((min(a, b), max(a, b)), float("nan"))
        return phi_from_frequencies(single[a]["frequency"], single[b]["frequency"], joint)
    z = [[phi(a, b) for b in bits] for a in bits]
    r = rows[0]
    return {"collection": r["collection"], "window_start": r["window_start"], "window_end": r["window_end"],
            "dimensions": r["dimensions"], "labels": [single[b]["labels"][0] for b in bits], "z": z}


def _key_json(dims: dict) -> str:
    return json.dumps(dims, sort_keys=True)


def changes(rows_now: dict, rows_before: dict, dims: dict, start: int, before: int | None, info: dict) -> list:
    """The change table's entries for the selected window and key: against the previous window that
    shares no report with it, and against every other value of each of the key's dimensions in the
    same window (up to :data:`MAX_COMPARED_VALUES` values), computed as ``compare`` computes them.
    ``rows_now``/``rows_before``: ``{kind: rows of every key}`` of the window and of the previous one."""
    out = []
    level = info.get("level", 0.95)

    def add(kind, mine, versus_rows, versus, label):
        found = compare.changes(compare.keyed(compare.rows_of(versus_rows, kind)),
                                compare.keyed(compare.rows_of(mine, kind)), level, FDR)
        out.append({"collection": info.get("collection"), "dimensions": dims, "kind": kind, "window_start": start,
                    "versus": versus, "versus_label": label, "fdr": FDR, "changes": found})

    for kind in CHANGE_KINDS:
        mine = [r for r in rows_now.get(kind, []) if r["dimensions"] == dims]
        if before is not None:
            add(kind, mine, [r for r in rows_before.get(kind, []) if r["dimensions"] == dims], "previous",
                compare.iso(before))
        for dim in sorted(d for d in dims if dims[d] != ROLLED_UP):   # a rollup's values hold each other's reports
            others = {}
            for r in rows_now.get(kind, []):
                d = r["dimensions"]
                if d.keys() == dims.keys() and all(d[k] == v for k, v in dims.items() if k != dim) and \
                        d[dim] not in (dims[dim], ROLLED_UP):
                    others.setdefault(d[dim], []).append(r)
            if len(others) + 1 > MAX_COMPARED_VALUES:
                continue
            for value, rows in sorted(others.items()):
                # paired without the compared dimension, as compare --dimension pairs them
                strip = [dict(r, dimensions={k: v for k, v in r["dimensions"].items() if k != dim}) for r in rows]
                own = [dict(r, dimensions={k: v for k, v in r["dimensions"].items() if k != dim}) for r in mine]
                add(kind, own, strip, f"{dim}={value}", f"{dim}={value}")
    return out


def _row_level(r: dict) -> float:
    """The level of a row's (symmetric normal) interval: from its half-width and variance."""
    half = (r["ci_high"] - r["ci_low"]) / 2
    return 2 * NormalDist().cdf(half / math.sqrt(r["variance"])) - 1 if r["variance"] > 0 else float("nan")


def precision(marginals: list, tables: list, means: list, c: dict | None) -> list:
    """Per published 1-way marginal, table cell and mean over all reports of the window: the
    half-width ``ldp-marginals plan`` gives at the window's reports (worst case) beside the measured
    one, both on the published scale and at the level of the row's interval."""
    out = []
    if not c:
        return out

    def add(r, kind, label, planned_variance, measured):
        level = _row_level(r) if r.get("interval") == "simultaneous" else c["level"]
        out.append({"collection": r["collection"], "dimensions": r["dimensions"], "window_start": r["window_start"],
                    "kind": kind, "label": label, "n_reports": r["n_reports"],
                    "planned": half_width_of(planned_variance, level), "measured": measured,
                    "interval": r.get("interval", "per_cell")})

    kind = (c.get("channel") or {}).get("kind")
    if kind in ("hadamard", "subset"):   # a channel kind: its closed-form worst case
        ch = c["channel"]
        extra = [[c["labels"].index(label) for label in s] for s in ch.get("extra_sets", [])]   # the pool's extra sets
        if kind == "subset":
            from ldp_marginals.ldp.subset_reports import cell_variance_per_report
            from ldp_marginals.ldp.subset_rr import SubsetRR
            mech = SubsetRR(len(c["labels"]), c["max_order"], ch["epsilon"], ch["width"], extra)
        else:
            from ldp_marginals.ldp.hadamard import HadamardSampling
            from ldp_marginals.ldp.hadamard_reports import cell_variance_per_report
            mech = HadamardSampling(len(c["labels"]), c["max_order"], ch["epsilon"], ch["slots"], ch["weights"], extra)
        for r, kind in [(r, "marginals") for r in marginals if len(r["columns"]) == 1] + [(r, "tables") for r in tables]:
            label = r["labels"][0] if kind == "marginals" else ", ".join(f"{g}={v}" for g, v in zip(r["group"], r["cell"]))
            add(r, kind, label, cell_variance_per_report(mech, len(r["columns"])) / r["n_reports"],
                (r["ci_high"] - r["ci_low"]) / 2 / r["n_reports"])
        return out
    p_all, q_all = np.array(c["p"]), np.array(c["q"])
    for r in marginals:
        if len(r["columns"]) == 1:
            add(r, "marginals", r["labels"][0], frequency_variance(p_all[r["columns"]], q_all[r["columns"]],
                                                                   r["n_reports"]),
                (r["ci_high"] - r["ci_low"]) / 2 / r["n_reports"])
    for r in tables:
        # a categorical value's bit (label 'os=mac') and a boolean's 'true' must be 1, a boolean's 'false' 0
        ones = [b for b in r["columns"] if "=" in c["labels"][b] or r["cell"][r["group"].index(c["labels"][b])] == "true"]
        zeros = [b for b in r["columns"] if b not in ones]
        add(r, "tables", ", ".join(f"{g}={v}" for g, v in zip(r["group"], r["cell"])),
            cell_variance(p_all[ones], q_all[ones], p_all[zeros], q_all[zeros], r["n_reports"]),
            (r["ci_high"] - r["ci_low"]) / 2 / r["n_reports"])
    for r in means:
        if not r["given"]:
            bit = c["labels"].index(r["feature"])
            add(r, "means", f"mean({r['feature']})",
                mean_variance(c["p"][bit], c["q"][bit], r["low"], r["high"], r["n_reports"]),
                half_width_of(r["variance"], c["level"]))
    return out


def view(output_dir: str, selection: dict, cache: FileCache) -> dict:
    """Everything the page draws for ``selection`` (:func:`parse_selection`), as JSON-safe data."""
    problems = []
    collections = read_collections(output_dir)
    out = {"collections": collections, "problems": problems, "summary": None, "collection": None, "keys": [],
           "windows": [], "window": None, "latest_complete": None, "range": None, "sets_available": [],
           "chosen_marginals": selection["sets"], "span": selection["span"], "spans": list(SPANS),
           "published": [], "correlations": [], "changes": [], "precision": [], "dims": {}, "kept": [],
           "from_run": [], "notes": [],
           **{kind: [] for kind in ESTIMATE_KINDS}}
    try:
        manifest = load_manifest(output_dir)
    except OutputError as err:
        problems.append(str(err))
        return out
    out["summary"] = manifest.get("summary")
    names = sorted({e["group"] for e in manifest["files"] if e["kind"] in ESTIMATE_KINDS}
                   | {c["collection"] for c in collections})
    if not names:
        return out
    collection = selection["collection"] if selection["collection"] in names else names[0]
    info = next((c for c in collections if c["collection"] == collection), None)
    windows = windows_of(manifest, collection)
    # the default: the latest complete window with estimates (one withheld whole publishes none)
    complete = latest_complete(windows, info)
    published = [s for s, _ in windows_of(manifest, collection, (MARGINALS, TABLES, EXTREMES, CONDITIONALS, MEANS))
                 if complete is not None and s <= complete]
    out.update(collection=collection, collections_named=names, windows=[s for s, _ in windows],
               latest_complete=published[-1] if published else complete)
    if not windows:
        return out
    starts = [s for s, _ in windows]
    start = selection["window"] if selection["window"] in starts else out["latest_complete"]
    at = starts.index(start)
    span = starts[max(0, at - selection["span"] + 1):at + 1]
    before = previous_window(windows, start)
    out.update(window=start, range=[span[0], span[-1]], previous=before)

    def entries(kind, first, last):
        return [e for e in manifest_files(manifest, kind) if e["group"] == collection
                and e["window_start"] is not None and first <= e["window_start"] <= last]

    # the window itself and the previous one: every key (the pickers, the comparisons between values)
    now = {kind: _rows(_read(cache, entries(kind, start, start), problems))
           for kind in (MARGINALS, TABLES, CONSISTENT_TABLES, CONDITIONALS, MEANS, EXTREMES, WITHHELD)}
    keys = sorted({_key_json(r["dimensions"]) for rows in now.values() for r in rows})
    # by default the first key with estimates in the window (a key withheld whole there shows nothing)
    shown = sorted({_key_json(r["dimensions"]) for kind, rows in now.items() if kind != WITHHELD for r in rows})
    dims = selection["dims"] if selection["dims"] is not None and _key_json(selection["dims"]) in keys else (
        json.loads((shown or keys)[0]) if keys else {})
    out.update(dims=dims, keys=[json.loads(k) for k in keys])
    mine = {kind: [r for r in rows if r["dimensions"] == dims] for kind, rows in now.items()}
    # windows and keys whose earlier release the run kept (the release ledger withheld its own rows there)
    out["kept"] = [k for k in (out["summary"] or {}).get("earlier_releases_kept") or () if k["collection"] == collection]
    out["from_run"] = compare.from_runs(r for kind, rows in mine.items() if kind != WITHHELD for r in rows)
    out["notes"] = [k["note"] for k in out["kept"] if k["window_start"] == start and k["key"] == dims]
    earlier = {kind: _rows(_read(cache, entries(kind, before, before), problems)) for kind in CHANGE_KINDS} \
        if before is not None else {}
    # the span: the charted marginals (the sets the key published in it), every kind charted over time
    marg = _read(cache, entries(MARGINALS, span[0], span[-1]), problems)
    sets = selection["sets"] or []
    if marg is not None:
        marg = marg.filter(key_mask(marg, dims))
        out["published"] = sorted({(s, n) for s, n in zip(marg.column("window_start").cast(pa.int64()).to_pylist(),
                                                          marg.column("n_reports").to_pylist())})
        out["sets_available"] = _sets_of(marg)
        if selection["sets"] is None:
            sets = [s for s in out["sets_available"] if len(s) == 1][:DEFAULT_SERIES]
        out[MARGINALS] = to_rows(marg.filter(_labels_mask(marg, sets))) if sets else []
    out["sets"] = sets
    for kind in SERIES_KINDS:   # withheld windows: up to the latest, so that one held back after the window shows
        last = starts[-1] if kind == WITHHELD else span[-1]
        out[kind] = _rows(_read(cache, entries(kind, span[0], last), problems), dims)
    out[TABLES] = mine[TABLES]
    out[CONSISTENT_TABLES] = mine[CONSISTENT_TABLES]   # shown by default; the unbiased cells on request
    phi = correlations(mine[MARGINALS])
    out["correlations"] = [phi] if phi else []
    out["changes"] = changes(now, earlier, dims, start, before, info or {"collection": collection})
    out["precision"] = precision(mine[MARGINALS], mine[TABLES], mine[MEANS], info)
    return out
