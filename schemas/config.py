"""The collection config: what a collection's reports mean and how they are estimated.

JSON or YAML (a mapping, or a list of mappings for several collections)::

    collection: app_usage
    features:
      - {name: dark_mode, type: boolean}
      - {name: os, type: categorical, values: [mac, win, linux]}
    channel: {mechanism: symmetric, epsilon: 1.0}   # or {p, q}; or a list of {p, q}, one per bit;
                                                   # or {mechanism: optimized_unary, epsilon},
                                                   # {mechanism: symmetric, flip}, {mechanism: rappor, f, p, q}
    max_order: 2
    window: {type: fixed, size_seconds: 3600}      # or {type: sliding, size_seconds, period_seconds}, {type: global}
    min_reports: 1000
    # optional
    sets: [[dark_mode, os=mac, os=win]]            # extra sets to count (bit labels or indices)
    groups: [[os, dark_mode]]                      # feature groups: tables of their joint cells
    level: 0.95
    allowed_lateness_seconds: 0
    early_firing_seconds: null                     # streaming: speculative panes every N seconds
    extremes:
      - {name: any_beta, op: or, features: [beta_a, beta_b]}
      - {name: weekly_active, op: or, bits: [active], over: client}
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from ldp_marginals.ldp._checks import check_int, check_level, check_positive
from ldp_marginals.ldp.aggregate import ReportAggregator
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.encoding import Feature, Layout
from ldp_marginals.ldp.privacy import local_dp_epsilon
from ldp_marginals.ldp.sets import SetFamily

WINDOW_TYPES = ("fixed", "sliding", "global")


def _require(mapping: dict, key: str, where: str):
    if key not in mapping:
        raise ValueError(f"{where} must have '{key}', got keys={sorted(mapping)}")
    return mapping[key]


def _channel(spec, where: str) -> Channel:
    if not isinstance(spec, dict):
        raise ValueError(f"{where} must be a mapping, got {where}={spec!r}")
    mech = spec.get("mechanism")
    try:
        if mech is None:
            return Channel(_require(spec, "p", where), _require(spec, "q", where))
        if mech == "symmetric":
            if "flip" in spec:
                return Channel.symmetric(spec["flip"])
            return Channel.symmetric_from_epsilon(_require(spec, "epsilon", where))
        if mech == "optimized_unary":
            return Channel.optimized_unary(_require(spec, "epsilon", where))
        if mech == "rappor":
            return Channel.rappor(_require(spec, "f", where), _require(spec, "p", where), _require(spec, "q", where))
        if mech == "unrelated_question":
            return Channel.unrelated_question(_require(spec, "coin_probability", where))
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    raise ValueError(f"{where}.mechanism must be one of symmetric, optimized_unary, rappor, unrelated_question, "
                     f"got mechanism={mech!r}")


@dataclass(frozen=True)
class Window:
    type: str
    size_seconds: float = 0.0
    period_seconds: float = 0.0

    def __post_init__(self):
        if self.type not in WINDOW_TYPES:
            raise ValueError(f"window.type must be one of {list(WINDOW_TYPES)}, got type={self.type!r}")
        if self.type in ("fixed", "sliding"):
            check_positive("window.size_seconds", self.size_seconds)
        if self.type == "sliding":
            check_positive("window.period_seconds", self.period_seconds)
            if not 0 < self.period_seconds <= self.size_seconds:
                raise ValueError(f"window.period_seconds must be in (0, size_seconds], "
                                 f"got period_seconds={self.period_seconds!r}")


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

    @cached_property
    def family(self) -> SetFamily:
        """The counted sets: all up to max_order, the explicit sets and every group's cells."""
        extra = list(self.sets)
        for group in self.groups:
            extra.extend(self.layout.group_sets(group))
        return SetFamily(self.layout.n_bits, self.max_order, extra)

    @cached_property
    def aggregator(self) -> ReportAggregator:
        """Fills this collection's per-window accumulators: the counted sets and per-report extremes."""
        return ReportAggregator(self.family, self.channels, tuple((e.op, e.bits) for e in self.report_extremes))

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
                "local_epsilon": float(local_dp_epsilon(self.layout, self.channels)),
                "window": {"type": self.window.type, "size_seconds": self.window.size_seconds,
                           "period_seconds": self.window.period_seconds},
                "min_reports": self.min_reports, "max_order": self.max_order, "level": self.level,
                "groups": [list(g) for g in self.groups],
                "extremes": [{"name": e.name, "op": e.op, "bits": list(e.bits), "over": e.over}
                             for e in self.extremes]}


