"""One interface for the channel kinds (issue 48 item 1, Python side; Beam-free): what a kind is to the
rest of the code, and, in one place, what it can publish.

A kind (per-bit randomized response, the default; ``hadamard``; ``subset``; any added later) is a
:class:`ChannelKind`:

- ``name``: its name in configs (``channel: {kind: NAME}``), client specs and descriptions;
- ``wire(mechanism)``: its wire format, with ``n_bits``, ``n_bytes``, ``pack`` and ``unpack`` (the per-bit
  kind's is the collection's :class:`~ldp_marginals.ldp.encoding.Layout`);
- ``encode_reports(true_bits, mechanism, rng)``: the simulated client, true 0/1 bits ``(n, d)`` -> packed
  reports (the clients of record are ``ldp/client.py``, ``ldp/hadamard_client.py``, ``ldp/subset_client.py``);
- ``aggregator(mechanism, device_bound, collection_key)``: the job's accumulator of its reports, a
  :class:`~ldp_marginals.ldp.aggregate.ReportAggregator` (``create``, ``create_open``, ``add_packed``,
  ``add_devices``, ``merge``, ``settle``) whose ``marginals(acc)`` gives every counted set's all-ones count
  and its variance (the whole-report kinds' base: :mod:`ldp_marginals.ldp.whole_report`);
- ``cell_variance_per_report(mechanism, order)``: N times the worst-case variance of one cell of an
  ``order``-bit table (what ``plan`` and the dashboard state);
- ``publishes``: the analyses (:data:`ANALYSES`) it serves. A config asking for one outside it is refused
  by :func:`refused` (read by ``schemas/composition.py``: a limit of the privacy math when the analysis
  is in :data:`LIMITS`, else not built); nothing else decides it.

The per-bit kind's aggregator takes more than a mechanism (its channels, extremes, client sample), so
the collection builds it itself (``CollectionConfig.aggregator``); its entry here states its name and what
it publishes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ldp_marginals.ldp import hadamard_reports, subset_reports

# What a collection can ask for, as config fields (the first five) or privacy settings.
# ``extremes``: over reports; ``client_extremes``: over a client's reports (``over: client``).
ANALYSES = ("extremes", "client_extremes", "conditionals", "means", "sets", "rollups", "marginals", "tables",
            "consistent_tables", "device_unit", "sufficient", "epsilon_per_day", "epsilon_per_month")


@dataclass(frozen=True)
class ChannelKind:
    """A channel kind (module docstring)."""

    name: str
    publishes: frozenset
    wire: Callable | None = None
    encode_reports: Callable | None = None
    aggregator: Callable | None = None
    cell_variance_per_report: Callable | None = None

    def __post_init__(self):
        unknown = sorted(set(self.publishes) - set(ANALYSES))
        if unknown:
            raise ValueError(f"publishes must be analyses of {list(ANALYSES)}, got unknown={unknown}")

    def serves(self, analysis: str) -> bool:
        if analysis not in ANALYSES:
            raise ValueError(f"analysis must be one of {list(ANALYSES)}, got analysis={analysis!r}")
        return analysis in self.publishes


# the whole-report kinds: marginals and tables (their estimates and covariances), under either privacy unit,
# and what is derived from the tables of at most max_order bits (ldp/kind_analyses.py): conditionals and
# conditional means (ratios of two all-ones counts of one table, with their covariance), means (a numeric
# feature's 1-bit encoding: its marginal rescaled) and extremes over reports (the table's all-zeros or
# all-ones cell); extremes over clients (a product over a client's reports of each report's unbiased term
# of the indicator, ldp/kind_client_extremes.py). Not served: extra counted sets (not built);
# schemas/composition.py names each refusal
_WHOLE_REPORT = frozenset({"marginals", "tables", "consistent_tables", "device_unit", "extremes", "client_extremes",
                           "conditionals", "means"})
# what a whole-report kind cannot serve whatever is built: a limit of the privacy math (none today)
LIMITS = frozenset()

PER_BIT = ChannelKind("per_bit", frozenset(ANALYSES))
HADAMARD = ChannelKind(hadamard_reports.KIND, _WHOLE_REPORT, hadamard_reports.HadamardFormat,
                       hadamard_reports.encode_reports, hadamard_reports.HadamardAggregator,
                       hadamard_reports.cell_variance_per_report)
SUBSET = ChannelKind(subset_reports.KIND, _WHOLE_REPORT, subset_reports.SubsetFormat,
                     subset_reports.encode_reports, subset_reports.SubsetAggregator,
                     subset_reports.cell_variance_per_report)
KINDS = {k.name: k for k in (PER_BIT, HADAMARD, SUBSET)}


def channel_kind(name: str) -> ChannelKind:
    """The kind named ``name`` (``per_bit``, ``hadamard``, ``subset``)."""
    if name not in KINDS:
        raise ValueError(f"channel kind must be one of {list(KINDS)}, got kind={name!r}")
    return KINDS[name]


def refused(name: str, asked) -> list:
    """Of the analyses ``asked`` (names of :data:`ANALYSES`), those kind ``name`` does not serve, in
    :data:`ANALYSES` order."""
    kind = channel_kind(name)
    return [a for a in ANALYSES if a in set(asked) and not kind.serves(a)]
