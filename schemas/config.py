"""The collection config: what a collection's reports mean and how they are estimated.

JSON or YAML (a mapping, or a list of mappings for several collections)::

    collection: app_usage
    features:
      - {name: dark_mode, type: boolean}
      - {name: os, type: categorical, values: [mac, win, linux]}
    - {name: session_minutes, type: numeric, low: 0, high: 120}   # one bit, 1 w.p. (x - low)/(high - low)
    channel: {mechanism: symmetric, epsilon: 1.0}   # or {p, q}; or a list of {p, q}, one per bit;
                                                   # or {mechanism: optimized_unary, epsilon},
                                                   # {mechanism: symmetric, flip}, {mechanism: rappor, f, p, q};
                                                   # or by feature name: {os: {...}, default: {...}}
    max_order: 2
    window: {type: fixed, size_seconds: 3600}      # or {type: sliding, size_seconds, period_seconds}, {type: global}
    min_reports: 1000
    # optional
    sets: [[dark_mode, os=mac, beta_a]]            # extra sets to count (bit labels or indices)
    groups: [[os, dark_mode]]                      # feature groups: tables of their joint cells, or
                                                   # {features: [...], interval: simultaneous}
    level: 0.95
    allowed_lateness_seconds: 0
    early_firing_seconds: null                     # streaming: speculative panes every N seconds
    extremes:
      - {name: any_beta, op: or, features: [beta_a, beta_b]}
      - {name: weekly_active, op: or, bits: [active], over: client}   # fixed or global windows only
    dimensions:                                    # the public dimensions reports may carry
      region: {max_values: 50}                     # at most 50 distinct values per window
      app_version: {max_values: 500, max_length: 32}
    conditionals: [{of: [beta_a], given: [os=mac]}]  # P(of | given) per window and key; or all_pairs:
                                                   # P(a | b) for all bits a, b of two different features
    conditional_alpha: 0.001                       # P(a conditional or conditional mean is published
                                                   # when its condition never holds) is at most this
    means: [{of: session_minutes, by: [os]}]      # conditional means (every numeric mean is published);
                                                   # or {of, given: [labels]}
    marginal_interval: simultaneous                # marginals' intervals hold jointly per window and key
    privacy: {model: sufficient, epsilon: 1.0, eta: 0.01}   # or {model: local[, epsilon]}: the promise,
                                                   # checked against the channels and min_reports

Every mapping is checked for unknown keys (a typo is an error, never ignored), every value for its
type; a collection whose accumulator would exceed ``MAX_COUNTED_SETS`` counts is refused before
anything runs. Errors are ``ValueError`` s naming the field and its value (and, from a file, the
file).
"""
from __future__ import annotations

import difflib

import json
import math
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import yaml

from ldp_marginals.ldp._checks import check_int, check_level, check_positive, check_probability
from ldp_marginals.ldp.aggregate import ReportAggregator
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.conditional import DEFAULT_ALPHA
from ldp_marginals.ldp.encoding import KINDS, Feature, Layout
from ldp_marginals.ldp.privacy import local_dp_epsilon, smallest_population
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.windows import WINDOW_TYPES, Window
from ldp_marginals.schemas.dead_letters import DIMENSION_TOO_LONG, UNDECLARED_DIMENSION

# A collection name becomes part of file names and table rows: letters, digits, '_', '-', '.'
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DIMENSION_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
DEFAULT_MAX_VALUES = 100     # distinct values of one dimension per window and collection
DEFAULT_MAX_LENGTH = 64      # characters of one dimension value
# The memory budget of one accumulator (one window and key): 8 bytes per counted set. 200,000 sets
# (1.6 MB) hold all triples of 64 bits (43,745) with room; all 4-sets of 64 bits (679,121) do not.
MAX_COUNTED_SETS = 200_000
OTHER = "__other__"          # the value that counts a dimension's values past max_values in a window


def _require(mapping: dict, key: str, where: str):
    if key not in mapping:
        raise ValueError(f"{where} must have '{key}', got keys={sorted(mapping)}")
    return mapping[key]


