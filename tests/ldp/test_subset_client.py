"""The subset-RR client (ldp/subset_client.py) against its test vectors (clients/test-vectors/subset.json),
the specification's rule recomputed from the mechanism (ldp/subset_rr.py) and the job's wire format
(ldp/subset_reports.py), and its law by seeded simulation."""
import math
from itertools import combinations

import numpy as np
import pytest
from scipy.stats import chi2

from ldp_marginals.ldp.client import _window as read_window   # the config's window object, read as clients do
from ldp_marginals.ldp.coins import HmacDrbg, coin_value, units
from ldp_marginals.ldp.subset_client import SubsetClientSpec, SubsetDeviceClient
from ldp_marginals.ldp.subset_reports import SubsetFormat
from ldp_marginals.ldp.subset_rr import SubsetRR
from ldp_marginals.ldp.windows import Window
from tests.ldp.whole_report_vectors import (
    check_negative_vector, check_positive_vector, features_of, layout_of, load_vectors,
)
from tests.stats import ALPHA, Z

VECTORS = load_vectors("subset")


def mechanism_of(config: dict) -> SubsetRR:
    """The mechanism a client config stands for, found from its numbers: keep = e^eps / (e^eps + 2^s - 1)."""
    s = config["subset"]
    big = (1 << s["width"]) - 1
    epsilon = math.log(s["keep"] * big / (1 - s["keep"]))
    return SubsetRR(layout_of(config).n_bits, s["max_order"], epsilon, s["width"])


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"][:30])
def test_the_client_reproduces_every_positive_vector(case):
    check_positive_vector(case, SubsetClientSpec, SubsetDeviceClient, ("subset", "kept", "pattern"),
                          "permanent_pattern")


@pytest.mark.parametrize("case", [c for c in VECTORS["cases"] if "permanent_keep" not in c["config"]["subset"]],
                         ids=lambda c: c["name"][:30])
def test_the_vectors_follow_the_rule_from_the_mechanism_and_the_wire_format(case):
    """Recomputed without the client, in integers: position i joins iff its coin is below
    floor(r / (d - i) * 2^32 + 1/2); the true pattern is kept iff the keep coin is below units(SubsetRR.p);
    the flip mask's bit j is 1 iff its coin is below units(2^(m-1) / (2^m - 1)) until a bit is set, then
    units(1/2); the bits are the job's wire format."""
    mech = mechanism_of(case["config"])
    assert SubsetClientSpec.of(case["config"]["collection"], features_of(case["config"]),
                               read_window(case["config"]["window"]), mech,
                                 **SubsetClientSpec.device_of(case["config"])).to_json() == case["config"]
    d, s = mech.n_bits, mech.width
    fmt = SubsetFormat(mech)
    layout = layout_of(case["config"])
    for report in (r for r in case["reports"] if "refusal" not in r["expect"]):
        e = report["expect"]
        assert e["encoded"] == layout.encode(report["values"]).tolist()   # as the per-bit client encodes them
        raw = bytes.fromhex(e["coins"])
        u = [coin_value(raw[4 * i:4 * i + 4]) for i in range(len(raw) // 4)]
        assert len(u) == d + 1 + s
        chosen = []
        for i in range(d):
            if u[i] < math.floor((s - len(chosen)) / (d - i) * 2.0 ** 32 + 0.5):
                chosen.append(i)
        assert chosen == e["subset"] and len(chosen) == s
        kept = int(u[d] < units(mech.p))
        mask, seen = [], False
        for j in range(s):
            m = s - j
            bit = int(u[d + 1 + j] < (units(0.5) if seen else units(2.0 ** (m - 1) / (2.0 ** m - 1))))
            seen |= bool(bit)
            mask.append(bit)
        assert any(mask)
        x = e["encoded"]
        assert e["kept"] == kept
        assert e["pattern"] == [x[i] ^ (0 if kept else mask[j]) for j, i in enumerate(chosen)]
        packed = np.frombuffer(bytes.fromhex(e["bits"]), dtype=np.uint8)[None, :]
        assert packed.shape[1] == fmt.n_bytes and not fmt.bad_subset(packed).any()
        sub, pat = fmt.unpack(packed)
        assert int(sub[0]) == sum(1 << i for i in chosen)
        assert int(pat[0]) == sum(b << i for b, i in zip(e["pattern"], chosen))


@pytest.mark.parametrize("item", VECTORS["refusals"], ids=lambda r: r["name"])
def test_every_negative_vector_is_refused_with_its_code(item):
    check_negative_vector(item, SubsetClientSpec, SubsetDeviceClient)


@pytest.mark.statistical
def test_the_clients_law_is_the_mechanisms():
    """12,000 reports of one device (d = 5, s = 3, epsilon 1): the joint law of (subset, sent pattern) over its
    C(5, 3) 2^3 = 80 cells is SubsetRR's, 1 / C(d, s) times p on the true pattern and q on each other
    (chi-square at the suite's false-alarm rate, 79 degrees of freedom). A client whose subset or flip mask
    were not uniform would fail it; the share of true patterns is p within the suite's z band (a keep 10% low
    fails it)."""
    mech = SubsetRR(5, 2, 1.0, width=3)
    spec = SubsetClientSpec.of("s", [f"q{i}" for i in range(5)], Window("fixed", 3600.0), mech)
    client = SubsetDeviceClient(spec, bytes(range(32)), HmacDrbg(bytes(range(7, 39))))
    truth = (1, 0, 1, 1, 0)
    x = {f"q{i}": bool(b) for i, b in enumerate(truth)}
    subsets = list(combinations(range(5), 3))
    n = 12_000
    counts = np.zeros((len(subsets), 8))
    for _ in range(n):
        trace = client.report_with_trace(x, 1_767_225_600_000)[1]
        counts[subsets.index(trace.subset), sum(b << j for j, b in enumerate(trace.pattern))] += 1
    expected = np.full_like(counts, mech.q)
    for row, sub in enumerate(subsets):
        expected[row, sum(truth[i] << j for j, i in enumerate(sub))] = mech.p
    expected *= n / len(subsets)
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert stat < chi2.isf(ALPHA, counts.size - 1), stat
    kept = counts[expected == expected.max()].sum() / n      # the sharper check of the keep rate alone
    assert abs(kept - mech.p) <= Z * np.sqrt(mech.p * (1 - mech.p) / n), kept


def test_the_draw_count_and_the_mask_are_exact_at_the_extremes():
    """Every report draws d + 1 + s coins and sends exactly s positions; at width d (InpPS) every position is
    chosen, and a flipped pattern always differs from the true one (the mask is never zero)."""
    mech = SubsetRR(4, 1, 0.01, width=4)
    spec = SubsetClientSpec.of("s", [f"q{i}" for i in range(4)], Window("fixed", 3600.0), mech)
    client = SubsetDeviceClient(spec, bytes(range(32)), HmacDrbg(bytes(range(7, 39))))
    x = {f"q{i}": bool(i % 2) for i in range(4)}
    for _ in range(300):
        record, trace = client.report_with_trace(x, 1_767_225_600_000)
        assert len(trace.coins) == 4 * (4 + 1 + 4) and trace.subset == (0, 1, 2, 3)
        assert (trace.pattern == trace.encoded) == bool(trace.kept)
