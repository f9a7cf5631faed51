"""The file sink's crash safety, checked on the pipeline it builds: with ``stable_input`` every file
writer declares that it needs stable input (Flink then gives it only checkpointed rows) and the
streaming estimates reach their writer through a reshuffle, so that only the writers wait for
checkpoints; without it nothing asks for stable input. (The crash itself: tests/cluster.)"""
import apache_beam as beam
import pytest
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner.translations import PAR_DO_URNS

from ldp_marginals.schemas.outputs import KINDS
from ldp_marginals.transforms.panes import PANES
from ldp_marginals.transforms.sinks import FileSink

STABLE = common_urns.requirements.REQUIRES_STABLE_INPUT.urn


def sink_proto(tmp_path, stable_input: bool):
    p = beam.Pipeline()
    outputs = {kind: p | f"Rows[{kind}]" >> beam.Create([]) for kind in KINDS + (PANES,)}
    outputs | FileSink(str(tmp_path), streaming=True, dead_letter_seconds=5, stable_input=stable_input)
    return p.to_runner_api()


def stable_transforms(proto) -> dict:
    """``{unique name: transform}`` of the ParDos whose payload requires stable input."""
    found = {}
    for t in proto.components.transforms.values():
        if t.spec.urn in PAR_DO_URNS:
            payload = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
            if payload.requires_stable_input:
                found[t.unique_name] = t
    return found


def test_with_stable_input_every_writer_and_only_the_writers_require_it(tmp_path):
    proto = sink_proto(tmp_path, stable_input=True)
    stable = stable_transforms(proto)
    assert sorted(n.split("/")[1] for n in stable) == sorted(f"Write[{kind}]" for kind in KINDS)
    assert STABLE in proto.requirements
    # each estimate writer reads a reshuffle's output: a stage boundary before the waiting writer
    producers = {pc: t for t in proto.components.transforms.values() if not t.subtransforms
                 for pc in t.outputs.values()}
    for name, t in stable.items():
        (source,) = t.inputs.values()
        assert "Stage[" in producers[source].unique_name or "GroupByFile" in producers[source].unique_name, name


def test_without_stable_input_nothing_requires_it(tmp_path):
    proto = sink_proto(tmp_path, stable_input=False)
    assert not stable_transforms(proto)
    assert STABLE not in proto.requirements


def test_stable_input_is_refused_for_a_batch_sink(tmp_path):
    with pytest.raises(ValueError, match="stable_input=True with streaming=False"):
        FileSink(str(tmp_path), streaming=False, stable_input=True)