def _bits_of(layout: Layout, items, where: str) -> tuple:
    out = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item < layout.n_bits:
                raise ValueError(f"{where} bit must be in [0, {layout.n_bits}), got bit={item}")
            out.append(item)
        elif isinstance(item, str):
            out.append(layout.bit_index(item))
        else:
            raise ValueError(f"{where} must list bit labels or indices, got {item!r}")
    return tuple(sorted(set(out)))


def parse_config(spec: dict) -> CollectionConfig:
    """Validate one collection's config mapping; ``ValueError`` naming the field otherwise."""
    if not isinstance(spec, dict):
        raise ValueError(f"config must be a mapping, got {type(spec).__name__}")
    known = {"collection", "features", "channel", "max_order", "window", "min_reports", "sets", "groups", "level",
             "allowed_lateness_seconds", "early_firing_seconds", "extremes"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ValueError(f"config has unknown keys {unknown}; known keys are {sorted(known)}")
    name = _require(spec, "collection", "config")
    if not isinstance(name, str) or not name:
        raise ValueError(f"collection must be a non-empty string, got collection={name!r}")
    feats = []
    for i, f in enumerate(_require(spec, "features", "config")):
        where = f"features[{i}]"
        if not isinstance(f, dict):
            raise ValueError(f"{where} must be a mapping, got {where}={f!r}")
        kind = _require(f, "type", where)
        if kind == "categorical":
            feats.append(Feature.categorical(_require(f, "name", where), _require(f, "values", where)))
        else:
            feats.append(Feature(_require(f, "name", where), kind))
    layout = Layout(tuple(feats))
    chan = _require(spec, "channel", "config")
    if isinstance(chan, list):
        if len(chan) != layout.n_bits:
            raise ValueError(f"channel list must have one entry per bit ({layout.n_bits}), got len={len(chan)}")
        channels = ChannelSet(tuple(_channel(c, f"channel[{i}]") for i, c in enumerate(chan)))
    else:
        channels = ChannelSet.uniform(_channel(chan, "channel"), layout.n_bits)
    max_order = check_int("max_order", _require(spec, "max_order", "config"), minimum=1)
    if max_order > layout.n_bits:
        raise ValueError(f"max_order must be <= the {layout.n_bits} bits of the layout, got max_order={max_order}")
    w = _require(spec, "window", "config")
    if not isinstance(w, dict):
        raise ValueError(f"window must be a mapping, got window={w!r}")
    window = Window(_require(w, "type", "window"), w.get("size_seconds", 0.0), w.get("period_seconds", 0.0))
    min_reports = check_int("min_reports", _require(spec, "min_reports", "config"), minimum=0)
    sets = tuple(_bits_of(layout, s, "sets") for s in spec.get("sets", []))
    groups = []
    for g in spec.get("groups", []):
        for fname in g:
            layout.feature(fname)
        groups.append(tuple(g))
    level = check_level(spec.get("level", 0.95))
    lateness = check_positive("allowed_lateness_seconds", spec.get("allowed_lateness_seconds", 0), allow_zero=True)
    early = spec.get("early_firing_seconds")
    if early is not None:
        check_int("early_firing_seconds", early, minimum=1)
    extremes = []
    for i, e in enumerate(spec.get("extremes", [])):
        where = f"extremes[{i}]"
        if not isinstance(e, dict):
            raise ValueError(f"{where} must be a mapping, got {where}={e!r}")
        if "features" in e:
            bits = tuple(sorted(b for fname in e["features"] for b in layout.bits_of(fname)))
        else:
            bits = _bits_of(layout, _require(e, "bits", where), where)
        extremes.append(Extreme(_require(e, "name", where), _require(e, "op", where), bits, e.get("over", "report")))
    names = [e.name for e in extremes]
    if len(set(names)) != len(names):
        raise ValueError(f"extremes names must be unique, got names={names}")
    return CollectionConfig(name, layout, channels, max_order, window, min_reports, sets, tuple(groups), level,
                            float(lateness), early, tuple(extremes))


def load_configs(path) -> dict:
    """Collection configs from a JSON or YAML file (one mapping, or a list): name -> config."""
    return configs_from_text(Path(path).read_text(), path)


def configs_from_text(text: str, path) -> dict:
    """Collection configs from the text of the file ``path`` (JSON if it ends ``.json``, else YAML)."""
    try:
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ValueError(f"config file {path} is not valid JSON/YAML: {err}") from None
    items = data if isinstance(data, list) else [data]
    out = {}
    for spec in items:
        cfg = parse_config(spec)
        if cfg.name in out:
            raise ValueError(f"collection names must be unique, got {cfg.name!r} twice")
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
