"""What a device derives from its secret: the window-scoped device token and the coins of its
permanent (memoized) responses. No table is stored: every derived value is recomputed from the
secret, HMAC-SHA256 over a :func:`~ldp_marginals.ldp.coins.frame` d message.

- The secret: 32 bytes from the operating system's secure generator, made once and kept on the
  device (never sent, never logged).
- The device token of a collection and slice: the first 16 bytes of
  ``HMAC(secret, frame("ldp-marginals/v1/token", collection, slice_start_ms))`` in base64url
  without padding (22 characters). A slice is the period-long piece of event time whose reports
  lie in the same windows (:meth:`~ldp_marginals.ldp.windows.Window.slice_of`): a fixed window
  itself, a sliding window's period, all of time for the global window. Tokens of two slices, or of
  two collections, are unrelated without the secret.
- A permanent coin: the first 4 bytes of ``HMAC(secret, frame("ldp-marginals/v1/permanent",
  collection, feature, value, bit))`` for bit ``bit`` (0-based within the feature) of the feature's
  value ``value`` (a categorical value's name; ``"0"`` or ``"1"`` for a boolean and for a numeric
  feature's encoded bit).
- The permanent-report seed of a whole-report kind that memoizes (docs/client.md section 13): the
  32 bytes ``HMAC(secret, frame("ldp-marginals/v1/permanent-report", collection, kind, value))``,
  ``value`` the true bits in layout order as ``"0"``/``"1"`` characters (bit 0 first); the entropy of
  the HMAC_DRBG whose coins draw the kind's permanent response for that value.
- The encoding coin of a numeric feature whose bit memoizes: the first 4 bytes of
  ``HMAC(secret, frame("ldp-marginals/v1/encoding", collection, feature))``: its encoded bit is
  ``1`` iff this coin is below ``units((x - low)/(high - low))``, the same for every report of the
  same value (Ding et al.'s alpha-point rounding for one bit).

Integers in messages are written in decimal ASCII without sign or leading zeros.
"""
from __future__ import annotations

import base64
import os

from ldp_marginals.ldp.coins import COIN_BYTES, frame, hmac_sha256

SECRET_BYTES = 32
TOKEN_BYTES = 16
TOKEN = "ldp-marginals/v1/token"
PERMANENT = "ldp-marginals/v1/permanent"
ENCODING = "ldp-marginals/v1/encoding"
PERMANENT_REPORT = "ldp-marginals/v1/permanent-report"


def new_secret() -> bytes:
    """A new device secret from the operating system's secure generator."""
    return os.urandom(SECRET_BYTES)


def check_secret(secret) -> bytes:
    if not isinstance(secret, (bytes, bytearray)) or len(secret) != SECRET_BYTES:
        shown = f"len(secret)={len(secret)}" if isinstance(secret, (bytes, bytearray)) else f"secret={type(secret).__name__}"
        raise ValueError(f"secret must be {SECRET_BYTES} bytes, got {shown}")
    return bytes(secret)


def device_token(secret: bytes, collection: str, slice_start_ms: int) -> str:
    """The device token of a collection and slice (module docstring)."""
    if isinstance(slice_start_ms, bool) or not isinstance(slice_start_ms, int) or slice_start_ms < 0:
        raise ValueError(f"slice_start_ms must be an integer >= 0, got slice_start_ms={slice_start_ms!r}")
    digest = hmac_sha256(check_secret(secret), frame(TOKEN, collection, str(slice_start_ms)))
    return base64.urlsafe_b64encode(digest[:TOKEN_BYTES]).rstrip(b"=").decode("ascii")


def permanent_coin(secret: bytes, collection: str, feature: str, value: str, bit: int) -> bytes:
    """The coin of the permanent response of one bit of one value of a feature."""
    return hmac_sha256(check_secret(secret), frame(PERMANENT, collection, feature, value, str(bit)))[:COIN_BYTES]


def encoding_coin(secret: bytes, collection: str, feature: str) -> bytes:
    """The coin that encodes a memoized numeric feature to its bit."""
    return hmac_sha256(check_secret(secret), frame(ENCODING, collection, feature))[:COIN_BYTES]


def permanent_report_seed(secret: bytes, collection: str, kind: str, bits) -> bytes:
    """The seed of the permanent response of a whole-report kind to one value (its true bits)."""
    value = "".join("1" if b else "0" for b in bits)
    return hmac_sha256(check_secret(secret), frame(PERMANENT_REPORT, collection, kind, value))
