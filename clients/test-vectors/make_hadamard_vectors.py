"""Writes hadamard.json beside this file from the Python reference client of Hadamard-sampling
collections (ldp/hadamard_client.py; docs/client.md section 11). Run from the repository:
`.venv/bin/python clients/test-vectors/make_hadamard_vectors.py`.

tests/ldp/test_hadamard_client.py checks that the Python client still reproduces them. Regenerate only
when the specification changes on purpose, and say so in the commit.
"""
from __future__ import annotations

import json
from pathlib import Path

from make_vectors import SECRET, SEED, _refusal   # the same secret, seed and refusal capture (run as a script)

from ldp_marginals.ldp.client import Refusal
from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.hadamard_client import HadamardClientSpec, HadamardDeviceClient
from ldp_marginals.ldp.kind_memoize import MemoizedKind
from ldp_marginals.ldp.windows import Window
from ldp_marginals.schemas import encode_message

HERE = Path(__file__).resolve().parent
T0 = 1_767_225_600_000


MS_DAY = 86_400_000
SLIDING = Window("sliding", 7200.0, 3600.0)


def spec(d: int, k: int, epsilon: float, slots=None, weights="sqrt", name="survey", epsilon_1=None,
         window=Window("fixed", 3600.0), token=False, rate=None, sets=(), features=None) -> dict:
    mech = HadamardSampling(d, k, epsilon, slots, weights, sets)
    names = features or [f"q{i}" for i in range(d)]   # features: a boolean's name, a categorical's (name, values)
    if epsilon_1 is not None:   # memoized (docs/client.md section 13): epsilon is epsilon_infinity
        memo = MemoizedKind.of(mech, epsilon_1)
        return HadamardClientSpec.of(name, names, window, memo.instantaneous, memo.permanent, token=token,
                                    reports_per_day=rate).to_json()
    return HadamardClientSpec.of(name, names, window, mech, token=token, reports_per_day=rate).to_json()


def values(d: int, pattern: int) -> dict:
    return {f"q{i}": bool(pattern >> i & 1) for i in range(d)}


# a categorical feature (issue 48 item 1): its value one-hot, one bit per value, as the per-bit client encodes it
OS = ("os", ("ios", "android", "web"))
CATEGORICAL = ["q0", OS, "q1"]   # 5 bits: q0, os=ios, os=android, os=web, q1


def os_values(q0: bool, os: str, q1: bool) -> dict:
    return {"q0": q0, "os": os, "q1": q1}


OS_REPORTS = [os_values(False, "ios", False), os_values(True, "android", True), os_values(True, "web", False),
              os_values(False, "web", True), os_values(True, "ios", True)]


# the device unit's reports (sections 3 and 5) over a sliding window at 3 a day: T0 is 2026-01-01T00:00Z, the first
# millisecond of UTC day 20454, so the fourth report of the day is refused and the next day's counts afresh
DEVICE_REPORTS = [(values(5, 0b10110), T0 + 5, {}), (values(5, 0b10110), T0 + 3_600_000, {"region": "eu"}),
                  (values(5, 0b01001), T0 + MS_DAY - 1, {}), (values(5, 0b01001), T0 + 7_200_000, {}),
                  (values(5, 31), T0 + MS_DAY, {})]
# a memoized case's reports, an hour apart: one value three times (its one permanent response), another between
MEMO_REPORTS = [(values(7, p), T0 + 3_600_000 * i, {}) for i, p in enumerate((0b1010101, 0b1010101, 0, 0b1010101))]

