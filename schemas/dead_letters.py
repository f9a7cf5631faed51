"""Dead-letter reasons and the job's counter names, owned here (no Beam): every input the job reads
ends up counted (counter :data:`VALID`) or dead-lettered with one of :data:`REASONS` (counter
``dead_letter.<reason>``, :func:`counter_name`, and a row of kind ``dead_letters``, whose schema
``schemas/dead_letter.avsc`` lists the same reasons). Every module that names a reason or a counter
imports it from here: the per-report checks, the config's dimension check, the readers, the
BigQuery sink, the summary and the progress line. The Beam part (the row, counting, tagging) is
:mod:`ldp_marginals.transforms.dead_letters`.
"""
from __future__ import annotations

import types

NAMESPACE = "ldp_marginals"   # every counter of the job lives in this metrics namespace
VALID = "reports.valid"       # counter: reports added to an accumulator (counted in the estimates)
LOST = "reports.lost"         # counter: reports declared by damaged blocks that could not be read
LOST_UNKNOWN = "damaged.count_unreadable"  # counter: damaged ranges whose record count is unreadable
FILES_PLANNED = "files.planned"   # counter: file sets handed to the writers (batch; dead letters' as they reach theirs)
FILES_WRITTEN = "files.written"   # counter: file sets written (Avro, Parquet and entry)
ROWS_WRITTEN = "rows.written"     # counter: rows in the file sets written
# the guard, counted once per window at its close (batch: its one pane), over all its keys: operators'
# view of what min_reports keeps back (a report of sliding windows counts in each of its windows)
REPORTS_PUBLISHED = "reports.published"   # counter: reports in a closed window's published rows
REPORTS_WITHHELD = "reports.withheld"     # counter: reports the guard held back when their window closed
WINDOWS_WITHHELD = "windows.withheld"     # counter: windows and keys that closed with reports held back
OVER_DEVICE_BOUND = "reports.over_device_bound"   # counter: valid reports past a device's bound (privacy.unit:
#                                                  device), counted in VALID but in no estimate (batch)
OVER_KEY_BOUND = "reports.over_key_bound"   # counter: valid reports of a device to keys past its bound on keys
#                                             (privacy.max_keys_per_device), counted in VALID, in no estimate (batch)
# the release ledger (batch: transforms/publication/releases.py): what it withholds of a rerun, by window
REPORTS_WITHHELD_BY_LEDGER = "reports.withheld_by_ledger"   # counter: reports of slices the ledger withheld
CLIENT_ROWS_WITHHELD_BY_LEDGER = "client_rows.withheld_by_ledger"   # counter: windows and keys whose client
#                                                                   extremes the ledger withheld
DEAD_LETTER_PREFIX = "dead_letter."   # counter of a reason: this prefix and the reason
COUNTERS = (VALID, LOST, LOST_UNKNOWN, FILES_PLANNED, FILES_WRITTEN, ROWS_WRITTEN, REPORTS_PUBLISHED,
            REPORTS_WITHHELD, WINDOWS_WITHHELD, OVER_DEVICE_BOUND, OVER_KEY_BOUND, REPORTS_WITHHELD_BY_LEDGER,
            CLIENT_ROWS_WITHHELD_BY_LEDGER)   # and one per reason

# the reasons, one name each (the values are the contract: rows, counters, summary.json)
UNDECODABLE = "undecodable"
DAMAGED_BLOCK = "damaged_block"
UNKNOWN_COLLECTION = "unknown_collection"
WRONG_LENGTH = "wrong_length"
PADDING_BITS = "padding_bits"
BAD_COEFFICIENT = "bad_coefficient"
BAD_SUBSET = "bad_subset"
BAD_TIMESTAMP = "bad_timestamp"
BAD_FIELD = "bad_field"
UNDECLARED_DIMENSION = "undeclared_dimension"
DIMENSION_TOO_LONG = "dimension_too_long"
RESERVED_DIMENSION_VALUE = "reserved_dimension_value"
LATE = "late"
NO_DEVICE_TOKEN = "no_device_token"
BIGQUERY_INSERT = "bigquery_insert"

# reason -> meaning (read-only). The schema's doc of the ``reason`` field lists the same codes.
REASONS = types.MappingProxyType({
    UNDECODABLE: "the bytes are not a NoisyReport: a message that does not decode, or a record whose "
                 "strings are not valid UTF-8",
    DAMAGED_BLOCK: "a byte range of an Avro file that could not be read (truncated or corrupted block or "
                   "header): one dead letter per range, with the range and the records its block declared",
    UNKNOWN_COLLECTION: "no config names the report's collection",
    WRONG_LENGTH: "bits has another length than the collection's layout",
    PADDING_BITS: "a bit past the layout's last bit is set",
    BAD_COEFFICIENT: "a report of a Hadamard-sampling collection (channel kind hadamard) names a coefficient "
                     "index outside 1..T, the coefficients its collection counts",
    BAD_SUBSET: "a report of a subset-randomized-response collection (channel kind subset) whose subset mask "
                "does not hold exactly the collection's width of bits",
    BAD_TIMESTAMP: "event_time is missing, not int millis, or outside [1970, 2100)",
    BAD_FIELD: "a field has the wrong type (collection, bits, dimensions, client) or a client token is "
               "longer than 128 characters",
    UNDECLARED_DIMENSION: "the report carries a dimension its collection does not declare (a config without "
                          "dimensions accepts reports without dimensions only)",
    DIMENSION_TOO_LONG: "a dimension value is longer than the declared max_length",
    RESERVED_DIMENSION_VALUE: "a dimension value is `__all__`, which marks rollup rows, in a collection that "
                              "declares rollups",
    NO_DEVICE_TOKEN: "the collection bounds devices (privacy.unit: device, or unit report with a device bound or "
                     "memoized channels) and the report names no device: its client field (the slice-scoped device "
                     "token) is missing or empty",
    LATE: "the report arrived after every window it belongs to had closed (its end plus the allowed lateness "
          "had passed; streaming). One row per pre-aggregated batch, its `reports` field says how many",
    BIGQUERY_INSERT: "BigQuery refused the row (streaming inserts); the published row is kept in output_row",
})


def check_reason(reason: str) -> str:
    if reason not in REASONS:
        raise ValueError(f"reason must be one of {sorted(REASONS)}, got reason={reason!r}")
    return reason


def counter_name(reason: str) -> str:
    """The counter of one reason: ``dead_letter.<reason>``."""
    return DEAD_LETTER_PREFIX + check_reason(reason)


def totals_by_reason(counters: dict) -> dict:
    """``{reason: count}`` (non-zero only) from the job's counter totals by name."""
    return {reason: counters[counter_name(reason)] for reason in REASONS if counters.get(counter_name(reason))}


def reports_dead_lettered(by_reason: dict) -> int:
    """The reports among :func:`totals_by_reason`'s counts: every reason's counter counts reports
    but ``damaged_block``'s, which counts byte ranges (their reports are :data:`LOST`)."""
    return sum(n for reason, n in by_reason.items() if reason != DAMAGED_BLOCK)
