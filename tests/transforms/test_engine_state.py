"""State survives an upgrade of the code and crosses the wire as versioned records, never pickles: what
earlier releases stored loads with this one (version 1, Beam's pickles, tests/transforms/data/
state_v1.json; version 2 entries), what this release writes (version 4: tests/transforms/data/
state_v4.bin, written by make_state_v4.py beside it; the slice and rollups steps' records in
state_v4_steps.bin, by make_state_v4_steps.py) loads to what it held, every record round-trips,
a state written for another shape of collection is refused by name, and Beam moves accumulators and
partials with the coders of transforms/coders.py wherever the job declares their types."""
import base64
import json
import pathlib
import struct

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.coders import BytesCoder
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.transforms.window import GlobalWindow

from ldp_marginals.ldp.aggregate import REPORTS, WindowAccumulator, client_key
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.versioned import VERSION, accumulator_from_bytes, accumulator_to_bytes, split
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms import coders
from ldp_marginals.transforms.combiners import CollectionCombineFn, ReleasedHeldCombineFn
from ldp_marginals.transforms.publication import slices, state
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, Entry
from ldp_marginals.transforms.publication.release import client_rule
from ldp_marginals.transforms.source import Partial
from tests.configs import SMALL_CONFIG
from tests.transforms.data import make_state_v4, make_state_v4_steps

DATA = pathlib.Path(__file__).parent / "data"
V1 = json.loads((DATA / "state_v1.json").read_text())


def stored(name: str) -> bytes:
    """A version-1 state cell as the runner held it (PickleCoder, nested), read back as bytes."""
    return BytesCoder().get_impl().decode_from_stream(create_InputStream(base64.b64decode(V1[name])), True)


def test_the_version_1_release_state_loads():
    cfg = parse_config(SMALL_CONFIG)
    entry = state.entry_from_bytes(stored("entry"), cfg.aggregator)
    assert (entry.start, entry.dims, entry.released) == (1767225600000, (("region", "eu"),), False)
    acc = entry.acc
    assert acc.cooc.counts.tolist() == V1["counts"] and acc.extreme_sums.tolist() == V1["extreme_sums"]
    assert [int(c) for c in acc.clients] == V1["clients"]
    assert np.array_equal(acc.client_states[:, :, :REPORTS], np.array(V1["client_states"]))
    assert np.isnan(acc.client_reports).all()   # version 1 did not count each client's reports
    # so its client rows are withheld, with the reason, rather than published under a rule it cannot check
    assert "earlier version" in client_rule(cfg, [acc])


def test_the_version_4_state_file_loads_to_what_it_held():
    """The records this release wrote (every kind the job keeps or moves), read by this release: a later
    release must keep this test as it is."""
    cfg = parse_config(SMALL_CONFIG)
    want = json.loads((DATA / "state_v4.json").read_text())
    records = split((DATA / "state_v4.bin").read_bytes())
    assert [r[:5] for r in records] == [m + b"\x04" for m in (b"LDPA", b"LDPE", b"LDPP", b"LDPW", b"LDPR", b"LDPD",
                                                              b"LDPC", b"LDPX", b"LDPN", b"LDPK", b"LDPB", b"LDPY",
                                                              b"LDPQ")]
    for what, data in zip(want["records"], records):
        assert make_state_v4.describe(make_state_v4.read(what, data, cfg)) == want["decoded"][what], what
    acc = accumulator_from_bytes(records[0], cfg.aggregator)
    assert acc.n == 6 and acc.named_reports == 4 and acc.client_reports.tolist() == [2.0, 2.0]


