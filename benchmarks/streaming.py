"""Goal 3: a message-at-a-time pipeline (Avro messages, as Pub/Sub or Kafka deliver them) with the
buffered accumulator against the per-element CombineFn, same messages, same run."""
from __future__ import annotations

import time

import apache_beam as beam

from benchmarks.e2e import CONFIG, NaiveCombineFn
from ldp_marginals import schemas
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.combiners import CollectionCombineFn
from ldp_marginals.transforms.dead_letters import TAG
from ldp_marginals.transforms.reports import ValidateReportsFn


def pipeline_seconds(messages, cfg, combine_fn):
    start = time.perf_counter()
    with beam.Pipeline(runner="DirectRunner") as p:
        checked = (p | beam.Create(messages, reshuffle=False)
                   | beam.ParDo(ValidateReportsFn({cfg.name: cfg})).with_outputs(TAG, main="reports"))
        checked["reports"] | beam.Map(lambda r: r.bits) | beam.CombineGlobally(combine_fn)
    return time.perf_counter() - start


def run(tmp, full):
    n = 400_000 if full else 100_000
    cfg = parse_config(CONFIG)
    pop = simulate_population(cfg, n, seed=5, span_seconds=3000)
    messages = [schemas.encode_message("noisy_report", r) for r in report_records(cfg, pop)]
    t_naive = pipeline_seconds(messages, cfg, NaiveCombineFn())
    t_buffered = pipeline_seconds(messages, cfg, CollectionCombineFn(cfg))
    return [{"goal": "3. message-at-a-time: buffered accumulator vs per-element CombineFn",
             "measured": f"{n / t_buffered:,.0f} messages/s", "baseline": f"{n / t_naive:,.0f} messages/s",
             "ratio": t_naive / t_buffered, "target": ">= 2x", "met": t_naive / t_buffered >= 2}], {
        "streaming messages": f"{n:,}"}
