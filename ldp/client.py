"""The reference client: what a device runs to turn its feature values into one report, byte for
byte as docs/client.md specifies (Java and TypeScript clients reproduce it from the test vectors in
clients/test-vectors/).

A :class:`ClientSpec` is what a device is told about a collection (the JSON of docs/client.md: its
name, features, window, per-bit channels and whether reports carry the device token). A
:class:`DeviceClient` holds the spec, the device secret and a coin generator
(:class:`~ldp_marginals.ldp.coins.SystemCoins` on a device, a seeded
:class:`~ldp_marginals.ldp.coins.HmacDrbg` in tests) and makes a ``NoisyReport`` record; its Avro
bytes are ``ldp_marginals.schemas.encode_message("noisy_report", record)``.

One report, in order:

1. check the input (every refusal is a :class:`Refusal` with a code, docs/client.md);
2. draw ``4 * (numeric features that do not memoize + bits)`` bytes from the generator in one call;
   its 4-byte coins are used in order: first the encoding of each numeric feature that does not
   memoize (layout order), then one per bit (bit order);
3. encode: a boolean is its bit, a categorical value one-hot, a numeric value ``x`` the bit
   ``coin < units((x - low)/(high - low))`` with the next coin, or, when its bit memoizes, with the
   device's encoding coin (:mod:`~ldp_marginals.ldp.device`);
4. randomize each bit ``i`` with true bit ``x``: if it memoizes, ``b = decide(permanent coin,
   q_P if x else p_P)`` then ``y = decide(bit coin, q_I if b else p_I)``; else
   ``y = decide(bit coin, q_I if x else p_I)``;
5. pack: bit ``i`` is ``(bits[i // 8] >> (i % 8)) & 1``; the device token of the event's slice
   goes in ``client`` when the spec says so; dimensions are sorted by their keys' UTF-8 bytes.

The rate (docs/client.md section 3, "The declared rate"): a client counts the reports it makes per UTC
day of their event time (its *rate state*, ``{day number: count}``, which the app persists and passes
back); with ``reports_per_day: R`` in the spec, a report that would be the day's ``R + 1``-th is refused
(``rate_exceeded``) after every other check and before any coin is drawn.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.coins import COIN_BYTES, MAX_REQUEST_BYTES, decide
from ldp_marginals.ldp.device import check_secret, device_token, encoding_coin, permanent_coin
from ldp_marginals.ldp.encoding import BOOLEAN, CATEGORICAL, NUMERIC, Feature, Layout, pack_bits
from ldp_marginals.ldp.memoized import ClientChannels
from ldp_marginals.ldp.windows import MAX_EVENT_MS, MIN_EVENT_MS, Window

# Refusal codes: the same in every client (the negative test vectors name them)
BAD_CONFIG = "bad_config"
BAD_SECRET = "bad_secret"
MISSING_FEATURE = "missing_feature"
UNKNOWN_FEATURE = "unknown_feature"
BAD_VALUE = "bad_value"
OUT_OF_RANGE = "out_of_range"
BAD_EVENT_TIME = "bad_event_time"
BAD_DIMENSIONS = "bad_dimensions"
RATE_EXCEEDED = "rate_exceeded"
BAD_STATE = "bad_state"
CODES = (BAD_CONFIG, BAD_SECRET, MISSING_FEATURE, UNKNOWN_FEATURE, BAD_VALUE, OUT_OF_RANGE, BAD_EVENT_TIME,
         BAD_DIMENSIONS, RATE_EXCEEDED, BAD_STATE)

MS_PER_DAY = 86_400_000
MAX_REPORTS_PER_DAY = 2 ** 31 - 1    # a Java int, a JavaScript safe integer
LAST_DAY = (MAX_EVENT_MS - 1) // MS_PER_DAY   # the UTC day of the last event time a client accepts


class Refusal(ValueError):
    """A client's refusal: ``code`` is one of :data:`CODES`, the message names the field. A refusal of
    a report never echoes what the device was asked to report (a feature's value, the values, the
    dimensions): an application may log it, and the true value is what the randomizer protects."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code


