"""The reference client's randomizer, statistically: its transition frequencies (true bit -> noisy
bit, over many devices) follow the effective channel the server inverts, and two reports of one
device follow the memoized law (shared permanent response), not independence. Chi-square tests at
the suite's false-alarm rate, seeded."""
import hashlib

import numpy as np
import pytest
from scipy.stats import binom, chi2

from ldp_marginals.ldp.client import ClientSpec, DeviceClient
from ldp_marginals.ldp.coins import HmacDrbg, SystemCoins
from ldp_marginals.ldp.device import device_token, new_secret
from ldp_marginals.ldp.memoized import ClientChannels
from tests.stats import ALPHA

RAPPOR = {"p": 0.5, "q": 0.75, "permanent": {"p": 0.25, "q": 0.75}}
CONFIG = {"collection": "c", "window": {"type": "fixed", "size_seconds": 3600}, "token": True,
          "features": [{"name": "a", "type": "boolean"}, {"name": "os", "type": "categorical", "values": ["x", "y", "z"]},
                       {"name": "m", "type": "numeric", "low": 0, "high": 10}, {"name": "plain", "type": "boolean"}],
          "channels": [RAPPOR, RAPPOR, RAPPOR, {"p": 0.2, "q": 0.6, "permanent": {"p": 0.4, "q": 0.95}},
                       {"p": 0.1, "q": 0.7, "permanent": {"p": 0.2, "q": 0.9}}, {"p": 0.2, "q": 0.6}]}
N_DEVICES = 4000


def device_values(i: int) -> dict:
    return {"a": i % 2 == 0, "os": "xyz"[i % 3], "m": 2.5 if i % 4 < 2 else 10, "plain": i % 5 < 2}


@pytest.fixture(scope="module")
def reports():
    """Two reports per device (same value, same window), from seeded coins and per-device secrets."""
    spec = ClientSpec.from_json(CONFIG)
    drbg = HmacDrbg(hashlib.sha256(b"chi-square").digest())
    true, noisy = [], []
    for i in range(N_DEVICES):
        client = DeviceClient(spec, hashlib.sha256(i.to_bytes(4, "big")).digest(), drbg)
        pair = []
        for t in (0, 1000):
            record, trace = client.report_with_trace(device_values(i), t)
            pair.append(np.unpackbits(np.frombuffer(record["bits"], np.uint8), bitorder="little")[:spec.layout.n_bits])
        true.append(trace.encoded)
        noisy.append(pair)
    return spec, np.array(true), np.array(noisy)   # (n, bits), (n, 2, bits)


def chi_square_p_value(observed, expected) -> float:
    observed, expected = np.asarray(observed, float), np.asarray(expected, float)
    stat = ((observed - expected) ** 2 / expected).sum()
    return float(chi2.sf(stat, observed.size - observed.shape[0]))   # one constraint per row (row totals)


def states(spec, bit: int, u: float) -> list:
    """``[(weight, P(noisy 1)), ...]``: the latent states of a device's bit whose true bit is 1 with
    probability u (0 or 1, or a numeric value's (m - low)/(high - low), drawn once per device when
    the bit memoizes), each with its weight and the probability that a report says 1."""
    inst, perm = spec.channels.instantaneous[bit], spec.channels.permanent[bit]
    if perm is None:
        return [(u, inst.q), (1 - u, inst.p)]
    return [(u * perm.q, inst.q), (u * (1 - perm.q), inst.p), ((1 - u) * perm.p, inst.q),
            ((1 - u) * (1 - perm.p), inst.p)]


def groups(spec, true):
    """``(bit, u, rows)``: devices grouped by the input of each bit (the numeric bit by its value)."""
    m_bit = spec.layout.bits_of("m")[0]
    for bit in range(spec.layout.n_bits):
        if bit == m_bit:
            values = np.array([device_values(i)["m"] for i in range(N_DEVICES)])
            yield from ((bit, u, values == v) for v, u in ((2.5, 0.25), (10, 1.0)))
        else:
            yield from ((bit, x, true[:, bit] == x) for x in (0, 1))


