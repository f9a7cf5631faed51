"""The Hadamard-sampling client (ldp/hadamard_client.py) against its test vectors
(clients/test-vectors/hadamard.json), the specification's rule recomputed from the mechanism
(ldp/hadamard.py) and the job's wire format (ldp/hadamard_reports.py), and its law by seeded simulation."""
import numpy as np
import pytest
from scipy.stats import chi2

from ldp_marginals.ldp.client import _window as read_window   # the config's window object, read as clients do
from ldp_marginals.ldp.coins import HmacDrbg, coin_value, units
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.hadamard_client import HadamardClientSpec, HadamardDeviceClient
from ldp_marginals.ldp.hadamard_reports import HadamardFormat
from ldp_marginals.ldp.windows import Window
from tests.ldp.whole_report_vectors import (
    check_negative_vector, check_positive_vector, features_of, layout_of, load_vectors,
)
from tests.stats import ALPHA, Z

VECTORS = load_vectors("hadamard")


def mechanism_of(config: dict) -> HadamardSampling:
    """The mechanism a client config stands for, found from its numbers (weights name sqrt or uniform)."""
    h = config["hadamard"]
    d = layout_of(config).n_bits
    weights = "uniform" if len(set(h["weights"])) == 1 else "sqrt"
    keep = h["keep"]
    epsilon = h["slots"] * float(np.log(keep / (1 - keep)))
    return HadamardSampling(d, h["max_order"], epsilon, h["slots"], weights, [tuple(e) for e in h.get("sets", [])])


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"][:30])
def test_the_client_reproduces_every_positive_vector(case):
    check_positive_vector(case, HadamardClientSpec, HadamardDeviceClient, ("indices", "parities"),
                          "permanent_parities")


@pytest.mark.parametrize("case", [c for c in VECTORS["cases"] if "permanent_keep" not in c["config"]["hadamard"]],
                         ids=lambda c: c["name"][:30])
def test_the_vectors_follow_the_rule_from_the_mechanism_and_the_wire_format(case):
    """Recomputed without the client: each index is the first coefficient whose cumulative probability (the
    mechanism's, in family order) in coin units is above the index coin; the parity is the set's parity of the
    true bits, flipped when the parity coin is not below units(keep); the bits are the job's wire format."""
    mech = mechanism_of(case["config"])
    assert HadamardClientSpec.of(case["config"]["collection"], features_of(case["config"]),
                                 read_window(case["config"]["window"]), mech,
                                 **HadamardClientSpec.device_of(case["config"])).to_json() == case["config"]
    thresholds = [units(min(t, 1.0)) for t in np.cumsum(mech.probabilities)]
    thresholds[-1] = 1 << 32
    fmt = HadamardFormat(mech)
    layout = layout_of(case["config"])
    for report in (r for r in case["reports"] if "refusal" not in r["expect"]):
        e = report["expect"]
        assert e["encoded"] == layout.encode(report["values"]).tolist()   # as the per-bit client encodes them
        coins = bytes.fromhex(e["coins"])
        x = np.array(e["encoded"])
        for j, (a, sent) in enumerate(zip(e["indices"], e["parities"])):
            u = coin_value(coins[8 * j:8 * j + 4])
            assert a == 1 + next(i for i, t in enumerate(thresholds) if u < t)
            parity = int(x[list(mech.family[a])].sum() % 2)
            kept = coin_value(coins[8 * j + 4:8 * j + 8]) < units(mech.keep)
            assert sent == (parity if kept else 1 - parity)
        idx, par = fmt.unpack(np.frombuffer(bytes.fromhex(e["bits"]), dtype=np.uint8)[None, :])
        assert idx[0].tolist() == e["indices"] and par[0].tolist() == e["parities"]


@pytest.mark.parametrize("item", VECTORS["refusals"], ids=lambda r: r["name"])
def test_every_negative_vector_is_refused_with_its_code(item):
    check_negative_vector(item, HadamardClientSpec, HadamardDeviceClient)


@pytest.mark.statistical
@pytest.mark.parametrize("mech", [HadamardSampling(5, 3, 1.0), HadamardSampling(5, 2, 1.0, sets=[(0, 1, 2), (1, 2, 3, 4)])],
                         ids=["plain", "extra sets"])
def test_the_clients_law_is_the_mechanisms(mech):
    """12,000 reports of one device (d = 5, k = 3, epsilon 1; or k = 2 with the extra sets {0,1,2} and
    {1,2,3,4}, a pool of 21: issue 48 item 1): the drawn coefficients follow the mechanism's probabilities
    (chi-square at the suite's false-alarm rate) and the parity is kept at its rate (z band). A client that
    drew uniformly would fail the first (sqrt weights are 2.2x apart here), and so would one that left the
    extra sets' coefficients out of its pool."""
    spec = HadamardClientSpec.of("s", [f"q{i}" for i in range(5)], Window("fixed", 3600.0), mech)
    client = HadamardDeviceClient(spec, bytes(range(32)), HmacDrbg(bytes(range(7, 39))))
    x = {f"q{i}": bool(b) for i, b in enumerate((1, 0, 1, 1, 0))}
    n = 12_000
    traces = [client.report_with_trace(x, 1_767_225_600_000)[1] for _ in range(n)]
    idx = np.array([t.indices[0] for t in traces])
    counts = np.bincount(idx, minlength=mech.n_coefficients + 1)[1:]
    expected = n * mech.probabilities
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert stat < chi2.isf(ALPHA, mech.n_coefficients - 1), stat
    true = np.array([sum(x[f"q{i}"] for i in mech.family[a]) % 2 for a in idx])
    kept = (np.array([t.parities[0] for t in traces]) == true).mean()
    assert abs(kept - mech.keep) <= Z * np.sqrt(mech.keep * (1 - mech.keep) / n)
