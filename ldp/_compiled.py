"""Optional numba-compiled kernels. ``ldp`` stays importable with numpy alone: callers fall back to
numpy when numba is missing (``AVAILABLE`` is False). numba is imported, and the kernels compiled,
on first use, so importing the core (a device's client randomizer, say) does not pay for it.

Where numba is required: the batch readers (:mod:`ldp_marginals.transforms.avro_blocks` and
:mod:`ldp_marginals.transforms.blocks`) need it; in ``ldp`` only counting orders >= 3 uses it here.
"""
from __future__ import annotations

import importlib.util

AVAILABLE = importlib.util.find_spec("numba") is not None


def count_sets(cols, members, out):
    """``out[r] += popcount(AND of cols[members[r, :]])`` over all words, for sets sorted so that
    sets sharing their prefix (all members but the last) are adjacent (compiled on first use)."""
    from ldp_marginals.ldp import _kernels  # imports numba and loads (or compiles) the kernel

    _kernels.count_sets(cols, members, out)