@pytest.mark.statistical
def test_transition_frequencies_follow_the_effective_channel(reports):
    spec, true, noisy = reports
    observed, expected = [], []
    for bit, u, rows in groups(spec, true):
        eff = spec.channels.effective[bit]
        p1 = u * eff.q + (1 - u) * eff.p
        ones = noisy[rows, 0, bit].sum()
        observed.append([ones, rows.sum() - ones])
        expected.append([rows.sum() * p1, rows.sum() * (1 - p1)])
    assert chi_square_p_value(observed, expected) > ALPHA


@pytest.mark.statistical
def test_two_reports_of_one_device_share_the_permanent_response(reports):
    """How often a device's two reports agree on a bit, per bit and input: memoized bits (and the
    memoized numeric encoding) follow sum_state P(state) P(y1|state) P(y2|state), the plain bit
    independence. One binomial per group (the statistic that memoization moves), Bonferroni over
    the groups."""
    spec, true, noisy = reports
    found = list(groups(spec, true))
    for bit, u, rows in found:
        law = states(spec, bit, u)
        if spec.channels.permanent[bit] is None:   # fresh draws: independent given the true bit
            one = sum(w * t for w, t in law)
            agree = one ** 2 + (1 - one) ** 2
        else:
            agree = sum(w * (t ** 2 + (1 - t) ** 2) for w, t in law)
        seen = (noisy[rows, 0, bit] == noisy[rows, 1, bit]).sum()
        n = rows.sum()
        p_value = 2 * min(binom.cdf(seen, n, agree), binom.sf(seen - 1, n, agree))
        assert p_value > ALPHA / len(found), (spec.layout.labels[bit], u, seen / n, agree)


def test_the_production_client_draws_from_the_operating_system():
    spec = ClientSpec.from_json(CONFIG)
    secret = new_secret()
    client = DeviceClient(spec, secret, SystemCoins())
    records = [client.report(device_values(0), 5000) for _ in range(64)]
    assert len({r["bits"] for r in records}) > 1                      # fresh coins every report
    assert {r["client"] for r in records} == {device_token(secret, "c", 0)}
    assert len(new_secret()) == 32 and new_secret() != secret


def test_tokens_do_not_repeat_across_slices_collections_or_devices():
    secret = bytes(32)
    tokens = {device_token(secret, c, s) for c in ("a", "b") for s in range(0, 100 * 3_600_000, 3_600_000)}
    tokens |= {device_token(bytes([1]) + bytes(31), "a", 0)}
    assert len(tokens) == 201
    with pytest.raises(ValueError, match="secret must be 32 bytes"):
        device_token(bytes(16), "a", 0)


def test_effective_channel_is_rapport_formula():
    """RAPPOR's p* = f(p+q)/2 + (1-f)p, q* = f(p+q)/2 + (1-f)q, from the composition rule."""
    f, p, q = 0.5, 0.5, 0.75
    eff = ClientChannels.rappor(f, p, q, 1).effective[0]
    assert eff.p == pytest.approx(f * (p + q) / 2 + (1 - f) * p)
    assert eff.q == pytest.approx(f * (p + q) / 2 + (1 - f) * q)


@pytest.mark.parametrize("values, dims, code", [
    ({"a": "secret-a", "os": "x", "m": 1, "plain": True}, None, "bad_value"),            # a boolean's value
    ({"a": True, "os": "secret-os", "m": 1, "plain": True}, None, "bad_value"),          # a category not offered
    ({"a": True, "os": "x", "m": "secret-m", "plain": True}, None, "bad_value"),         # a numeric's type
    ({"a": True, "os": "x", "m": 987654.321, "plain": True}, None, "out_of_range"),      # a numeric's value
    ({"a": True, "os": "x", "m": 1, "plain": True}, {"k": 987654}, "bad_dimensions"),   # a dimension
    ("secret-values", None, "bad_value"),
])
def test_a_refused_report_never_echoes_what_the_device_was_asked_to_report(values, dims, code):
    from ldp_marginals.ldp.client import Refusal
    client = DeviceClient(ClientSpec.from_json(CONFIG), hashlib.sha256(b"r").digest(), HmacDrbg(b"\0" * 32))
    with pytest.raises(Refusal) as err:
        client.report(values, 0, dims)
    assert err.value.code == code
    message = str(err.value)
    assert "secret" not in message and "987654" not in message, message
