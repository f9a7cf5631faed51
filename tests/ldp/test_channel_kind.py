"""The one interface of the channel kinds (ldp/channel_kind.py, issue 48 item 1): every whole-report kind
is reached through it (wire, simulated client, aggregator, worst-case cell variance) the same way, and the
config's refusals read what a kind publishes from it alone. Failed before: no such module (the collection,
plan and the config check each branched on the kind's name)."""
import subprocess
import sys

import numpy as np
import pytest

from ldp_marginals.ldp import channel_kind as ck
from ldp_marginals.schemas.config import parse_config
from tests.schemas.test_channel_kinds import spec

WHOLE = [{"kind": "hadamard", "epsilon": 2.0}, {"kind": "subset", "epsilon": 4.0, "width": 4}]


@pytest.mark.parametrize("channel", WHOLE)
def test_each_whole_report_kind_through_the_interface(channel):
    cfg = parse_config(spec(channel=channel, max_order=2))
    kind = ck.channel_kind(cfg.channel_kind)
    assert kind.name == channel["kind"] and type(cfg.aggregator) is type(kind.aggregator(cfg.sampling))
    wire = kind.wire(cfg.sampling)
    assert wire == cfg.wire
    rng = np.random.default_rng(1)
    packed = kind.encode_reports((rng.random((200, 7)) < 0.3).astype(np.uint8), cfg.sampling, rng)
    assert packed.shape == (200, wire.n_bytes)
    assert np.array_equal(wire.pack(*wire.unpack(packed)), packed)
    agg = kind.aggregator(cfg.sampling, 2, 99)
    assert (agg.device_bound, agg.collection_key, agg.wire_bytes) == (2, 99, wire.n_bytes)
    got = agg.marginals(agg.add_packed(agg.create(), packed))
    assert got.n == 200 and np.isfinite(got.means).all() and (got.variances[1:] > 0).all()
    assert kind.cell_variance_per_report(cfg.sampling, 2) > 0


def test_what_a_kind_publishes_is_decided_in_one_place(monkeypatch):
    """The composition table's rules for a kind's analyses (schemas/composition.py, kind-analyses and
    kind-analyses-over-order) read ChannelKind.publishes: a hadamard kind that publishes sets is not refused
    them (no estimator counts them, so the real kind does not), and the real one is, naming the field;
    conditionals and means are served (ldp/kind_analyses.py)."""
    from types import SimpleNamespace

    from ldp_marginals.schemas.composition import _kind_fields
    with pytest.raises(ValueError, match="sets are not supported with channel kind 'hadamard' yet"):
        parse_config(spec(sets=[["q0", "q1", "q2", "q3"]]))
    parse_config(spec(conditionals=[{"of": ["q0"], "given": ["q1"]}]))   # served
    assert ck.refused("hadamard", ["means", "sets", "marginals", "client_extremes"]) == ["sets"]
    assert ck.refused("per_bit", ck.ANALYSES) == []
    cfg = SimpleNamespace(channel_kind="hadamard", report_extremes=(), client_extremes=(), conditionals=(),
                          means=((0, None),), sets=((0, 1, 2, 3),))
    assert _kind_fields(cfg) == ["sets"]
    widened = ck.ChannelKind("hadamard", ck.HADAMARD.publishes | {"sets"}, ck.HADAMARD.wire)
    monkeypatch.setitem(ck.KINDS, "hadamard", widened)
    assert _kind_fields(cfg) == []   # the capability set is the only rule


def test_validation_names_the_value():
    with pytest.raises(ValueError, match="channel kind must be one of .* got kind='rappor'"):
        ck.channel_kind("rappor")
    with pytest.raises(ValueError, match=r"got unknown=\['medians'\]"):
        ck.ChannelKind("x", frozenset({"medians"}))
    with pytest.raises(ValueError, match="got analysis='medians'"):
        ck.HADAMARD.serves("medians")


def test_the_interface_does_not_import_beam():
    code = "import sys, ldp_marginals.ldp.channel_kind; print('apache_beam' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
