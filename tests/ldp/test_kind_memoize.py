"""Memoization for the whole-report kinds (docs/client.md section 13; ldp/kind_memoize.py, the clients
ldp/hadamard_client.py and ldp/subset_client.py): the memoized vectors recomputed from the specification
without the clients, the stages' epsilons, and the law of the two stages by seeded simulation."""
import hashlib
import hmac
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ldp_marginals.ldp.coins import HmacDrbg, coin_value, units
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.hadamard_client import HadamardClientSpec, HadamardDeviceClient
from ldp_marginals.ldp.kind_memoize import MemoizedKind
from ldp_marginals.ldp.subset_client import SubsetClientSpec, SubsetDeviceClient, chosen_positions, flip_mask
from ldp_marginals.ldp.subset_rr import SubsetRR
from ldp_marginals.ldp.windows import Window
from tests.stats import Z

HERE = Path(__file__).resolve().parents[2] / "clients" / "test-vectors"
T0 = 1_767_225_600_000


def _memo_cases(kind: str) -> list:
    data = json.loads((HERE / f"{kind}.json").read_text(encoding="utf-8"))
    return [c for c in data["cases"] if "permanent_keep" in c["config"][kind]]


def _frame(*parts: str) -> bytes:
    """docs/client.md section 5's frame, written out here: per part its UTF-8 length in 4 big-endian bytes."""
    out = b""
    for p in parts:
        b = p.encode("utf-8")
        out += len(b).to_bytes(4, "big") + b
    return out


def _permanent(secret: bytes, collection: str, kind: str, bits, n: int) -> bytes:
    value = "".join(str(b) for b in bits)
    seed = hmac.new(secret, _frame("ldp-marginals/v1/permanent-report", collection, kind, value), hashlib.sha256)
    return HmacDrbg(seed.digest()).generate(n)


def test_the_frame_written_out_here_is_the_specifications():
    from ldp_marginals.ldp.coins import frame
    assert _frame("ab", "", "é") == frame("ab", "", "é")


def test_both_kinds_have_memoized_vectors():
    assert len(_memo_cases("hadamard")) >= 2 and len(_memo_cases("subset")) >= 2


@pytest.mark.parametrize("case", _memo_cases("hadamard"), ids=lambda c: c["name"][:40])
def test_the_hadamard_memoized_vectors_follow_section_13(case):
    """Recomputed without the client: permanent coins from the secret and the value, each slot's index and
    permanent parity from them at permanent_keep, one fresh coin per slot deciding keep; every report of
    one value has the same permanent coins, indices and permanent parities."""
    h = case["config"]["hadamard"]
    spec = HadamardClientSpec.from_json(case["config"])
    secret = bytes.fromhex(case["secret"])
    masks, thresholds = spec.masks, spec.thresholds
    seen = {}
    for report in case["reports"]:
        e = report["expect"]
        x = e["encoded"]
        perm = _permanent(secret, case["config"]["collection"], "hadamard", x, 8 * h["slots"])
        assert e["permanent_coins"] == perm.hex()
        fresh = bytes.fromhex(e["coins"])
        assert len(fresh) == 4 * h["slots"]
        xi = sum(b << i for i, b in enumerate(x))
        for j in range(h["slots"]):
            u = coin_value(perm[8 * j:8 * j + 4])
            a = 1 + next(i for i, t in enumerate(thresholds) if u < t)
            assert e["indices"][j] == a
            parity = bin(xi & masks[a - 1]).count("1") & 1
            held = parity if coin_value(perm[8 * j + 4:8 * j + 8]) < units(h["permanent_keep"]) else 1 - parity
            assert e["permanent_parities"][j] == held
            sent = held if coin_value(fresh[4 * j:4 * j + 4]) < units(h["keep"]) else 1 - held
            assert e["parities"][j] == sent
        key = tuple(x)
        got = (e["permanent_coins"], e["indices"], e["permanent_parities"])
        assert seen.setdefault(key, got) == got
    assert len(seen) < len(case["reports"])      # some value repeats


