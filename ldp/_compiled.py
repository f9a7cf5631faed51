"""Optional numba-compiled kernels. ``ldp`` stays importable with numpy alone: callers fall back to
numpy when numba is missing (``AVAILABLE`` is False). numba is imported, and the kernels compiled,
on first use, so importing the core (a device's client randomizer, say) does not pay for it.

Where numba is required: the batch readers (:mod:`ldp_marginals.transforms.avro_blocks` and
:mod:`ldp_marginals.transforms.blocks`) need it; in ``ldp`` counting orders >= 3 and the client key
(:func:`span_hashes`) use it here.
"""
from __future__ import annotations

import importlib.util

import numpy as np

from ldp_marginals.ldp import hashing

AVAILABLE = importlib.util.find_spec("numba") is not None


def span_hashes(buf, offs, lens):
    """:func:`ldp_marginals.ldp.hashing.span_hashes`: compiled when numba is installed, else the same
    function run as Python (numpy's warning of the multiplication's wrap silenced: the hash wraps
    modulo 2**64 by definition)."""
    if AVAILABLE:
        from ldp_marginals.ldp import _kernels
        return _kernels.span_hashes(buf, offs, lens)
    with np.errstate(over="ignore"):
        return hashing.span_hashes(buf, offs, lens)


def count_sets(cols, members, out):
    """``out[r] += popcount(AND of cols[members[r, :]])`` over all words, for sets sorted so that
    sets sharing their prefix (all members but the last) are adjacent (compiled on first use)."""
    from ldp_marginals.ldp import _kernels  # imports numba and loads (or compiles) the kernel

    _kernels.count_sets(cols, members, out)


def below_per_owner(owner, rank, cap, bound: int, n_real: int):
    """:func:`ldp_marginals.ldp._kernels.below_per_owner` (compiled on first use; numba required:
    callers check :data:`AVAILABLE`)."""
    from ldp_marginals.ldp import _kernels
    return _kernels.below_per_owner(owner, rank, cap, bound, n_real)


def report_ranks(collection_key, device_keys, event_ms):
    """:func:`ldp_marginals.ldp._kernels.report_ranks` (compiled on first use; numba required: callers
    check :data:`AVAILABLE`)."""
    from ldp_marginals.ldp import _kernels
    return _kernels.report_ranks(collection_key, device_keys, event_ms)


def distinct_rows(words, limit: int):
    """:func:`ldp_marginals.ldp._kernels.distinct_rows` (compiled on first use; numba required: callers
    check :data:`AVAILABLE`)."""
    from ldp_marginals.ldp import _kernels
    return _kernels.distinct_rows(words, limit)


def pattern_state_sums(inverse, bits, cols, widths, tables, n_clients: int):
    """:func:`ldp_marginals.ldp._kernels.pattern_state_sums` (compiled on first use; numba required:
    callers check :data:`AVAILABLE`)."""
    from ldp_marginals.ldp import _kernels
    return _kernels.pattern_state_sums(inverse, bits, cols, widths, tables, n_clients)
