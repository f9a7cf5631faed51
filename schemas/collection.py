"""A collection's config as the job holds it: frozen dataclasses whose ``__post_init__`` validate
what a single value can get wrong (:class:`CollectionConfig`, :class:`Extreme`, :class:`Dimension`,
:class:`Privacy`), and what follows from them (the counted sets, the published sets, the
aggregator, the dimension check and cap, the description readers get). The config file's format
and its field-naming errors are the parser's, :mod:`ldp_marginals.schemas.config`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from ldp_marginals.ldp._checks import check_int
from ldp_marginals.ldp.aggregate import ReportAggregator
from ldp_marginals.ldp.channels import ChannelSet
from ldp_marginals.ldp.client import MAX_REPORTS_PER_DAY
from ldp_marginals.ldp.conditional import DEFAULT_ALPHA
from ldp_marginals.ldp.encoding import Layout
from ldp_marginals.ldp.longitudinal import enforced_epsilon, longitudinal_epsilon
from ldp_marginals.ldp.memoized import ClientChannels
from ldp_marginals.ldp.privacy import local_dp_epsilon, smallest_population
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.windows import Window
from ldp_marginals.schemas.composition import check_composition
from ldp_marginals.schemas.dead_letters import DIMENSION_TOO_LONG, RESERVED_DIMENSION_VALUE, UNDECLARED_DIMENSION

# A collection name becomes part of file names and table rows: letters, digits, '_', '-', '.'
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DIMENSION_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
DEFAULT_MAX_VALUES = 100     # distinct values of one dimension per window and collection
DEFAULT_MAX_LENGTH = 64      # characters of one dimension value
ROLLED_UP = "__all__"        # a rollup row's value of each dimension it sums over (reserved where rollups are)


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
    rest are counted under ``__other__`` by the publication engine's cap,
    :mod:`ldp_marginals.transforms.publication.cap`) of at most ``max_length`` characters."""

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
    # local, unit device: the most a device's published reports of a day / a month may spend, checked
    # against the enforced figures (CollectionConfig.enforced_epsilons, promise_fault)
    epsilon_per_day: float | None = None
    epsilon_per_month: float | None = None

    def describe(self) -> dict:
        return {"model": self.model, "epsilon": self.epsilon, "eta": self.eta if self.model == "sufficient" else None,
                "flip": self.flip, "smallest_crowd": self.smallest_crowd, "epsilon_per_day": self.epsilon_per_day,
                "epsilon_per_month": self.epsilon_per_month}


UNITS = ("report", "device")   # privacy.unit: what min_reports counts and what the bounds are per


@dataclass(frozen=True)
class DeviceUnit:
    """Reports that name their device, with bounds per device: every report names its device (the
    slice-scoped token in ``client``); per slice and key a device adds at most ``max_reports_per_device``
    reports (the bottom M by rank, :mod:`ldp_marginals.ldp.devices`). ``reports_per_day``: the
    declared rate at which a device reports (a whole number a UTC day, which the clients enforce), for
    the epsilons per day and month (optional).
    ``max_keys_per_device``: per slice a device adds to at most this many keys (dimension values: a
    device that changes region), the K of smallest key rank (:func:`~ldp_marginals.ldp.devices.keys_over_bound`).

    ``unit``: what ``min_reports`` counts. ``device`` (``privacy.unit: device``): devices. ``report``
    (``privacy.unit: report`` with a device bound given, or with memoized channels: "the report unit with
    device bounds"): the same tokens and bounds, enforced by the same content-blind machinery, while the
    publication threshold, thin rows, rollups and the release ledger count reports, as under the plain
    report unit (docs/design.md, "The report unit with device bounds")."""

    max_reports_per_device: int = 1
    reports_per_day: int | None = None
    max_keys_per_device: int = 1
    unit: str = "device"

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"privacy.unit must be one of {list(UNITS)}, got unit={self.unit!r}")
        check_int("privacy.max_reports_per_device", self.max_reports_per_device, minimum=1)
        check_int("privacy.max_keys_per_device", self.max_keys_per_device, minimum=1)
        # a whole number: the clients enforce it per UTC day (docs/client.md section 3, "The declared rate")
        # and refuse any other value in their config, so the job states what the clients hold to
        if self.reports_per_day is not None and not (isinstance(self.reports_per_day, int)
                                                     and not isinstance(self.reports_per_day, bool)
                                                     and 1 <= self.reports_per_day <= MAX_REPORTS_PER_DAY):
            raise ValueError(f"privacy.reports_per_day must be a whole number of reports in [1, {MAX_REPORTS_PER_DAY}] "
                             f"(the clients refuse more than that many a UTC day), got "
                             f"reports_per_day={self.reports_per_day!r}")


