"""One table of what composes: every refusal of a combination of features of a collection config
(unit x channel kind x window x batch/streaming x feature), checked once after parsing.

Each :class:`Rule` is a predicate over ``(config, streaming)`` with its verdict (a limit of the privacy
math, or not built), the section of docs/design.md that explains it and what to do instead; a refusal's
message says all three. Single-field validation (a negative number, an unknown key) stays with the
field's parser (schemas/config.py, schemas/channel_kinds.py); what needs earlier runs (the release
ledger's rollups, pipelines/release_ledger.py) stays with the ledger.

:func:`check_composition` runs the table: without a mode (``streaming=None``: ``CollectionConfig``
after parsing, so a job-wide ``--window`` override is checked too) the rules of every mode; with one
(:class:`~ldp_marginals.pipelines.job.JobOptions`) the rules of that mode as well. docs/design.md's and
the README's matrix are :func:`matrix_markdown` (tests/schemas/test_composition.py checks they match).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

LIMIT = "limit of the privacy math"
CONFIG, SPEC = "config", "spec"   # a rule over the parsed CollectionConfig, or over the config mapping (a
#                                   combination whose field the model does not keep: checked while parsing)
NOT_BUILT = "not built"
ANY, STREAMING = "any", "streaming"


@dataclass(frozen=True)
class Rule:
    """``when(cfg)`` true: the combination is refused (in ``mode``: ``any`` or ``streaming``), for
    ``why(cfg)``; ``verdict`` LIMIT or NOT_BUILT; ``anchor`` the docs/design.md section; ``instead``
    what a user does instead (also in the message). ``owner``: the work item lifting a NOT_BUILT rule
    (the lead deletes the entry when it merges), or ''."""

    name: str
    combination: str   # for the matrix: which features with which
    verdict: str
    mode: str
    when: Callable
    why: Callable
    instead: str
    anchor: str
    owner: str = ""
    stage: str = CONFIG

    def message(self, cfg) -> str:
        name = cfg.get("collection") if isinstance(cfg, dict) else cfg.name
        return (f"collection {name!r}: {self.why(cfg)} [{self.verdict}: docs/design.md, {self.anchor!r}; "
                f"rule {self.name}]; instead: {self.instead}")


def _kind(cfg) -> str:
    return cfg.channel_kind


def _whole_report(cfg) -> bool:
    return cfg.sampling is not None


def _kind_fields(cfg) -> list:
    """The analyses asked for that the kind does not publish (ldp/channel_kind.py: ChannelKind.publishes, the
    one place that says what a kind serves)."""
    from ldp_marginals.ldp.channel_kind import refused
    return refused(cfg.channel_kind, [name for name, on in (
        ("extremes", cfg.report_extremes), ("client_extremes", cfg.client_extremes),
        ("conditionals", cfg.conditionals), ("means", cfg.means), ("sets", cfg.sets)) if on])


def _over_width(cfg) -> list:
    """The extra sets (labels) of a subset-RR collection wider than its width (:func:`~ldp_marginals.schemas.
    channel_kinds.kind_sets`; the parser keeps only those it holds, this rule refuses the rest)."""
    if not _whole_report(cfg) or _kind(cfg) != "subset":
        return []
    from ldp_marginals.schemas.channel_kinds import kind_sets_of
    labels = cfg.layout.labels
    return [[labels[b] for b in s] for s in kind_sets_of(cfg) if len(s) > cfg.sampling.width]


def _window_text(cfg) -> str:
    return f"a sliding window of {cfg.window.size_seconds:g} s every {cfg.window.period_seconds:g} s"


def _mapping(spec, key) -> dict:
    value = spec.get(key) if isinstance(spec, dict) else None
    return value if isinstance(value, dict) else {}




def _memoized_client_extremes(cfg) -> list:
    """The extremes over clients whose bits memoize (a rappor bit with ``memoize: true``, or every bit of a
    memoized whole-report kind) when the client rows take more than one report a client (``reports_per_client``
    other than 1; unset: every report, or under a device bound its M): their names."""
    if not cfg.client_extremes or cfg.client_sample == 1:
        return []
    if cfg.kind_memo is not None:
        return [e.name for e in cfg.client_extremes]
    perm = cfg.permanent or ()
    return [e.name for e in cfg.client_extremes if any(b < len(perm) and perm[b] is not None for b in e.bits)]


RULES = (
    # ---- limits of the privacy math ------------------------------------------------------------------
    Rule("spans-need-device", "privacy.epsilon_per_day/epsilon_per_month x privacy.unit report", LIMIT, ANY,
         lambda c: not c.counts_devices and c.privacy is not None and (c.privacy.epsilon_per_day is not None
                                                                   or c.privacy.epsilon_per_month is not None),
         lambda c: f"privacy.{'epsilon_per_day' if c.privacy.epsilon_per_day is not None else 'epsilon_per_month'} "
                   "needs privacy.unit 'device' (only it bounds the reports of a device the job publishes), got "
                   "unit='report'",
         "set privacy.unit: device (with max_reports_per_device), or drop the promise per day or month",
         "Devices over time: memoization and epsilon"),
    Rule("memoize-client-extremes", "memoized channels (per bit or a kind) x extremes over: client x "
         "reports_per_client other than 1", LIMIT, ANY,
         lambda c: bool(_memoized_client_extremes(c)),
         lambda c: f"extremes {_memoized_client_extremes(c)} (over: client) on memoized channels take "
                   f"{'every report' if c.client_sample is None else f'{c.client_sample} reports'} of a client "
                   f"(reports_per_client={c.reports_per_client!r}): a client's OR/AND multiplies one unbiased term "
                   "per report, unbiased only when its reports are randomized independently, and reports of one "
                   "value share its permanent response, so the product of two or more is biased (no per-report "
                   "term can be unbiased for every number of reports sharing a permanent response)",
         "set reports_per_client: 1 (one report a client and window, unbiased whatever memoization does), or "
         "drop memoize",
         "Extremes over clients and memoized channels"),
    Rule("client-extremes-sliding", "extremes over: client x sliding window", LIMIT, ANY,
         lambda c: bool(c.client_extremes) and c.window.overlapping,
         lambda c: f"extremes {[e.name for e in c.client_extremes]} (over: client) need fixed or global windows, "
                   f"got {_window_text(c)}: a client's state merged across overlapping "
                   "windows lets a difference of windows single out one client",
         "use a fixed or global window, or extremes over: report",
         "Extremes over clients: the groups rule"),
    Rule("rollups-sliding", "rollups x sliding window", LIMIT, ANY,
         lambda c: bool(c.rollups) and c.window.overlapping,
         lambda c: f"rollups need fixed or global windows, got {_window_text(c)}: a rollup holds what the guard "
                   "withholds of its keys, which overlapping windows would difference slice by slice",
         "use a fixed or global window for the collection with rollups, or drop rollups",
         "Rollups: totals over dimensions, and complementary suppression"),
    Rule("kind-sufficient-dp", "channel kind hadamard/subset x privacy.model sufficient", LIMIT, ANY,
         lambda c: _whole_report(c) and c.privacy is not None and c.privacy.model != "local",
         lambda c: f"privacy.model must be 'local' with channel kind {_kind(c)!r} (it randomizes the whole report, "
                   "and the sufficient-DP model of Zhilyaev & Zeber assumes per-bit symmetric flips), got "
                   f"model={c.privacy.model!r}",
         "promise privacy.model: local (the kind's epsilon), or use per-bit channels for a sufficient promise",
         "Privacy calibration (Zhilyaev & Zeber)"),
    Rule("global-streaming-no-early-firing", "global window x streaming, no early_firing_seconds", LIMIT, STREAMING,
         lambda c: c.window.type == "global" and not c.early_firing_seconds,
         lambda c: "a global window never closes in streaming, so it needs early_firing_seconds, got "
                   f"early_firing_seconds={c.early_firing_seconds!r}",
         "give early_firing_seconds, use fixed or sliding windows, or run it in batch",
         "Data flow of the job"),
    Rule("device-keys-streaming-global", "device bounds (privacy.unit device, or unit report with a bound) x "
         "dimensions x global window x streaming", LIMIT, STREAMING,
         lambda c: c.bounds_keys and c.window.type == "global",
         lambda c: f"privacy.unit {c.unit!r}{'' if c.counts_devices else ' with a bound per device'} with dimensions {[d.name for d in c.dimensions]} on a global window: the "
                   "streaming engine bounds a device's keys (max_keys_per_device="
                   f"{c.device.max_keys_per_device}) when the slice's window closes, and a global window closes only "
                   "when the stream ends, so its early panes would publish nothing",
         "use fixed or sliding windows, run it in batch, or drop the dimensions to stream it",
         "The device as the unit: a bound per device"),
    # ---- not built: none left (issue 48 item 1 lifted the last, kind-categorical: a whole-report kind
    # randomizes the report as a whole, so a categorical's one-hot bits are bits of the true report and the
    # kind's estimator of every table over them is unbiased as for booleans; their exclusivity is unused) ----
    # issue 48 item 1: a kind counts extra sets (schemas/channel_kinds.py kind_sets); subset RR estimates a table
    # from the reports whose subset holds it, so none wider than the subsets
    Rule("kind-subset-width", "channel kind subset x a set wider than channel.width", LIMIT, ANY,
         lambda c: bool(_over_width(c)),
         lambda c: f"channel kind 'subset' at width={c.sampling.width} cannot estimate the table of "
                   f"{_over_width(c)[0]} ({len(_over_width(c)[0])} bits: a sets entry, a group, or the bits of a "
                   "conditional, a mean or an extreme): a report sends the pattern of its subset's width bits only, "
                   "so no report holds a wider set",
         "raise channel.width to the widest set, or drop width (the default is at least the widest extra set), "
         "or use channel kind hadamard, which samples any set's coefficients",
         "Whole-report promises: per-bit RR, Hadamard sampling, subset RR"),
)


def composition_faults(cfg, streaming: bool | None = None) -> list:
    """The rules ``cfg`` breaks, in table order: of every mode, and with ``streaming`` True those of
    streaming as well. ``cfg`` a :class:`~ldp_marginals.schemas.collection.CollectionConfig` (the
    rules over it) or a config mapping (the rules over the mapping, :data:`SPEC`)."""
    stage = SPEC if isinstance(cfg, dict) else CONFIG
    modes = {ANY} | ({STREAMING} if streaming else set())
    return [rule for rule in RULES if rule.stage == stage and rule.mode in modes and rule.when(cfg)]


def check_composition(cfg, streaming: bool | None = None) -> None:
    """A ValueError with the first broken rule's message (:meth:`Rule.message`), or nothing."""
    faults = composition_faults(cfg, streaming)
    if faults:
        raise ValueError(faults[0].message(cfg))


