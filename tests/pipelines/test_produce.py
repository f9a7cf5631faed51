"""A collector's batching (``ldp_marginals.pipelines.produce``), without Kafka: containers flushed by
size and by age, split under the byte limit, stamped with their earliest event time, every report
once and in order. The producer against a real broker: ``tests/cluster/test_produce.py``."""
import io

import fastavro
import pytest

from ldp_marginals import schemas
from ldp_marginals.pipelines.produce import ContainerBatcher, containers
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.schemas.config import parse_config
from tests.configs import SMALL_CONFIG


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def decoded(container) -> list:
    return [schemas.normalize("noisy_report", r) for r in fastavro.reader(io.BytesIO(container.value))]


@pytest.fixture(scope="module")
def sample():
    cfg = parse_config(SMALL_CONFIG)
    return list(report_records(cfg, simulate_population(cfg, 1200, seed=3)))


def test_containers_leave_when_full_or_aged_stamped_with_their_earliest_report(sample):
    clock = Clock()
    batcher = ContainerBatcher(max_reports=100, max_seconds=10, clock=clock)
    out = []
    for i, report in enumerate(sample[:450]):
        clock.now += 0.01 if i < 250 else 1.0   # 2.5 s for 250 reports, then one report a second
        out += batcher.add(report)
    # full at 100 and 200 reports; then, at one report a second, a container each time the oldest
    # report it holds has waited 10 s: about 10 reports each
    assert [c.reports for c in out[:2]] == [100, 100]
    assert all(9 <= c.reports <= 11 for c in out[3:])
    assert all(c.reports <= 100 for c in out) and len(batcher) == 450 - sum(c.reports for c in out)
    clock.now += 10
    out += batcher.due()
    assert len(batcher) == 0 and batcher.due() == [] and batcher.flush() == []
    got = [r for c in out for r in decoded(c)]
    assert got == [schemas.normalize("noisy_report", r) for r in sample[:450]]
    for c in out:
        assert c.timestamp_ms == min(r["event_time"] for r in decoded(c)) and c.reports == len(decoded(c))


def test_a_request_s_reports_held_at_once_leave_as_when_held_one_by_one(sample):
    # extend (the collector holds a request's reports at once) against add, report by report: the same
    # containers, full ones at max_reports across requests, aged ones when the oldest waited
    sizes = [1, 37, 100, 63, 250, 1, 99, 200, 49]   # requests of these many reports, 800 in all
    got = {}
    for way in ("add", "extend"):
        clock, out, first = Clock(), [], 0
        batcher = ContainerBatcher(max_reports=100, max_seconds=10, clock=clock)
        for i, n in enumerate(sizes):
            clock.now += 11.0 if i in (1, 5, 8) else 0.5   # the second, sixth and last requests age a container
            reports = sample[first:first + n]
            first += n
            out += batcher.extend(reports) if way == "extend" else [c for r in reports for c in batcher.add(r)]
        got[way] = ([c.reports for c in out], [decoded(c) for c in out], len(batcher))
    assert got["extend"] == got["add"]
    assert sum(got["add"][0]) + got["add"][2] == sum(sizes) and 100 in got["add"][0] and got["add"][0][0] < 100


def test_a_container_over_the_byte_limit_is_split_until_each_fits(sample):
    whole = containers(sample)
    assert len(whole) == 1 and whole[0].reports == len(sample)
    parts = containers(sample, max_bytes=len(whole[0].value) // 5)
    assert len(parts) >= 5 and all(len(p.value) <= len(whole[0].value) // 5 for p in parts)
    assert [r for p in parts for r in decoded(p)] == decoded(whole[0])
    with pytest.raises(ValueError, match="one report encodes to"):
        containers(sample[:1], max_bytes=10)


@pytest.mark.parametrize("kwargs, message", [
    ({"max_reports": 0}, "max_reports must be an integer >= 1, got max_reports=0"),
    ({"max_seconds": 0}, "max_seconds must be > 0, got max_seconds=0"),
    ({"max_bytes": 100}, "max_bytes must be an integer >= 1024, got max_bytes=100"),
])
def test_batching_parameters_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ContainerBatcher(**kwargs)
