"""The collection config's parser: the file a collection is configured in, JSON or YAML, checked
and turned into the model, :class:`~ldp_marginals.schemas.collection.CollectionConfig` (what a
collection's reports mean and how they are estimated).

JSON or YAML (a mapping, or a list of mappings for several collections)::

    collection: app_usage
    features:
      - {name: dark_mode, type: boolean}
      - {name: os, type: categorical, values: [mac, win, linux]}
    - {name: session_minutes, type: numeric, low: 0, high: 120}   # one bit, 1 w.p. (x - low)/(high - low)
    channel: {mechanism: symmetric, epsilon: 1.0}   # or {p, q}; or a list of {p, q}, one per bit;
                                                   # or {mechanism: optimized_unary, epsilon},
                                                   # {mechanism: symmetric, flip}, {mechanism: rappor, f, p, q};
                                                   # or by feature name: {os: {...}, default: {...}};
                                                   # or a kind: {kind: hadamard | subset, epsilon} (schemas/channel_kinds.py)
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
    rollups: all                                   # totals over dimensions: every proper subset of them, or a
                                                   # list ([[region], []]: per region, and the window's total)
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
import itertools
import json
import math
from pathlib import Path

import yaml

from ldp_marginals.ldp._checks import check_int, check_level, check_positive, check_probability
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.conditional import DEFAULT_ALPHA
from ldp_marginals.ldp.encoding import KINDS, Feature, Layout
from ldp_marginals.ldp.privacy import local_dp_epsilon
from ldp_marginals.ldp.windows import WINDOW_TYPES, Window
from ldp_marginals.schemas.channel_kinds import is_kind, parse_kind, parse_memo
from ldp_marginals.schemas.composition import check_composition
from ldp_marginals.schemas.collection import (
    INTERVALS,
    NAME_PATTERN,
    PRIVACY_MODELS,
    CollectionConfig,
    Dimension,
    Extreme,
    UNITS,
    DeviceUnit,
    Privacy,
    device_repeats,
    sufficient_crowd,
    sufficient_flip,
)

# The memory budget of one accumulator (one window and key): 8 bytes per counted set. 200,000 sets
# (1.6 MB) hold all triples of 64 bits (43,745) with room; all 4-sets of 64 bits (679,121) do not.
MAX_COUNTED_SETS = 200_000


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
               "rappor": ("f", "p", "q", "memoize"), "unrelated_question": ("coin_probability",)}


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


def _permanent(chan, layout: Layout) -> tuple:
    """Per bit, the permanent channel ``(f/2, 1 - f/2)`` of a ``rappor`` channel with ``memoize: true``
    (the device draws it once per value from its secret, docs/client.md section 4), else None."""
    if isinstance(chan, list):
        specs = chan
    elif isinstance(chan, dict) and chan and all(isinstance(v, dict) for v in chan.values()):
        specs = [chan.get(f.name, chan.get("default")) for f in layout.features for _ in range(f.n_bits)]
    else:
        specs = [chan] * layout.n_bits
    return tuple(Channel(s["f"] / 2.0, 1.0 - s["f"] / 2.0) if s.get("mechanism") == "rappor" and s.get("memoize")
                 else None for s in specs)


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
            if not isinstance(spec.get("memoize", False), bool):
                raise ValueError(f"memoize must be true or false, got memoize={spec['memoize']!r}")
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



_UNIT_KEYS = ("unit", "max_reports_per_device", "max_keys_per_device", "reports_per_day", "epsilon_per_day",
              "epsilon_per_month")
_SPANS = ("epsilon_per_day", "epsilon_per_month")


_BOUNDS = ("max_reports_per_device", "max_keys_per_device", "reports_per_day")


def _unit(spec, memoizes: bool = False) -> DeviceUnit | None:
    """``privacy.unit``: ``report`` (the default) or ``device`` with its bound and declared rate.

    Under ``report`` reports carry no device token and nothing is bounded (None), unless a device bound
    or rate is given or the channels memoize (``memoizes``): then the report unit *with device bounds*
    (``DeviceUnit(unit="report")``): reports carry the token, the job enforces the bounds (the device
    unit's defaults, 1 report and 1 key per device and slice, for a bound not given), and ``min_reports``
    still counts reports. A memoizing collection needs the bound for an honest variance: reports of one
    device share permanent responses, and only an enforced bound says how many
    (:func:`~ldp_marginals.ldp.memoized.with_repeats`, ``s = k * M * K - 1``)."""
    spec = spec or {}
    unit = spec.get("unit", "report")
    if unit not in UNITS:
        raise ValueError(f"privacy.unit must be one of {list(UNITS)}, got unit={unit!r}")
    if unit == "report" and not memoizes and not any(k in spec for k in _BOUNDS):
        return None
    return DeviceUnit(spec.get("max_reports_per_device", 1), spec.get("reports_per_day"),
                      spec.get("max_keys_per_device", 1), unit)


def _memoizes(chan_spec, kind, layout: Layout) -> bool:
    """Whether the channels memoize, whatever their kind: a whole-report kind's ``memoize: true``, or a
    per-bit ``rappor`` channel's."""
    if kind:
        return bool(isinstance(chan_spec, dict) and chan_spec.get("memoize"))
    return any(c is not None for c in _permanent(chan_spec, layout))


def _spans(spec) -> dict:
    """``privacy.epsilon_per_day`` / ``epsilon_per_month``: what a device's published reports of a day /
    a month may spend (local promises; positive numbers)."""
    out = {}
    for key in _SPANS:
        if (spec or {}).get(key) is not None:
            out[key] = check_positive(f"privacy.{key}", spec[key])
            if spec.get("model") != "local":
                raise ValueError(f"privacy.{key} is a local promise, got model={spec.get('model')!r}")
    return out


def _check_month(cfg: CollectionConfig, check: bool) -> None:
    """With ``check`` (the job) the enforced figures must keep a day's or a month's promise
    (:meth:`CollectionConfig.promise_fault`)."""
    if check:   # the promise without the device unit: schemas/composition.py (spans-need-device)
        fault = cfg.promise_fault()
        if fault:
            raise ValueError(fault)


def _privacy(spec, layout: Layout, channels: ChannelSet, min_reports: int, check: bool = True,
             repeats: int = 1) -> Privacy | None:
    """The promise of ``spec``; with ``check`` (the job) a promise the channels or ``min_reports`` do
    not keep is an error, without it (``calibrate``, which says what to change) it is returned."""
    if spec is None:
        return None
    _mapping(spec, "privacy", ("model", "epsilon", "eta") + _UNIT_KEYS)
    if "model" not in spec:   # a unit without a promise
        if "epsilon" in spec or "eta" in spec:
            raise ValueError(f"privacy must have 'model' with epsilon or eta, got keys={sorted(spec)}")
        return None
    model = spec["model"]
    if model not in PRIVACY_MODELS:
        raise ValueError(f"privacy.model must be one of {list(PRIVACY_MODELS)}, got model={model!r}")
    epsilon = spec.get("epsilon")
    if epsilon is not None:
        check_positive("privacy.epsilon", epsilon)
    spans = _spans(spec)
    local = local_dp_epsilon(layout, channels)
    if model == "local":
        if "eta" in spec:
            raise ValueError(f"privacy.eta is only for model 'sufficient', got eta={spec['eta']!r}")
        if check and epsilon is not None and local > epsilon + 1e-12:
            raise ValueError(f"privacy promises local DP at epsilon={epsilon:g}, but the channels give a whole "
                             f"report epsilon={local:.4g}; add noise or promise 'sufficient'")
        return Privacy("local", epsilon, **spans)
    if epsilon is None:
        raise ValueError("privacy.epsilon is required for model 'sufficient', got none")
    eta = check_probability("privacy.eta", spec.get("eta", 0.01), open_low=True, open_high=True)
    flip = sufficient_flip(channels)
    if not flip > 0:
        raise ValueError("privacy model 'sufficient' needs noise on every bit, but a bit has p=0 or q=1")
    crowd = sufficient_crowd(layout, flip, epsilon, eta, repeats)
    if check and min_reports < crowd:
        raise ValueError(f"min_reports={min_reports} is below the {crowd:,} reports the privacy promise needs "
                         f"(sufficient DP at epsilon={epsilon:g}, eta={eta:g}, with these channels: "
                         f"P[R > e^epsilon] <= eta needs at least {crowd:,} reports per published window); "
                         f"raise min_reports to {crowd:,} or more")
    return Privacy("sufficient", float(epsilon), eta, flip, crowd)




def _kind_privacy(spec, sampling, check: bool = True) -> Privacy | None:
    """The promise of a collection whose channel is a kind: ``local``, at an epsilon no smaller than the
    channel's (the whole report's). Another model is returned as given, for the composition table to
    refuse (schemas/composition.py, kind-sufficient-dp)."""
    if spec is None or "model" not in spec:
        if spec is not None and ("epsilon" in spec or "eta" in spec):
            raise ValueError(f"privacy must have 'model' with epsilon or eta, got keys={sorted(spec)}")
        return None
    _mapping(spec, "privacy", ("model", "epsilon", "eta") + _UNIT_KEYS)
    if spec["model"] not in PRIVACY_MODELS:
        raise ValueError(f"privacy.model must be one of {list(PRIVACY_MODELS)}, got model={spec['model']!r}")
    if spec["model"] != "local":
        return Privacy(spec["model"], spec.get("epsilon"))
    if "eta" in spec:
        raise ValueError(f"privacy.eta is only for model 'sufficient', got eta={spec['eta']!r}")
    epsilon = spec.get("epsilon")
    if epsilon is not None:
        check_positive("privacy.epsilon", epsilon)
        if check and sampling.epsilon > epsilon + 1e-12:
            raise ValueError(f"privacy promises local DP at epsilon={epsilon:g}, but the channel gives a whole "
                             f"report epsilon={sampling.epsilon:g}; lower channel.epsilon (channel.epsilon_1 when it "
                             f"memoizes: one report's)")
    return Privacy("local", epsilon, **_spans(spec))


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
                "conditionals", "means", "marginal_interval", "conditional_alpha", "rollups",
                "reports_per_client")


