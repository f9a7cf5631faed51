"""Collection configs of every kind a device is told about (``ldp-marginals client-config``), and the values
a device reports for each: shared by tests/schemas/test_client_config.py (the Python reference client, the
collector's screen) and tests/clients/test_client_config_clients.py (the JVM and TypeScript clients)."""

FEATURES = [{"name": "dark", "type": "boolean"}, {"name": "os", "type": "categorical", "values": ["mac", "win", "linux"]},
            {"name": "minutes", "type": "numeric", "low": 0, "high": 120}]
BOOLEANS = [{"name": f"q{i}", "type": "boolean"} for i in range(5)]
HOUR = {"type": "fixed", "size_seconds": 3600}


def _per_bit(name, channel, **extra):
    return {"collection": name, "features": FEATURES, "channel": channel, "max_order": 2, "min_reports": 10,
            "window": HOUR, **extra}


# name -> collection config: per-bit channels of every mechanism (p/q per bit, symmetric, optimized unary,
# RAPPOR memoized under the device unit with a declared rate, unrelated question), sliding and global
# windows, extremes over clients (the token is the client), and the two whole-report kinds (under the report
# unit, and under the device unit with and without memoization)
CONFIGS = {
    "pq": _per_bit("pq", [{"p": 0.1, "q": 0.85}, {"p": 0.2, "q": 0.8}, {"p": 0.2, "q": 0.8}, {"p": 0.2, "q": 0.8},
                          {"p": 0.25, "q": 0.75}]),
    "symmetric": _per_bit("symmetric", {"mechanism": "symmetric", "epsilon": 1.5}),
    "unary": _per_bit("unary", {"os": {"mechanism": "optimized_unary", "epsilon": 1.0},
                                "default": {"mechanism": "symmetric", "flip": 0.2}}),
    "rappor": _per_bit("rappor", {"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75, "memoize": True},
                       privacy={"unit": "device", "max_reports_per_device": 2, "reports_per_day": 4}),
    "rappor_fresh": _per_bit("rappor_fresh", {"mechanism": "rappor", "f": 0.3, "p": 0.4, "q": 0.8}),
    "unrelated": _per_bit("unrelated", {"mechanism": "unrelated_question", "coin_probability": 0.4}),
    "sliding": _per_bit("sliding", {"p": 0.2, "q": 0.8},
                        window={"type": "sliding", "size_seconds": 7200, "period_seconds": 3600},
                        privacy={"unit": "device", "max_reports_per_device": 1}),
    "clients": {"collection": "clients", "features": FEATURES[:2], "channel": {"p": 0.2, "q": 0.8}, "max_order": 2,
                "min_reports": 10, "window": {"type": "global"},
                "extremes": [{"name": "any", "op": "or", "bits": ["dark", "os=mac"], "over": "client"}]},
    "hadamard": {"collection": "hadamard", "features": BOOLEANS, "channel": {"kind": "hadamard", "epsilon": 2.0},
                 "max_order": 2, "min_reports": 10, "window": HOUR},
    "subset": {"collection": "subset", "features": BOOLEANS, "channel": {"kind": "subset", "epsilon": 3.0},
               "max_order": 2, "min_reports": 10, "window": {"type": "sliding", "size_seconds": 7200,
                                                              "period_seconds": 3600}},
    # the whole-report kinds under the device unit (reports carry the token; the declared rate is enforced),
    # memoized (the permanent stage's keep) and not, fixed and sliding windows
    "hadamard_memo": {"collection": "hadamard_memo", "features": BOOLEANS, "max_order": 2, "min_reports": 10,
                      "channel": {"kind": "hadamard", "epsilon": 4.0, "memoize": True, "epsilon_1": 1.0},
                      "window": HOUR, "privacy": {"unit": "device", "max_reports_per_device": 2,
                                                  "reports_per_day": 4}},
    "subset_device": {"collection": "subset_device", "features": BOOLEANS, "max_order": 2, "min_reports": 10,
                      "channel": {"kind": "subset", "epsilon": 3.0},
                      "window": {"type": "sliding", "size_seconds": 7200, "period_seconds": 3600},
                      "privacy": {"unit": "device", "max_reports_per_device": 1}},
    "hadamard_bounds": {"collection": "hadamard_bounds", "features": BOOLEANS, "max_order": 2, "min_reports": 10,
                        "channel": {"kind": "hadamard", "epsilon": 2.0}, "window": HOUR,
                        "privacy": {"unit": "report", "max_reports_per_device": 2}},   # the report unit with bounds
    "subset_memo": {"collection": "subset_memo", "features": BOOLEANS, "max_order": 2, "min_reports": 10,
                    "channel": {"kind": "subset", "epsilon": 6.0, "memoize": True, "epsilon_1": 2.0},
                    "window": {"type": "global"}, "privacy": {"unit": "device", "max_reports_per_device": 3,
                                                             "reports_per_day": 24}},
}


def values_of(name: str, i: int) -> dict:
    """Device ``i``'s true values for collection ``name`` (varied over devices, valid for the collection)."""
    features = CONFIGS[name]["features"]
    out = {}
    for j, f in enumerate(features):
        if f["type"] == "boolean":
            out[f["name"]] = (i >> j) % 2 == 1
        elif f["type"] == "categorical":
            out[f["name"]] = f["values"][i % len(f["values"])]
        else:
            out[f["name"]] = float(i * 17 % 121)
    return out
