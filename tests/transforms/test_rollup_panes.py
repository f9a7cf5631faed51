"""The streaming rollups step's wiring and records (issue 37, item 2): its messages and status cross
the wire as versioned records (another record refused, naming what it got), and every edge into it
carries ``(key, versioned record)``, never a pickle. What it publishes is checked by the publication
rule's property tests (tests/transforms/test_publication_rule.py) and on TestStream
(tests/pipelines/test_rollups_stream.py)."""
import apache_beam as beam
import pytest

from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication import rollup_panes, state
from ldp_marginals.transforms.publication.messages import Drop
from tests.configs import SMALL_CONFIG
from tests.transforms.test_engine_state import _walk

CFG = parse_config(dict(SMALL_CONFIG, rollups=[["region"], []]))


def test_rollup_messages_and_status_are_versioned_records():
    agg = CFG.aggregator
    acc = agg.create()
    part = rollup_panes.RollupPart(7, (("region", "eu"), ("v", "1")), (("region", "eu"), ("v", "__other__")), acc, 3)
    back = rollup_panes.message_from_bytes(rollup_panes.message_to_bytes(part, agg), agg)
    assert back._replace(acc=None) == part._replace(acc=None) and back.acc.n == acc.n
    # privacy.unit device: the held devices (64-bit keys) cross too; a part without them holds none
    held = rollup_panes.DeviceRollupPart(*part, (1, 2 ** 64 - 1))
    again = rollup_panes.message_from_bytes(rollup_panes.message_to_bytes(held, agg), agg)
    assert type(again) is rollup_panes.DeviceRollupPart and again._replace(acc=None) == held._replace(acc=None)
    assert type(back) is rollup_panes.RollupPart and back.devices == ()
    assert b"devices" not in rollup_panes.message_to_bytes(part, agg)
    expect = rollup_panes.RollupExpect(7, (0, 60_000), "closed", True, 12)
    assert rollup_panes.message_from_bytes(rollup_panes.message_to_bytes(expect)) == expect
    status = rollup_panes.RollupStatus(2, {7: expect}, {7: 5, 9: 1})
    assert rollup_panes.status_from_bytes(rollup_panes.status_to_bytes(status)) == status
    with pytest.raises(ValueError, match="a rollup message must be a record LDPO or LDPV, got one starting b'LDPD'"):
        rollup_panes.message_from_bytes(state.message_to_bytes(Drop("x")))
    with pytest.raises(ValueError, match="state must be a record LDPZ"):
        rollup_panes.status_from_bytes(state.clock_to_bytes(state.ClockStatus()))
    with pytest.raises(ValueError, match="message must be a RollupPart or a RollupExpect, got Drop"):
        rollup_panes.message_to_bytes(Drop("x"))


def test_the_rollups_step_takes_keyed_versioned_records_and_only_with_rollups():
    for cfg, steps in ((CFG, 1), (parse_config(SMALL_CONFIG), 0)):
        p = beam.Pipeline()
        build(p, beam.Create([]), None, JobOptions({cfg.name: cfg}, streaming=True))
        seen = {}
        for applied in p.transforms_stack[0].parts:
            _walk(applied, seen)
        edges = [("Clock", "to_rollups"), ("Atoms", "to_rollups"), ("ToRollups", None)]
        for label, tag in edges:
            found = [c for (name, t), c in seen.items() if name.endswith(f"Panes/{label}") and t == tag]
            assert len(found) == steps, (label, tag, found)
            assert all(repr(c) == "TupleCoder[StrUtf8Coder, BytesCoder]" for c in found), (label, tag, found)
        assert len({n for n, _ in seen if n.endswith("Panes/Rollups")}) == steps
