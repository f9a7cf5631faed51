"""The guard's counters (issue 36, item 7) in a batch run: per window, ``reports.published`` and
``reports.withheld`` add up to the window's reports, and ``windows.withheld`` counts the windows and
keys the guard held back, as the ``withheld`` rows say. (Streaming: the Kafka test on Flink scrapes
the same counters from Prometheus, ``tests/cluster/test_kafka_streaming.py``.)"""
import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline

from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.dead_letters import NAMESPACE, REPORTS_PUBLISHED, REPORTS_WITHHELD, VALID, WINDOWS_WITHHELD
from tests.collect import Collected
from tests.configs import SMALL_CONFIG


def test_batch_counts_what_the_guard_publishes_and_holds_back():
    cfg = parse_config(dict(SMALL_CONFIG, extremes=[], min_reports=300))
    records = []
    for seed, region, n in ((1, "eu", 900), (2, "us", 250)):   # us: below the guard in every window
        pop = simulate_population(cfg, n, seed=seed, span_seconds=3 * 3600)
        records += list(report_records(cfg, pop, {"region": region}))
    got = Collected()
    p = BeamTestPipeline()
    outs = build(p, beam.Create(records), None, JobOptions({cfg.name: cfg}))
    outs["withheld"] | got.into("withheld")
    result = p.run()
    result.wait_until_finish()
    counters = {c.key.metric.name: c.committed
                for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]}
    held = [r for r in got["withheld"] if r["cause"] == "privacy" and r["statistic"] == "all"]
    assert len(held) >= 3 and counters[WINDOWS_WITHHELD] == len(held)
    assert counters[REPORTS_WITHHELD] == sum(r["n_reports"] for r in held) >= 250
    assert counters[REPORTS_PUBLISHED] + counters[REPORTS_WITHHELD] == counters[VALID] == len(records)
