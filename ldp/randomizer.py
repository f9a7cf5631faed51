"""The client randomizer: encode a record and randomize each bit through its channel.

Real clients use a cryptographically secure source (the operating system's CSPRNG through
:func:`os.urandom`); simulations pass a seeded :class:`numpy.random.Generator`. Both paths are
vectorized so that millions of devices can be simulated in chunks.
"""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from ldp_marginals.ldp.channels import ChannelSet
from ldp_marginals.ldp.encoding import Layout, pack_bits

_CHUNK_ROWS = 1 << 16


class SecureUniform:
    """Uniform floats in [0, 1) with 53 random bits each, from the OS CSPRNG (``os.urandom``)."""

    def random(self, shape) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64))
        words = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        return ((words >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))).reshape(shape)


def randomize_bits(bits, channels: ChannelSet, rng=None) -> np.ndarray:
    """Noisy copy of 0/1 ``bits`` (shape ``(d,)`` or ``(n, d)``): a true 1 is reported as 1 with
    probability ``q_i``, a true 0 with probability ``p_i``, independently per bit.

    ``rng`` is a seeded ``numpy.random.Generator`` for simulation; ``None`` uses the OS CSPRNG.
    """
    x = np.asarray(bits, dtype=np.uint8)
    if x.shape[-1] != len(channels):
        raise ValueError(f"bits must have {len(channels)} columns, got shape={x.shape}")
    source = SecureUniform() if rng is None else rng
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    p, q = channels.p, channels.q
    for start in range(0, rows.shape[0], _CHUNK_ROWS):
        block = rows[start:start + _CHUNK_ROWS]
        threshold = np.where(block == 1, q, p)
        out[start:start + _CHUNK_ROWS] = source.random(block.shape) < threshold
    return out.reshape(x.shape)


class ClientRandomizer:
    """What a device runs: encode a record with a :class:`Layout`, randomize, pack to bytes."""

    def __init__(self, layout: Layout, channels: ChannelSet, rng=None):
        if len(channels) != layout.n_bits:
            raise ValueError(
                f"channels must have one channel per bit ({layout.n_bits}), got len(channels)={len(channels)}")
        self.layout = layout
        self.channels = channels
        self.rng = rng

    def randomize(self, record: Mapping) -> bytes:
        """One record -> one noisy packed report (numeric features are encoded with the same source)."""
        source = SecureUniform() if self.rng is None else self.rng
        noisy = randomize_bits(self.layout.encode(record, source), self.channels, self.rng)
        return pack_bits(noisy).tobytes()

    def randomize_many(self, true_bits) -> np.ndarray:
        """True bits ``(n, n_bits)`` -> noisy packed reports ``(n, n_bytes)``."""
        return pack_bits(randomize_bits(true_bits, self.channels, self.rng))