def device_repeats(device: DeviceUnit | None, window, dimensions: bool) -> int:
    """The most reports of one person in a published row of a window: 1 per report; under the device
    unit ``k * M``, k the window's slices (a sliding window's device shows a token per slice), and with
    dimensions ``k * K * M`` (K = max_keys_per_device: the cap's ``__other__`` row sums keys, in up to K
    of which a device may be in a slice; a key's own row holds at most ``k * M``, so this bounds it)."""
    if device is None:
        return 1
    k = int(round(window.size_seconds / window.period_seconds)) if window.overlapping else 1
    return k * device.max_reports_per_device * (device.max_keys_per_device if dimensions else 1)


@lru_cache(maxsize=None)
def _smallest_crowd(flip: float, n_bits: int, lam: float, eta: float, max_ones: int, repeats: int = 1) -> int:
    return smallest_population(flip, n_bits, lam, eta, repeats, max_ones=max_ones)


def sufficient_flip(channels: ChannelSet) -> float:
    """The symmetric flip a collection's channels are held to under sufficient DP. The model of
    Zhilyaev & Zeber randomizes every bit with one symmetric flip: each bit is held to the symmetric
    channel of its own local epsilon, and every bit to the least noisy of them."""
    return min(1.0 / (1.0 + math.exp(c.epsilon_bit)) for c in channels.channels)