def test_the_version_4_steps_state_file_loads_to_what_it_held_and_writes_the_same_bytes():
    """The records of the slice step of the bound on keys (and the clock's book under it) and of the rollups
    step, as this release wrote them (state_v4_steps.bin, make_state_v4_steps.py beside it), read by this
    release to what they held, and written again to the same bytes: a later release must keep this test
    as it is."""
    cfg = parse_config(SMALL_CONFIG)
    want = json.loads((DATA / "state_v4_steps.json").read_text())
    records = split((DATA / "state_v4_steps.bin").read_bytes())
    assert [r[:5] for r in records] == [m + b"\x04" for m in (b"LDPU", b"LDPJ", b"LDPT", b"LDPS", b"LDPG", b"LDPB",
                                                              b"LDPO", b"LDPV", b"LDPZ")]
    assert want["records"] == ["device_keys", "accept", "kept", "slice", "table", "key_book", "rollup_part",
                               "rollup_expect", "rollup_status"]
    for what, data in zip(want["records"], records):
        value = make_state_v4_steps.read(what, data, cfg)
        assert make_state_v4.describe(value) == want["decoded"][what], what
        assert make_state_v4_steps.write(what, value, cfg) == data, what
    device_keys, accept, kept, status, table, book, part, expect, rollup = (
        make_state_v4_steps.read(what, data, cfg) for what, data in zip(want["records"], records))
    devices = [11, 29, 2**63 + 5, 2**64 - 1]
    assert device_keys.devices.dtype == np.uint64 and device_keys.devices.tolist() == devices
    assert (device_keys.id, device_keys.dims, device_keys.start) == ("p1", (("region", "eu"),), 1767225600000)
    assert accept == (1767225600000, ("p1", "p2"), True, 5)
    assert (kept.start, kept.devices.tolist()) == (1767225600000, [11, 2**63 + 5])
    assert (status.merged, status.total, status.accepted) == (2, 5, {slices.id_hash("p4")})
    assert status.dropped == {slices.id_hash(p) for p in ("p5", "p6")}
    assert status.keys == {(("region", "eu"),), (("region", "us"),)}
    assert table.device.tolist() == devices and table.key.dtype == np.uint64   # bound 1: one key per device
    assert type(book).__name__ == "KeyBook" and book.slices == {1767225600000: 3, 1767229200000: 1}
    assert book.windows[(1767225600000, 1767229200000)].fresh == {(("region", "us"),)}
    assert (part.event, part.dims, part.route, part.held, part.acc.n) == (7, (("region", "eu"),),
                                                                          (("region", "__other__"),), 3, 6)
    assert expect == (8, (1767225600000, 1767229200000), "on_time", False, 2)
    assert (rollup.panes, rollup.expects, rollup.arrived) == (1, {8: expect}, {8: 1, 9: 2})


def test_every_record_of_this_release_round_trips_with_its_version():
    cfg = parse_config(SMALL_CONFIG)
    for what, data in make_state_v4.records(cfg):
        assert data[4] == VERSION == 4, what
        again = make_state_v4.read(what, data, cfg)
        writer = {"accumulator": lambda v: accumulator_to_bytes(v, cfg.aggregator),
                  "entry": lambda v: state.entry_to_bytes(v, cfg.aggregator),
                  "partial": coders.partial_to_bytes, "clock": state.clock_to_bytes, "book": state.book_to_bytes,
                  "key": state.key_to_bytes, "panes": state.panes_to_bytes}.get(
            what, lambda v: state.message_to_bytes(v, cfg.aggregator))
        assert writer(again) == data, what


def test_a_version_2_entry_loads_and_its_merged_releases_withhold_the_client_rows():
    """Version 2 kept a released flag and merged a slice's released increments into one entry: such an
    entry is atom 0 whose clients' report counts are unknown, so the client rule withholds the window's
    client rows (it cannot tell how the increments split each client's reports); a pending one is
    pending, its counts kept."""
    cfg = parse_config(SMALL_CONFIG)
    agg = cfg.aggregator
    keys = np.array([client_key(f"c{i % 7}") for i in range(50)], dtype=np.uint64)
    acc = agg.add_packed(agg.create(), np.zeros((50, 1), np.uint8), keys, np.ones(50, bool))
    for released in (True, False):
        header = json.dumps({"start": 60_000, "dims": [["region", "us"]], "released": released}).encode()
        old = accumulator_to_bytes(acc, agg)
        old = old[:4] + b"\x02" + old[5:]   # the accumulator as version 2 wrote it: the same layout
        data = struct.pack("<4sBI", b"LDPE", 2, len(header)) + header + old
        back = state.entry_from_bytes(data, agg)
        assert (back.start, back.dims, back.atom, back.released) == (60_000, (("region", "us"),), 0 if released
                                                                     else -1, released)
        assert np.array_equal(back.acc.clients, acc.clients) and back.acc.n == 50
        assert np.isnan(back.acc.client_reports).all() == released
        assert ("earlier version" in (client_rule(cfg, [back.acc]) or "")) == released