CASES = [
    {"name": "7 answers, 3-way tables, whole report epsilon 1: one slot, sqrt weights", "config": spec(7, 3, 1.0),
     "reports": [(values(7, p), T0 + i, {} if i % 2 else {"region": "eu"}) for i, p in enumerate((0, 127, 0b1010101,
                                                                                                  0b0110011, 5, 64))]},
    {"name": "5 answers, 2-way tables, whole report epsilon 8: four slots at 2 each", "config": spec(5, 2, 8.0),
     "reports": [(values(5, p), T0 + 3_600_000 + i, {}) for i, p in enumerate((0, 31, 0b10110, 0b01001))]},
    {"name": "InpHT: one slot, uniform weights, 12 answers up to 3-way (298 coefficients, 9 index bits)",
     "config": spec(12, 3, 2.0, slots=1, weights="uniform", name="inpht"),
     "reports": [(values(12, p), T0 + i, {}) for i, p in enumerate((0, 4095, 0b101100111000))]},
    {"name": "extra sets (issue 48 item 1): 5 answers, 2-way tables and the tables of {q0,q1,q2} and {q1,q2,q3,q4}: "
             "a pool of 21 coefficients (15, then 5 of order 3 and 1 of order 4), sqrt weights, epsilon 2",
     "config": spec(5, 2, 2.0, sets=[(0, 1, 2), (1, 2, 3, 4)], name="wide"),
     "reports": [(values(5, p), T0 + i, {}) for i, p in enumerate((0, 31, 0b10110, 0b01001, 0b00111, 0b11110,
                                                                  0b01110, 0b10101))]},
    {"name": "extra sets: 8 answers, 3-way tables and two 5-bit sets sharing {q2,q3,q4}, uniform weights, 3 slots at "
             "epsilon 6 (a pool of 92 + 11 coefficients, 7 index bits)",
     "config": spec(8, 3, 6.0, slots=3, weights="uniform", sets=[(0, 1, 2, 3, 4), (2, 3, 4, 6, 7)], name="wide"),
     "reports": [(values(8, p), T0 + i, {"region": "eu"}) for i, p in enumerate((0, 255, 0b11011100, 0b00011111))]},
    {"name": "extra sets, memoized (section 13): 5 answers, 2-way tables and {q0,q2,q4}, epsilon_infinity 4, "
             "epsilon_1 1, one slot; the same value twice keeps its permanent index and parity",
     "config": spec(5, 2, 4.0, slots=1, epsilon_1=1.0, sets=[(0, 2, 4)], name="memo"),
     "reports": [(values(5, p), T0 + 3_600_000 * i, {}) for i, p in enumerate((0b10101, 0b10101, 0))]},
    {"name": "memoized (section 13): 7 answers, 3-way tables, epsilon_infinity 4, epsilon_1 1, one slot; the "
             "same value thrice keeps its permanent index and parity",
     "config": spec(7, 3, 4.0, slots=1, epsilon_1=1.0, name="memo"),
     "reports": [(values(7, p), T0 + 3_600_000 * i, {}) for i, p in enumerate((0b1010101, 0b1010101, 0, 0b1010101,
                                                                                 127, 0))]},
    {"name": "memoized (section 13): 5 answers, 2-way tables, epsilon_infinity 8, epsilon_1 2, four slots",
     "config": spec(5, 2, 8.0, slots=4, epsilon_1=2.0, name="memo"),
     "reports": [(values(5, p), T0 + i, {"region": "eu"}) for i, p in enumerate((0b10110, 0b10110, 31, 0b10110))]},
    # the device unit (sections 3 and 5): T0 is 2026-01-01T00:00Z, the first millisecond of UTC day 20454
    {"name": "device unit: token and reports_per_day 3, sliding window (2 h every hour): each report carries its "
             "slice's token; the day's fourth is refused and draws no coins; the next day counts afresh",
     "config": spec(5, 2, 2.0, name="devices", window=SLIDING, token=True, rate=3),
     "reports": DEVICE_REPORTS},
    {"name": "memoized with token: 7 answers, 3-way tables, epsilon_infinity 4, epsilon_1 1, one slot, global "
             "window (one token for all time), reports_per_day 24",
     "config": spec(7, 3, 4.0, slots=1, epsilon_1=1.0, name="memo", window=Window("global"), token=True, rate=24),
     "reports": MEMO_REPORTS},
    {"name": "a categorical (issue 48 item 1): q0, os of 3 values, q1 (5 bits, the value one-hot), 2-way tables, "
             "epsilon 2, sqrt weights",
     "config": spec(5, 2, 2.0, name="apps", features=CATEGORICAL),
     "reports": [(v, T0 + i, {}) for i, v in enumerate(OS_REPORTS)]},
    {"name": "a categorical, memoized (section 13): q0, os of 3 values, q1, 2-way tables, epsilon_infinity 4, "
             "epsilon_1 1, one slot; the same value twice keeps its permanent index and parity",
     "config": spec(5, 2, 4.0, slots=1, epsilon_1=1.0, name="apps", features=CATEGORICAL),
     "reports": [(v, T0 + 3_600_000 * i, {}) for i, v in enumerate(OS_REPORTS[:2] + OS_REPORTS[:1])]},
]


def reports() -> list:
    return kind_reports(CASES, HadamardClientSpec, HadamardDeviceClient, ("indices", "parities"), "permanent_parities")


