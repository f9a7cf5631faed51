"""``ldp_marginals.read``: a run's outputs as an Arrow table, for notebooks, ``compare`` and the
dashboard. It reads the Parquet files of the run that owns the directory (its manifest,
:func:`ldp_marginals.schemas.outputs.load_manifest`) and nothing else; a file that is missing,
damaged or holds another number of rows than its manifest entry is an error naming it, never
skipped or read in part.

    >>> import ldp_marginals
    >>> t = ldp_marginals.read("out/demo", "marginals", collection="app",
    ...                        windows=("2026-01-01T00:00", "2026-01-01T12:00"), dimensions={})
    >>> t.to_pandas()   # where pandas is installed
    >>> ldp_marginals.read("out/demo", "tables")                         # consistent tables (default)
    >>> ldp_marginals.read("out/demo", "tables", estimator="unbiased")   # the unbiased cells
"""
from __future__ import annotations

import datetime as dt
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ldp_marginals.schemas.arrow import arrow_schema, to_rows, with_columns
from ldp_marginals.schemas.collection import ROLLED_UP
from ldp_marginals.schemas.outputs import (
    COLLECTIONS_FILE,
    CONSISTENT_TABLES,
    DEAD_LETTERS,
    FINAL,
    FROM_RUN,
    PANE_INDEX,
    ROLLUP,
    SCHEMA_OF,
    TABLES,
    OutputError,
    check_kind,
    entry_final,
    is_rollup,
    load_manifest,
    manifest_files,
)


def to_ms(value, name: str = "windows") -> int:
    """A time as int milliseconds since the epoch: int milliseconds, a datetime (naive: UTC) or an
    ISO string (no offset: UTC)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be times (ISO strings, datetimes or int milliseconds), got {name}={value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{name} must be UTC times such as 2026-01-01T00:00, got {name}={value!r}") from None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(round(value.timestamp() * 1000))
    raise ValueError(f"{name} must be times (ISO strings, datetimes or int milliseconds), got {name}={value!r}")


def _window_range(windows) -> tuple | None:
    """``windows`` -> ``(first start, last start)`` in ms, inclusive; None for every window."""
    if windows is None:
        return None
    if isinstance(windows, (tuple, list)):
        if len(windows) != 2:
            raise ValueError(f"windows must be one window start or a (first, last) pair of starts, got windows={windows!r}")
        first, last = (to_ms(w) for w in windows)
        if last < first:
            raise ValueError(f"windows must be (first, last) with first <= last, got windows={windows!r}")
        return first, last
    start = to_ms(windows)
    return start, start


def read_file(output_dir: str, entry: dict) -> pa.Table:
    """One file set's Parquet file, checked against its manifest entry."""
    path = os.path.join(output_dir, *entry["files"]["parquet"].split("/"))
    schema = arrow_schema(SCHEMA_OF[entry["kind"]])
    try:
        table = pq.read_table(path, schema=schema)
    except FileNotFoundError:
        raise OutputError(f"{path} is missing (the run's manifest lists it)") from None
    except (OSError, pa.ArrowException) as err:
        raise OutputError(f"{path} cannot be read: {err}") from None
    if table.num_rows != entry["rows"]:
        raise OutputError(f"{path} holds {table.num_rows} rows where the run's manifest says {entry['rows']}: it was "
                          "changed after the run wrote it")
    return table


def with_entry_panes(table: pa.Table, manifest: dict, entry: dict) -> pa.Table:
    """``table`` (the rows of ``entry``) with the pane columns that a file written before rows said their
    pane (schema version 1: the entry has no ``final``) holds as nulls filled from its entry:
    ``pane_index``, ``final`` (:func:`~ldp_marginals.schemas.outputs.entry_final`) and ``rollup``;
    ``pane_timing`` stays null (such an entry does not say it)."""
    if FINAL in entry or entry["kind"] == DEAD_LETTERS:
        return table
    return with_columns(table, {PANE_INDEX: int(entry["pane"]), FINAL: entry_final(manifest, entry),
                                ROLLUP: is_rollup(entry.get("key") or {})})


def window_states(manifest: dict, final: pa.Array) -> pa.Array:
    """The column ``window_state`` of rows whose ``final`` column is ``final``: ``closed`` (a final pane:
    the window's answer), ``open`` (a streaming run still running; the window may publish more) or
    ``never_closed`` (the run stopped, by a cancel or a Ctrl-C, before the window closed: its latest
    pane is all there is, and is not the window's answer)."""
    stopped = manifest.get("mode") != "streaming" or bool(manifest.get("stopped"))
    final = pc.fill_null(final, False)
    return pc.if_else(final, pa.scalar(CLOSED), pa.scalar(NEVER_CLOSED if stopped else OPEN))


