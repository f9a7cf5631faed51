"""The Python client against the shared test vectors (clients/test-vectors/*.json), which Java and
TypeScript clients read too: exact coins, bits, tokens and Avro bytes of every positive vector, the
same refusal code for every negative one, and the specification's own rules (HMAC_DRBG against
NIST's known answers, the decision rule, the Avro bytes written from docs/client.md by hand)."""
import json
from pathlib import Path

import pytest

from ldp_marginals.ldp.client import CODES, ClientSpec, DeviceClient, Refusal
from ldp_marginals.ldp.coins import HmacDrbg, decide, frame, units
from ldp_marginals.schemas import decode_message, encode_message

VECTORS = Path(__file__).resolve().parents[2] / "clients" / "test-vectors"


def load(name: str) -> dict:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


COINS, REPORTS, REFUSALS = load("coins.json"), load("reports.json"), load("refusals.json")


def spec_avro(record: dict) -> bytes:
    """The NoisyReport bytes as docs/client.md spells them, without fastavro."""
    def long(n):
        n = (n << 1) ^ (n >> 63)
        out = bytearray()
        while n > 0x7F:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        return bytes(out + bytes([n]))

    def blob(b):
        return long(len(b)) + b

    dims = record["dimensions"]
    out = blob(record["collection"].encode()) + long(record["event_time"]) + blob(record["bits"])
    if dims:
        out += long(len(dims)) + b"".join(blob(k.encode()) + blob(v.encode())
                                          for k, v in sorted(dims.items(), key=lambda kv: kv[0].encode()))
    out += long(0)
    return out + (long(0) if record["client"] is None else long(1) + blob(record["client"].encode()))


def test_hmac_drbg_gives_nists_known_answers_and_the_vectors_stream():
    for case in COINS["hmac_drbg_nist"]:
        drbg = HmacDrbg(bytes.fromhex(case["entropy"]), bytes.fromhex(case["nonce"]))
        out = [drbg.generate(n) for n in case["requests"]]
        assert out[-1].hex() == case["last"]
    ours = COINS["hmac_drbg"]
    drbg = HmacDrbg(bytes.fromhex(ours["entropy"]))
    assert [drbg.generate(n).hex() for n in ours["requests"]] == ours["outputs"]
    # one request of 8 bytes is not two of 4: the state is updated after every request
    assert HmacDrbg(bytes.fromhex(ours["entropy"])).generate(8).hex() != "".join(ours["outputs"][:2])


def test_units_decisions_and_frames_follow_the_rule():
    for item in COINS["units"]:
        assert units(item["probability"]) == item["units"]
        assert abs(item["units"] / 2 ** 32 - item["probability"]) <= 2 ** -33 + 2 ** -80   # + the sum's rounding
    assert units(2.0 ** -33) == 1 and units(2.0 ** -33 * 0.999) == 0 and units(1.0) == 2 ** 32  # half rounds up
    assert units((0.5 - 2.0 ** -54) * 2.0 ** -32) == 1    # IEEE-754's sum, not exact arithmetic (which gives 0)
    for item in COINS["decisions"]:
        assert decide(bytes.fromhex(item["coin"]), item["probability"]) == item["decision"]
    for item in COINS["frames"]:
        assert frame(*item["parts"]).hex() == item["hex"]
    with pytest.raises(ValueError, match="probability must be a number in"):
        units(1.5)


@pytest.mark.parametrize("case", REPORTS["cases"], ids=[c["name"] for c in REPORTS["cases"]])
def test_positive_vectors_are_reproduced_byte_for_byte(case):
    spec = ClientSpec.from_json(case["config"])
    assert ClientSpec.from_json(spec.to_json()) == spec
    # a case with a rate state starts from it (the app restores it) and ends with rate_state_after
    client = DeviceClient(spec, bytes.fromhex(case["secret"]), HmacDrbg(bytes.fromhex(case["seed"])),
                          case.get("rate_state"))
    for item in case["reports"]:
        expect = item["expect"]
        if "refusal" in expect:
            with pytest.raises(Refusal) as err:
                client.report(item["values"], item["event_ms"], item["dimensions"])
            assert err.value.code == expect["refusal"]
            continue
        record, trace = client.report_with_trace(item["values"], item["event_ms"], item["dimensions"])
        got = {"coins": trace.coins.hex(), "encoded": list(trace.encoded), "permanent": list(trace.permanent),
               "bits": record["bits"].hex(), "client": record["client"],
               "avro": encode_message("noisy_report", record).hex()}
        assert got == expect
        assert spec_avro(record).hex() == expect["avro"]
        assert decode_message("noisy_report", bytes.fromhex(expect["avro"])) == record
    assert ("rate_state" in case) == ("rate_state_after" in case)
    if "rate_state_after" in case:
        assert client.rate_state() == case["rate_state_after"]
        assert list(client.rate_state()) == sorted(client.rate_state(), key=int)   # days in order