def kind_reports(cases: list, spec_cls, client_cls, chosen: tuple, permanent: str) -> list:
    """A whole-report kind's positive vectors: each of ``cases`` made by ``client_cls`` from its config (read by
    ``spec_cls``) with SECRET and SEED; expect holds the coins, the true bits, the trace's ``chosen`` fields,
    in a memoized case the permanent coins and the trace's ``permanent`` field, the device token, the bits and
    the Avro bytes, or a refused report's code."""
    out_cases = []
    for case in cases:
        client = client_cls(spec_cls.from_json(case["config"]), bytes.fromhex(SECRET), HmacDrbg(bytes.fromhex(SEED)))
        out = []
        for v, t, dims in case["reports"]:
            try:
                record, trace = client.report_with_trace(v, t, dims)
            except Refusal as err:   # past the declared rate (section 3)
                out.append({"values": v, "event_ms": t, "dimensions": dims, "expect": {"refusal": err.code}})
                continue
            out.append({"values": v, "event_ms": t, "dimensions": dims,
                        "expect": {"coins": trace.coins.hex(), "encoded": list(trace.encoded),
                                   **{k: _plain(getattr(trace, k)) for k in chosen},
                                   **({"permanent_coins": trace.permanent.hex(),
                                       permanent: list(getattr(trace, permanent))} if trace.permanent else {}),
                                   **device_expect(record),
                                   "bits": record["bits"].hex(), "avro": encode_message("noisy_report", record).hex()}})
        made = {"name": case["name"], "config": case["config"], "secret": SECRET, "seed": SEED, "reports": out}
        if "reports_per_day" in case["config"]:   # what the app persists after these reports (section 3)
            made["rate_state_after"] = client.rate_state()
        out_cases.append(made)
    return out_cases


def _plain(v):
    return list(v) if isinstance(v, tuple) else v


def device_expect(record: dict) -> dict:
    """``{"client": token}`` of a report that carries the device token (section 5), else nothing."""
    return {} if record["client"] is None else {"client": record["client"]}


def refusals() -> list:
    base = spec(5, 2, 1.0)
    wide = spec(5, 2, 1.0, sets=[(0, 1, 2)])
    big = spec(21, 2, 1.0)
    bad_configs = [
        ("a categorical feature", dict(base, features=[{"name": "os", "type": "categorical"}] + base["features"][1:])),
        ("weights that do not sum to 1", dict(base, hadamard=dict(base["hadamard"], weights=[0.1, 0.1]))),
        ("one weight per order missing", dict(base, hadamard=dict(base["hadamard"], weights=[0.2]))),
        ("keep at most one half", dict(base, hadamard=dict(base["hadamard"], keep=0.5))),
        ("max_order above the features", dict(base, hadamard=dict(base["hadamard"], max_order=6))),
        ("slots zero", dict(base, hadamard=dict(base["hadamard"], slots=0))),
        ("permanent_keep at one half", dict(base, hadamard=dict(base["hadamard"], permanent_keep=0.5))),
        ("permanent_keep a boolean", dict(base, hadamard=dict(base["hadamard"], permanent_keep=True))),
        ("an unknown key", dict(base, channels=[])),
        # extra sets (issue 48 item 1): base has 5 answers and max_order 2
        ("an extra set not wider than max_order", dict(base, hadamard=dict(wide["hadamard"], sets=[[0, 1]]))),
        ("an extra set's bits not increasing", dict(base, hadamard=dict(wide["hadamard"], sets=[[0, 2, 1]]))),
        ("an extra set's bit beyond the features", dict(base, hadamard=dict(wide["hadamard"], sets=[[0, 1, 5]]))),
        ("an extra set's bit a boolean", dict(base, hadamard=dict(wide["hadamard"], sets=[[0, True, 2]]))),
        ("extra sets repeated", dict(base, hadamard=dict(wide["hadamard"], sets=[[0, 1, 2], [0, 1, 2]]))),
        ("extra sets an empty list", dict(base, hadamard=dict(base["hadamard"], sets=[]))),
        ("extra sets not a list", dict(base, hadamard=dict(wide["hadamard"], sets={"0": [0, 1, 2]}))),
        ("one weight per order up to the widest set missing", dict(base, hadamard=dict(
            wide["hadamard"], weights=wide["hadamard"]["weights"][:2]))),
        ("weights of the pool that do not sum to 1 (the plain weights with an extra set)",
         dict(base, hadamard=dict(base["hadamard"], sets=[[0, 1, 2]], weights=base["hadamard"]["weights"] + [0.05]))),
        ("extra sets of more than 2^20 subsets", dict(
            big, hadamard=dict(big["hadamard"], sets=[list(range(21))], weights=[0.01] * 21))),
    ] + [(n, dict(base, **change)) for n, change in DEVICE_CONFIGS]
    out = [{"name": n, "config": c, "input": None, "refusal": _refusal(lambda c=c: HadamardClientSpec.from_json(c))}
           for n, c in bad_configs]
    out += categorical_refusals(spec(5, 2, 1.0, name="apps", features=CATEGORICAL), HadamardClientSpec,
                                HadamardDeviceClient)
    return out + report_refusals(base, lambda: HadamardDeviceClient(
        HadamardClientSpec.from_json(base), bytes.fromhex(SECRET), HmacDrbg(bytes.fromhex(SEED))),
        lambda rated, state: HadamardDeviceClient(HadamardClientSpec.from_json(rated), bytes.fromhex(SECRET),
                                                  HmacDrbg(bytes.fromhex(SEED)), state))


