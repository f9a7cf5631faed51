"""Writes subset.json beside this file from the Python reference client of subset-randomized-response
collections (ldp/subset_client.py; docs/client.md section 12). Run from the repository:
`.venv/bin/python clients/test-vectors/make_subset_vectors.py`.

tests/ldp/test_subset_client.py checks that the Python client still reproduces them. Regenerate only
when the specification changes on purpose, and say so in the commit.
"""
from __future__ import annotations

import json
from pathlib import Path

from make_hadamard_vectors import (   # the same times, values, refused configs and reports
    CATEGORICAL,
    DEVICE_REPORTS,
    MEMO_REPORTS,
    OS_REPORTS,
    DEVICE_CONFIGS,
    SLIDING,
    T0,
    categorical_refusals,
    kind_reports,
    report_refusals,
    values,
)
from make_vectors import SECRET, SEED, _refusal

from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.ldp.subset_client import SubsetClientSpec, SubsetDeviceClient
from ldp_marginals.ldp.subset_rr import SubsetRR
from ldp_marginals.ldp.kind_memoize import MemoizedKind
from ldp_marginals.ldp.windows import Window

HERE = Path(__file__).resolve().parent


def spec(d: int, k: int, epsilon: float, width=None, name="survey", epsilon_1=None, window=Window("fixed", 3600.0),
         token=False, rate=None, sets=(), features=None) -> dict:
    mech = SubsetRR(d, k, epsilon, width, sets)
    names = features or [f"q{i}" for i in range(d)]   # features: a boolean's name, a categorical's (name, values)
    if epsilon_1 is not None:   # memoized (docs/client.md section 13): epsilon is epsilon_infinity
        memo = MemoizedKind.of(mech, epsilon_1)
        return SubsetClientSpec.of(name, names, window, memo.instantaneous, memo.permanent, token=token,
                                    reports_per_day=rate).to_json()
    return SubsetClientSpec.of(name, names, window, mech, token=token, reports_per_day=rate).to_json()


CASES = [
    {"name": "7 answers, 3-way tables, whole report epsilon 4: the best width, 6",
     "config": spec(7, 3, 4.0),
     "reports": [(values(7, p), T0 + i, {} if i % 2 else {"region": "eu"}) for i, p in enumerate((0, 127, 0b1010101,
                                                                                                  0b0110011, 5, 64))]},
    {"name": "5 answers, 2-way tables, whole report epsilon 1: width 2 (MargPS)", "config": spec(5, 2, 1.0, width=2),
     "reports": [(values(5, p), T0 + 3_600_000 + i, {}) for i, p in enumerate((0, 31, 0b10110, 0b01001))]},
    {"name": "InpPS: 12 answers up to 3-way, width 12 (the whole input), epsilon 8",
     "config": spec(12, 3, 8.0, width=12, name="inpps"),
     "reports": [(values(12, p), T0 + i, {}) for i, p in enumerate((0, 4095, 0b101100111000, 0b010011000111))]},
    {"name": "62 answers, 3-way tables, epsilon 0.5: width 3 of 62 (the most features)",
     "config": spec(62, 3, 0.5, width=3),
     "reports": [(values(62, p), T0 + i, {}) for i, p in enumerate((0, (1 << 62) - 1, 0x2AAAAAAAAAAAAAAA))]},
    {"name": "memoized (section 13): 7 answers, 3-way tables, epsilon_infinity 4, epsilon_1 1, width 4; the same "
             "value thrice keeps its subset and permanent pattern",
     "config": spec(7, 3, 4.0, width=4, epsilon_1=1.0, name="memo"),
     "reports": [(values(7, p), T0 + 3_600_000 * i, {}) for i, p in enumerate((0b1010101, 0b1010101, 0, 0b1010101,
                                                                                 127, 0))]},
    {"name": "extra sets (issue 48 item 1): 7 answers, 2-way tables and the tables of {q0,q1,q2} and {q2,q3,q4,q5}, "
             "epsilon 1: the default width is at least 4 (the widest set), the device's config is the plain one",
     "config": spec(7, 2, 1.0, sets=[(0, 1, 2), (2, 3, 4, 5)], name="wide"),
     "reports": [(values(7, p), T0 + i, {}) for i, p in enumerate((0, 127, 0b0111100, 0b1000011))]},
    {"name": "memoized (section 13): 12 answers, 2-way tables, epsilon_infinity 8, epsilon_1 2, width 12",
     "config": spec(12, 2, 8.0, width=12, epsilon_1=2.0, name="memo"),
     "reports": [(values(12, p), T0 + i, {"region": "eu"}) for i, p in enumerate((0b101100111000, 0b101100111000,
                                                                                  4095))]},
    # the device unit (sections 3 and 5): T0 is 2026-01-01T00:00Z, the first millisecond of UTC day 20454
    {"name": "device unit: token and reports_per_day 3, sliding window (2 h every hour): each report carries its "
             "slice's token; the day's fourth is refused and draws no coins; the next day counts afresh",
     "config": spec(5, 2, 3.0, width=3, name="devices", window=SLIDING, token=True, rate=3),
     "reports": DEVICE_REPORTS},
    {"name": "memoized with token: 7 answers, 3-way tables, epsilon_infinity 4, epsilon_1 1, width 4, global "
             "window (one token for all time), reports_per_day 24",
     "config": spec(7, 3, 4.0, width=4, epsilon_1=1.0, name="memo", window=Window("global"), token=True, rate=24),
     "reports": MEMO_REPORTS},
    {"name": "a categorical (issue 48 item 1): q0, os of 3 values, q1 (5 bits, the value one-hot), 2-way tables, "
             "epsilon 2, width 3",
     "config": spec(5, 2, 2.0, width=3, name="apps", features=CATEGORICAL),
     "reports": [(v, T0 + i, {}) for i, v in enumerate(OS_REPORTS)]},
    {"name": "a categorical, memoized (section 13): q0, os of 3 values, q1, 2-way tables, epsilon_infinity 4, "
             "epsilon_1 1, width 3; the same value twice keeps its subset and permanent pattern",
     "config": spec(5, 2, 4.0, width=3, epsilon_1=1.0, name="apps", features=CATEGORICAL),
     "reports": [(v, T0 + 3_600_000 * i, {}) for i, v in enumerate(OS_REPORTS[:2] + OS_REPORTS[:1])]},
]