def _is_text(value) -> bool:
    """A string that has UTF-8 bytes: no unpaired surrogate (a JSON ``\\ud800`` escape, or a Java or
    JavaScript string cut inside a surrogate pair), which every client refuses rather than encode."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _keys(spec, where: str, required: tuple, optional: tuple = ()) -> dict:
    if not isinstance(spec, dict):
        raise Refusal(BAD_CONFIG, f"{where} must be an object, got {where}={spec!r}")
    unknown = sorted(set(spec) - set(required) - set(optional))
    missing = [k for k in required if k not in spec]
    if unknown or missing:
        raise Refusal(BAD_CONFIG, f"{where} must have keys {list(required)} (optional {list(optional)}), "
                                  f"got keys={sorted(spec)}")
    return spec


def _channel(spec, where: str) -> Channel:
    _keys(spec, where, ("p", "q"))
    try:
        return Channel(spec["p"], spec["q"])
    except ValueError as err:
        raise Refusal(BAD_CONFIG, f"{where}: {err}") from None


def _window(spec) -> Window:
    kind = spec.get("type") if isinstance(spec, dict) else None
    sizes = {"fixed": ("size_seconds",), "sliding": ("size_seconds", "period_seconds"), "global": ()}
    if kind not in sizes:
        raise Refusal(BAD_CONFIG, f"window.type must be one of {list(sizes)}, got window={spec!r}")
    _keys(spec, "window", ("type",) + sizes[kind])
    try:
        window = Window(kind, spec.get("size_seconds", 0.0), spec.get("period_seconds", 0.0))
    except ValueError as err:
        raise Refusal(BAD_CONFIG, str(err)) from None
    for key in sizes[kind]:
        ms = spec[key] * 1000
        if abs(ms - round(ms)) > 1e-6:
            raise Refusal(BAD_CONFIG, f"window.{key} must be a whole number of milliseconds, got {key}={spec[key]!r}")
    return window


def window_json(window: Window) -> dict:
    """The config's ``window`` object of ``window`` (what :func:`_window` reads)."""
    out = {"type": window.type}
    if window.type != "global":
        out["size_seconds"] = window.size_seconds
    if window.type == "sliding":
        out["period_seconds"] = window.period_seconds
    return out


MAX_BOOLEAN_FEATURES = 62   # a whole-report kind's bits are a 64-bit mask in every client and in the job


def feature_width(feature) -> int:
    """The bits of a whole-report kind's feature: a name (boolean) is one, ``(name, values)`` (categorical)
    one per value (one-hot, as :class:`~ldp_marginals.ldp.encoding.Layout` lays it out)."""
    return 1 if isinstance(feature, str) else len(feature[1])


def feature_name(feature) -> str:
    return feature if isinstance(feature, str) else feature[0]


def check_whole_report(collection, features) -> int:
    """The checks every whole-report kind's spec shares (docs/client.md sections 11 and 12): the collection's
    name and features (a name: boolean; ``(name, values)``: categorical) of 1 to 62 bits; returns their bits."""
    if not isinstance(collection, str) or not collection or not _is_text(collection):
        raise Refusal(BAD_CONFIG, f"collection must be a non-empty string of well-formed Unicode, "
                                  f"got collection={collection!r}")
    d = sum(feature_width(f) for f in features)
    if not features or not 1 <= d <= MAX_BOOLEAN_FEATURES:
        raise Refusal(BAD_CONFIG, f"features must lay out 1 to {MAX_BOOLEAN_FEATURES} bits (a boolean is one, a "
                                  f"categorical one per value), got {d}")
    return d