@pytest.mark.parametrize("change, named, named_v1", [
    (dict(max_order=3), "max_order", "max_order"),
    (dict(sets=[]), "extra", "extra"),
    (dict(extremes=SMALL_CONFIG["extremes"][:2]), "client_extremes", "n_client_extremes"),
    # version 1 kept only the number of extremes: another extreme of the same number it cannot tell
    (dict(extremes=[dict(SMALL_CONFIG["extremes"][0], features=["dark", "beta"])] + SMALL_CONFIG["extremes"][1:]),
     "extremes", None),
])
def test_a_state_of_another_shape_is_refused_by_name(change, named, named_v1):
    cfg = parse_config(SMALL_CONFIG)
    data = accumulator_to_bytes(cfg.aggregator.create(), cfg.aggregator)
    other = parse_config(dict(SMALL_CONFIG, **change))
    with pytest.raises(ValueError, match=f"the saved state was written for another collection shape \\({named} "
                                         f"changed.*start without the savepoint"):
        accumulator_from_bytes(data, other.aggregator)
    with pytest.raises(ValueError, match=f"\\({named} changed"):
        state.entry_from_bytes(state.entry_to_bytes(Entry(0, (), 0, cfg.aggregator.create()), cfg.aggregator),
                               other.aggregator)
    if named_v1:
        with pytest.raises(ValueError, match=f"\\({named_v1} changed"):
            state.entry_from_bytes(stored("entry"), other.aggregator)


def test_a_state_from_a_newer_release_or_of_no_version_is_refused_by_its_version():
    cfg = parse_config(SMALL_CONFIG)
    data = bytearray(accumulator_to_bytes(cfg.aggregator.create(), cfg.aggregator))
    data[4] = 9
    with pytest.raises(ValueError, match="state version must be <= 4.*got version=9"):
        accumulator_from_bytes(bytes(data), cfg.aggregator)
    record = bytearray(state.clock_to_bytes(state.ClockStatus()))
    record[4] = 5
    with pytest.raises(ValueError, match="state version must be <= 4.*got version=5"):
        state.clock_from_bytes(bytes(record))
    for version in (0, 1):   # version 1 wrote pickles: a record that says 0 or 1 is damaged
        record[4] = version
        with pytest.raises(ValueError, match=f"state version must be >= 2 for a record LDPK.*got version={version}"):
            state.clock_from_bytes(bytes(record))


