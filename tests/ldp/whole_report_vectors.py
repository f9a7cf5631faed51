"""What the Python tests of the whole-report kinds' clients (tests/ldp/test_hadamard_client.py,
tests/ldp/test_subset_client.py) run against their clients/test-vectors file, as the TypeScript tests'
``replayVectors`` (clients/typescript/test/whole-report.js) does: every positive vector's coins, device token,
kind's choices, packed bits and Avro bytes, a report past the declared rate refused, and the rate state after;
every negative vector refused with its code. A kind's test passes its spec and client classes and the
names of its own trace fields."""
import json
from pathlib import Path

import pytest

from ldp_marginals.ldp.client import Refusal
from ldp_marginals.ldp.client import _window as read_window   # the config's window object, read as clients do
from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.ldp.device import device_token
from ldp_marginals.ldp.encoding import Feature, Layout
from ldp_marginals.schemas import encode_message
from tests.ldp.test_client_vectors import spec_avro


def load_vectors(kind: str) -> dict:
    """clients/test-vectors/<kind>.json."""
    return json.loads((Path(__file__).resolve().parents[2] / "clients" / "test-vectors" / f"{kind}.json")
                      .read_text(encoding="utf-8"))


def layout_of(config: dict) -> Layout:
    """The per-bit client's layout of a whole-report config's features (a categorical one-hot)."""
    return Layout(tuple(Feature.categorical(f["name"], f["values"]) if f["type"] == "categorical"
                        else Feature.boolean(f["name"]) for f in config["features"]))


def features_of(config: dict) -> list:
    """The features as a spec holds them: a boolean's name, a categorical's (name, values)."""
    return [(f["name"], f["values"]) if f["type"] == "categorical" else f["name"] for f in config["features"]]


def check_positive_vector(case: dict, spec_cls, client_cls, chosen: tuple, permanent: str) -> None:
    """``case`` (a positive vector) reproduced by ``client_cls`` from its config read by ``spec_cls``, secret and
    seed. ``chosen``: the trace's fields the kind adds (the vectors' names too); ``permanent``: the one of the
    kind's permanent choice (memoized cases; the vectors leave it out, and ``permanent_coins``, otherwise)."""
    client = client_cls(spec_cls.from_json(case["config"]), bytes.fromhex(case["secret"]),
                        HmacDrbg(bytes.fromhex(case["seed"])))
    for report in case["reports"]:
        expect = report["expect"]
        if "refusal" in expect:   # past the declared rate (section 3): refused, and the next report's coins
            with pytest.raises(Refusal) as err:   # show that it drew none
                client.report_with_trace(report["values"], report["event_ms"], report["dimensions"])
            assert err.value.code == expect["refusal"]
            continue
        record, trace = client.report_with_trace(report["values"], report["event_ms"], report["dimensions"])
        assert trace.coins.hex() == expect["coins"]
        # the device token of the event's slice exactly when the config says so (section 5)
        assert record["client"] == expect.get("client")
        assert (record["client"] is not None) == case["config"].get("token", False)
        if record["client"] is not None:
            slice_start = read_window(case["config"]["window"]).slice_of(report["event_ms"])
            assert record["client"] == device_token(bytes.fromhex(case["secret"]), case["config"]["collection"],
                                                    slice_start)
        fields = ("encoded", *chosen)
        assert {k: _plain(getattr(trace, k)) for k in fields} == {k: expect[k] for k in fields}
        assert (trace.permanent.hex(), list(getattr(trace, permanent))) == (expect.get("permanent_coins", ""),
                                                                           expect.get(permanent, []))
        assert record["bits"].hex() == expect["bits"]
        assert encode_message("noisy_report", record).hex() == expect["avro"] == spec_avro(record).hex()
    # the rate state the app persists: every report made counted on its UTC day, the refused one not
    assert client.rate_state() == case.get("rate_state_after", client.rate_state())
    assert ("rate_state_after" in case) == ("reports_per_day" in case["config"])


def check_negative_vector(item: dict, spec_cls, client_cls) -> None:
    """``item`` (a negative vector) refused with its code: its config, its rate state or its input."""
    with pytest.raises(Refusal) as err:
        spec = spec_cls.from_json(item["config"])
        client = client_cls(spec, bytes(range(32)), HmacDrbg(bytes(range(100, 132))), item.get("rate_state"))
        i = item["input"]   # None: the config or the rate state is what is refused
        if i is not None:
            client.report(i["values"], i["event_ms"], i["dimensions"])
    assert err.value.code == item["refusal"]


def _plain(v):
    return list(v) if isinstance(v, tuple) else v