def boolean_features(spec, kind: str) -> tuple:
    """``(features, kind's object)`` of a whole-report kind's client config: the keys ``collection``,
    ``features``, ``window`` and ``kind`` (optional ``token`` and ``reports_per_day``, as the per-bit
    config's: :func:`device_fields`); every feature ``{name, type: boolean}`` (read as its name) or
    ``{name, type: categorical, values}`` (read as ``(name, values)``, checked as the per-bit config's),
    the names unique."""
    _keys(spec, "config", ("collection", "features", "window", kind), DEVICE_FIELDS)
    feats = spec["features"]
    if not isinstance(feats, list) or not feats:
        raise Refusal(BAD_CONFIG, f"features must be a non-empty list, got features={feats!r}")
    out = []
    for i, f in enumerate(feats):
        categorical = isinstance(f, dict) and f.get("type") == CATEGORICAL
        _keys(f, f"features[{i}]", ("name", "type") + (("values",) if categorical else ()))
        if categorical:
            values = f["values"]
            if not isinstance(values, list) or any(isinstance(t, str) and not _is_text(t) for t in [f["name"]] + values):
                raise Refusal(BAD_CONFIG, f"features[{i}]: values must be a list of well-formed Unicode, got {f!r}")
            try:
                feature = Feature.categorical(f["name"], values)
            except ValueError as err:
                raise Refusal(BAD_CONFIG, f"features[{i}]: {err}") from None
            out.append((feature.name, feature.values))
            continue
        if f["type"] != "boolean" or not isinstance(f["name"], str) or not f["name"] or not _is_text(f["name"]):
            raise Refusal(BAD_CONFIG, f"features[{i}] must be a boolean or categorical feature with a name, got {f!r}")
        out.append(f["name"])
    names = [feature_name(f) for f in out]
    if len(set(names)) != len(names):
        raise Refusal(BAD_CONFIG, f"feature names must be unique, got {names}")
    return tuple(out), spec[kind]


DEVICE_FIELDS = ("token", "reports_per_day")   # a client config's optional keys, every kind's (docs/client.md 3, 5)


def device_fields(spec: dict) -> tuple:
    """``(token, reports_per_day)`` of a client config (every kind's): ``token`` true or false (absent: false),
    ``reports_per_day`` an integer in ``[1, 2^31 - 1]`` when given (absent: None, no limit); ``bad_config``
    otherwise."""
    token = spec.get("token", False)
    if not isinstance(token, bool):
        raise Refusal(BAD_CONFIG, f"token must be true or false, got token={token!r}")
    rate = spec.get("reports_per_day")
    if "reports_per_day" in spec and rate is None:
        raise Refusal(BAD_CONFIG, "reports_per_day must be an integer in [1, "
                                  f"{MAX_REPORTS_PER_DAY}] when given, got reports_per_day=None")
    check_rate(rate)
    return token, rate


def check_rate(rate) -> None:
    """``reports_per_day``: None (no limit) or an integer in ``[1, 2^31 - 1]``; ``bad_config`` otherwise."""
    if rate is not None and not (_is_integer(rate) and 1 <= rate <= MAX_REPORTS_PER_DAY):
        raise Refusal(BAD_CONFIG, f"reports_per_day must be an integer in [1, {MAX_REPORTS_PER_DAY}], "
                                  f"got reports_per_day={rate!r}")