def _mapping(value, where: str, allowed) -> dict:
    """``value`` as a mapping whose keys are all in ``allowed``."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a mapping, got {where}={value!r}")
    unknown = sorted(str(k) for k in set(value) - set(allowed))
    if unknown:
        raise ValueError(f"{where} has unknown keys {unknown}; known keys are {sorted(allowed)}")
    return value


def _list(value, where: str) -> list:
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list, got {where}={value!r}")
    return value


def _names(value, where: str) -> list:
    """A list of non-empty strings (feature names, labels)."""
    items = _list(value, where)
    if not all(isinstance(v, str) and v for v in items):
        raise ValueError(f"{where} must be a list of names, got {where}={value!r}")
    return items


_MECHANISMS = {None: ("p", "q"), "symmetric": ("epsilon", "flip"), "optimized_unary": ("epsilon",),
               "rappor": ("f", "p", "q"), "unrelated_question": ("coin_probability",)}


def _channels(chan, layout: Layout) -> ChannelSet:
    """``channel``: one channel for every bit; a list with one per bit (in layout order); or channels
    by feature name, ``{os: {...}, default: {...}}`` (a feature's channel randomizes each of its
    bits; ``default`` the features not named), which adding a feature cannot shift."""
    if isinstance(chan, list):
        if len(chan) != layout.n_bits:
            raise ValueError(f"channel list must have one entry per bit ({layout.n_bits}: {list(layout.labels)}), got "
                             f"len={len(chan)}; channels by feature name ({{feature: {{...}}, default: {{...}}}}) "
                             "do not depend on the bits' order")
        return ChannelSet(tuple(_channel(c, f"channel[{i}]") for i, c in enumerate(chan)))
    if isinstance(chan, dict) and chan and all(isinstance(v, dict) for v in chan.values()):   # by feature name
        names = [f.name for f in layout.features]
        for key in chan:
            if key != "default" and key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                raise ValueError(f"channel.{key}: not a feature of the collection; the features are {names}"
                                 + (f" (did you mean {close[0]!r}?)" if close else ""))
        missing = [n for n in names if n not in chan]
        if missing and "default" not in chan:
            raise ValueError(f"channel names no channel for features {missing}: name them or give channel.default")
        per_feature = {n: _channel(chan[n] if n in chan else chan["default"], f"channel.{n if n in chan else 'default'}")
                       for n in names}
        return ChannelSet(tuple(per_feature[f.name] for f in layout.features for _ in range(f.n_bits)))
    return ChannelSet.uniform(_channel(chan, "channel"), layout.n_bits)


def _mechanisms(chan, layout: Layout) -> tuple:
    """Per bit, the mechanism's name as the config gives it (``p/q`` for explicit probabilities):
    for readers (the dashboard), beside the channels' p and q."""
    def name(spec):
        return spec.get("mechanism") or "p/q"
    if isinstance(chan, list):
        return tuple(name(c) for c in chan)
    if isinstance(chan, dict) and chan and all(isinstance(v, dict) for v in chan.values()):
        return tuple(name(chan.get(f.name, chan.get("default"))) for f in layout.features for _ in range(f.n_bits))
    return (name(chan),) * layout.n_bits


def _channel(spec, where: str) -> Channel:
    mech = spec.get("mechanism") if isinstance(spec, dict) else None
    if mech not in _MECHANISMS:
        raise ValueError(f"{where}.mechanism must be one of symmetric, optimized_unary, rappor, unrelated_question, "
                         f"got mechanism={mech!r}")
    _mapping(spec, where, _MECHANISMS[mech] + (("mechanism",) if mech else ()))
    try:
        if mech is None:
            return Channel(_require(spec, "p", where), _require(spec, "q", where))
        if mech == "symmetric":
            if "flip" in spec and "epsilon" in spec:
                raise ValueError("give one of flip or epsilon, got both")
            if "flip" in spec:
                return Channel.symmetric(spec["flip"])
            return Channel.symmetric_from_epsilon(_require(spec, "epsilon", where))
        if mech == "optimized_unary":
            return Channel.optimized_unary(_require(spec, "epsilon", where))
        if mech == "rappor":
            return Channel.rappor(_require(spec, "f", where), _require(spec, "p", where), _require(spec, "q", where))
        return Channel.unrelated_question(_require(spec, "coin_probability", where))
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


_WINDOW_KEYS = {"fixed": ("type", "size_seconds"), "sliding": ("type", "size_seconds", "period_seconds"),
                "global": ("type",)}


def _window(spec) -> Window:
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind not in WINDOW_TYPES:
        if not isinstance(spec, dict):
            raise ValueError(f"window must be a mapping, got window={spec!r}")
        raise ValueError(f"window.type must be one of {list(WINDOW_TYPES)}, got type={kind!r}")
    _mapping(spec, "window", _WINDOW_KEYS[kind])
    for key in _WINDOW_KEYS[kind][1:]:
        _require(spec, key, "window")
    return Window(kind, spec.get("size_seconds", 0.0), spec.get("period_seconds", 0.0))