def check_job_composition(configs: dict, streaming: bool) -> None:
    """The job's check (:class:`~ldp_marginals.pipelines.job.JobOptions`): every collection against
    the rules of its mode (those of every mode already held when it was made)."""
    for name in sorted(configs):
        check_composition(configs[name], streaming)


def matrix_markdown() -> str:
    """The table of rules as docs/design.md and README.md show it (generated: do not edit there)."""
    lines = ["| rule | combination refused | mode | verdict | explained in docs/design.md | instead |",
             "|---|---|---|---|---|---|"]
    for r in RULES:
        lines.append(f"| `{r.name}` | {r.combination} | {'streaming' if r.mode == STREAMING else 'batch and streaming'} "
                     f"| {r.verdict}{f' ({r.owner})' if r.owner else ''} | {r.anchor} | {r.instead} |")
    return "\n".join(lines)


BEGIN, END = "<!-- composition matrix: generated by python -m ldp_marginals.schemas.composition -->", \
    "<!-- end of the composition matrix -->"


def replace_matrix(text: str) -> str:
    """``text`` (docs/design.md, README.md) with the matrix between its markers regenerated; a ValueError
    naming the markers when ``text`` has none."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the text has no composition matrix markers, got markers {BEGIN!r} ... {END!r} missing")
    return text[:start] + BEGIN + "\n" + matrix_markdown() + "\n" + text[end:]


if __name__ == "__main__":   # regenerate the matrix in docs/design.md and README.md (run from the repository root)
    from pathlib import Path
    for doc in ("docs/design.md", "README.md"):
        path = Path(doc)
        path.write_text(replace_matrix(path.read_text()))
        print(f"wrote the composition matrix into {doc}")