def sufficient_crowd(layout: Layout, flip: float, epsilon: float, eta: float, repeats: int = 1) -> int:
    """The fewest reports per published window for which ``P[R > e^epsilon] <= eta`` at ``flip``
    (a boolean or a categorical feature sets at most one bit: at most one set bit per feature), with
    up to ``repeats`` reports per person in a window (Zhilyaev & Zeber section 6)."""
    return _smallest_crowd(flip, layout.n_bits, math.exp(epsilon), eta, len(layout.features), repeats)


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
    device: DeviceUnit | None = None   # privacy.unit: device (None: the unit is the report)
    permanent: tuple = ()   # per bit: the permanent channel of a bit that memoizes (rappor, memoize), or None
    sampling: object = None   # a channel kind: its HadamardSampling (ldp/hadamard_reports.py) or SubsetRR
    #                           (ldp/subset_reports.py); None: per bit. Memoized: the effective one, at epsilon_1
    kind_memo: object = None  # a memoized kind (channel: {kind: ..., memoize: true}): its MemoizedKind
    #                           (ldp/kind_memoize.py, the permanent and instantaneous stages), else None
    rollups: tuple = ()     # the dimensions each rollup keeps (sorted name tuples, each a proper subset)
    reports_per_client: int | None = None   # the client rows' sample per client and window (None: the default)

    def __post_init__(self):
        self._check_rollups()
        self._check_reports_per_client()
        # every combination of features the job refuses: one table (schemas/composition.py), checked here
        # once the config is parsed, so a job-wide --window override (dataclasses.replace) is checked too
        check_composition(self)

    def _check_reports_per_client(self) -> None:
        """``reports_per_client`` (c): an int >= 1, with extremes over clients, at most the device bound
        (a client keeps at most M reports of a window and key, so none would hold more)."""
        c = self.reports_per_client
        if c is None:
            return
        check_int("reports_per_client", c, minimum=1)
        if not self.client_extremes:
            raise ValueError(f"collection {self.name!r}: reports_per_client={c} samples the reports of the extremes "
                             "over clients, and the collection has none (extremes with over: client)")
        if self.device is not None and c > self.device.max_reports_per_device:
            raise ValueError(f"collection {self.name!r}: reports_per_client must be at most "
                             f"privacy.max_reports_per_device={self.device.max_reports_per_device} (a device keeps "
                             f"no more of a window and key), got reports_per_client={c}")

    @property
    def client_sample(self) -> int | None:
        """c, the reports each client contributes to the client rows (its c of smallest rank; a client
        with fewer is left out and counted): ``reports_per_client``, by default under ``privacy.unit:
        device`` the bound ``max_reports_per_device``; None (every report, the groups rule) otherwise
        or without extremes over clients."""
        if not self.client_extremes:
            return None
        if self.reports_per_client is not None:
            return self.reports_per_client
        return self.device.max_reports_per_device if self.device is not None else None

    def _check_rollups(self) -> None:
        """Each rollup keeps a proper subset of the declared dimensions, once (the windows and the unit
        rollups compose with are rules of schemas/composition.py)."""
        declared = [d.name for d in self.dimensions]
        for i, over in enumerate(self.rollups):
            unknown = sorted(set(over) - set(declared))
            if unknown:
                raise ValueError(f"collection {self.name!r}: rollups[{i}] names dimensions {unknown} that are not "
                                 f"declared (declared: {declared or 'none'}), got rollups[{i}]={list(over)}")
            if tuple(sorted(set(over))) != tuple(over) or len(over) >= len(declared):
                raise ValueError(f"collection {self.name!r}: rollups[{i}] must keep a proper subset of the dimensions "
                                 f"{declared}, each once (every dimension kept is the key itself), got "
                                 f"rollups[{i}]={list(over)}")
        if len(set(self.rollups)) != len(self.rollups):
            raise ValueError(f"collection {self.name!r}: rollups must be distinct, got rollups="
                             f"{[list(r) for r in self.rollups]}")
        # rollups with a sliding window: schemas/composition.py

    @property
    def dimension_limits(self) -> dict:
        return {d.name: d for d in self.dimensions}

    def dimension_fault(self, dims: dict) -> tuple | None:
        """``(reason, detail)`` when a report's dimensions break the collection's declaration (a key
        not declared, a value longer than its ``max_length``), else None. Keys are checked in
        sorted order, so the first fault is the same on every reader."""
        limits = self.dimension_limits
        for key in sorted(dims):
            if key not in limits:   # never named: the key is the report's string (it reaches answers, dead letters)
                return (UNDECLARED_DIMENSION, f"a dimension name of {len(key):,} characters is not declared for "
                        f"collection {self.name!r} (declared: {sorted(limits) if limits else 'none'})")
        for key in sorted(dims):
            if len(dims[key]) > limits[key].max_length:
                return (DIMENSION_TOO_LONG, f"dimension {key!r} has a value of {len(dims[key]):,} characters, "
                        f"over max_length={limits[key].max_length}")
        if self.rollups:
            for key in sorted(dims):
                if dims[key] == ROLLED_UP:
                    return (RESERVED_DIMENSION_VALUE, f"dimension {key!r} has the value {ROLLED_UP!r}, which marks "
                            f"rollup rows of collection {self.name!r}")
        return None

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
        """Fills this collection's per-window accumulators: the counted sets, per-report and per-client
        extremes, and under ``privacy.unit: device`` the bound per device."""
        from ldp_marginals.ldp.aggregate import client_key
        bound = self.device.max_reports_per_device if self.device is not None else None
        if self.sampling is not None:   # a whole-report kind (ldp/channel_kind.py)
            from ldp_marginals.ldp.channel_kind import channel_kind
            return channel_kind(self.channel_kind).aggregator(self.sampling, bound, client_key(self.name),
                                                              tuple((e.op, e.bits) for e in self.client_extremes),
                                                              self.client_sample)
        return ReportAggregator(self.family, self.channels, tuple((e.op, e.bits) for e in self.report_extremes),
                                tuple((e.op, e.bits) for e in self.client_extremes), bound, client_key(self.name),
                                self.client_sample,
                                (self.shared_reports, *self.client_channels.shared) if self.shared_reports else None)

    @property
    def channel_kind(self) -> str:
        """``per_bit`` (randomized response bit by bit), ``hadamard`` (Hadamard sampling) or ``subset``
        (subset randomized response)."""
        if self.sampling is None:
            return "per_bit"
        from ldp_marginals.schemas.channel_kinds import kind_of
        return kind_of(self.sampling)

    @cached_property
    def wire(self):
        """What a report's ``bits`` hold: the layout's bits (per bit), or the sampled coefficients
        (:class:`~ldp_marginals.ldp.hadamard_reports.HadamardFormat`) or the subset and its pattern
        (:class:`~ldp_marginals.ldp.subset_reports.SubsetFormat`); all have ``n_bits`` and ``n_bytes``."""
        if self.sampling is None:
            return self.layout
        from ldp_marginals.ldp.channel_kind import channel_kind
        return channel_kind(self.channel_kind).wire(self.sampling)

    @property
    def bounds_keys(self) -> bool:
        """Whether a slice's devices must be bounded across keys: the device unit with dimensions."""
        return self.device is not None and bool(self.dimensions)

    @property
    def unit(self) -> str:
        """What ``min_reports`` counts: ``report`` or ``device`` (``privacy.unit``)."""
        return "report" if self.device is None else self.device.unit

    @property
    def counts_devices(self) -> bool:
        """Whether ``min_reports`` counts devices (``privacy.unit: device``). Reports name their device
        whenever :attr:`device` is set (the unit, or the report unit with device bounds); only under the
        device unit do the publication rule, thin rows, rollups and the ledger count devices."""
        return self.device is not None and self.device.unit == "device"

    @property
    def promise_repeats(self) -> int:
        """The reports of one *unit* in a published row, for the sufficient-DP crowd: the device's
        :attr:`repeats_per_window` under the device unit, 1 under the report unit (the promise is per
        report, bounds or not)."""
        return self.repeats_per_window if self.counts_devices else 1

    @property
    def repeats_per_window(self) -> int:
        """The most reports of one person in a published row of a window (:func:`device_repeats`)."""
        return device_repeats(self.device, self.window, bool(self.dimensions))

    @property
    def shared_reports(self) -> int:
        """``s`` of :func:`~ldp_marginals.ldp.memoized.repeat_variance`: how many other reports of its
        device a report may share its permanent responses with in a published row of a window,
        ``k * M - 1``, with dimensions ``k * K * M - 1`` (0 when no bit memoizes). A memoized kind's reports
        share their whole permanent response: the same ``s`` (:func:`~ldp_marginals.ldp.kind_memoize.
        with_kind_repeats`)."""
        if self.kind_memo is not None:
            return self.repeats_per_window - 1
        if not self.permanent or all(c is None for c in self.permanent):
            return 0
        return self.repeats_per_window - 1

    @property
    def client_channels(self) -> ClientChannels:
        """Per bit the instantaneous channel and the permanent one of a bit that memoizes; their
        composition is :attr:`channels`, the channel the job inverts."""
        if not self.permanent or all(c is None for c in self.permanent):
            return ClientChannels.plain(self.channels)
        return ClientChannels(self._instantaneous, self.permanent)

    @property
    def _instantaneous(self) -> ChannelSet:
        from ldp_marginals.ldp.channels import Channel
        out = []
        for eff, perm in zip(self.channels.channels, self.permanent):
            if perm is None:
                out.append(eff)
            else:   # eff = perm then inst: solve p = p2 + p1 (q2 - p2), q = p2 + q1 (q2 - p2) for (p2, q2)
                gap = (eff.q - eff.p) / (perm.q - perm.p)
                p2 = eff.p - perm.p * gap
                out.append(Channel(p2, p2 + gap))
        return ChannelSet(tuple(out))

    @property
    def spend(self):
        """What a device spends, as :mod:`ldp_marginals.ldp.longitudinal` reads it: per bit its
        :attr:`client_channels`; a whole-report kind its :class:`~ldp_marginals.ldp.kind_memoize.WholeReportSpend`
        (one report ``epsilon_1``; all reports of one value ``epsilon_infinity`` when it memoizes)."""
        if self.sampling is None:
            return self.client_channels
        from ldp_marginals.ldp.kind_memoize import WholeReportSpend
        return WholeReportSpend.of(self.sampling, self.kind_memo)

    def epsilons(self):
        """:class:`~ldp_marginals.ldp.longitudinal.LongitudinalEpsilon` of the collection's channels at
        its DECLARED ``reports_per_day`` (the clients' rate, which the job does not enforce), or None
        when none is declared. The promise is checked against :meth:`enforced_epsilons`."""
        rate = self.device.reports_per_day if self.device is not None else None
        return None if rate is None else self._epsilon_figures

    @cached_property
    def _epsilon_figures(self):
        return longitudinal_epsilon(self.layout, self.spend, self.device.reports_per_day)

    @property
    def reports_per_slice(self) -> int | None:
        """The most reports of one device the job publishes per slice (its token's scope): ``M``, and
        ``M * K`` with dimensions; None under ``unit: report`` (nothing links a device's reports)."""
        if self.device is None:
            return None
        return self.device.max_reports_per_device * (self.device.max_keys_per_device if self.dimensions else 1)

    def enforced_epsilons(self):
        """:class:`~ldp_marginals.ldp.longitudinal.EnforcedEpsilon`: a device's epsilons over a day and a
        month from the bounds the job enforces (slices a day x ``M`` x ``K``, exact for one value where
        bits memoize), or None under ``unit: report`` (nothing bounds a device there)."""
        return None if self.device is None else self._enforced_figures

    @cached_property
    def _enforced_figures(self):
        return enforced_epsilon(self.layout, self.spend, self.window, self.reports_per_slice)

    def promise_fault(self) -> str | None:
        """Why the enforced figures break ``privacy.epsilon_per_day`` / ``epsilon_per_month`` (naming the
        figure, where it comes from and a window or bound that keeps it), None when they keep it
        (:func:`~ldp_marginals.schemas.promise_over_time.promise_fault`)."""
        from ldp_marginals.schemas.promise_over_time import promise_fault
        return promise_fault(self)

    def describe_epsilons(self) -> dict:
        """epsilon_1 and epsilon_infinity always; ``enforced``: a device's day and month as the job's bounds
        hold them (None under ``unit: report``: one report spends epsilon_1, and nothing bounds how many a
        device sends); ``declared``: the same at the declared ``reports_per_day`` (None without one)."""
        from ldp_marginals.ldp.longitudinal import epsilon_infinity, epsilon_one
        cc = self.spend
        inf = epsilon_infinity(self.layout, cc)
        declared = self.epsilons()
        enforced = self.enforced_epsilons()
        return {"epsilon_1": float(epsilon_one(self.layout, cc)), "epsilon_infinity": None if math.isinf(inf) else inf,
                "enforced": None if enforced is None else enforced.describe(),
                "declared": None if declared is None else {k: v for k, v in declared.describe().items()
                                                           if k not in ("epsilon_1", "epsilon_infinity")}}

    @property
    def client_extremes(self) -> tuple:
        return tuple(e for e in self.extremes if e.over == "client")

    @property
    def report_extremes(self) -> tuple:
        return tuple(e for e in self.extremes if e.over == "report")

    def describe_unit(self) -> dict:
        """What ``min_reports`` counts and which bounds per device apply (collections.json): ``unit``;
        ``device_token``: whether reports must carry the device token (client config ``token: true``);
        ``max_reports_per_device`` / ``max_keys_per_device``: the bounds the job enforces per slice (None
        when reports are not linked to devices)."""
        dev = self.device
        return {"unit": self.unit, "device_token": dev is not None,
                "max_reports_per_device": dev.max_reports_per_device if dev is not None else None,
                "max_keys_per_device": dev.max_keys_per_device if dev is not None else None}

    def describe(self) -> dict:
        """What a reader of the outputs needs to know about the collection (JSON-safe): the bits, the
        channels and the local-DP epsilon they give a whole report, the window and the guard."""
        if self.sampling is not None:
            from ldp_marginals.schemas.channel_kinds import describe_kind
            return describe_kind(self)
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
                "rollups": [list(r) for r in self.rollups],
                "extremes": [{"name": e.name, "op": e.op, "bits": list(e.bits), "over": e.over}
                             for e in self.extremes],
                "conditionals": len(self.conditionals),
                "privacy": self.privacy.describe() if self.privacy is not None else None,
                **self.describe_unit(),
                "reports_per_client": self.client_sample,
                "memoized_bits": [self.layout.labels[i] for i, c in enumerate(self.permanent) if c is not None],
                "epsilons": self.describe_epsilons()}