def with_from_run(table: pa.Table, entry: dict) -> pa.Table:
    """``table`` (the rows of ``entry``) with the column ``from_run``: null for rows of the run that owns
    the directory; the id of the earlier run that published them for rows that run's release the owning
    run kept, its own rows of their window and key withheld by the release ledger (docs/design.md, "The
    release ledger", *What stays published*)."""
    return table.append_column(pa.field(FROM_RUN, pa.string()),
                               pa.array([entry.get(FROM_RUN)] * table.num_rows, pa.string()))


WINDOW_STATE = "window_state"   # the column read() adds: whether the row's window closed
CLOSED, OPEN, NEVER_CLOSED = "closed", "open", "never_closed"

CONSISTENT, UNBIASED = "consistent", "unbiased"
ESTIMATORS = {CONSISTENT: CONSISTENT_TABLES, UNBIASED: TABLES}   # read(kind="tables", estimator=...) -> the kind read


def _table_kind(kind: str, estimator) -> tuple:
    """``(kind read, estimator)``: ``tables`` are the consistent tables unless ``estimator`` is
    ``unbiased``; ``consistent_tables`` are the consistent ones; no other kind takes an estimator."""
    if estimator is not None and estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {sorted(ESTIMATORS)}, got estimator={estimator!r}")
    if kind == TABLES:
        estimator = estimator or CONSISTENT
        return ESTIMATORS[estimator], estimator
    if kind == CONSISTENT_TABLES:
        if estimator not in (None, CONSISTENT):
            raise ValueError(f"kind {kind!r} holds the consistent tables, got estimator={estimator!r}; read kind "
                             f"'tables' with estimator='unbiased' for the unbiased ones")
        return kind, CONSISTENT
    if estimator is not None:
        raise ValueError(f"estimator applies to kind 'tables' only, got kind={kind!r}, estimator={estimator!r}")
    return kind, None