@dataclass(frozen=True)
class Extreme:
    name: str
    op: str
    bits: tuple
    over: str = "report"

    def __post_init__(self):
        if self.op not in ("or", "and"):
            raise ValueError(f"extremes.{self.name}.op must be 'or' or 'and', got op={self.op!r}")
        if self.over not in ("report", "client"):
            raise ValueError(f"extremes.{self.name}.over must be 'report' or 'client', got over={self.over!r}")
        if not self.bits:
            raise ValueError(f"extremes.{self.name} must name at least one bit, got bits=()")


@dataclass(frozen=True)
class Dimension:
    """A public dimension reports may carry: at most ``max_values`` distinct values per window (the
    rest are counted under :data:`OTHER`) of at most ``max_length`` characters."""

    name: str
    max_values: int = DEFAULT_MAX_VALUES
    max_length: int = DEFAULT_MAX_LENGTH

    def __post_init__(self):
        if not isinstance(self.name, str) or not DIMENSION_PATTERN.match(self.name):
            raise ValueError(f"dimensions keys must match {DIMENSION_PATTERN.pattern}, got dimension={self.name!r}")
        check_int(f"dimensions.{self.name}.max_values", self.max_values, minimum=1)
        check_int(f"dimensions.{self.name}.max_length", self.max_length, minimum=1)
PRIVACY_MODELS = ("local", "sufficient")
INTERVALS = ("per_cell", "simultaneous")   # a table's intervals: each cell alone, or all cells together


@dataclass(frozen=True)
class Privacy:
    """The promise a collection makes to its users. ``local``: each report is epsilon-LDP by its
    channels alone (``epsilon`` optional: when given, the channels must not exceed it). ``sufficient``
    (Zhilyaev & Zeber): a published window of at least ``smallest_crowd`` reports has
    ``P[R > e^epsilon] <= eta``; the job refuses a ``min_reports`` below that crowd."""

    model: str
    epsilon: float | None = None
    eta: float = 0.01
    flip: float | None = None            # sufficient: the symmetric flip the channels are held to
    smallest_crowd: int | None = None    # sufficient: the least min_reports that keeps the promise

    def describe(self) -> dict:
        return {"model": self.model, "epsilon": self.epsilon, "eta": self.eta if self.model == "sufficient" else None,
                "flip": self.flip, "smallest_crowd": self.smallest_crowd}


@lru_cache(maxsize=None)
def _smallest_crowd(flip: float, n_bits: int, lam: float, eta: float, max_ones: int) -> int:
    return smallest_population(flip, n_bits, lam, eta, max_ones=max_ones)


def sufficient_flip(channels: ChannelSet) -> float:
    """The symmetric flip a collection's channels are held to under sufficient DP. The model of
    Zhilyaev & Zeber randomizes every bit with one symmetric flip: each bit is held to the symmetric
    channel of its own local epsilon, and every bit to the least noisy of them."""
    return min(1.0 / (1.0 + math.exp(c.epsilon_bit)) for c in channels.channels)


def sufficient_crowd(layout: Layout, flip: float, epsilon: float, eta: float) -> int:
    """The fewest reports per published window for which ``P[R > e^epsilon] <= eta`` at ``flip``
    (a boolean or a categorical feature sets at most one bit: at most one set bit per feature)."""
    return _smallest_crowd(flip, layout.n_bits, math.exp(epsilon), eta, len(layout.features))


