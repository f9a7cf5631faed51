"""The streaming state survives an upgrade of the code: what the previous release stored (version 1,
Beam's pickles; tests/transforms/data/state_v1.json was written by that release's code) loads with
this one, the new format round-trips with its version, and a state written for another shape of
collection is refused by name."""
import base64
import json
import pathlib

import numpy as np
import pytest
from apache_beam.coders import BytesCoder, PickleCoder
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.transforms.window import GlobalWindow

from ldp_marginals.ldp.aggregate import REPORTS, accumulator_from_bytes, accumulator_to_bytes, client_key
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.panes import WindowPanesFn
from ldp_marginals.transforms.publication.engine import END_OF_TIME_US, Entry, WindowStatus
from ldp_marginals.transforms.publication.release import client_rule
from ldp_marginals.transforms.publication.state import (
    entry_from_bytes,
    entry_to_bytes,
    windows_from_bytes,
    windows_to_bytes,
)
from tests.configs import SMALL_CONFIG

V1 = json.loads((pathlib.Path(__file__).parent / "data" / "state_v1.json").read_text())


def stored(name: str) -> bytes:
    """A version-1 state cell as the runner holds it (PickleCoder, nested) read back by this release's
    coder (bytes, nested), as the adapter reads it."""
    return BytesCoder().get_impl().decode_from_stream(create_InputStream(base64.b64decode(V1[name])), True)


def test_the_previous_release_state_loads():
    cfg = parse_config(SMALL_CONFIG)
    entry = entry_from_bytes(stored("entry"), cfg.aggregator)
    assert (entry.start, entry.dims, entry.released) == (1767225600000, (("region", "eu"),), False)
    acc = entry.acc
    assert acc.cooc.counts.tolist() == V1["counts"] and acc.extreme_sums.tolist() == V1["extreme_sums"]
    assert [int(c) for c in acc.clients] == V1["clients"]
    assert np.array_equal(acc.client_states[:, :, :REPORTS], np.array(V1["client_states"]))
    assert np.isnan(acc.client_reports).all()   # version 1 did not count each client's reports
    # so its client rows are withheld, with the reason, rather than published under a rule it cannot check
    assert "earlier version" in client_rule(cfg, [acc])
    assert windows_from_bytes(stored("windows")) == {(1767225600000, 1767229200000): WindowStatus(1, True, False, 40)}
    through = PickleCoder().get_impl().decode_from_stream(create_InputStream(base64.b64decode(V1["through"])), True)
    assert through == 1767229199999000
    # the adapter stores entries and statuses as bytes under the same state names as the previous release
    assert (WindowPanesFn.ENTRIES.name, WindowPanesFn.WINDOWS.name) == ("entries", "windows")
    assert isinstance(WindowPanesFn.ENTRIES.coder, BytesCoder) and isinstance(WindowPanesFn.WINDOWS.coder, BytesCoder)


def test_the_new_format_round_trips_with_its_version():
    cfg = parse_config(SMALL_CONFIG)
    agg = cfg.aggregator
    rng = np.random.default_rng(3)
    keys = np.array([client_key(f"c{i % 7}") for i in range(50)], dtype=np.uint64)
    acc = agg.add_packed(agg.create(), rng.integers(0, 64, (50, 1)).astype(np.uint8), keys, np.arange(50) % 4 > 0)
    data = entry_to_bytes(Entry(60_000, (("region", "us"),), 0, acc), agg)
    assert data[:5] == b"LDPE\x03"
    back = entry_from_bytes(data, agg)
    assert (back.start, back.dims, back.atom, back.released) == (60_000, (("region", "us"),), 0, True)
    assert np.array_equal(back.acc.cooc.counts, acc.cooc.counts) and np.array_equal(back.acc.clients, acc.clients)
    assert np.array_equal(back.acc.client_states, acc.client_states) and back.acc.named_reports == 37
    windows = {(0, 60_000): WindowStatus(2, True, False, 12), (60_000, 120_000): WindowStatus(0, False, True, 0)}
    assert windows_from_bytes(windows_to_bytes(windows)) == windows
    # nested in the runner's state exactly as given
    out = create_OutputStream()
    BytesCoder().get_impl().encode_to_stream(data, out, True)
    assert BytesCoder().get_impl().decode_from_stream(create_InputStream(out.get()), True) == data


def test_a_version_2_entry_loads_and_its_merged_releases_withhold_the_client_rows():
    """Version 2 kept a released flag and merged a slice's released increments into one entry: such an
    entry is atom 0 whose clients' report counts are unknown, so the client rule withholds the window's
    client rows (it cannot tell how the increments split each client's reports); a pending one is
    pending, its counts kept."""
    import struct
    cfg = parse_config(SMALL_CONFIG)
    agg = cfg.aggregator
    keys = np.array([client_key(f"c{i % 7}") for i in range(50)], dtype=np.uint64)
    acc = agg.add_packed(agg.create(), np.zeros((50, 1), np.uint8), keys, np.ones(50, bool))
    for released in (True, False):
        header = json.dumps({"start": 60_000, "dims": [["region", "us"]], "released": released}).encode()
        data = struct.pack("<4sBI", b"LDPE", 2, len(header)) + header + accumulator_to_bytes(acc, agg)
        back = entry_from_bytes(data, agg)
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
    if named_v1:
        with pytest.raises(ValueError, match=f"\\({named_v1} changed"):
            entry_from_bytes(stored("entry"), other.aggregator)


def test_a_state_from_a_newer_release_is_refused():
    cfg = parse_config(SMALL_CONFIG)
    data = bytearray(accumulator_to_bytes(cfg.aggregator.create(), cfg.aggregator))
    data[4] = 9
    with pytest.raises(ValueError, match="state version must be <= 3.*got version=9"):
        accumulator_from_bytes(bytes(data), cfg.aggregator)


def test_the_engine_end_of_time_is_beams():
    assert END_OF_TIME_US == GlobalWindow().max_timestamp().micros