def read(output_dir: str, kind: str, collection=None, windows=None, dimensions: dict | None = None,
         estimator: str | None = None, exact: bool = False, final_only: bool = False) -> pa.Table:
    """The rows of ``kind`` (marginals, tables, extremes, conditionals, means, withheld, dead_letters)
    in the run that owns ``output_dir``, as a :class:`pyarrow.Table` of the kind's schema (the Avro
    contract's fields; times as UTC millisecond timestamps).

    ``tables`` are the consistent tables by default (kind ``consistent_tables``: non-negative, each
    group's cells summing to one, groups agreeing on shared features), the unbiased cells with
    ``estimator="unbiased"`` (kind ``tables``, with their variances); either way the rows gain a column
    ``estimator`` (``consistent`` or ``unbiased``) that says which they are. A run written before
    consistent tables existed has none: reading its tables without ``estimator="unbiased"`` is an
    error that says so.

    ``collection``: a name or a list of names (default: all). ``windows``: one window start, or a
    ``(first, last)`` pair of starts, inclusive (ISO strings in UTC, datetimes or int milliseconds;
    default: every window). ``dimensions``: a dict of dimension values. Where the collection publishes
    the rollup over exactly these dimensions (its rows' other dimensions are ``__all__``), its rows:
    ``{"region": "eu"}`` is the region's total over every other dimension, ``{}`` the window's total.
    Else the rows of every key that holds them (``{"region": "eu"}`` selects ``region=eu`` whatever
    the key's other dimensions; rollup rows are left out, so nothing is counted twice); ``{}``: the key
    without dimensions. With ``exact``, only the key or rollup that is exactly ``dimensions`` (a
    rollup's ``__all__`` dimensions counted as absent). Default: every key and rollup row. A
    ``dimensions`` that matches no key of the selected collections and windows is a ValueError
    naming the keys there are; a key that exists but was withheld gives no rows (``withheld`` says
    why). Of a window's panes only the latest is read (it holds the window's estimate so far); with
    ``final_only``, only final panes: the windows that closed, each key's answer (what a sum over
    windows should read; a streaming run's open windows and those a stop cut short are left out).

    Every row says its pane: ``pane_index``, ``pane_timing`` (``EARLY``, ``ON_TIME``, ``LATE``), ``final``
    and ``rollup`` (a total over dimensions: sum key rows or rollup rows, never both), and the reader
    adds ``window_state``: ``closed`` (a final row), ``open`` (a streaming run still running) or
    ``never_closed`` (the run was stopped before the window closed). Dead letters have none of these.

    Every row has a column ``from_run``: null where the row is the owning run's; the id of an earlier
    run where the owning run kept that run's rows of a window and key because the release ledger
    withheld its own (a rerun never unpublishes: the ``withheld`` row and ``summary.json``'s
    ``earlier_releases_kept`` name the reports the owning run left out there)."""
    check_kind(kind)
    kind, which = _table_kind(kind, estimator)
    names = None if collection is None else ({collection} if isinstance(collection, str) else set(collection))
    span = _window_range(windows)
    if dimensions is not None and not isinstance(dimensions, dict):
        raise ValueError(f"dimensions must be a dict of key -> value, got dimensions={dimensions!r}")
    manifest = load_manifest(output_dir)
    entries = manifest_files(manifest, kind, final_only=final_only)
    if kind == CONSISTENT_TABLES and not entries and manifest_files(manifest, TABLES):
        raise OutputError(f"{output_dir} holds unbiased tables but no consistent ones (a run written before "
                          "they were published): read kind 'tables' with estimator='unbiased'")
    if names is not None and kind != DEAD_LETTERS:   # dead letters are grouped by writer, not collection
        entries = [e for e in entries if e["group"] in names]
    if span is not None:
        entries = [e for e in entries if e["window_start"] is not None and span[0] <= e["window_start"] <= span[1]]
    tables = [with_from_run(with_entry_panes(read_file(output_dir, e), manifest, e), e) for e in entries]
    schema = arrow_schema(SCHEMA_OF[kind])
    table = pa.concat_tables(tables) if tables else with_from_run(schema.empty_table(), {})
    if kind != DEAD_LETTERS:
        table = table.append_column(pa.field(WINDOW_STATE, pa.string()), window_states(manifest, table.column(FINAL)))
    if names is not None and kind == DEAD_LETTERS:
        table = table.filter(pa.array([c in names for c in table.column("collection").to_pylist()], pa.bool_()))
    if dimensions is not None:
        rollup = rollup_mask(table, dimensions)
        if exact:
            mask = pc.or_(rollup, key_mask(table, dimensions))
        elif pc.any(rollup).as_py():
            mask = rollup
        else:   # every key holding the values, no rollup row (a rollup over more dimensions holds them too)
            mask = pc.and_(key_mask(table, dimensions, partial=bool(dimensions)),
                           pc.invert(rollup_mask(table, None)))
        selected = table.filter(mask)
        if selected.num_rows == 0:
            _check_some_key_matches(dimensions, _keys_there(manifest, table, names, span), exact)
        table = selected
    if which is not None:
        table = table.append_column("estimator", pa.repeat(pa.scalar(which, pa.string()), table.num_rows))
    return table


def _keys_there(manifest: dict, table: pa.Table, names: set | None, span: tuple | None) -> list:
    """The keys (dicts) of the selected collections and windows: of the manifest's entries of every
    estimate kind and of the withheld rows (a key withheld in every window has no estimate file), and
    of ``table``'s rows (a run from before keys were written apart names no key in its entries)."""
    keys = {json.dumps(sorted(e["key"].items())) for e in manifest["files"]
            if e["kind"] != DEAD_LETTERS and e.get("key") is not None
            and (names is None or e["group"] in names)
            and (span is None or (e["window_start"] is not None and span[0] <= e["window_start"] <= span[1]))}
    column = table.column("dimensions").to_pylist() if "dimensions" in table.column_names else []
    keys |= {json.dumps(sorted(dict(d or []).items())) for d in column}
    return [dict(json.loads(k)) for k in sorted(keys)]


def _check_some_key_matches(dimensions: dict, keys: list, exact: bool = False) -> None:
    """A ValueError when ``dimensions`` selects none of ``keys`` (and there are keys to select): a key
    holding them, or with ``exact`` a key or rollup that is exactly them."""
    want = {str(k): str(v) for k, v in dimensions.items()}
    if exact:
        keys_as = [{k: v for k, v in key.items() if v != ROLLED_UP} for key in keys]
        if not keys or want in keys_as:
            return
    elif not keys or any((want.items() <= key.items()) if want else not key for key in keys):
        return
    shown = ", ".join("{" + ", ".join(f"{k}={v}" for k, v in sorted(key.items())) + "}" for key in keys[:20])
    more = f" and {len(keys) - 20} more" if len(keys) > 20 else ""
    raise ValueError(f"dimensions={dimensions!r} matches no key of the selected collections and windows"
                     + (" exactly (a rollup withheld by complementary suppression has no rows)" if exact else "")
                     + f"; the keys are {shown}{more}")