def categorical_refusals(cat: dict, spec_cls, client_cls) -> list:
    """A categorical's config and value refusals (issue 48 item 1), as the per-bit client's: ``cat`` a kind's
    config over CATEGORICAL, ``spec_cls`` and ``client_cls`` the kind's spec and client."""
    one = dict(cat, features=[cat["features"][0], {"name": "os", "type": "categorical", "values": ["ios"]}]
               + cat["features"][2:])
    out = [{"name": "a categorical of one value", "config": one, "input": None,
            "refusal": _refusal(lambda: spec_cls.from_json(one))}]
    for n, v in (("a categorical value not among its values", os_values(True, "linux", False)),
                 ("a categorical value not a string", os_values(True, 1, False))):
        made = client_cls(spec_cls.from_json(cat), bytes.fromhex(SECRET), HmacDrbg(bytes.fromhex(SEED)))
        out.append({"name": n, "config": cat, "input": {"values": v, "event_ms": T0, "dimensions": {}},
                    "refusal": _refusal(lambda v=v: made.report(v, T0, {}))})
    return out


# the device unit's keys, as the per-bit config's (sections 3 and 5): refused as the per-bit client refuses them
DEVICE_CONFIGS = [("token not a boolean", {"token": "yes"}),
                  ("reports_per_day zero", {"reports_per_day": 0}),
                  ("reports_per_day above 2^31 - 1", {"reports_per_day": 2 ** 31}),
                  ("reports_per_day a string", {"reports_per_day": "2"}),
                  ("reports_per_day null", {"reports_per_day": None})]


def report_refusals(base: dict, client, rated_client=None) -> list:
    """The refused reports of a whole-report kind's 5 boolean answers ``base`` (``client()`` makes its client),
    and with ``rated_client(config, rate_state)``, a report past ``reports_per_day`` on a day the restored rate
    state holds full (section 3), and a bad rate state (refused when the client is made)."""
    good = dict(values(5, 3))
    bad_reports = [("a missing feature", {k: v for k, v in good.items() if k != "q4"}, T0),
                   ("an unknown feature", dict(good, q9=True), T0),
                   ("a boolean given as 1", dict(good, q2=1), T0),
                   ("an event time before 1970", good, -1)]
    out = []
    for n, v, t in bad_reports:
        made = client()
        out.append({"name": n, "config": base, "input": {"values": v, "event_ms": t, "dimensions": {}},
                    "refusal": _refusal(lambda v=v, t=t: made.report(v, t, {}))})
    if rated_client is None:
        return out
    rated, full = dict(base, token=True, reports_per_day=2), {"20454": 2}
    for n, v, t in (("a report past reports_per_day on a day the restored rate state holds full", good,
                     T0 + MS_DAY - 1),
                    ("a report past the rate with a bad value: the value is refused first", dict(good, q2=1), T0)):
        made = rated_client(rated, full)
        out.append({"name": n, "config": rated, "rate_state": full,
                    "input": {"values": v, "event_ms": t, "dimensions": {}},
                    "refusal": _refusal(lambda v=v, t=t: made.report(v, t, {}))})
    bad_state = {"020454": 1}
    out.append({"name": "a rate state day with a leading zero", "config": rated, "rate_state": bad_state,
                "input": None, "refusal": _refusal(lambda: rated_client(rated, bad_state))})
    return out


def main() -> None:
    data = {"about": "Hadamard-sampling client vectors (docs/client.md section 11): per case one HMAC_DRBG "
                     "instantiated with the seed makes the reports in order; expect holds the drawn coins, the true "
                     "bits, each slot's coefficient index and sent parity, the packed bits and the Avro bytes of the "
                     "NoisyReport; a memoized case (hadamard.permanent_keep, section 13) adds the permanent coins "
                     "(derived from the secret and the value) and each slot's permanent parity; a config with hadamard.sets "
                     "(extra sets, issue 48 item 1) numbers its pool as docs/client.md section 11 says; a report that "
                     "carries the "
                     "device token (token: true, section 5) adds client, the token; a report past reports_per_day "
                     "(section 3) expects only its refusal code and draws no coins; a case with reports_per_day ends with "
                     "rate_state_after, the client's rate state (UTC day numbers to reports made). refusals: a "
                     "config refused when "
                     "read (input null), a rate state (rate_state, when present) refused when the client is made, "
                     "or one report refused (from that rate state), with its code.",
            "cases": reports(), "refusals": refusals()}
    (HERE / "hadamard.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
