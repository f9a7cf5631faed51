"""What the reference clients of the whole-report kinds share (``ldp/hadamard_client.py``,
``ldp/subset_client.py``; docs/client.md sections 11 and 12): the client config's JSON (``collection``,
boolean and categorical ``features``, ``window``, and one object named for the kind holding its parameters, in a fixed
order) and the record a report is sent in. Each kind adds its parameters' checks and its randomizer.

Memoization (docs/client.md section 13): a kind's object may hold ``permanent_keep``; the device then draws
the kind's permanent response to each distinct value once, with the coins of :func:`permanent_coins`
(derived from its secret, the same for every report of that value), and each report re-randomizes it
with fresh coins at ``keep``.

The device unit (docs/client.md sections 3 and 5), as the per-bit config declares it: ``token: true`` puts
the device token of the event's slice in ``client`` (:func:`~ldp_marginals.ldp.device.device_token`, the
per-bit client's); ``reports_per_day: R`` refuses a report that would be its UTC day's ``R + 1``-th
(``rate_exceeded``, after every other check and before any coin is drawn). Both keys are optional and
written only when set (true, a number), so a config without them reads and writes as before."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ldp_marginals.ldp.client import (
    BAD_CONFIG,
    Refusal,
    _keys,
    _window,
    boolean_features,
    check_rate,
    device_fields,
    feature_width,
    window_json,
)
from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.ldp.device import device_token, permanent_report_seed


class WholeReportSpec:
    """Mixin of a kind's frozen client spec: ``KIND`` (the config object's name) and ``PARAMS`` (its keys,
    in the order the JSON writes them, each a field of the spec after ``collection``, ``features``,
    ``window``)."""

    KIND: str = ""
    PARAMS: tuple = ()
    OPTIONAL = ("permanent_keep",)   # present iff the collection memoizes (section 13)

    @property
    def n_bits(self) -> int:
        """The report's true bits: a boolean's one, a categorical's one per value (one-hot)."""
        return sum(feature_width(f) for f in self.features)

    @staticmethod
    def features_of(features) -> tuple:
        """``features`` as a spec holds them: a boolean's name, a categorical's ``(name, values)`` (tuples)."""
        return tuple(f if isinstance(f, str) else (f[0], tuple(f[1])) for f in features)

    def params_json(self) -> dict:
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in ((k, getattr(self, k)) for k in self.PARAMS)}
        if self.permanent_keep is not None:
            out["permanent_keep"] = self.permanent_keep
        return out

    def check_device_fields(self) -> None:
        """``token`` a boolean, ``reports_per_day`` None or an integer in ``[1, 2^31 - 1]`` (module docstring)."""
        if not isinstance(self.token, bool):
            raise Refusal(BAD_CONFIG, f"token must be true or false, got token={self.token!r}")
        check_rate(self.reports_per_day)

    def token_of(self, secret: bytes, event_ms: int) -> str | None:
        """What a report at ``event_ms`` carries in ``client``: the device token of its slice when the spec
        says so, else None."""
        return device_token(secret, self.collection, self.window.slice_of(event_ms)) if self.token else None

    def check_permanent_keep(self, low: float) -> None:
        """``permanent_keep``, when given, a number in ``(low, 1]`` (the kind's bound on ``keep``)."""
        v = self.permanent_keep
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not low < v <= 1.0):
            raise Refusal(BAD_CONFIG, f"{self.KIND}.permanent_keep must be a number in ({low!r}, 1], "
                                      f"got permanent_keep={v!r}")

    def to_json(self) -> dict:
        feats = [{"name": f, "type": "boolean"} if isinstance(f, str) else
                 {"name": f[0], "type": "categorical", "values": list(f[1])} for f in self.features]
        out = {"collection": self.collection, "features": feats,
               "window": window_json(self.window), self.KIND: self.params_json()}
        if self.token:
            out["token"] = True
        if self.reports_per_day is not None:
            out["reports_per_day"] = self.reports_per_day
        return out

    @classmethod
    def params_of(cls, spec) -> tuple:
        """``(collection, features, window, {param: value})`` of a client config (a feature: its name when
        boolean, ``(name, values)`` when categorical), checked as every
        whole-report kind's (``Refusal`` ``bad_config`` naming the field)."""
        names, kind = boolean_features(spec, cls.KIND)
        return spec["collection"], tuple(names), _window(spec["window"]), _keys(kind, cls.KIND, cls.PARAMS, cls.OPTIONAL)

    @classmethod
    def device_of(cls, spec) -> dict:
        """``{token, reports_per_day}`` of a client config read by :meth:`params_of` (module docstring)."""
        token, rate = device_fields(spec)
        return {"token": token, "reports_per_day": rate}


def report_record(collection: str, event_ms: int, bits: list, dimensions: Mapping, client: str | None = None) -> dict:
    """The record of one report: ``bits`` (0/1 list) packed least significant first, ``client`` the device
    token (:meth:`WholeReportSpec.token_of`) or null."""
    packed = np.packbits(np.array(bits, dtype=np.uint8), bitorder="little").tobytes()
    return {"collection": collection, "event_time": event_ms, "bits": packed, "dimensions": dimensions,
            "client": client}


def permanent_coins(secret: bytes, collection: str, kind: str, bits, n: int) -> bytes:
    """The ``n`` coin bytes of a device's permanent response to the value ``bits``: one Generate request of
    an HMAC_DRBG instantiated with :func:`~ldp_marginals.ldp.device.permanent_report_seed` alone."""
    return HmacDrbg(permanent_report_seed(secret, collection, kind, bits)).generate(n)