def rollup_mask(table: pa.Table, dimensions: dict | None) -> pa.Array:
    """Which rows are of the rollup that keeps exactly ``dimensions`` (a dict): rows holding each of
    its entries whose every other dimension is ``__all__`` (None: which rows are rollup rows at all)."""
    want = {} if dimensions is None else {str(k): str(v) for k, v in dimensions.items()}
    column = table.column("dimensions").combine_chunks()
    if isinstance(column, pa.ChunkedArray):   # no rows
        return pa.array([], pa.bool_())
    offsets = np.frombuffer(column.buffers()[1], np.int32)[column.offset:column.offset + len(column) + 1]
    pairs = pc.binary_join_element_wise(column.keys, column.items, "\x00")

    def per_row(hit):
        hits = np.concatenate([[0], np.cumsum(np.asarray(hit.fill_null(False).to_numpy(zero_copy_only=False),
                                                         dtype=np.int64))])
        return hits[offsets[1:]] - hits[offsets[:-1]]

    found = per_row(pc.is_in(pairs, value_set=pa.array([f"{k}\x00{v}" for k, v in want.items()], pa.string())))
    rolled = per_row(pc.and_(pc.equal(column.items, ROLLED_UP),
                             pc.invert(pc.is_in(column.keys, value_set=pa.array(list(want), pa.string())))))
    if dimensions is None:
        return pa.array(rolled > 0)
    return pa.array((found == len(want)) & (rolled > 0) & (found + rolled == np.diff(offsets)))


def key_mask(table: pa.Table, dimensions: dict, partial: bool = False) -> pa.Array:
    """Which rows' ``dimensions`` equal ``dimensions`` (a dict), or with ``partial`` hold every entry
    of it (and maybe others), computed on the columns: a row matches when it holds each wanted entry
    (a map's keys are distinct) and, unless ``partial``, no other."""
    want = {str(k): str(v) for k, v in dimensions.items()}
    column = table.column("dimensions").combine_chunks()
    if isinstance(column, pa.ChunkedArray):   # no rows
        return pa.array([], pa.bool_())
    offsets = np.frombuffer(column.buffers()[1], np.int32)[column.offset:column.offset + len(column) + 1]
    counts = np.diff(offsets)
    pairs = pc.binary_join_element_wise(column.keys, column.items, "\x00")
    hit = np.asarray(pc.is_in(pairs, value_set=pa.array([f"{k}\x00{v}" for k, v in want.items()], pa.string()))
                     .fill_null(False).to_numpy(zero_copy_only=False), dtype=np.int64)
    hits = np.concatenate([[0], np.cumsum(hit)])
    found = hits[offsets[1:]] - hits[offsets[:-1]]
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    same_size = np.ones(len(counts), dtype=bool) if partial else counts == len(want)
    return pa.array(same_size & (found == len(want)) & (valid | (len(want) == 0)))


def read_collections(output_dir: str) -> list:
    """The run's ``collections.json`` (each collection's labels, channels, window, ...; the job
    writes it first), or ``[]`` when there is none."""
    path = os.path.join(output_dir, COLLECTIONS_FILE)
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return json.load(fh)


def latest_complete(windows: list, info: dict | None) -> int | None:
    """The start of the latest complete window: the latest whose end is no later than the end of the
    latest window's first period (for fixed windows the latest window itself; for sliding windows
    the latest full-size window, not the trailing ones that hold only the last periods' reports).
    ``windows``: sorted ``(start, end)`` pairs; ``info``: the collection's entry of
    :func:`read_collections`. The window ``compare`` and the dashboard open on by default."""
    if not windows:
        return None
    latest = windows[-1][0]
    period = (info or {}).get("window", {}).get("period_seconds") or (info or {}).get("window", {}).get("size_seconds")
    if not period:
        return latest
    done = [s for s, e in windows if e <= latest + period * 1000]
    return done[-1] if done else latest


def read_rows(output_dir: str, kind: str, **selection) -> list:
    """:func:`read` as Avro rows (dicts; times as int milliseconds, dimensions as dicts)."""
    return to_rows(read(output_dir, kind, **selection))


def to_pandas(table: pa.Table):
    """A table :func:`read` returned as a ``pandas.DataFrame`` with ``dimensions`` as dicts (pyarrow's own
    ``Table.to_pandas()`` gives a map column as lists of pairs) and times as UTC timestamps. pandas is
    the ``pandas`` extra: ``pip install 'ldp-marginals[pandas]'``."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError("to_pandas needs pandas: pip install 'ldp-marginals[pandas]'") from None
    return table.to_pandas(maps_as_pydicts="strict")
