"""The client config a device receives (docs/client.md sections 1, 11 and 12), derived from a collection
config: the one source of what the JVM, TypeScript and Python clients read (``ldp-marginals client-config``).

- per-bit channels: ``channels`` holds each bit's instantaneous ``p``, ``q`` and, for a bit that memoizes
  (``rappor`` with ``memoize: true``), its permanent channel; their composition is the channel the job
  inverts (:attr:`~ldp_marginals.schemas.collection.CollectionConfig.channels`). ``token: true`` when the
  job needs each report's device token: reports name their device (``privacy.unit: device``, or the report
  unit with device bounds or memoization: ``cfg.device``; else a report is dead-lettered
  ``no_device_token``) or extremes over clients (the token is the client); otherwise false, so reports
  carry nothing that links them. ``reports_per_day`` is the declared rate, which the clients enforce.
- the whole-report kinds (``hadamard``, ``subset``): the kind's object with its final numbers (no client
  computes an exponential), ``permanent_keep`` when the collection memoizes (the permanent stage's keep,
  docs/client.md section 13), and ``token``/``reports_per_day`` as for per-bit channels (written only when
  set: true, a rate); a categorical feature is ``{name, type: categorical, values}``, its one-hot bits in the
  layout's order. A collection with a numeric feature has none (their clients take boolean and categorical
  features only).
"""
from __future__ import annotations

from ldp_marginals.ldp.client import ClientSpec
from ldp_marginals.ldp.hadamard_client import HadamardClientSpec
from ldp_marginals.ldp.kind_memoize import MemoizedKind
from ldp_marginals.ldp.subset_client import SubsetClientSpec
from ldp_marginals.schemas.channel_kinds import kind_of
from ldp_marginals.schemas.collection import CollectionConfig

_KIND_SPECS = {"hadamard": HadamardClientSpec, "subset": SubsetClientSpec}


def needs_token(cfg: CollectionConfig) -> bool:
    """Whether the collection's reports must carry the device token (module docstring)."""
    return cfg.device is not None or bool(cfg.client_extremes)


def client_spec(cfg: CollectionConfig):
    """The spec a device is told for ``cfg``: a :class:`~ldp_marginals.ldp.client.ClientSpec` (per bit),
    :class:`~ldp_marginals.ldp.hadamard_client.HadamardClientSpec` or
    :class:`~ldp_marginals.ldp.subset_client.SubsetClientSpec`; ValueError naming what no client can serve."""
    rate = cfg.device.reports_per_day if cfg.device is not None else None
    if cfg.sampling is None:
        return ClientSpec(cfg.name, cfg.layout, cfg.window, cfg.client_channels, needs_token(cfg), rate)
    memo = cfg.kind_memo   # memoized: the two stages (cfg.sampling is their composition, which the job inverts)
    stages = (memo.instantaneous, memo.permanent) if isinstance(memo, MemoizedKind) else (cfg.sampling, None)
    kind = kind_of(stages[0])
    numeric = [f.name for f in cfg.layout.features if f.kind == "numeric"]
    if numeric:
        raise ValueError(f"collection {cfg.name!r}: channel kind {kind!r} clients take boolean and categorical features "
                         f"only, got numeric features {numeric}")
    feats = [f.name if f.kind == "boolean" else (f.name, f.values) for f in cfg.layout.features]
    return _KIND_SPECS[kind].of(cfg.name, feats, cfg.window, *stages, token=needs_token(cfg), reports_per_day=rate)


def client_config(cfg: CollectionConfig) -> dict:
    """The JSON object of :func:`client_spec` (what every client's ``fromJson`` / ``create`` reads)."""
    return client_spec(cfg).to_json()
