"""The rank that chooses a client's sampled reports: a keyed hash of (collection, client, the report's
event time in ms), never of its bits, so which of a client's reports the client rows take is blind to
what the reports say (docs/design.md, section 7, "Extremes over clients: a sample of c reports").

:func:`report_ranks` has the signature and semantics of the device bound's rank
(``ldp_marginals.ldp.devices.report_ranks(collection_key, device_keys, event_ms)``, issue 47 item 1):
splitmix64's finalizer over the two keys, the event ms (int64 as its two's-complement uint64) xored in
and mixed again, capped at 2^64 - 2. Where the device bound ranks by those times too, the two are one
function: this module should then import it from :mod:`ldp_marginals.ldp.devices` instead.
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.devices import _mix

_LAST_RANK = np.uint64(0xFFFFFFFFFFFFFFFE)


def report_ranks(collection_key: int, device_keys: np.ndarray, event_ms: np.ndarray) -> np.ndarray:
    """uint64 per report: a hash of (collection key, its client key, its event time in ms) and of
    nothing in its content. Reports of one client in one millisecond share a rank."""
    keys = np.asarray(device_keys, dtype=np.uint64)
    ms = np.ascontiguousarray(event_ms, dtype=np.int64).view(np.uint64)
    if keys.shape != ms.shape:
        raise ValueError(f"event_ms must have one time per device key, got {ms.shape} for {keys.shape}")
    with np.errstate(over="ignore"):
        h = _mix(_mix(keys ^ np.uint64(collection_key & 0xFFFFFFFFFFFFFFFF)) ^ ms)
    return np.minimum(h, _LAST_RANK)
