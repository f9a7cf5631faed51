"""A categorical feature with the whole-report kinds (issue 48 item 1, the lifted rule kind-categorical),
end to end: the collection config's client config, the Python reference clients' reports (the categorical's
value one-hot, then the kind's randomizer), ``ldp-marginals run`` and its rows. A whole-report kind
randomizes the report as a whole, so the one-hot bits are bits of the true report and the kind's
estimator of every table over them is unbiased as for booleans (their exclusivity is unused): every
marginal is within z standard errors of the truth, and the rows name the categorical's values
(``os=ios``) as a per-bit collection's do."""
import numpy as np
import pytest

from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.ldp.hadamard_client import HadamardDeviceClient
from ldp_marginals.ldp.subset_client import SubsetDeviceClient
from ldp_marginals.pipelines.read import read
from ldp_marginals.schemas.client_config import client_spec
from ldp_marginals.schemas.config import parse_config
from tests.batch_runs import run_command

START = 1_767_225_600_000   # 2026-01-01, an hour boundary
N = 3000
OS = ("ios", "android", "web")
Z = 5.0   # two-sided false alarm ~6e-7 per row


def config(kind: str) -> dict:
    return {"collection": "apps", "features": [{"name": "q0", "type": "boolean"},
                                               {"name": "os", "type": "categorical", "values": list(OS)},
                                               {"name": "q1", "type": "boolean"}],
            "channel": {"kind": kind, "epsilon": 3.0},   # subset: the default width holds the group (4 bits)
            "max_order": 2, "window": {"type": "fixed", "size_seconds": 3600}, "min_reports": 20,
            "groups": [["os", "q1"]]}


def truth(seed=11):
    """N devices' true values: os 50/30/20 %, q0 likelier on ios, q1 independent."""
    rng = np.random.default_rng(seed)
    os_ = rng.choice(len(OS), size=N, p=[0.5, 0.3, 0.2])
    q0 = rng.random(N) < np.where(os_ == 0, 0.7, 0.2)
    q1 = rng.random(N) < 0.4
    return [{"q0": bool(a), "os": OS[o], "q1": bool(b)} for a, o, b in zip(q0, os_, q1)]


@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_a_categorical_through_the_clients_and_the_run_command(tmp_path, kind):
    spec = config(kind)
    cfg = parse_config(spec)
    client_cls = {"hadamard": HadamardDeviceClient, "subset": SubsetDeviceClient}[kind]
    device_spec = client_spec(cfg)
    assert device_spec.to_json()["features"][1] == {"name": "os", "type": "categorical", "values": list(OS)}
    values = truth()
    records = []
    for i, v in enumerate(values):
        secret = i.to_bytes(4, "big") * 8
        client = client_cls(device_spec, secret, HmacDrbg(b"coins" * 8 + i.to_bytes(4, "big")))
        records.append(client.report(v, START + i * 1000))
    got = run_command(tmp_path, spec, records, ("marginals",))
    # the true one-hot bits, in layout order q0, os=ios, os=android, os=web, q1
    bits = np.array([[v["q0"]] + [v["os"] == o for o in OS] + [v["q1"]] for v in values], dtype=float)
    labels = ["q0"] + [f"os={o}" for o in OS] + ["q1"]
    rows = got["marginals"]
    assert rows and {r["n_reports"] for r in rows} == {N}
    seen = set()
    for r in rows:
        cols = tuple(r["labels"])   # the bits' labels, a categorical's value os=ios as per-bit rows name it
        idx = list(r["columns"])
        assert cols == tuple(labels[b] for b in idx)
        true = float(np.prod(bits[:, idx], axis=1).sum())
        assert abs(r["estimate"] - true) <= Z * np.sqrt(r["variance"]), (cols, r["estimate"], true, r["variance"])
        seen.add(cols)
    assert {c for c in seen if len(c) == 1} == {(lab,) for lab in labels}   # the categorical's rows by value
    assert ("q0", "os=ios") in seen and ("os=ios", "os=android") not in seen   # no table of two values of os
    # the group's table over (os, q1) names os by its values; its cells are unbiased too
    unbiased = read(str(tmp_path / "out"), "tables", estimator="unbiased").to_pylist()
    table = {tuple(r["cell"]): r for r in unbiased}
    assert set(table) == {(o, b) for o in OS for b in ("false", "true")}
    for (o, b), r in table.items():
        true = sum(1 for v in values if v["os"] == o and v["q1"] == (b == "true"))
        assert abs(r["estimate"] - true) <= Z * np.sqrt(r["variance"]), ((o, b), r["estimate"], true)
    consistent = read(str(tmp_path / "out"), "tables").to_pylist()   # the default: the consistent tables
    assert {tuple(r["cell"]) for r in consistent} == set(table)
    freq = np.array([r["frequency"] for r in consistent])
    assert freq.min() >= 0 and abs(freq.sum() - 1) < 1e-9