@pytest.mark.parametrize("case", _memo_cases("subset"), ids=lambda c: c["name"][:40])
def test_the_subset_memoized_vectors_follow_section_13(case):
    s = case["config"]["subset"]
    secret = bytes.fromhex(case["secret"])
    width = s["width"]
    seen = {}
    for report in case["reports"]:
        e = report["expect"]
        x = e["encoded"]
        d = len(x)
        perm = _permanent(secret, case["config"]["collection"], "subset", x, 4 * (d + 1 + width))
        assert e["permanent_coins"] == perm.hex()
        pc = [perm[k:k + 4] for k in range(0, len(perm), 4)]
        subset = chosen_positions(pc[:d], d, width)
        assert e["subset"] == subset
        kept_p = coin_value(pc[d]) < units(s["permanent_keep"])
        mask = flip_mask(pc[d + 1:])
        held = [x[i] ^ (0 if kept_p else mask[j]) for j, i in enumerate(subset)]
        assert e["permanent_pattern"] == held
        fresh = bytes.fromhex(e["coins"])
        fc = [fresh[k:k + 4] for k in range(0, len(fresh), 4)]
        assert len(fc) == 1 + width
        kept = coin_value(fc[0]) < units(s["keep"])
        mask = flip_mask(fc[1:])
        assert e["kept"] == int(kept)
        assert e["pattern"] == [b ^ (0 if kept else mask[j]) for j, b in enumerate(held)]
        got = (e["permanent_coins"], e["subset"], e["permanent_pattern"])
        assert seen.setdefault(tuple(x), got) == got
    assert len(seen) < len(case["reports"])


@pytest.mark.parametrize("mech", [HadamardSampling(7, 3, 4.0, 1), HadamardSampling(5, 2, 8.0, 4),
                                  SubsetRR(7, 3, 4.0, 4), SubsetRR(12, 2, 8.0, 12)], ids=repr)
def test_the_stages_give_the_asked_epsilon_1_and_the_effective_channel_composes_them(mech):
    memo = MemoizedKind.of(mech, 1.5)
    assert memo.epsilon_infinity == mech.epsilon
    assert abs(memo.epsilon_1 - 1.5) < 1e-9
    assert memo.instantaneous.epsilon < mech.epsilon or isinstance(mech, SubsetRR)
    if isinstance(mech, SubsetRR):
        k = 2 ** mech.width
        p_p, p_i = memo.permanent.p, memo.instantaneous.p
        assert abs(memo.effective.p - (p_p * p_i + (1 - p_p) * (1 - p_i) / (k - 1))) < 1e-12
    else:
        tau = (2 * memo.permanent.keep - 1) * (2 * memo.instantaneous.keep - 1)
        assert abs((2 * memo.effective.keep - 1) - tau) < 1e-12


@pytest.mark.parametrize("epsilon_1", [4.0, 5.0, 0.0, -1.0])
def test_epsilon_1_must_be_positive_and_below_epsilon_infinity(epsilon_1):
    with pytest.raises(ValueError, match="epsilon_1"):
        MemoizedKind.of(HadamardSampling(5, 2, 4.0), epsilon_1)


def _clients(kind: str, n_devices: int, seed: int):
    if kind == "hadamard":
        memo = MemoizedKind.of(HadamardSampling(5, 2, 3.0, 1), 1.0)
        spec = HadamardClientSpec.of("m", [f"q{i}" for i in range(5)], Window("fixed", 3600.0), memo.instantaneous,
                                     memo.permanent)
        make = HadamardDeviceClient
    else:
        memo = MemoizedKind.of(SubsetRR(5, 2, 3.0, 2), 1.0)
        spec = SubsetClientSpec.of("m", [f"q{i}" for i in range(5)], Window("fixed", 3600.0), memo.instantaneous,
                                   memo.permanent)
        make = SubsetDeviceClient
    rng = np.random.default_rng(seed)
    return memo, [make(spec, rng.bytes(32), HmacDrbg(rng.bytes(32))) for _ in range(n_devices)]




