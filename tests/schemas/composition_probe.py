"""The probe of issue 48: 36 setups (unit report/device x per-bit/hadamard/subset x fixed/sliding/global x
batch/streaming) times 10 features, each config parsed and checked as ``ldp-marginals run`` checks it
before it starts (:func:`~ldp_marginals.schemas.config.configs_from_text`, then
:class:`~ldp_marginals.pipelines.job.JobOptions` in the run's mode; the release ledger's check needs
earlier runs, which a fresh --output has not). No job is started.

``python -m tests.schemas.composition_probe`` prints the table and the count."""
from __future__ import annotations

import copy
import itertools
import json

UNITS = ("report", "device")
KINDS = ("per_bit", "hadamard", "subset")
WINDOWS = ("fixed", "sliding", "global")
MODES = ("batch", "streaming")
FEATURES = ("dimensions", "rollups", "extremes per report", "per client", "conditionals", "means",
            "sufficient DP", "groups", "two keys a device", "memoized 24 a day")
DAY = 86400


def setups():
    return list(itertools.product(UNITS, KINDS, WINDOWS, MODES))


def _window(window: str) -> dict:
    return {"fixed": {"type": "fixed", "size_seconds": DAY},
            "sliding": {"type": "sliding", "size_seconds": DAY, "period_seconds": DAY // 4},
            "global": {"type": "global"}}[window]


def cell_config(unit: str, kind: str, window: str, feature: str) -> dict:
    """One collection config: four boolean features, the setup, and the feature as a user writes it."""
    spec = {"collection": "probe", "features": [{"name": n, "type": "boolean"} for n in "abcd"],
            "max_order": 2, "window": _window(window), "min_reports": 50,
            "channel": ({"mechanism": "symmetric", "epsilon": 1.0} if kind == "per_bit"
                        else {"kind": kind, "epsilon": 2.0})}
    if window == "global":
        spec["early_firing_seconds"] = 3600   # a global window in streaming fires early (a user gives it)
    privacy = {"unit": "device"} if unit == "device" else {}
    if feature in ("dimensions", "rollups", "two keys a device"):
        spec["dimensions"] = {"region": {"max_values": 10}, "os": {"max_values": 4}}
    if feature == "rollups":
        spec["rollups"] = "all"
    if feature == "extremes per report":
        spec["extremes"] = [{"name": "any", "op": "or", "bits": ["a", "b", "c"]}]
    if feature == "per client":
        spec["extremes"] = [{"name": "any", "op": "or", "bits": ["a", "b", "c"], "over": "client"}]
    if feature == "conditionals":
        spec["conditionals"] = [{"of": ["a"], "given": ["b"]}]
    if feature == "means":
        spec["features"].append({"name": "x", "type": "numeric", "low": 0, "high": 10})
        spec["means"] = [{"of": "x", "given": ["a"]}]
    if feature == "sufficient DP":
        privacy.update(model="sufficient", epsilon=3.0, eta=0.01)
        spec["min_reports"] = 10 ** 7
    if feature == "groups":
        spec["groups"] = [["a", "b"]]
    if feature == "two keys a device":
        privacy["max_keys_per_device"] = 2
    if feature == "memoized 24 a day":
        if kind == "per_bit":
            spec["channel"] = {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True}
        else:
            # epsilon: the value's (epsilon_infinity), epsilon_1: one report's (docs/client.md section 13)
            spec["channel"] = dict(spec["channel"], memoize=True, epsilon_1=1.0)
        if unit == "device":
            privacy.update(max_reports_per_device=24, reports_per_day=24)
    if privacy:
        spec["privacy"] = privacy
    return copy.deepcopy(spec)


def check_cell(spec: dict, streaming: bool) -> str | None:
    """None when ``run`` would start the job for this config, else the refusal's message."""
    from ldp_marginals.pipelines.job import JobOptions
    from ldp_marginals.schemas.config import configs_from_text
    try:
        configs = configs_from_text(json.dumps(spec), "probe.json")
        JobOptions(configs, streaming=streaming)
    except ValueError as err:
        return str(err)
    return None


def probe() -> list:
    """``[(unit, kind, window, mode, feature, refusal or None)]`` over the 360 cells."""
    out = []
    for unit, kind, window, mode in setups():
        for feature in FEATURES:
            out.append((unit, kind, window, mode, feature,
                        check_cell(cell_config(unit, kind, window, feature), mode == "streaming")))
    return out


if __name__ == "__main__":
    cells = probe()
    refused = [c for c in cells if c[5] is not None]
    for c in refused:
        print(" | ".join(c[:5]), "::", c[5][:200])
    not_built = [c for c in refused if "not built" in c[5] or ("not supported" in c[5] and "yet" in c[5])
                 or "yet" in c[5]]
    print(f"{len(refused)} of {len(cells)} cells refused, {len(not_built)} of them 'not built'/'... yet'")