@dataclass(frozen=True)
class ClientSpec:
    """What a device is told about a collection (docs/client.md)."""

    collection: str
    layout: Layout
    window: Window
    channels: ClientChannels
    token: bool = False
    reports_per_day: int | None = None   # the declared rate: at most this many reports a UTC day; None: no limit

    def __post_init__(self):
        if not isinstance(self.collection, str) or not self.collection or not _is_text(self.collection):
            raise Refusal(BAD_CONFIG, f"collection must be a non-empty string of well-formed Unicode, "
                                      f"got collection={self.collection!r}")
        check_rate(self.reports_per_day)
        if len(self.channels) != self.layout.n_bits:
            raise Refusal(BAD_CONFIG, f"channels must have one entry per bit ({self.layout.n_bits}: "
                                      f"{list(self.layout.labels)}), got {len(self.channels)}")
        draws = sum(1 for b in self.layout.numeric_bits if not self.channels.memoizes[b]) + self.layout.n_bits
        if draws * COIN_BYTES > MAX_REQUEST_BYTES:
            raise Refusal(BAD_CONFIG, f"a report may draw at most {MAX_REQUEST_BYTES // COIN_BYTES} coins, "
                                      f"this layout draws {draws}")

    @classmethod
    def from_json(cls, spec) -> "ClientSpec":
        """The spec from its JSON object; a :class:`Refusal` of code ``bad_config`` otherwise."""
        _keys(spec, "config", ("collection", "features", "window", "channels"), DEVICE_FIELDS)
        feats = spec["features"]
        if not isinstance(feats, list) or not feats:
            raise Refusal(BAD_CONFIG, f"features must be a non-empty list, got features={feats!r}")
        features = []
        for i, f in enumerate(feats):
            kind = f.get("type") if isinstance(f, dict) else None
            extra = {CATEGORICAL: ("values",), NUMERIC: ("low", "high")}.get(kind, ())
            _keys(f, f"features[{i}]", ("name", "type") + extra)
            if kind == CATEGORICAL and not isinstance(f["values"], list):
                raise Refusal(BAD_CONFIG, f"features[{i}].values must be a list, got values={f['values']!r}")
            texts = [f["name"]] + (f["values"] if kind == CATEGORICAL else [])
            if any(isinstance(t, str) and not _is_text(t) for t in texts):
                raise Refusal(BAD_CONFIG, f"features[{i}]: names and values must be well-formed Unicode, got {texts!r}")
            try:
                features.append(Feature(f["name"], kind, tuple(f.get("values", ())), f.get("low"), f.get("high")))
            except ValueError as err:
                raise Refusal(BAD_CONFIG, f"features[{i}]: {err}") from None
        try:
            layout = Layout(tuple(features))
        except ValueError as err:
            raise Refusal(BAD_CONFIG, str(err)) from None
        chans = spec["channels"]
        if not isinstance(chans, list):
            raise Refusal(BAD_CONFIG, f"channels must be a list with one entry per bit, got channels={chans!r}")
        instantaneous, permanent = [], []
        for i, c in enumerate(chans):
            _keys(c, f"channels[{i}]", ("p", "q"), ("permanent",))
            instantaneous.append(_channel({"p": c["p"], "q": c["q"]}, f"channels[{i}]"))
            permanent.append(_channel(c["permanent"], f"channels[{i}].permanent") if "permanent" in c else None)
        token, rate = device_fields(spec)
        if len(instantaneous) != layout.n_bits:
            raise Refusal(BAD_CONFIG, f"channels must have one entry per bit ({layout.n_bits}: {list(layout.labels)}), "
                                      f"got {len(instantaneous)}")
        channels = ClientChannels(ChannelSet(tuple(instantaneous)), tuple(permanent))
        return cls(spec["collection"], layout, _window(spec["window"]), channels, token, rate)

    def to_json(self) -> dict:
        """The JSON object :meth:`from_json` reads."""
        features = []
        for f in self.layout.features:
            item = {"name": f.name, "type": f.kind}
            if f.kind == CATEGORICAL:
                item["values"] = list(f.values)
            if f.kind == NUMERIC:
                item.update(low=f.low, high=f.high)
            features.append(item)
        window = window_json(self.window)
        channels = []
        for inst, perm in zip(self.channels.instantaneous, self.channels.permanent):
            item = {"p": inst.p, "q": inst.q}
            if perm is not None:
                item["permanent"] = {"p": perm.p, "q": perm.q}
            channels.append(item)
        out = {"collection": self.collection, "features": features, "window": window, "channels": channels,
               "token": self.token}
        if self.reports_per_day is not None:
            out["reports_per_day"] = self.reports_per_day
        return out


def _is_integer(value) -> bool:
    """An integer as JSON writes one: a Python int, not a bool and not a float (``2.0`` is refused, as in
    the JVM client; JavaScript cannot tell ``2.0`` from ``2``, docs/client.md section 11)."""
    return isinstance(value, int) and not isinstance(value, bool)


def utc_day(event_ms: int) -> int:
    """The UTC day number of an event time (days since 1970-01-01): the day the rate counts it in."""
    return event_ms // MS_PER_DAY


def read_rate_state(state) -> dict:
    """The rate state an app restores (docs/client.md section 3): a JSON object whose keys are UTC day
    numbers in decimal (no sign, no leading zero, at most the last day a client accepts) and whose values
    are counts, integers in [0, 2^31 - 1]; None is an empty state. A :class:`Refusal` ``bad_state``
    otherwise (the message shows the offending key, never a count, which says how active a device is)."""
    if state is None:
        return {}
    if not isinstance(state, Mapping):
        raise Refusal(BAD_STATE, f"the rate state must map UTC day numbers to counts, got a {type(state).__name__}")
    out = {}
    for key, count in state.items():
        if not (isinstance(key, str) and re.fullmatch("0|[1-9][0-9]{0,5}", key) and int(key) <= LAST_DAY):
            raise Refusal(BAD_STATE, f"the rate state's keys must be UTC day numbers in [0, {LAST_DAY}] in decimal, "
                                     f"got key {key!r}")
        if not (_is_integer(count) and 0 <= count <= MAX_REPORTS_PER_DAY):
            raise Refusal(BAD_STATE, f"the rate state's counts must be integers in [0, {MAX_REPORTS_PER_DAY}], "
                                     f"got a bad count for day {key}")
        out[int(key)] = count
    return out