def test_the_vectors_show_what_the_specification_promises():
    """Tokens follow slices and collections; permanent bits follow values, not reports."""
    memo = next(c for c in REPORTS["cases"] if c["name"].startswith("RAPPOR"))
    r = [item["expect"] for item in memo["reports"]]
    assert r[0]["client"] == r[1]["client"] != r[2]["client"]          # same hour, next hour
    assert len(r[0]["client"]) == 22
    assert r[0]["permanent"] == r[1]["permanent"] == r[2]["permanent"]  # one value, one permanent response
    assert r[3]["permanent"][0] == r[0]["permanent"][0]                 # dark_mode kept its value
    assert len({x["coins"] for x in r}) == len(r)                       # fresh instantaneous coins
    glob = next(c for c in REPORTS["cases"] if c["name"].startswith("global"))
    assert len({item["expect"]["client"] for item in glob["reports"]}) == 1


def test_the_vectors_tell_the_permanent_bit_from_the_true_bit():
    """Some memoized bit has a permanent bit other than its true bit and a coin that decides differently
    under the two: a client that randomizes the true bit instead of the permanent one fails a vector."""
    seen = 0
    for case in REPORTS["cases"]:
        spec = ClientSpec.from_json(case["config"])
        fresh = sum(1 for b in spec.layout.numeric_bits if not spec.channels.memoizes[b])
        for item in case["reports"]:
            expect = item["expect"]
            for i, (x, b) in enumerate(zip(expect.get("encoded", ()), expect.get("permanent", ()))):
                coin = bytes.fromhex(expect["coins"])[4 * (fresh + i):4 * (fresh + i + 1)]
                inst = spec.channels.instantaneous[i]
                seen += b is not None and b != x and decide(coin, inst.q if b else inst.p) != decide(coin, inst.q if x else inst.p)
    assert seen >= 2, seen


@pytest.mark.parametrize("case", REFUSALS["cases"], ids=[c["name"] for c in REFUSALS["cases"]])
def test_negative_vectors_are_refused_with_their_code(case):
    assert case["refusal"] in CODES

    def attempt():
        client = DeviceClient(ClientSpec.from_json(case["config"]), bytes.fromhex(case["secret"]),
                              HmacDrbg(bytes(32)), case.get("rate_state"))
        if case["input"] is not None:
            client.report(case["input"]["values"], case["input"]["event_ms"], case["input"]["dimensions"])

    with pytest.raises(Refusal) as err:
        attempt()
    assert err.value.code == case["refusal"], str(err.value)


DOC = (Path(__file__).resolve().parents[2] / "docs" / "client.md").read_text(encoding="utf-8")


def test_the_specifications_config_example_is_read_as_it_says():
    import re
    spec = ClientSpec.from_json(json.loads(re.search(r"```json\n(.*?)```", DOC, re.S).group(1)))
    assert spec.layout.n_bits == 5 and spec.token
    assert list(spec.channels.memoizes) == [True, True, True, True, False]


def test_the_specifications_epsilon_and_attacker_tables_are_computed():
    """The figures of docs/client.md section 6 and 7 come from the functions they name."""
    import math

    from ldp_marginals.ldp.attacks import attacker_accuracy
    from ldp_marginals.ldp.channels import Channel, ChannelSet
    from ldp_marginals.ldp.encoding import Feature, Layout
    from ldp_marginals.ldp.longitudinal import longitudinal_epsilon
    from ldp_marginals.ldp.memoized import ClientChannels

    layout = Layout((Feature.boolean("a"),))
    memo = ClientChannels.rappor(0.5, 0.5, 0.75, 1)
    plain = ClientChannels.plain(memo.effective)
    sym = ClientChannels.plain(ChannelSet.uniform(Channel.symmetric_from_epsilon(math.log(3)), 1))
    m, p, s = (longitudinal_epsilon(layout, c, 24) for c in (memo, plain, sym))
    assert f"| {m.one:.3f} | {m.per_day:.3f} | {m.per_month:.3f} | {m.infinity:.3f} (= ln 3) |" in DOC
    assert f"| {p.one:.3f} | {p.per_day:.2f} | {p.per_month:.1f} | infinite |" in DOC
    assert f"| {s.one:.3f} | {s.per_day:.1f} | {s.per_month:.1f} | infinite |" in DOC
    row = " | ".join(f"{attacker_accuracy(memo, 0, t, 'average'):.4f}" for t in (1, 10, 100, 1000))
    assert f"| memoized (default) | {row} |" in DOC
    row = " | ".join(f"{attacker_accuracy(plain, 0, t, 'average'):.4f}" for t in (1, 10, 100))
    assert f"| same effective channel, not memoized | {row} | 0.99998 |" in DOC
