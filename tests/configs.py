"""Collection configs shared by the tests (import them from here, not from ``conftest``)."""

SMALL_CONFIG = {
    "collection": "app",
    "features": [
        {"name": "dark", "type": "boolean"},
        {"name": "os", "type": "categorical", "values": ["mac", "win", "linux"]},
        {"name": "beta", "type": "boolean"},
        {"name": "sync", "type": "boolean"},
    ],
    "channel": [{"p": 0.1, "q": 0.85}, {"p": 0.2, "q": 0.8}, {"p": 0.2, "q": 0.8}, {"p": 0.2, "q": 0.8},
                {"p": 0.15, "q": 0.9}, {"p": 0.25, "q": 0.75}],
    "max_order": 2,
    "sets": [["dark", "beta", "sync"]],
    "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 50,
    "groups": [["os", "dark"]],
    "dimensions": {"region": {"max_values": 10}, "v": {"max_values": 10}, "arch": {"max_values": 10}},
    "extremes": [
        {"name": "any_flag", "op": "or", "features": ["dark", "beta", "sync"]},
        {"name": "all_flags", "op": "and", "bits": ["beta", "sync"]},
        {"name": "active_client", "op": "or", "bits": ["dark"], "over": "client"},
    ],
}