@dataclass(frozen=True)
class Trace:
    """The intermediate values of one report (for test vectors and debugging another client)."""

    coins: bytes          # the bytes drawn from the generator
    encoded: tuple        # the true bits
    permanent: tuple      # per bit, the permanent bit (None for bits that do not memoize)


class DeviceClient:
    """One device's client for one collection: ``report(values, event_ms)`` -> a NoisyReport record."""

    def __init__(self, spec: ClientSpec, secret: bytes, coins, rate_state=None):
        try:
            self.secret = check_secret(secret)
        except ValueError as err:
            raise Refusal(BAD_SECRET, str(err)) from None
        self.spec = spec
        self.coins = coins
        self._reported = read_rate_state(rate_state)   # {UTC day: reports made}, this collection's

    def rate_state(self) -> dict:
        """The reports made per UTC day of their event time, ``{"20454": 2, ...}`` (days in decimal, in
        order): what the app persists and passes back as ``rate_state`` (module docstring)."""
        return {str(day): n for day, n in sorted(self._reported.items())}

    def _count(self, event_ms: int) -> None:
        """Counts a report on its event's UTC day, or refuses it (``rate_exceeded``) past the rate."""
        day = utc_day(event_ms)
        made = self._reported.get(day, 0)
        rate = self.spec.reports_per_day
        if rate is not None and made >= rate:
            raise Refusal(RATE_EXCEEDED, f"this device has made the {rate} reports a UTC day the collection "
                                         f"declares (reports_per_day={rate}) on day {day}")
        self._reported[day] = min(made + 1, MAX_REPORTS_PER_DAY)   # without a rate a count stops at 2^31 - 1

    def report(self, values: Mapping, event_ms: int, dimensions: Mapping | None = None) -> dict:
        """The ``NoisyReport`` record of one report (module docstring)."""
        return self.report_with_trace(values, event_ms, dimensions)[0]

    def report_with_trace(self, values: Mapping, event_ms: int, dimensions: Mapping | None = None):
        spec = self.spec
        dims = checked_event(event_ms, dimensions)
        units = self._units(values)
        self._count(event_ms)
        fresh = [f for f in spec.layout.features if f.kind == NUMERIC
                 and not spec.channels.memoizes[spec.layout.bits_of(f.name)[0]]]
        drawn = self.coins.generate(COIN_BYTES * (len(fresh) + spec.layout.n_bits))
        coins = [drawn[k:k + COIN_BYTES] for k in range(0, len(drawn), COIN_BYTES)]
        encoding = dict(zip((f.name for f in fresh), coins))
        bit_coins = coins[len(fresh):]
        encoded, permanent, noisy = [], [], []
        for f in spec.layout.features:
            value = values[f.name]
            if f.kind == NUMERIC:
                coin = encoding[f.name] if f.name in encoding else encoding_coin(self.secret, spec.collection, f.name)
                bits = [decide(coin, units[f.name])]
            else:
                bits = f.encode(value)
            label = value if f.kind == CATEGORICAL else str(bits[0])
            for j, (x, i) in enumerate(zip(bits, spec.layout.bits_of(f.name))):
                inst, perm = spec.channels.instantaneous[i], spec.channels.permanent[i]
                if perm is not None:
                    b = decide(permanent_coin(self.secret, spec.collection, f.name, label, j), perm.q if x else perm.p)
                    permanent.append(b)
                    noisy.append(decide(bit_coins[i], inst.q if b else inst.p))
                else:
                    permanent.append(None)
                    noisy.append(decide(bit_coins[i], inst.q if x else inst.p))
                encoded.append(x)
        token = device_token(self.secret, spec.collection, spec.window.slice_of(event_ms)) if spec.token else None
        record = {"collection": spec.collection, "event_time": event_ms,
                  "bits": pack_bits(np.array(noisy, dtype=np.uint8)).tobytes(), "dimensions": dims, "client": token}
        return record, Trace(drawn, tuple(encoded), tuple(permanent))

    def _units(self, values) -> dict:
        """Checks the values (refusals in layout order, after the keys); numeric ones' unit values."""
        layout = self.spec.layout
        check_names(values, [f.name for f in layout.features])
        units = {}
        for f in layout.features:
            v = values[f.name]
            if f.kind == BOOLEAN and not isinstance(v, bool):
                raise Refusal(BAD_VALUE, f"feature {f.name!r} is boolean: its value must be true or false, got "
                                         f"{type(v).__name__}")
            if f.kind == CATEGORICAL and (not isinstance(v, str) or v not in f.values):
                raise Refusal(BAD_VALUE, f"feature {f.name!r} must be one of its {len(f.values)} values, got "
                                         f"{'another string' if isinstance(v, str) else type(v).__name__}")
            if f.kind == NUMERIC:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise Refusal(BAD_VALUE, f"feature {f.name!r} is numeric: its value must be a number, got "
                                             f"{type(v).__name__}")
                try:
                    x = float(v)
                except OverflowError:
                    x = math.inf
                if not (math.isfinite(x) and f.low <= x <= f.high):
                    raise Refusal(OUT_OF_RANGE, f"feature {f.name!r} must be in [{f.low:g}, {f.high:g}], got a value "
                                                f"outside it")
                units[f.name] = (x - f.low) / (f.high - f.low)
        return units