def reports() -> list:
    return kind_reports(CASES, SubsetClientSpec, SubsetDeviceClient, ("subset", "kept", "pattern"), "permanent_pattern")


def refusals() -> list:
    base = spec(5, 2, 1.0, width=3)
    sub = base["subset"]
    bad_configs = [
        ("a categorical feature", dict(base, features=[{"name": "os", "type": "categorical"}] + base["features"][1:])),
        ("width below max_order", dict(base, subset=dict(sub, width=1))),
        ("width above the features", dict(base, subset=dict(sub, width=6))),
        ("max_order zero", dict(base, subset=dict(sub, max_order=0))),
        ("width not an integer", dict(base, subset=dict(sub, width=2.5))),
        ("width a boolean", dict(base, subset=dict(sub, width=True))),
        ("keep at most 2^-width", dict(base, subset=dict(sub, keep=0.125))),
        ("keep above 1", dict(base, subset=dict(sub, keep=1.5))),
        ("keep a string", dict(base, subset=dict(sub, keep="0.5"))),
        ("permanent_keep at most 2^-width", dict(base, subset=dict(sub, permanent_keep=0.125))),
        ("permanent_keep above 1", dict(base, subset=dict(sub, permanent_keep=1.5))),
        ("a missing key", dict(base, subset={"max_order": 2, "width": 3})),
        ("an unknown key", dict(base, channels=[])),
        ("63 features", dict(base, features=[{"name": f"q{i}", "type": "boolean"} for i in range(63)])),
    ] + [(n, dict(base, **change)) for n, change in DEVICE_CONFIGS]
    out = [{"name": n, "config": c, "input": None, "refusal": _refusal(lambda c=c: SubsetClientSpec.from_json(c))}
           for n, c in bad_configs]
    out += categorical_refusals(spec(5, 2, 1.0, width=3, name="apps", features=CATEGORICAL), SubsetClientSpec,
                                SubsetDeviceClient)
    return out + report_refusals(base, lambda: SubsetDeviceClient(SubsetClientSpec.from_json(base),
                                                                  bytes.fromhex(SECRET), HmacDrbg(bytes.fromhex(SEED))),
                                 lambda rated, state: SubsetDeviceClient(SubsetClientSpec.from_json(rated),
                                                                         bytes.fromhex(SECRET),
                                                                         HmacDrbg(bytes.fromhex(SEED)), state))


def main() -> None:
    data = {"about": "Subset randomized response client vectors (docs/client.md section 12): per case one HMAC_DRBG "
                     "instantiated with the seed makes the reports in order; expect holds the drawn coins, the true "
                     "bits, the chosen positions, whether the true pattern was kept (1) or flipped (0), the sent "
                     "pattern (bit j of the j-th chosen position), the packed bits and the Avro bytes of the "
                     "NoisyReport; a memoized case (subset.permanent_keep, section 13) adds the permanent coins "
                     "(derived from the secret and the value) and the permanent pattern; kept is then the fresh stage's; "
                     "a report that carries the device token (token: true, section 5) adds client, the token; a "
                     "report past reports_per_day (section 3) expects only its refusal code and draws no coins; a case "
                     "with reports_per_day ends with rate_state_after, the client's rate state. "
                     "refusals: a config refused when read (input null), a rate state (rate_state, when present) "
                     "refused when the client is made, or one report refused (from that rate state), with its code.",
            "cases": reports(), "refusals": refusals()}
    (HERE / "subset.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
