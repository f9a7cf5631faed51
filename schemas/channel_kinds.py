"""Channel kinds other than per-bit randomized response, in a collection config::

    channel: {kind: hadamard, epsilon: 2.0}          # optional: slots (default: the best for epsilon),
                                                     # weights: sqrt (default) or uniform (InpHT)

Hadamard sampling (:mod:`ldp_marginals.ldp.hadamard`, on the wire :mod:`ldp_marginals.ldp.hadamard_reports`)
makes the whole report ``epsilon``-LDP, not each bit: the kind for a ``local`` promise over many bits. What
this release supports with it, each refusal a ``ValueError`` naming the field:

- boolean features only (a categorical's one-hot bits or a numeric's encoded bit would make tables
  of structural zeros and means this kind does not estimate yet);
- marginals of every set of 1..max_order bits, and tables of feature groups of at most max_order
  features (the unbiased ones; their consistent tables are not made for this kind yet);
- no extremes, conditionals, means or extra sets; privacy model ``local`` only (its ``epsilon`` at
  least the channel's) and unit ``report`` (a device bound would need the devices' reports kept
  in the wire format, which this release does not do).
"""
from __future__ import annotations

import math

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.encoding import BOOLEAN, Layout
from ldp_marginals.ldp.hadamard import WEIGHTS, HadamardSampling
from ldp_marginals.ldp.hadamard_reports import KIND

KINDS = (KIND,)
_KEYS = ("kind", "epsilon", "slots", "weights")
MAX_COEFFICIENTS = 1 << 18   # 4 MiB of counts per window and key; 62 bits at max_order 3 are 39,773
UNSUPPORTED = ("extremes", "conditionals", "means", "sets")   # config fields this kind refuses


def is_kind(chan) -> bool:
    """Whether a config's ``channel`` names a kind (a mapping with ``kind``)."""
    return isinstance(chan, dict) and "kind" in chan


def parse_kind(chan: dict, layout: Layout, max_order: int) -> HadamardSampling:
    """The mechanism of ``channel: {kind: ...}`` for ``layout``'s bits and tables up to ``max_order``."""
    if chan["kind"] not in KINDS:
        raise ValueError(f"channel.kind must be one of {list(KINDS)}, got kind={chan['kind']!r}")
    unknown = sorted(str(k) for k in set(chan) - set(_KEYS))
    if unknown:
        raise ValueError(f"channel has unknown keys {unknown}; known keys for kind {KIND!r} are {sorted(_KEYS)}")
    if "epsilon" not in chan:
        raise ValueError(f"channel of kind {KIND!r} must have 'epsilon' (the whole report's), got keys={sorted(chan)}")
    others = [f.name for f in layout.features if f.kind != BOOLEAN]
    if others:
        raise ValueError(f"channel kind {KIND!r} takes boolean features only, got non-boolean features {others}")
    if layout.n_bits > 62:
        raise ValueError(f"channel kind {KIND!r} holds at most 62 bits, got {layout.n_bits}")
    coefficients = sum(math.comb(layout.n_bits, j) for j in range(1, max_order + 1))
    if coefficients > MAX_COEFFICIENTS:
        raise ValueError(f"channel kind {KIND!r} samples among the {coefficients:,} coefficients of order 1..max_order "
                         f"of {layout.n_bits} bits, over the {MAX_COEFFICIENTS:,} it holds (a window keeps two counts "
                         f"per coefficient and every client enumerates them): lower max_order, got max_order={max_order}")
    epsilon = check_positive("channel.epsilon", chan["epsilon"])
    slots = chan.get("slots")
    if slots is not None:
        check_int("channel.slots", slots, minimum=1)
    weights = chan.get("weights", "sqrt")
    if weights not in WEIGHTS:
        raise ValueError(f"channel.weights must be one of {list(WEIGHTS)}, got weights={weights!r}")
    return HadamardSampling(layout.n_bits, max_order, epsilon, slots, weights)


def check_config(spec: dict, groups: tuple, max_order: int) -> None:
    """The fields of a collection config that this kind refuses (module docstring)."""
    for key in UNSUPPORTED:
        if spec.get(key):
            raise ValueError(f"{key} are not supported with channel kind {KIND!r} yet, got {key}={spec[key]!r}")
    privacy = spec.get("privacy") or {}
    if isinstance(privacy, dict):
        if privacy.get("unit", "report") != "report":
            raise ValueError(f"privacy.unit must be 'report' with channel kind {KIND!r}, got unit={privacy['unit']!r}")
        if privacy.get("model", "local") != "local":
            raise ValueError(f"privacy.model must be 'local' with channel kind {KIND!r} (it randomizes the whole "
                             f"report, not each bit), got model={privacy['model']!r}")
    for i, g in enumerate(groups):
        if len(g) > max_order:
            raise ValueError(f"groups[{i}] has {len(g)} features, over max_order={max_order}: channel kind {KIND!r} "
                             f"estimates tables of at most max_order bits")


def describe_kind(cfg) -> dict:
    """:meth:`~ldp_marginals.schemas.collection.CollectionConfig.describe` of a collection of this kind:
    the same fields (no per-bit p and q: empty lists), and ``channel`` with the mechanism."""
    m = cfg.sampling
    return {"collection": cfg.name, "labels": list(cfg.layout.labels), "p": [], "q": [],
            "mechanisms": [KIND] * cfg.layout.n_bits,
            "channel": {"kind": KIND, "epsilon": m.epsilon, "slots": m.slots, "weights": m.weights,
                        "coefficients": m.n_coefficients, "report_bits": cfg.wire.n_bits},
            "local_epsilon": float(m.epsilon),
            "window": cfg.window.describe(), "min_reports": cfg.min_reports, "max_order": cfg.max_order,
            "level": cfg.level, "groups": [list(g) for g in cfg.groups],
            "group_intervals": list(cfg.group_intervals or ("per_cell",) * len(cfg.groups)),
            "marginal_interval": cfg.marginal_interval, "numeric": {},
            "dimensions": {d.name: {"max_values": d.max_values, "max_length": d.max_length} for d in cfg.dimensions},
            "extremes": [], "conditionals": 0,
            "privacy": cfg.privacy.describe() if cfg.privacy is not None else None,
            "unit": "report", "max_reports_per_device": None, "memoized_bits": [],
            # one report is epsilon-LDP; reports of one device compose (no memoization)
            "epsilons": {"epsilon_1": float(m.epsilon), "epsilon_infinity": None, "reports_per_day": None,
                         "epsilon_per_day": None, "epsilon_per_month": None}}