def checked_event(event_ms, dimensions) -> dict:
    """Step 1's first checks (docs/client.md section 3): the event time, then the dimensions, sorted."""
    if isinstance(event_ms, bool) or not isinstance(event_ms, int) or not MIN_EVENT_MS <= event_ms < MAX_EVENT_MS:
        raise Refusal(BAD_EVENT_TIME, f"event_ms must be an integer in [{MIN_EVENT_MS}, {MAX_EVENT_MS}), "
                                      f"got event_ms={event_ms!r}")
    return _dimensions({} if dimensions is None else dimensions)


def check_names(values, names: list) -> None:
    """Step 1's checks of the values' keys: a mapping with every feature (``names``) and no other."""
    if not isinstance(values, Mapping):
        raise Refusal(BAD_VALUE, f"values must map feature names to values, got {type(values).__name__}")
    missing = [n for n in names if n not in values]
    if missing:
        raise Refusal(MISSING_FEATURE, f"values must give every feature, got missing={missing}")
    unknown = sorted(str(k) for k in values if k not in names)
    if unknown:
        raise Refusal(UNKNOWN_FEATURE, f"values name features the collection does not have: {unknown}")


def boolean_bits(values, features: list) -> list:
    """The true bits of a whole-report kind's report (``features`` in layout order: a name is a boolean,
    ``(name, values)`` a categorical), after :func:`check_names`: ``bad_value`` unless every boolean's value is
    ``True``/``False`` and every categorical's one of its values, which is one-hot (one bit per value, as
    :meth:`~ldp_marginals.ldp.encoding.Feature.encode` and the per-bit client encode it)."""
    check_names(values, [feature_name(f) for f in features])
    bits = []
    for f in features:
        if isinstance(f, str):
            if not isinstance(values[f], bool):
                raise Refusal(BAD_VALUE, f"feature {f!r} is boolean: its value must be true or false, got "
                                         f"{type(values[f]).__name__}")
            bits.append(int(values[f]))
            continue
        name, vals = f
        v = values[name]
        if not isinstance(v, str) or v not in vals:
            raise Refusal(BAD_VALUE, f"feature {name!r} must be one of its {len(vals)} values, got "
                                     f"{'another string' if isinstance(v, str) else type(v).__name__}")
        bits += Feature.categorical(name, vals).encode(v)
    return bits


def _dimensions(dims) -> dict:
    """Dimensions as a dict sorted by the keys' UTF-8 bytes; string keys and values only."""
    if not isinstance(dims, Mapping) or not all(isinstance(k, str) and k and isinstance(v, str) and _is_text(k)
                                                and _is_text(v) for k, v in dims.items()):
        raise Refusal(BAD_DIMENSIONS, f"dimensions must map non-empty strings to strings (well-formed Unicode), "
                                      f"got a {type(dims).__name__} that does not")
    return dict(sorted(dims.items(), key=lambda kv: kv[0].encode("utf-8")))