def test_beam_moves_accumulators_and_partials_with_their_coders_not_pickles():
    """The registry gives the coders for the types; a record nests in Beam's streams as given; the
    combiners' accumulators cross their shuffle as records; and the job's steps that move accumulators
    declare types whose coders are those (no accumulator pickled on the way to publication)."""
    cfg = parse_config(SMALL_CONFIG)
    acc = make_state_v4.accumulator(cfg)
    assert isinstance(beam.coders.registry.get_coder(WindowAccumulator), coders.AccumulatorCoder)
    assert isinstance(beam.coders.registry.get_coder(Partial), coders.PartialCoder)
    for coder, value in ((coders.AccumulatorCoder(), acc), (coders.PartialCoder(), Partial("app", (("v", "1"),), acc))):
        out = create_OutputStream()
        coder.get_impl().encode_to_stream(value, out, True)
        data = out.get()
        assert b"WindowAccumulator" not in data and b"ldp_marginals" not in data   # not a pickle
        back = coder.get_impl().decode_from_stream(create_InputStream(data), True)
        back = back.accumulator if isinstance(back, Partial) else back
        assert back.cooc.counts.tolist() == acc.cooc.counts.tolist()
        assert np.array_equal(back.client_states, acc.client_states) and np.array_equal(back.clients, acc.clients)
    assert isinstance(CollectionCombineFn(cfg).get_accumulator_coder(), coders.AccumulatorCoder)
    pair = ReleasedHeldCombineFn(cfg).get_accumulator_coder()
    assert [type(c) for c in pair._coders] == [coders.AccumulatorCoder] * 2
    # the job's steps: every PCollection that holds accumulators is coded with AccumulatorCoder
    from ldp_marginals.pipelines.job import JobOptions, build
    for streaming in (False, True):
        p = beam.Pipeline()
        build(p, beam.Create([]), None, JobOptions({cfg.name: cfg}, streaming=streaming))
        seen = {}
        for applied in p.transforms_stack[0].parts:
            _walk(applied, seen)
        names = ({"KeyBySlice", "Spread", "PerShard", "Unspread", "PerKey", "KeyByCollection", "Route", "Unflag",
                  "ReleasedHeld"} if not streaming else {"SplitByCollection"})
        for label in names:   # the main output, or Partition's numbered ones
            found = [c for (name, tag), c in seen.items() if (name.split("/")[-1] == label and tag is None
                                                               and label != "SplitByCollection")
                     or (name == f"{label}/ParDo(ApplyPartitionFnFn)" and tag == "0")]
            assert found, label
            for coder in found:   # keys (dimensions: tuples of strings) go by Beam's primitives coder, unpickled
                assert "AccumulatorCoder" in repr(coder) or "PartialCoder" in repr(coder), (label, coder)
                assert "PickleCoder" not in repr(coder), (label, coder)


    # the streaming engines' messages: (key, versioned record) on every edge between them
    edges = [("SplitPartials", "weights"), ("SplitPartials", "arrivals"), ("Clock", "to_keys"), ("Clock", "to_capped"),
             ("ToKeys", None), ("Atoms", None), ("ToCappedKeys", None)]
    for label, tag in edges:
        (coder,) = [c for (name, t), c in seen.items() if name.endswith(f"Panes/{label}") and t == tag]
        assert repr(coder) == "TupleCoder[StrUtf8Coder, BytesCoder]", (label, tag, coder)


def test_the_coders_size_estimate_is_the_records_length_without_writing_it(monkeypatch):
    """Beam sizes the elements it samples with the coder's estimate (by encoding them, unless the coder
    says): the estimate is the exact length of the record for every accumulator (with clients,
    empty, open under a device bound with its kept reports, settled) and partial, and writes none."""
    cfg = parse_config(SMALL_CONFIG)
    agg = parse_config(dict(SMALL_CONFIG, privacy={"unit": "device", "max_reports_per_device": 2})).aggregator
    rng = np.random.default_rng(5)
    packed = pack_bits(rng.integers(0, 2, (300, agg.family.n_bits)))
    opened = agg.add_devices(agg.create_open(), packed, rng.integers(0, 40, 300).astype(np.uint64) * np.uint64(7919),
                             np.arange(300, dtype=np.int64))
    values = []
    for acc in (make_state_v4.accumulator(cfg), cfg.aggregator.create(), agg.create_open(), opened, agg.settle(opened)):
        values += [(coders.AccumulatorCoder(), acc), (coders.PartialCoder(), Partial("app", (("v", "é"),), acc))]
    lengths = [len(coder.encode(value)) for coder, value in values]
    assert lengths[6] > 300 * 8   # the open accumulator holds its kept reports

    def written(*_):
        raise AssertionError("the estimate wrote the record")

    monkeypatch.setattr(coders.AccumulatorCoder, "encode", written)
    monkeypatch.setattr(coders.PartialCoder, "encode", written)
    assert [coder.estimate_size(value) for coder, value in values] == lengths
    assert [coder.get_impl().estimate_size(value, nested=True) for coder, value in values] == [
        n + len(beam.coders.VarIntCoder().encode(n)) for n in lengths]   # nested: its length prefixed


def _walk(applied, seen):
    for tag, out in applied.outputs.items():
        seen.setdefault((applied.full_label, tag), beam.coders.registry.get_coder(out.element_type))
    for part in applied.parts:
        _walk(part, seen)


def test_the_engine_end_of_time_is_beams():
    assert END_OF_TIME_US == GlobalWindow().max_timestamp().micros