def _privacy(spec, layout: Layout, channels: ChannelSet, min_reports: int, check: bool = True) -> Privacy | None:
    """The promise of ``spec``; with ``check`` (the job) a promise the channels or ``min_reports`` do
    not keep is an error, without it (``calibrate``, which says what to change) it is returned."""
    if spec is None:
        return None
    _mapping(spec, "privacy", ("model", "epsilon", "eta"))
    model = _require(spec, "model", "privacy")
    if model not in PRIVACY_MODELS:
        raise ValueError(f"privacy.model must be one of {list(PRIVACY_MODELS)}, got model={model!r}")
    epsilon = spec.get("epsilon")
    if epsilon is not None:
        check_positive("privacy.epsilon", epsilon)
    local = local_dp_epsilon(layout, channels)
    if model == "local":
        if "eta" in spec:
            raise ValueError(f"privacy.eta is only for model 'sufficient', got eta={spec['eta']!r}")
        if check and epsilon is not None and local > epsilon + 1e-12:
            raise ValueError(f"privacy promises local DP at epsilon={epsilon:g}, but the channels give a whole "
                             f"report epsilon={local:.4g}; add noise or promise 'sufficient'")
        return Privacy("local", epsilon)
    if epsilon is None:
        raise ValueError("privacy.epsilon is required for model 'sufficient', got none")
    eta = check_probability("privacy.eta", spec.get("eta", 0.01), open_low=True, open_high=True)
    flip = sufficient_flip(channels)
    if not flip > 0:
        raise ValueError("privacy model 'sufficient' needs noise on every bit, but a bit has p=0 or q=1")
    crowd = sufficient_crowd(layout, flip, epsilon, eta)
    if check and min_reports < crowd:
        raise ValueError(f"min_reports={min_reports} is below the {crowd:,} reports the privacy promise needs "
                         f"(sufficient DP at epsilon={epsilon:g}, eta={eta:g}, with these channels: "
                         f"P[R > e^epsilon] <= eta needs at least {crowd:,} reports per published window); "
                         f"raise min_reports to {crowd:,} or more")
    return Privacy("sufficient", float(epsilon), eta, flip, crowd)


@dataclass(frozen=True)
class CollectionConfig:
    name: str
    layout: Layout
    channels: ChannelSet
    max_order: int
    window: Window
    min_reports: int
    sets: tuple = ()
    groups: tuple = ()
    level: float = 0.95
    allowed_lateness_seconds: float = 0.0
    early_firing_seconds: float | None = None
    extremes: tuple = field(default_factory=tuple)
    dimensions: tuple = ()   # Dimension, sorted by name
    privacy: Privacy | None = None
    conditionals: tuple = ()   # ((of bits), (given bits)) pairs: P(of | given) per window and key
    group_intervals: tuple = ()   # per group: "per_cell" (default) or "simultaneous"
    means: tuple = ()             # (numeric bit, (given bits)): every numeric feature's mean, then conditional means
    marginal_interval: str = "per_cell"   # or "simultaneous": the marginals of a window and key hold jointly
    conditional_alpha: float = DEFAULT_ALPHA   # false-positive rate of the presence test of a condition
    mechanisms: tuple = ()   # per bit: the channel's mechanism as configured (symmetric, optimized_unary, ..., or p/q)

    def __post_init__(self):
        # checked here, so a job-wide --window override (dataclasses.replace) is checked too
        if self.client_extremes and self.window.overlapping:
            names = [e.name for e in self.client_extremes]
            raise ValueError(f"collection {self.name!r}: extremes {names} (over: client) need fixed or global "
                             f"windows, got a sliding window of {self.window.size_seconds:g} s every "
                             f"{self.window.period_seconds:g} s: a client's state merged across overlapping "
                             "windows lets a difference of windows single out one client; use a fixed window")

    @property
    def dimension_limits(self) -> dict:
        return {d.name: d for d in self.dimensions}

    def dimension_fault(self, dims: dict) -> tuple | None:
        """``(reason, detail)`` when a report's dimensions break the collection's declaration (a key
        not declared, a value longer than its ``max_length``), else None. Keys are checked in
        sorted order, so the first fault is the same on every reader."""
        limits = self.dimension_limits
        for key in sorted(dims):
            if key not in limits:   # a key is named only when it has the form of a dimension name
                shown = repr(key) if DIMENSION_PATTERN.match(key) else f"of {len(key):,} characters"
                return (UNDECLARED_DIMENSION, f"dimension {shown} is not declared for collection {self.name!r} "
                        f"(declared: {sorted(limits) if limits else 'none'})")
        for key in sorted(dims):
            if len(dims[key]) > limits[key].max_length:
                return (DIMENSION_TOO_LONG, f"dimension {key!r} has a value of {len(dims[key]):,} characters, "
                        f"over max_length={limits[key].max_length}")
        return None

    def cap_dimension_values(self, weights: dict) -> dict:
        """``{dims: capped dims}`` for the keys of one window, given each key's weight (reports, or
        clients): per dimension, the ``max_values`` values of largest total weight are kept (ties by
        value) and the others become :data:`OTHER`, so a window never lists more than ``max_values``
        (+1) values of a dimension."""
        mapping = {dims: dict(dims) for dims in weights}
        for dim in self.dimensions:
            totals = {}
            for dims, weight in weights.items():
                value = dict(dims).get(dim.name)
                if value is not None:
                    totals[value] = totals.get(value, 0) + weight
            if len(totals) <= dim.max_values:
                continue
            kept = {v for v, _ in sorted(totals.items(), key=lambda vw: (-vw[1], vw[0]))[:dim.max_values]}
            for dims, capped in mapping.items():
                if dim.name in capped and capped[dim.name] not in kept:
                    capped[dim.name] = OTHER
        return {dims: tuple(sorted(capped.items())) for dims, capped in mapping.items()}

    @cached_property
    def family(self) -> SetFamily:
        """The counted sets: all up to max_order, the explicit sets and every group's cells."""
        extra = list(self.sets)
        for group in self.groups:
            extra.extend(self.layout.group_sets(group))
        return SetFamily(self.layout.n_bits, self.max_order, extra)

    @cached_property
    def published_index(self) -> tuple:
        """Indices in ``family`` of the sets published as marginals: order >= 1, not holding two
        values of one categorical feature (zero by construction: their estimates would be pure
        noise), not holding a numeric feature's encoded bit (it publishes means)."""
        numeric = set(self.layout.numeric_bits)
        return tuple(i for i, s in enumerate(self.family) if s and not numeric & set(s)
                     and not self.layout.is_structural_zero(s))

    @property
    def published_sets(self) -> list:
        return [self.family[i] for i in self.published_index]

    @cached_property
    def aggregator(self) -> ReportAggregator:
        """Fills this collection's per-window accumulators: the counted sets, per-report and per-client extremes."""
        return ReportAggregator(self.family, self.channels, tuple((e.op, e.bits) for e in self.report_extremes),
                                tuple((e.op, e.bits) for e in self.client_extremes))

    @property
    def client_extremes(self) -> tuple:
        return tuple(e for e in self.extremes if e.over == "client")

    @property
    def report_extremes(self) -> tuple:
        return tuple(e for e in self.extremes if e.over == "report")

    def describe(self) -> dict:
        """What a reader of the outputs needs to know about the collection (JSON-safe): the bits, the
        channels and the local-DP epsilon they give a whole report, the window and the guard."""
        return {"collection": self.name, "labels": list(self.layout.labels),
                "p": [float(c.p) for c in self.channels.channels], "q": [float(c.q) for c in self.channels.channels],
                "mechanisms": list(self.mechanisms),
                "local_epsilon": float(local_dp_epsilon(self.layout, self.channels)),
                "window": self.window.describe(),
                "min_reports": self.min_reports, "max_order": self.max_order, "level": self.level,
                "groups": [list(g) for g in self.groups],
                "group_intervals": list(self.group_intervals or ("per_cell",) * len(self.groups)),
                "marginal_interval": self.marginal_interval,
                "numeric": {f.name: {"low": f.low, "high": f.high} for f in self.layout.features
                            if f.kind == "numeric"},
                "dimensions": {d.name: {"max_values": d.max_values, "max_length": d.max_length}
                               for d in self.dimensions},
                "extremes": [{"name": e.name, "op": e.op, "bits": list(e.bits), "over": e.over}
                             for e in self.extremes],
                "conditionals": len(self.conditionals),
                "privacy": self.privacy.describe() if self.privacy is not None else None}


