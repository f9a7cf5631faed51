"""The 64-bit hash of a byte string that keys clients (and groups equal strings in the batch
readers): FNV-1a 64 over the bytes, xor their length. One definition, :func:`span_hashes`, written
in the subset of Python that numba compiles: the batch readers run it compiled
(``ldp._kernels.span_hashes`` is this function under ``numba.njit``) over a block's spans, and
:func:`~ldp_marginals.ldp.aggregate.client_key` runs it on one token's bytes through
:func:`ldp_marginals.ldp._compiled.span_hashes`, compiled when numba is installed and as plain
Python over numpy scalars otherwise (``ldp`` imports without numba).
"""
from __future__ import annotations

import numpy as np

FNV_OFFSET = 14695981039346656037   # FNV-1a 64's offset basis
FNV_PRIME = 1099511628211            # FNV-1a 64's prime


def span_hashes(buf, offs, lens):
    """Per span ``buf[offs[i]:offs[i] + lens[i]]`` (uint8 buffer, int64 offsets and lengths), its
    FNV-1a 64 xor its length, as uint64. Multiplication wraps modulo 2**64 (run as Python, numpy
    warns of the wrap: :func:`ldp_marginals.ldp._compiled.span_hashes` silences it)."""
    n = offs.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = np.uint64(FNV_OFFSET)
        for t in range(lens[i]):
            h = (h ^ np.uint64(buf[offs[i] + t])) * np.uint64(FNV_PRIME)
        out[i] = h ^ np.uint64(lens[i])
    return out
