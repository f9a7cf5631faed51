"""Writes the client test vectors (coins.json, reports.json, refusals.json) beside this file from the
Python reference client. Run from the repository: `.venv/bin/python clients/test-vectors/make_vectors.py`.

The vectors are the contract every client reads (docs/client.md); tests/ldp/test_client_vectors.py
checks that the Python client still reproduces them. Regenerate only when the specification changes
on purpose, and say so in the commit.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ldp_marginals.ldp.client import ClientSpec, DeviceClient, Refusal
from ldp_marginals.ldp.coins import HmacDrbg, decide, frame, units
from ldp_marginals.schemas import encode_message

HERE = Path(__file__).resolve().parent
SECRET = bytes(range(32)).hex()
SEED = bytes(range(100, 132)).hex()

BOOL_OS = [{"name": "dark_mode", "type": "boolean"},
           {"name": "os", "type": "categorical", "values": ["mac", "win", "linux"]}]
RAPPOR = {"p": 0.5, "q": 0.75, "permanent": {"p": 0.25, "q": 0.75}}
OUE_P = 1.0 / (math.e + 1.0)
MS_DAY = 86_400_000
DAY0 = 20_454 * MS_DAY     # 2026-01-01T00:00:00Z = 1_767_225_600_000

CASES = [
    {"name": "plain symmetric channels, fixed hourly window, no token",
     "config": {"collection": "app_usage", "features": BOOL_OS, "window": {"type": "fixed", "size_seconds": 3600},
                "channels": [{"p": 0.25, "q": 0.75}] * 4},
     "reports": [({"dark_mode": True, "os": "win"}, 1_767_225_600_000, {}),
                 ({"dark_mode": False, "os": "mac"}, 1_767_225_600_001, {"region": "eu"}),
                 ({"dark_mode": True, "os": "linux"}, 1_767_229_200_000, {})]},
    {"name": "RAPPOR memoized on every bit (f = 0.5, p = 0.5, q = 0.75), device token",
     "config": {"collection": "app_usage", "features": BOOL_OS, "window": {"type": "fixed", "size_seconds": 3600},
                "channels": [RAPPOR] * 4, "token": True},
     "reports": [({"dark_mode": True, "os": "win"}, 1_767_225_600_000, {}),
                 ({"dark_mode": True, "os": "win"}, 1_767_227_000_000, {}),       # same window: same token
                 ({"dark_mode": True, "os": "win"}, 1_767_229_200_000, {}),       # next window: new token
                 ({"dark_mode": True, "os": "linux"}, 1_767_229_300_000, {})]},   # new value: new permanent bits
    {"name": "numeric features (memoized and not), per-bit channels, sliding window, UTF-8 names and dimensions",
     "config": {"collection": "sessions.v2",
                "features": [{"name": "minutes", "type": "numeric", "low": 0, "high": 120},
                             {"name": "load", "type": "numeric", "low": -1.5, "high": 2.5},
                             {"name": "pays", "type": "categorical", "values": ["café", "日本", "other"]},
                             {"name": "beta", "type": "boolean"}],
                "window": {"type": "sliding", "size_seconds": 86400, "period_seconds": 3600},
                "channels": [RAPPOR, {"p": 0.2, "q": 0.9}, {"p": 0.0, "q": 1.0},
                             {"p": 0.1, "q": 0.6, "permanent": {"p": 0.3, "q": 0.95}},
                             {"p": OUE_P, "q": 0.5}, {"p": 2.0 ** -33, "q": 1.0 - 2.0 ** -33}],
                "token": True},
     "reports": [({"minutes": 37.25, "load": -1.5, "pays": "café", "beta": False}, 1_767_225_600_000,
                  {"région": "eu", "Zone": "b", "a": "", "日": "x", "\U0001f600": "2", "\uff21": "1"}),
                 ({"minutes": 120, "load": 2.5, "pays": "日本", "beta": True}, 1_767_229_199_999, {}),
                 ({"minutes": 0.001, "load": 0.3, "pays": "other", "beta": True}, 1_767_229_200_000, {})]},
    {"name": "global window: one token for all time",
     "config": {"collection": "lifetime", "features": [{"name": "enabled", "type": "boolean"}],
                "window": {"type": "global"}, "channels": [RAPPOR], "token": True},
     "reports": [({"enabled": True}, 0, {}), ({"enabled": True}, 4_102_444_799_999, {})]},
    {"name": "numeric values inside their ranges: the drawn coins encode them in layout order, before the bits",
     "config": {"collection": "timing", "window": {"type": "fixed", "size_seconds": 60},
                "features": [{"name": "a", "type": "numeric", "low": 0, "high": 1}, {"name": "flag", "type": "boolean"},
                             {"name": "b", "type": "numeric", "low": -10, "high": 10},
                             {"name": "c", "type": "numeric", "low": 0, "high": 100}],
                "channels": [{"p": 0.0, "q": 1.0}, {"p": 0.25, "q": 0.75}, {"p": 0.0, "q": 1.0}, RAPPOR]},
     # each report's a and b fire with probability 1/2 (c memoizes: its coin is the device's): a client that
     # takes another coin for them disagrees with these reports with probability 1 - 2^-12
     "reports": [({"a": 0.5, "flag": i % 2 == 0, "b": 0.0, "c": 50}, 60_000 * i, {}) for i in range(6)]},
    {"name": "a refused report draws no coins",
     "config": {"collection": "app_usage", "features": BOOL_OS, "window": {"type": "fixed", "size_seconds": 60},
                "channels": [{"p": 0.25, "q": 0.75}] * 4},
     "reports": [({"dark_mode": True, "os": "win"}, 60_000, {}),
                 ({"dark_mode": 1, "os": "win"}, 60_000, {}),
                 ({"dark_mode": True, "os": "win"}, 60_000, {})]},
    {"name": "memoized bits whose permanent response differs from the true bit, decided by the instantaneous coin",
     # a wide instantaneous channel and a noisy permanent one: where b != x, the coin usually lies between
     # p_I and q_I, so a client that randomizes the true bit instead of the permanent one gets other bits
     "config": {"collection": "flags", "features": BOOL_OS, "window": {"type": "fixed", "size_seconds": 3600},
                "channels": [{"p": 0.1, "q": 0.9, "permanent": {"p": 0.4, "q": 0.6}}] * 4},
     "reports": [({"dark_mode": True, "os": "mac"}, 1_767_225_600_000, {}),
                 ({"dark_mode": False, "os": "win"}, 1_767_225_600_000, {}),
                 ({"dark_mode": True, "os": "linux"}, 1_767_225_600_000, {})]},
    # the declared rate (docs/client.md section 3): day 20454 is 2026-01-01 UTC, DAY0 its first millisecond
    {"name": "reports_per_day 2: the third report of a UTC day is refused and draws no coins, the next day counts "
             "afresh, a backfill counts on its own day",
     "config": {"collection": "app_usage", "features": BOOL_OS, "window": {"type": "fixed", "size_seconds": 3600},
                "channels": [RAPPOR] * 4, "token": True, "reports_per_day": 2},
     "reports": [({"dark_mode": True, "os": "win"}, DAY0 + 3_600_000, {}),
                 ({"dark_mode": True, "os": "win"}, DAY0 + MS_DAY - 1, {}),             # the day's last ms
                 ({"dark_mode": True, "os": "win"}, DAY0 + 7_200_000, {}),              # the day's third: refused
                 ({"dark_mode": 1, "os": "win"}, DAY0 + 7_200_000, {}),                 # a bad value is refused as such
                 ({"dark_mode": True, "os": "win"}, DAY0 + MS_DAY, {}),                 # the next day's first ms
                 ({"dark_mode": True, "os": "win"}, DAY0 + MS_DAY - 1, {}),             # back to the full day: refused
                 ({"dark_mode": False, "os": "mac"}, DAY0 + MS_DAY + 1, {"region": "eu"}),
                 ({"dark_mode": False, "os": "mac"}, DAY0 + 2 * MS_DAY - 1, {}),        # the day's third: refused
                 ({"dark_mode": True, "os": "win"}, DAY0 - 1, {}),                      # the day before: a backfill
                 ({"dark_mode": True, "os": "win"}, DAY0 + 2 * MS_DAY, {})]},
    {"name": "reports_per_day 1 from a restored rate state, sliding window: a day the state holds is full",
     "config": {"collection": "sessions.v2", "features": [{"name": "beta", "type": "boolean"}],
                "window": {"type": "sliding", "size_seconds": 86400, "period_seconds": 3600},
                "channels": [RAPPOR], "token": True, "reports_per_day": 1},
     "rate_state": {"20454": 1, "20000": 7},
     "reports": [({"beta": True}, DAY0 + 5_000, {}),
                 ({"beta": True}, DAY0 + MS_DAY + 5_000, {}),
                 ({"beta": False}, DAY0 + MS_DAY + 3_600_000, {}),
                 ({"beta": False}, 0, {})]},
    {"name": "no reports_per_day: no limit, and the rate state still counts every report made",
     "config": {"collection": "app_usage", "features": BOOL_OS, "window": {"type": "fixed", "size_seconds": 3600},
                "channels": [{"p": 0.25, "q": 0.75}] * 4},
     "rate_state": {"20454": 2147483647},
     "reports": [({"dark_mode": True, "os": "win"}, DAY0 + 1, {}),
                 ({"dark_mode": True, "os": "win"}, DAY0 + MS_DAY + 2, {}),
                 ({"dark_mode": False, "os": "win"}, DAY0 + MS_DAY + 3, {}),
                 ({"dark_mode": 1, "os": "win"}, DAY0 + MS_DAY + 3, {})]},
]

BAD_CONFIGS = [
    ("one channel too few", {"channels": [{"p": 0.25, "q": 0.75}] * 3}),
    ("p not below q", {"channels": [{"p": 0.75, "q": 0.25}] * 4}),
    ("permanent probability above 1", {"channels": [{"p": 0.25, "q": 0.75, "permanent": {"p": 0.25, "q": 1.5}}] * 4}),
    ("unknown key", {"memoize": True}),
    ("unknown channel key", {"channels": [{"p": 0.25, "q": 0.75, "f": 0.5}] * 4}),
    ("sliding size not a multiple of the period", {"window": {"type": "sliding", "size_seconds": 3600, "period_seconds": 700}}),
    ("window not a whole number of milliseconds", {"window": {"type": "fixed", "size_seconds": 3600.0004}}),
    ("categorical feature with one value", {"features": [BOOL_OS[0], {"name": "os", "type": "categorical", "values": ["mac"]}],
                                            "channels": [{"p": 0.25, "q": 0.75}] * 2}),
    ("token not a boolean", {"token": "yes"}),
    ("numeric feature without high", {"features": [{"name": "m", "type": "numeric", "low": 0}],
                                      "channels": [{"p": 0.25, "q": 0.75}]}),
    # strings without UTF-8 bytes: an unpaired surrogate (written as a \u escape in the JSON)
    ("collection with an unpaired surrogate", {"collection": "app\ud800usage"}),
    ("categorical value with an unpaired surrogate", {"features": [BOOL_OS[0], {"name": "os", "type": "categorical",
                                                                                "values": ["mac", "w\udc00n", "linux"]}]}),
    ("feature name with an unpaired surrogate", {"features": [{"name": "dark_mode\udfff", "type": "boolean"}, BOOL_OS[1]]}),
    # the declared rate: a whole number of reports a UTC day, written as a JSON integer, at most 2^31 - 1
    ("reports_per_day zero", {"reports_per_day": 0}),
    ("reports_per_day negative", {"reports_per_day": -2}),
    ("reports_per_day fractional", {"reports_per_day": 0.5}),
    ("reports_per_day above 2^31 - 1", {"reports_per_day": 2 ** 31}),
    ("reports_per_day a string", {"reports_per_day": "2"}),
    ("reports_per_day a boolean", {"reports_per_day": True}),
    ("reports_per_day null", {"reports_per_day": None}),
]
BASE = {"collection": "app_usage", "features": BOOL_OS, "window": {"type": "fixed", "size_seconds": 3600},
        "channels": [{"p": 0.25, "q": 0.75}] * 4}
NUMERIC = dict(BASE, features=BOOL_OS + [{"name": "minutes", "type": "numeric", "low": 0, "high": 120}],
               channels=[{"p": 0.25, "q": 0.75}] * 5)
GOOD = {"dark_mode": True, "os": "win", "minutes": 3.5}
# rate states an app restores (docs/client.md section 3): UTC day numbers in decimal to counts
BAD_STATES = [
    ("rate state not an object", [["20454", 1]]),
    ("rate state day with a sign", {"-1": 1}),
    ("rate state day with a leading zero", {"020454": 1}),
    ("rate state day not decimal", {"2e4": 1}),
    ("rate state day after the last event time", {"47482": 1}),
    ("rate state count negative", {"20454": -1}),
    ("rate state count fractional", {"20454": 1.5}),
    ("rate state count a string", {"20454": "1"}),
    ("rate state count a boolean", {"20454": True}),
    ("rate state count above 2^31 - 1", {"20454": 2 ** 31}),
]
BAD_INPUTS = [
    ("missing feature", {"dark_mode": True, "os": "win"}, 0, {}),
    ("unknown feature", dict(GOOD, theme="dark"), 0, {}),
    ("boolean given as a number", dict(GOOD, dark_mode=1), 0, {}),
    ("boolean given as null", dict(GOOD, dark_mode=None), 0, {}),
    ("categorical value not listed", dict(GOOD, os="bsd"), 0, {}),
    ("categorical value of another case", dict(GOOD, os="Mac"), 0, {}),
    ("numeric given as a string", dict(GOOD, minutes="3.5"), 0, {}),
    ("numeric below low", dict(GOOD, minutes=-0.5), 0, {}),
    ("numeric above high", dict(GOOD, minutes=120.000001), 0, {}),
    ("event time before 1970", GOOD, -1, {}),
    ("event time at 2100", GOOD, 4_102_444_800_000, {}),
    ("event time not an integer", GOOD, 1.5, {}),
    ("dimension value not a string", GOOD, 0, {"region": 3}),
    ("dimension key empty", GOOD, 0, {"": "eu"}),
    ("dimension value cut inside a surrogate pair", GOOD, 0, {"region": "eu\ud83d"}),
    ("dimension key an unpaired low surrogate", GOOD, 0, {"\ude00": "eu"}),
    ("several faults: the event time is checked first", dict(GOOD, os="bsd"), -1, {"region": 3}),
    ("several faults: dimensions before values", dict(GOOD, os="bsd"), 0, {"region": 3}),
    ("several faults: missing before a bad value", {"dark_mode": 1, "os": "win"}, 0, {}),
]


def _report_expectation(client, values, event_ms, dims) -> dict:
    try:
        record, trace = client.report_with_trace(values, event_ms, dims)
    except Refusal as err:
        return {"refusal": err.code}
    return {"coins": trace.coins.hex(), "encoded": list(trace.encoded), "permanent": list(trace.permanent),
            "bits": record["bits"].hex(), "client": record["client"],
            "avro": encode_message("noisy_report", record).hex()}


def reports() -> dict:
    cases = []
    for case in CASES:
        client = DeviceClient(ClientSpec.from_json(case["config"]), bytes.fromhex(SECRET), HmacDrbg(bytes.fromhex(SEED)),
                              case.get("rate_state"))
        out = {"name": case["name"], "config": case["config"], "secret": SECRET, "seed": SEED}
        if "rate_state" in case or "reports_per_day" in case["config"]:
            out["rate_state"] = case.get("rate_state", {})
        out["reports"] = [{"values": v, "event_ms": t, "dimensions": d, "expect": _report_expectation(client, v, t, d)}
                          for v, t, d in case["reports"]]
        if "rate_state" in out:
            out["rate_state_after"] = client.rate_state()
        cases.append(out)
    return {"about": "Positive client vectors (docs/client.md): per case, one HMAC_DRBG instantiated with the seed "
                     "makes the reports in order; expect holds the drawn coins, the true bits, the permanent bits "
                     "(null: the bit does not memoize), the packed bits, the device token and the Avro bytes of the "
                     "NoisyReport, or the refusal code of a refused report. A case with rate_state starts its client "
                     "from that rate state (UTC day numbers to reports made) and ends with rate_state_after.",
            "cases": cases}


def _refusal(make) -> str:
    try:
        make()
    except Refusal as err:
        return err.code
    raise AssertionError("expected a refusal")


def refusals() -> dict:
    cases = []
    for name, change in BAD_CONFIGS:
        config = dict(BASE, **change)
        cases.append({"name": name, "config": config, "secret": SECRET, "input": None,
                      "refusal": _refusal(lambda: ClientSpec.from_json(config))})
    for secret in (bytes(31).hex(), bytes(33).hex()):
        cases.append({"name": f"secret of {len(secret) // 2} bytes", "config": BASE, "secret": secret, "input": None,
                      "refusal": _refusal(lambda: DeviceClient(ClientSpec.from_json(BASE), bytes.fromhex(secret),
                                                               HmacDrbg(bytes.fromhex(SEED))))})
    rated = dict(NUMERIC, reports_per_day=1)
    for name, state in BAD_STATES:   # refused when the client is made, after the secret
        cases.append({"name": name, "config": rated, "secret": SECRET, "rate_state": state, "input": None,
                      "refusal": _refusal(lambda: DeviceClient(ClientSpec.from_json(rated), bytes.fromhex(SECRET),
                                                               HmacDrbg(bytes.fromhex(SEED)), state))})
    full = {"20454": 1}
    for name, values, event_ms in (("a report past reports_per_day on a day the restored state holds full",
                                    GOOD, DAY0 + MS_DAY - 1),
                                   ("a report past the rate with a bad value: the value is refused first",
                                    dict(GOOD, minutes=-1), DAY0)):
        client = DeviceClient(ClientSpec.from_json(rated), bytes.fromhex(SECRET), HmacDrbg(bytes.fromhex(SEED)), full)
        cases.append({"name": name, "config": rated, "secret": SECRET, "rate_state": full,
                      "input": {"values": values, "event_ms": event_ms, "dimensions": {}},
                      "refusal": _refusal(lambda: client.report(values, event_ms, {}))})
    for name, values, event_ms, dims in BAD_INPUTS:
        client = DeviceClient(ClientSpec.from_json(NUMERIC), bytes.fromhex(SECRET), HmacDrbg(bytes.fromhex(SEED)))
        cases.append({"name": name, "config": NUMERIC, "secret": SECRET,
                      "input": {"values": values, "event_ms": event_ms, "dimensions": dims},
                      "refusal": _refusal(lambda: client.report(values, event_ms, dims))})
    return {"about": "Negative client vectors (docs/client.md): a config refused when read (input null), a secret "
                     "or a rate state (rate_state, when present) refused when the client is made, or one report "
                     "refused; refusal is the code every client gives.", "cases": cases}


def coins() -> dict:
    nist = []
    for entropy, nonce, expected in (
            ("ca851911349384bffe89de1cbdc46e6831e44d34a4fb935ee285dd14b71a7488", "659ba96c601dc69fc902940805ec0ca8",
             "e528e9abf2dece54d47c7e75e5fe302149f817ea9fb4bee6f4199697d04d5b89d54fbb978a15b5c443c9ec21036d2460"
             "b6f73ebad0dc2aba6e624abf07745bc107694bb7547bb0995f70de25d6b29e2d3011bb19d27676c07162c8b5ccde0668"
             "961df86803482cb37ed6d5c0bb8d50cf1f50d476aa0458bdaba806f48be9dcb8"),
            ("79737479ba4e7642a221fcfd1b820b134e9e3540a35bb48ffae29c20f5418ea3", "3593259c092bef4129bc2c6c9e19f343",
             "cf5ad5984f9e43917aa9087380dac46e410ddc8a7731859c84e9d0f31bd43655b924159413e2293b17610f211e09f770"
             "f172b8fb693a35b85d3b9e5e63b1dc252ac0e115002e9bedfb4b5b6fd43f33b8e0eafb2d072e1a6fee1f159df9b51e6c"
             "8da737e60d5032dd30544ec51558c6f080bdbdab1de8a939e961e06b5f1aca37")):
        nist.append({"entropy": entropy, "nonce": nonce, "personalization": "", "requests": [128, 128],
                     "last": expected})
    drbg = HmacDrbg(bytes.fromhex(SEED))
    ours = {"entropy": SEED, "nonce": "", "personalization": "", "requests": [4, 4, 24, 8],
            "outputs": [drbg.generate(n).hex() for n in (4, 4, 24, 8)]}
    probabilities = [0.0, 1.0, 0.5, 0.25, 0.75, 0.1, 1.0 / 3.0, OUE_P, 2.0 ** -33, 2.0 ** -33 * 0.999, 3 * 2.0 ** -33,
                     1e-10, 1.0 - 2.0 ** -33, 1.0 - 2.0 ** -32, 0.3,
                     (0.5 - 2.0 ** -54) * 2.0 ** -32]   # the sum t * 2^32 + 1/2 rounds (to even) up to 1
    decisions = [(c, t) for c in ("00000000", "3fffffff", "40000000", "7fffffff", "80000000", "ffffffff", "00000001")
                 for t in (0.0, 0.25, 0.5, 1.0, 2.0 ** -33)]
    return {"about": "Coins (docs/client.md): HMAC_DRBG (SP 800-90A, SHA-256) known answers, the NIST CAVP ones "
                     "(the last of two 128-byte requests) and the seed of reports.json (each request's output); "
                     "units(t) = floor(t * 2^32 + 1/2); a coin's decision; framed messages.",
            "hmac_drbg_nist": nist, "hmac_drbg": ours,
            "units": [{"probability": t, "units": units(t)} for t in probabilities],
            "decisions": [{"coin": c, "probability": t, "decision": decide(bytes.fromhex(c), t)} for c, t in decisions],
            "frames": [{"parts": parts, "hex": frame(*parts).hex()}
                       for parts in (["ldp-marginals/v1/token", "app_usage", "1767225600000"], [""], ["日本", "café"])]}


def write(name: str, data: dict) -> None:
    text = json.dumps(data, indent=1, ensure_ascii=False)
    # an unpaired surrogate has no UTF-8 bytes: written as its \u escape (a paired one is one code point here)
    text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    (HERE / name).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    write("coins.json", coins())
    write("reports.json", reports())
    write("refusals.json", refusals())