def _label_bit(layout: Layout, label: str, where: str) -> int:
    """The bit of ``label``; an unknown label is an error naming the field and the closest labels."""
    try:
        return layout.bit_index(label)
    except ValueError as err:
        labels = list(layout.labels)
        folded = [x for x in labels if x.lower() == label.lower()]
        close = folded or difflib.get_close_matches(label, labels, n=2, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else f"; the labels are {labels}"
        raise ValueError(f"{where}: {err}{hint}") from None


def _bits_of(layout: Layout, items, where: str) -> tuple:
    out = []
    for item in _list(items, where):
        if isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item < layout.n_bits:
                raise ValueError(f"{where} bit must be in [0, {layout.n_bits}), got bit={item}")
            out.append(item)
        elif isinstance(item, str):
            out.append(_label_bit(layout, item, where))
        else:
            raise ValueError(f"{where} must list bit labels or indices, got {item!r}")
    return tuple(sorted(set(out)))


_CONFIG_KEYS = ("collection", "features", "channel", "max_order", "window", "min_reports", "sets", "groups",
                "level", "allowed_lateness_seconds", "early_firing_seconds", "extremes", "dimensions", "privacy",
                "conditionals", "means", "marginal_interval", "conditional_alpha")


def _check_budget(name: str, layout: Layout, max_order: int, sets: tuple, groups: tuple) -> None:
    """Refuse, before anything is built, a collection whose accumulator exceeds the budget."""
    n_bits = layout.n_bits
    counted = sum(math.comb(n_bits, k) for k in range(max_order + 1))
    extra = sum(2 ** len(s) for s in sets) + sum(
        math.prod(len(layout.bits_of(f)) if layout.feature(f).values else 2 for f in g) * 2 ** len(g) for g in groups)
    if counted + extra > MAX_COUNTED_SETS:
        raise ValueError(
            f"collection {name!r}: max_order={max_order} on {n_bits} bits"
            + (f" with {len(sets)} sets and {len(groups)} groups" if sets or groups else "")
            + f" needs up to {counted + extra:,} counts per window and key ({8 * (counted + extra) / 1e6:,.1f} MB), "
            f"over the budget of {MAX_COUNTED_SETS:,} counts ({8 * MAX_COUNTED_SETS / 1e6:.1f} MB); "
            "lower max_order or count fewer sets")


def parse_config(spec: dict, check_promise: bool = True) -> CollectionConfig:
    """Validate one collection's config mapping; ``ValueError`` naming the field otherwise.
    ``check_promise=False`` accepts a privacy promise that the channels or ``min_reports`` do not
    keep (for ``calibrate``, which reports what to change); the job always checks it."""
    _mapping(spec, "config", _CONFIG_KEYS)
    name = _require(spec, "collection", "config")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValueError(f"collection must be 1-64 letters, digits, '_', '-' or '.' (starting with a letter or "
                         f"digit), got collection={name!r}")
    feats = []
    for i, f in enumerate(_list(_require(spec, "features", "config"), "features")):
        where = f"features[{i}]"
        kind = _require(_mapping(f, where, ("name", "type", "values", "low", "high")), "type", where)
        if kind not in KINDS:   # the config's field is `type` (the Feature's is `kind`)
            raise ValueError(f"{where}.type must be one of {list(KINDS)}, got type={kind!r}")
        if kind != "numeric" and ("low" in f or "high" in f):
            raise ValueError(f"{where}.low and .high are only for numeric features, got type={kind!r}")
        try:
            if kind == "categorical":
                feats.append(Feature.categorical(_require(f, "name", where), _names(_require(f, "values", where),
                                                                                    f"{where}.values")))
            elif kind == "numeric":
                if "values" in f:
                    raise ValueError(f"{where}.values is only for categorical features, got type={kind!r}")
                feats.append(Feature.numeric(_require(f, "name", where), _require(f, "low", where),
                                             _require(f, "high", where)))
            else:
                if "values" in f:
                    raise ValueError(f"{where}.values is only for categorical features, got type={kind!r}")
                feats.append(Feature(_require(f, "name", where), kind))
        except ValueError as err:
            raise ValueError(err.args[0] if str(err).startswith(where) else f"{where}: {err}") from None
    if not feats:
        raise ValueError("features must list at least one feature, got features=[]")
    layout = Layout(tuple(feats))
    channels = _channels(_require(spec, "channel", "config"), layout)
    max_order = check_int("max_order", _require(spec, "max_order", "config"), minimum=1)
    if max_order > layout.n_bits:
        raise ValueError(f"max_order must be <= the {layout.n_bits} bits of the layout, got max_order={max_order}")
    window = _window(_require(spec, "window", "config"))
    min_reports = check_int("min_reports", _require(spec, "min_reports", "config"), minimum=0)
    sets = tuple(_bits_of(layout, s, f"sets[{i}]") for i, s in enumerate(_list(spec.get("sets", []), "sets")))
    for i, bits in enumerate(sets):
        for group in layout.exclusive_groups:
            both = [layout.labels[b] for b in bits if b in group]
            if len(both) > 1:
                raise ValueError(f"sets[{i}] holds {both}, values of one categorical feature: its count is 0 by "
                                 f"construction (a report has one value), got sets[{i}]={[layout.labels[b] for b in bits]}")
    groups, group_intervals = [], []
    for i, g in enumerate(_list(spec.get("groups", []), "groups")):
        interval = "per_cell"
        if isinstance(g, dict):  # {features: [...], interval: per_cell | simultaneous}
            _mapping(g, f"groups[{i}]", ("features", "interval"))
            interval = g.get("interval", "per_cell")
            if interval not in INTERVALS:
                raise ValueError(f"groups[{i}].interval must be one of {list(INTERVALS)}, got interval={interval!r}")
            g = _require(g, "features", f"groups[{i}]")
        group_intervals.append(interval)
        for fname in _names(g, f"groups[{i}]"):
            if layout.feature(fname).kind == "numeric":
                raise ValueError(f"groups[{i}] holds numeric feature {fname!r}: numeric features publish means "
                                 f"(means: [{{of: {fname}, by: [...]}}]), not tables")
        groups.append(tuple(g))
    _check_budget(name, layout, max_order, sets, tuple(groups))
    level = check_level(spec.get("level", 0.95))
    lateness = check_positive("allowed_lateness_seconds", spec.get("allowed_lateness_seconds", 0), allow_zero=True)
    early = spec.get("early_firing_seconds")
    if early is not None:
        check_int("early_firing_seconds", early, minimum=1)
    extremes = []
    for i, e in enumerate(_list(spec.get("extremes", []), "extremes")):
        where = f"extremes[{i}]"
        _mapping(e, where, ("name", "op", "features", "bits", "over"))
        if ("features" in e) == ("bits" in e):
            raise ValueError(f"{where} must give one of features or bits, got keys={sorted(e)}")
        if "features" in e:
            bits = tuple(sorted(b for fname in _names(e["features"], f"{where}.features")
                                for b in layout.bits_of(fname)))
        else:
            bits = _bits_of(layout, e["bits"], f"{where}.bits")
        numeric = [layout.labels[b] for b in bits if b in layout.numeric_bits]
        if numeric:
            raise ValueError(f"{where} holds numeric features {numeric}: an OR/AND of their encoded bits has no "
                             "meaning")
        extremes.append(Extreme(_require(e, "name", where), _require(e, "op", where), bits, e.get("over", "report")))
    names = [e.name for e in extremes]
    if len(set(names)) != len(names):
        raise ValueError(f"extremes names must be unique, got names={names}")
    dims = _mapping(spec.get("dimensions", {}), "dimensions", spec.get("dimensions") or {})
    dimensions = tuple(Dimension(key, **_mapping(limits if limits is not None else {}, f"dimensions.{key}",
                                                ("max_values", "max_length")))
                       for key, limits in sorted(dims.items(), key=lambda kv: str(kv[0])))
    privacy = _privacy(spec.get("privacy"), layout, channels, min_reports, check_promise)
    conditionals = _conditionals(spec.get("conditionals", []), layout, max_order)
    sources = _means(spec.get("means", []), layout)   # {(bit, given): where it was asked for}
    means = tuple(sources)
    marginal_interval = spec.get("marginal_interval", "per_cell")
    if marginal_interval not in INTERVALS:
        raise ValueError(f"marginal_interval must be one of {list(INTERVALS)}, got marginal_interval="
                         f"{marginal_interval!r}")
    alpha = check_probability("conditional_alpha", spec.get("conditional_alpha", DEFAULT_ALPHA), open_low=True,
                              open_high=True)
    cfg = CollectionConfig(name, layout, channels, max_order, window, min_reports, sets, tuple(groups), level,
                           float(lateness), early, tuple(extremes), dimensions, privacy, conditionals,
                           tuple(group_intervals), means, marginal_interval, alpha,
                           mechanisms=_mechanisms(spec["channel"], layout))
    for where, (of, given) in [(f"conditionals[{i}]", c) for i, c in enumerate(cfg.conditionals)] + [
            (sources[(bit, given)], ((bit,), given)) for bit, given in cfg.means if given]:
        union = tuple(sorted(set(of) | set(given)))
        labels = [layout.labels[b] for b in union]
        if layout.is_structural_zero(union):
            raise ValueError(f"{where}: of and given together hold two values of one categorical feature "
                             f"({labels}), so it is 0 by construction")
        if union not in cfg.family:
            raise ValueError(f"{where} needs the count of {labels}, which is not counted: raise max_order "
                             f"to {len(union)} or add it to sets, got max_order={max_order}")
    return cfg


ALL_PAIRS = "all_pairs"


def _conditionals(spec, layout: Layout, max_order: int) -> tuple:
    """``conditionals: [{of, given}, ...]``, or ``all_pairs``: P(a | b) for every bit a and b of two
    different (non-numeric) features; ``((of bits), (given bits))`` pairs."""
    if spec == ALL_PAIRS:
        if max_order < 2:
            raise ValueError(f"conditionals: {ALL_PAIRS} needs the pairs counted, got max_order={max_order}")
        owner = {b: f.name for f in layout.features if f.kind != "numeric" for b in layout.bits_of(f.name)}
        return tuple(((a,), (b,)) for a in owner for b in owner if owner[a] != owner[b])
    if isinstance(spec, str):
        raise ValueError(f"conditionals must be a list of {{of, given}} or {ALL_PAIRS!r}, got conditionals={spec!r}")
    out = []
    for i, c in enumerate(_list(spec, "conditionals")):
        where = f"conditionals[{i}]"
        _mapping(c, where, ("of", "given"))
        of, given = _bits_of(layout, _require(c, "of", where), f"{where}.of"), _bits_of(
            layout, _require(c, "given", where), f"{where}.given")
        if not of or not given:
            raise ValueError(f"{where} must name bits in both of and given, got of={c['of']!r}, given={c['given']!r}")
        shared = [layout.labels[b] for b in sorted(set(of) & set(given))]
        if shared:
            raise ValueError(f"{where}: of and given share {shared}: a bit given is 1 for certain (P(x | x) = 1); "
                             f"got of={c['of']!r}, given={c['given']!r}")
        numeric = [layout.labels[b] for b in of + given if b in layout.numeric_bits]
        if numeric:
            raise ValueError(f"{where} names numeric features {numeric}: ask for their (conditional) means under "
                             "means, not for conditionals of their encoded bits")
        out.append((of, given))
    return tuple(out)


def _means(spec, layout: Layout) -> dict:
    """``{(numeric bit, (given bits)): where}`` of every published mean, in order: each numeric
    feature's mean over all reports, then ``means: [{of: NAME, given: [labels]} | {of: NAME, by:
    [features]}]`` (``by``: one conditional mean per bit of each feature, e.g. per value of a
    categorical); ``where`` names the config entry for errors."""
    out = {(b, ()): "features" for b in layout.numeric_bits}
    for i, m in enumerate(_list(spec, "means")):
        where = f"means[{i}]"
        _mapping(m, where, ("of", "given", "by"))
        name = _require(m, "of", where)
        if not isinstance(name, str) or layout.feature(name).kind != "numeric":
            raise ValueError(f"{where}.of must name a numeric feature, got of={name!r}")
        bit = layout.bits_of(name)[0]
        if ("given" in m) == ("by" in m):
            raise ValueError(f"{where} must give one of given or by, got keys={sorted(m)}")
        givens = [_bits_of(layout, m["given"], f"{where}.given")] if "given" in m else [
            (b,) for f in _names(m["by"], f"{where}.by") for b in layout.bits_of(f)]
        for given in givens:
            numeric = [layout.labels[b] for b in given if b in layout.numeric_bits]
            if not given or numeric:
                raise ValueError(f"{where} must condition on bits of boolean or categorical features, got "
                                 f"given={[layout.labels[b] for b in given]}")
            out.setdefault((bit, given), where)
    return out


def load_configs(path, check_promise: bool = True) -> dict:
    """Collection configs from a JSON or YAML file (one mapping, or a list): name -> config."""
    return configs_from_text(Path(path).read_text(), path, check_promise)


def configs_from_text(text: str, path, check_promise: bool = True) -> dict:
    """Collection configs from the text of the file ``path`` (JSON if it ends ``.json``, else YAML)."""
    try:
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ValueError(f"config file {path} is not valid JSON/YAML: {err}") from None
    items = data if isinstance(data, list) else [data]
    out = {}
    for spec in items:
        try:
            cfg = parse_config(spec, check_promise)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
        if cfg.name in out:
            raise ValueError(f"{path}: collection names must be unique, got {cfg.name!r} twice")
        out[cfg.name] = cfg
    return out


def parse_window(spec: str) -> Window:
    """``fixed:SECONDS``, ``sliding:SIZE:PERIOD`` or ``global`` -> :class:`Window` (a job-wide override)."""
    parts = spec.split(":") if isinstance(spec, str) else []
    expected = f"window must be fixed:SECONDS, sliding:SIZE:PERIOD or global, got window={spec!r}"
    try:
        if parts == ["global"]:
            return Window("global")
        if len(parts) == 2 and parts[0] == "fixed":
            return Window("fixed", float(parts[1]))
        if len(parts) == 3 and parts[0] == "sliding":
            return Window("sliding", float(parts[1]), float(parts[2]))
    except ValueError as err:
        raise ValueError(f"{expected} ({err})") from None
    raise ValueError(expected)