def _rollups(spec, declared: list) -> tuple:
    """``rollups``: ``all`` (every proper subset of the declared dimensions, the empty one, the window's
    total, included) or a list of lists of dimension names; the model checks each names declared
    dimensions (:class:`~ldp_marginals.schemas.collection.CollectionConfig`)."""
    if spec == "all":
        if not declared:
            raise ValueError("rollups: all needs dimensions to sum over, got no dimensions declared")
        return tuple(tuple(over) for k in range(len(declared)) for over in itertools.combinations(declared, k))
    out = []
    for i, over in enumerate(_list(spec, "rollups")):
        if isinstance(over, str) or not isinstance(over, (list, tuple)):
            raise ValueError(f"rollups[{i}] must be a list of dimension names (or rollups: all), got {over!r}")
        if not all(isinstance(n, str) for n in over):
            raise ValueError(f"rollups[{i}] must list dimension names, got rollups[{i}]={over!r}")
        out.append(tuple(sorted(over)) if len(set(over)) == len(over) else tuple(over))
    return tuple(out)


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
    check_composition(spec)   # the combinations whose fields the model does not keep (schemas/composition.py)
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
    chan_spec = _require(spec, "channel", "config")
    kind = is_kind(chan_spec)   # a channel kind (schemas/channel_kinds.py) randomizes the whole report
    # a kind's collection has no per-bit channels; the noiseless placeholder is never inverted (its rows,
    # plan and calibrate branch on cfg.sampling)
    channels = ChannelSet.uniform(Channel(0.0, 1.0), layout.n_bits) if kind else _channels(chan_spec, layout)
    max_order = check_int("max_order", _require(spec, "max_order", "config"), minimum=1)
    if max_order > layout.n_bits:
        raise ValueError(f"max_order must be <= the {layout.n_bits} bits of the layout, got max_order={max_order}")
    sampling = parse_kind(chan_spec, layout, max_order) if kind else None
    kind_memo = parse_memo(chan_spec, sampling) if kind else None
    if kind_memo is not None:   # the job inverts the effective mechanism, the kind at epsilon_1 (docs/client.md 13)
        sampling = kind_memo.effective
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
    device = _unit(spec.get("privacy"), _memoizes(spec["channel"], kind, layout))
    # of one unit in a published row (the sufficient-DP crowd): a device's reports under unit device, 1 per report
    repeats = device_repeats(device, window, bool(dimensions)) if device is not None and device.unit == "device" else 1
    if kind:
        privacy = _kind_privacy(spec.get("privacy"), sampling, check_promise)
    else:
        privacy = _privacy(spec.get("privacy"), layout, channels, min_reports, check_promise, repeats)
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
                           mechanisms=(chan_spec["kind"],) * layout.n_bits if kind else _mechanisms(spec["channel"], layout),
                           device=device, permanent=() if kind else _permanent(spec["channel"], layout),
                           sampling=sampling, kind_memo=kind_memo,
                           rollups=_rollups(spec.get("rollups", []), [d.name for d in dimensions]),
                           reports_per_client=spec.get("reports_per_client"))
    _check_month(cfg, check_promise)
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
