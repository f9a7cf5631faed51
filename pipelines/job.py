"""The ldp-marginals job: noisy reports -> windowed private marginals, tables, extremes, withheld
windows and dead letters. ``build`` wires it so tests can inject ``beam.Create`` or ``TestStream``."""
from __future__ import annotations

import time
from dataclasses import dataclass

import apache_beam as beam

from ldp_marginals.schemas.composition import check_job_composition
from ldp_marginals.schemas.outputs import DEAD_LETTERS, ESTIMATE_KINDS
from ldp_marginals.transforms.estimate import RELEASES, EstimateCollection
from ldp_marginals.transforms.panes import PANES
from ldp_marginals.transforms.reports import ValidateReportsFn
from ldp_marginals.transforms.source import PARTIALS, RECORDS, Partial, as_source

# The command's default watermark delay (``ldp-marginals run --watermark-delay-seconds``): a collector
# may hold reports for up to 60 s, from devices whose clocks run a few seconds behind, and none is
# late (measured on the local Kafka and Flink: benchmarks/lateness.py, README)
WATERMARK_DELAY_SECONDS = 90.0


@dataclass(frozen=True)
class JobOptions:
    """What the job needs beyond Beam's options: the collection configs by name, the mode, the
    processing-time clock of streaming early firings (tests give the test runner's clock origin), and
    in streaming how far behind the source's watermark windows close (``watermark_delay_seconds``:
    :mod:`ldp_marginals.transforms.panes`; the command's default is :data:`WATERMARK_DELAY_SECONDS`)."""

    configs: dict
    streaming: bool = False
    clock: object = time.time
    # the estimate kinds' per-row PCollections, filled in batch too: for sinks that take rows one
    # by one (BigQuery) and for tests; the file sink writes from the pane files alone, so a job
    # writing only files leaves them empty (a 128-bit collection publishes 8,256 rows a window)
    row_outputs: bool = True
    watermark_delay_seconds: float = 0.0
    # batch: the release ledger's earlier releases by collection ({} for a new ledger), or None (no
    # ledger: nothing withheld for earlier runs, no release output); transforms/publication/releases.py
    ledger: dict | None = None

    def __post_init__(self):
        if not (isinstance(self.watermark_delay_seconds, (int, float)) and self.watermark_delay_seconds >= 0):
            raise ValueError("watermark_delay_seconds must be a number >= 0, "
                             f"got watermark_delay_seconds={self.watermark_delay_seconds!r}")
        if not self.configs:
            raise ValueError("configs must name at least one collection, got configs={}")
        check_job_composition(self.configs, self.streaming)   # schemas/composition.py: the rules of the mode


def build(pipeline, source, sink, options: JobOptions) -> dict:
    """Apply the job to ``pipeline``.

    ``source``: one of the product's sources (:class:`~ldp_marginals.transforms.source.ReportSource`:
    records, pre-aggregated partials and dead letters), or any PTransform from the pipeline root to
    records (dicts), Avro messages (bytes) or ``(either, source_label)`` pairs, such as
    ``beam.Create`` or ``TestStream``. ``sink``: a PTransform taking the outputs by kind (the
    :mod:`ldp_marginals.transforms.sinks`), or None. Returns the output PCollections by kind
    (``marginals``, ``tables``, ``extremes``, ``withheld``, ``dead_letters``) and ``panes``,
    the pane files (one per kind, window and pane), and with ``options.ledger`` (batch) ``releases``,
    each collection's release for the release ledger. Stage labels are stable.

    Every report is pre-aggregated before the shuffle: files by their reader, records and messages
    by ``ValidateReports``; what reaches a collection's estimation are partial accumulators.
    """
    source = as_source(source)
    read = pipeline | "ReadReports" >> source
    # col : records or messages, optionally (record, source label)
    checked = read[RECORDS] | "ValidateReports" >> beam.ParDo(
        ValidateReportsFn(options.configs, count_valid=not options.streaming)).with_output_types(Partial).with_outputs(
        DEAD_LETTERS, main=PARTIALS)
    dead = [read[DEAD_LETTERS], checked[DEAD_LETTERS]]
    # col : Partial, timestamped with its window slice's start
    partials = checked[PARTIALS]
    if PARTIALS in source.given:  # a reader that pre-aggregates (streaming sources do not)
        read[PARTIALS].element_type = Partial   # a tagged output has no type hint: declared here, so its coder is ours
        partials = (read[PARTIALS], partials) | "AllPartials" >> beam.Flatten().with_output_types(Partial)

    names = sorted(options.configs)
    index = {name: i for i, name in enumerate(names)}
    parts = partials | "SplitByCollection" >> beam.Partition(lambda p, n: index[p.collection], len(names))
    for part in parts:
        part.element_type = Partial   # Partition's outputs carry no type hint
    kinds = ESTIMATE_KINDS + (PANES,)
    per_kind = {kind: [] for kind in kinds}
    releases = []
    for i, name in enumerate(names):
        ledger = None if options.ledger is None or options.streaming else list(options.ledger.get(name, []))
        # the witnesses of the other collections' releases: a device of this run among them is the same
        # reports under another name (releases.shared_devices), whichever devices take this run's own witnesses
        foreign = frozenset() if ledger is None else frozenset(
            w for other, rs in options.ledger.items() if other != name
            for r in rs for _, _, ws in r.witnesses for w in ws)
        estimate = EstimateCollection(options.configs[name], options.streaming, options.clock, options.row_outputs,
                                      options.watermark_delay_seconds, ledger, foreign)
        outs = parts[i] | f"Estimate[{name}]" >> estimate
        for kind in kinds:
            per_kind[kind].append(outs[kind])
        if RELEASES in outs:
            releases.append(outs[RELEASES])
        if options.streaming:
            dead.append(outs[DEAD_LETTERS])
    outputs = {kind: tuple(pcolls) | f"All[{kind}]" >> beam.Flatten() for kind, pcolls in per_kind.items()}
    outputs[DEAD_LETTERS] = tuple(dead) | f"All[{DEAD_LETTERS}]" >> beam.Flatten()
    if releases:   # (collection, release) per collection: what the driver adds to the release ledger
        outputs[RELEASES] = tuple(releases) | f"All[{RELEASES}]" >> beam.Flatten()
    if sink is not None:
        outputs | sink
    return outputs
