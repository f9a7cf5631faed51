"""The ldp-marginals job: noisy reports -> windowed private marginals, tables, extremes, withheld
windows and dead letters. ``build`` wires it so tests can inject ``beam.Create`` or ``TestStream``."""
from __future__ import annotations

from dataclasses import dataclass

import apache_beam as beam
from apache_beam.pvalue import DoOutputsTuple, PCollection

from ldp_marginals.transforms.blocks import PARTIALS
from ldp_marginals.transforms.estimate import OUTPUT_KINDS, EstimateCollection
from ldp_marginals.transforms.late import DropLateReports
from ldp_marginals.transforms.reports import DEAD_LETTER, ValidateReportsFn

DEAD_LETTERS = "dead_letters"


@dataclass(frozen=True)
class JobOptions:
    """What the job needs beyond Beam's options: the collection configs by name, and the mode."""

    configs: dict
    streaming: bool = False

    def __post_init__(self):
        if not self.configs:
            raise ValueError("configs must name at least one collection, got configs={}")
        for name, cfg in self.configs.items():
            if self.streaming and cfg.window.type == "global" and not cfg.early_firing_seconds:
                raise ValueError(f"collection {name!r}: a global window never closes in streaming, so it needs "
                                 f"early_firing_seconds, got early_firing_seconds={cfg.early_firing_seconds!r}")


def build(pipeline, source, sink, options: JobOptions) -> dict:
    """Apply the job to ``pipeline``.

    ``source`` is a PTransform from the pipeline root to records (dicts), Avro messages (bytes) or
    ``(either, source_label)`` pairs; it may instead return outputs tagged ``records`` and
    ``dead_letter`` (as :class:`transforms.reports.ReadNoisyReportFiles` does), and ``partials``:
    accumulators pre-aggregated by the block reader (:class:`transforms.blocks.ReadReportFilesFast`). ``sink`` has
    ``write(kind, pcoll)``, or is None. Returns the output PCollections by kind (``marginals``,
    ``tables``, ``extremes``, ``withheld``, ``dead_letters``). Stage labels are stable.
    """
    read = pipeline | "ReadReports" >> source
    dead = []
    partials = None
    if isinstance(read, DoOutputsTuple):
        elements = read["records"]
        dead.append(read[DEAD_LETTER])
        if PARTIALS in read._tags:
            partials = read[PARTIALS]
    elif isinstance(read, PCollection):
        elements = read
    else:
        raise ValueError(f"source must produce a PCollection or tagged outputs, got {type(read).__name__}")
    checked = elements | "ValidateReports" >> beam.ParDo(ValidateReportsFn(options.configs)).with_outputs(
        DEAD_LETTER, main="reports")
    dead.append(checked[DEAD_LETTER])
    reports = checked["reports"]
    if options.streaming:
        on_time = reports | "DropLateReports" >> DropLateReports(options.configs)
        reports = on_time["reports"]
        dead.append(on_time[DEAD_LETTER])

    names = sorted(options.configs)
    index = {name: i for i, name in enumerate(names)}
    parts = reports | "SplitByCollection" >> beam.Partition(lambda r, n: index[r.collection], len(names))
    if partials is not None:
        partial_parts = partials | "SplitPartials" >> beam.Partition(lambda p, n: index[p.collection], len(names))
    per_kind = {kind: [] for kind in OUTPUT_KINDS}
    for i, (name, part) in enumerate(zip(names, parts)):
        inputs = part if partials is None else {"reports": part, "partials": partial_parts[i]}
        outs = inputs | f"Estimate[{name}]" >> EstimateCollection(options.configs[name], options.streaming)
        for kind in OUTPUT_KINDS:
            per_kind[kind].append(outs[kind])
    outputs = {kind: tuple(pcolls) | f"All[{kind}]" >> beam.Flatten() for kind, pcolls in per_kind.items()}
    outputs[DEAD_LETTERS] = tuple(dead) | f"All[{DEAD_LETTERS}]" >> beam.Flatten()
    if sink is not None:
        for kind, pcoll in outputs.items():
            sink.write(kind, pcoll)
    return outputs