@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_the_two_stages_law_by_seeded_simulation(kind):
    """4,000 devices with their own secrets, each sending 3 reports of one value: a report's response is the
    true one at the effective channel's rate (keep* or p*, within the suite's z band over the devices' first
    reports); the index or subset and the permanent response never change within a device; the fresh stage
    keeps the permanent response at keep (z band over the 12,000 reports). A client that redrew the permanent
    coins per report, or skipped either stage, fails one of them."""
    memo, clients = _clients(kind, 4000, 48)
    x = {f"q{i}": bool(b) for i, b in enumerate((1, 0, 1, 1, 0))}
    bits = [1, 0, 1, 1, 0]
    first_true, fresh_kept, n = 0, 0, 0
    for c in clients:
        traces = [c.report_with_trace(x, T0 + 3_600_000 * r)[1] for r in range(3)]
        if kind == "hadamard":
            where = [t.indices for t in traces]
            held = [t.permanent_parities for t in traces]
            sets = c._masks
            a = traces[0].indices[0]
            truth = [bin(sum(b << i for i, b in enumerate(bits)) & sets[a - 1]).count("1") & 1]
            first_true += traces[0].parities[0] == truth[0]
            fresh_kept += sum(t.parities[0] == t.permanent_parities[0] for t in traces)
        else:
            where = [t.subset for t in traces]
            held = [t.permanent_pattern for t in traces]
            truth = [bits[i] for i in traces[0].subset]
            first_true += list(traces[0].pattern) == truth
            fresh_kept += sum(list(t.pattern) == list(t.permanent_pattern) for t in traces)
        assert where[0] == where[1] == where[2] and held[0] == held[1] == held[2]
        n += 3
    eff = memo.effective.keep if kind == "hadamard" else memo.effective.p
    inst = memo.instantaneous.keep if kind == "hadamard" else memo.instantaneous.p
    m = len(clients)
    assert abs(first_true / m - eff) <= Z * math.sqrt(eff * (1 - eff) / m), (first_true / m, eff)
    assert abs(fresh_kept / n - inst) <= Z * math.sqrt(inst * (1 - inst) / n), (fresh_kept / n, inst)


@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_tables_cover_at_24_memoized_reports_a_device_with_the_repeats_term(kind):
    """600 seeded windows of 300 devices sending 24 memoized reports each of one value (epsilon_inf 4,
    epsilon_1 1, 6 bits): the 95% intervals of the 2-way table's cells, with table_with_repeats' term at
    shared_reports = 23, cover the window's true counts within the suite's z band of 95% (the mean over a
    window's 4 cells has at most one indicator's variance, so the band uses R = 600); without the term
    (shared_reports = 0) they cover below the band (hadamard ~57%, subset ~87%)."""
    from ldp_marginals.ldp.hadamard import HadamardAccumulator, estimate_hadamard
    from ldp_marginals.ldp.kind_memoize import (randomize_memoized_hadamard, randomize_memoized_subset,
                                                table_with_repeats)
    from ldp_marginals.ldp.subset_rr import SubsetAccumulator, estimate_subset
    if kind == "hadamard":
        memo = MemoizedKind.of(HadamardSampling(6, 2, 4.0, 1), 1.0)
        simulate, accumulate, estimate = randomize_memoized_hadamard, HadamardAccumulator, estimate_hadamard
    else:
        memo = MemoizedKind.of(SubsetRR(6, 2, 4.0, 3), 1.0)
        simulate, accumulate, estimate = randomize_memoized_subset, SubsetAccumulator, estimate_subset
    rng = np.random.default_rng(4801)
    devices, m, r = 300, 24, 600
    share = np.array([0.3, 0.6, 0.5, 0.2, 0.7, 0.4])
    with_term, without = [], []
    for _ in range(r):
        x = (rng.random((devices, 6)) < share).astype(np.uint8)
        a, b, _owner = simulate(x, np.full(devices, m), memo, rng)
        est = estimate(accumulate(memo.effective).add(a, b))
        truth = m * np.array([np.sum((x[:, 0] == (c & 1)) & (x[:, 1] == (c >> 1 & 1))) for c in range(4)])
        for s, out in ((m - 1, with_term), (0, without)):
            t = table_with_repeats(est, memo, s, (0, 1))
            out.append(np.mean(np.abs(t.estimate - truth) <= 1.959964 * np.sqrt(np.diag(t.covariance))))
    tol = Z * math.sqrt(0.95 * 0.05 / r)
    assert abs(np.mean(with_term) - 0.95) <= tol, np.mean(with_term)
    assert np.mean(without) < 0.95 - tol, np.mean(without)


def test_a_day_of_24_reports_of_one_value_spends_epsilon_infinity_not_24_epsilon_1():
    memo = MemoizedKind.of(HadamardSampling(8, 2, 4.0), 1.0)
    assert memo.spent(24, 1) == pytest.approx(4.0)          # one value: its permanent response's epsilon
    assert memo.spent(3, 1) == pytest.approx(3.0)           # few reports: n epsilon_1
    assert memo.spent(24, 24) == pytest.approx(24.0)        # a new value every report: no better than n epsilon_1
    assert memo.spent(0, 0) == 0.0
    with pytest.raises(ValueError, match="values"):
        memo.spent(3, 4)
