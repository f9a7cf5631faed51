"""Where a client's random coins come from, and how a coin becomes a decision.

Every random choice a client makes is one *coin*: 4 bytes read as an unsigned 32-bit big-endian
integer ``U``. A choice with probability ``t`` is 1 iff ``U < units(t)``, where
``units(t) = floor(t * 2^32 + 1/2)`` (round half up), computed in IEEE-754 doubles as written: the
product is exact (a power of two), the sum rounds to nearest even as IEEE-754 defines it, so every
language gets the same integer. ``t = 0`` never fires, ``t = 1`` always does, and the realized
probability ``units(t) / 2^32`` is within 2^-33 of ``t``. The same arithmetic in Java (``Math.floor``, ``long``), JavaScript (``Math.floor``,
``DataView.getUint32``) and Python gives the same decision from the same bytes.

Coins come from a *generator* with one method, ``generate(n) -> n bytes``:

- :class:`SystemCoins`: the operating system's secure generator (``os.urandom``), in production;
- :class:`HmacDrbg`: HMAC_DRBG with SHA-256 (NIST SP 800-90A Rev. 1, section 10.1.2; no
  prediction resistance, no reseed, no additional input) keyed by a test seed, in tests and test
  vectors. HMAC-SHA256 is the one primitive that Java 11 (``javax.crypto.Mac``), browsers
  (WebCrypto ``HMAC``/``SHA-256``), Node (``crypto.createHmac``) and Python (``hmac``) all have without
  extra libraries; SHAKE-256 is missing from WebCrypto and from Java 11's providers.

Keyed derivations hash :func:`frame` d messages: each part length-prefixed, so that no two lists of
parts give the same bytes.
"""
from __future__ import annotations

import hashlib
import hmac
import math
import os

COIN_BYTES = 4
COIN_RANGE = 1 << 32
MAX_REQUEST_BYTES = 1 << 16      # SP 800-90A, Table 2: at most 2^19 bits per HMAC_DRBG request
_MAX_REQUESTS = 1 << 48           # SP 800-90A: reseed_interval for HMAC_DRBG


def units(probability: float) -> int:
    """``floor(t * 2^32 + 1/2)``: the number of the 2^32 coin values below which a choice of
    probability ``t`` fires."""
    if isinstance(probability, bool) or not isinstance(probability, (int, float)) \
            or not 0.0 <= float(probability) <= 1.0:
        raise ValueError(f"probability must be a number in [0, 1], got probability={probability!r}")
    return math.floor(float(probability) * COIN_RANGE + 0.5)


def coin_value(coin: bytes) -> int:
    """The unsigned 32-bit big-endian integer of a 4-byte coin."""
    if len(coin) != COIN_BYTES:
        raise ValueError(f"coin must have {COIN_BYTES} bytes, got len(coin)={len(coin)}")
    return int.from_bytes(coin, "big")


def decide(coin: bytes, probability: float) -> int:
    """1 iff the coin's value is below ``units(probability)``: a choice that fires with probability
    ``units(probability) / 2^32``."""
    return int(coin_value(coin) < units(probability))


def frame(*parts: str) -> bytes:
    """The message of a keyed derivation: each part as its UTF-8 bytes preceded by their length as
    an unsigned 32-bit big-endian integer."""
    out = bytearray()
    for part in parts:
        if not isinstance(part, str):
            raise ValueError(f"parts must be strings, got {part!r}")
        data = part.encode("utf-8")
        out += len(data).to_bytes(4, "big") + data
    return bytes(out)


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


class SystemCoins:
    """The operating system's secure generator (``os.urandom``): what a device uses."""

    def generate(self, n: int) -> bytes:
        return os.urandom(n)


class HmacDrbg:
    """HMAC_DRBG (NIST SP 800-90A Rev. 1, 10.1.2) with SHA-256: the seeded generator of tests.

    Instantiate with ``entropy || nonce || personalization`` as seed material; each
    :meth:`generate` is one Generate call without additional input (the state is updated after
    every call, so ``generate(8)`` differs from two ``generate(4)``).
    """

    def __init__(self, entropy: bytes, nonce: bytes = b"", personalization: bytes = b""):
        for name, value in (("entropy", entropy), ("nonce", nonce), ("personalization", personalization)):
            if not isinstance(value, (bytes, bytearray)):
                raise ValueError(f"{name} must be bytes, got {name}={value!r}")
        if len(entropy) < 32:
            raise ValueError(f"entropy must have at least 32 bytes (256-bit strength), got len(entropy)={len(entropy)}")
        self._key = b"\x00" * 32
        self._value = b"\x01" * 32
        self._update(bytes(entropy) + bytes(nonce) + bytes(personalization))
        self._requests = 1

    def _update(self, provided: bytes) -> None:
        self._key = hmac_sha256(self._key, self._value + b"\x00" + provided)
        self._value = hmac_sha256(self._key, self._value)
        if provided:
            self._key = hmac_sha256(self._key, self._value + b"\x01" + provided)
            self._value = hmac_sha256(self._key, self._value)

    def generate(self, n: int) -> bytes:
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_REQUEST_BYTES:
            raise ValueError(f"n must be an integer in [1, {MAX_REQUEST_BYTES}] bytes per request, got n={n!r}")
        if self._requests > _MAX_REQUESTS:
            raise ValueError("HMAC_DRBG needs a reseed after 2^48 requests; instantiate a new one")
        out = bytearray()
        while len(out) < n:
            self._value = hmac_sha256(self._key, self._value)
            out += self._value
        self._update(b"")
        self._requests += 1
        return bytes(out[:n])
