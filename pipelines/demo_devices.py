"""The demo's device-unit collection: devices that memoize (RAPPOR's permanent response, then an
instantaneous one per report) and report one to four times an hour; ``privacy.unit: device`` keeps
one report per device and hour, and the guard counts devices. Simulated with the reference client's
law (:func:`~ldp_marginals.ldp.memoized.randomize_repeats`) and its slice-scoped tokens."""
from __future__ import annotations

import hashlib

import numpy as np

from ldp_marginals import schemas
from ldp_marginals.ldp.device import device_token
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.memoized import randomize_repeats

HOUR_MS = 3_600_000
DEVICE_CONFIG = {
    "collection": "demo_devices",
    "features": [{"name": "dark_mode", "type": "boolean"}, {"name": "beta_search", "type": "boolean"},
                 {"name": "notifications", "type": "boolean"}],
    # RAPPOR's default parameters, memoized by the device: epsilon_1 ~ 0.34 a bit, and no more than
    # ln 3 a bit for any number of reports of one value (epsilon_infinity)
    "channel": {"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75, "memoize": True},
    "privacy": {"unit": "device", "max_reports_per_device": 1, "reports_per_day": 24,
                "model": "local", "epsilon_per_month": 3.3},
    "max_order": 2,
    "window": {"type": "fixed", "size_seconds": 3600},
    "min_reports": 1000,   # devices
}
SHARES = (0.3, 0.6, 0.8)   # the devices' true bits


def write_device_reports(cfg, path: str, start_ms: int, devices: int = 4000, hours: int = 4, seed: int = 7) -> dict:
    """Reports of ``devices`` devices over ``hours`` hourly windows to ``path`` (Avro); returns the
    truth ``{(window start, (bit,)): devices whose bit is 1}`` (every device reports in every hour)
    and how many reports were written."""
    rng = np.random.default_rng(seed)
    true_bits = (rng.random((devices, len(SHARES))) < np.array(SHARES)).astype(np.uint8)
    secrets = [hashlib.sha256(f"demo-device-{d}".encode()).digest() for d in range(devices)]
    records = []
    for h in range(hours):
        slice_start = start_ms + h * HOUR_MS
        sends = rng.integers(1, 5, devices)
        # one draw per hour: the permanent bits are redrawn here, so hours are independent samples
        # of the memoized law (a device's own secret fixes them in the real client)
        noisy, owner = randomize_repeats(true_bits, sends, cfg.client_channels, rng)
        times = slice_start + rng.integers(0, HOUR_MS, owner.size)
        tokens = [device_token(secrets[d], cfg.name, slice_start) for d in range(devices)]
        packed = pack_bits(noisy)
        records += [{"collection": cfg.name, "event_time": int(t), "bits": packed[i].tobytes(), "dimensions": {},
                     "client": tokens[owner[i]]} for i, t in enumerate(times)]
    schemas.write_avro(path, "noisy_report", records)
    truth = {(start_ms + h * HOUR_MS, (b,)): int(true_bits[:, b].sum()) for h in range(hours) for b in range(3)}
    return {"truth": truth, "reports": len(records)}


def print_devices(cfg, rows: list, truth: dict, summary: dict) -> dict:
    """The collection's epsilons, its 1-way marginals of the first window beside the devices' truth,
    and the reports the bound left out."""
    e = cfg.epsilons()
    print(f"\ndevice-unit collection {cfg.name} (memoized RAPPOR channels, at most "
          f"{cfg.device.max_reports_per_device} report per device and hour): epsilon_1 {e.one:.3f}, "
          f"epsilon_infinity {e.infinity:.3f}, epsilon per month at {e.reports_per_day:g} reports a day "
          f"{e.per_month:.3f} (without memoization: {720 * e.one:.0f})")
    mine = [r for r in rows if r["collection"] == cfg.name and len(r["columns"]) == 1]
    first = min(r["window_start"] for r in mine)
    print(f"{'bit':<16}{'estimate':>10}{'devices':>9}{'ci_low':>10}{'ci_high':>10}   (n = "
          f"{mine[0]['n_reports']:,} reports kept, one per device)")
    for r in sorted((r for r in mine if r["window_start"] == first), key=lambda r: r["columns"]):
        t = truth[(first, tuple(r["columns"]))]
        print(f"{r['labels'][0]:<16}{r['estimate']:>10.0f}{t:>9}{r['ci_low']:>10.0f}{r['ci_high']:>10.0f}")
    covered = [r["ci_low"] <= truth[(r["window_start"], tuple(r["columns"]))] <= r["ci_high"] for r in mine]
    print(f"{sum(covered)} of {len(covered)} cover the truth; {summary.get('reports_over_device_bound', 0):,} "
          "reports past the bound of one per device and hour were counted and left out")
    return {"epsilon_1": e.one, "epsilon_infinity": e.infinity, "epsilon_per_month": e.per_month,
            "coverage": float(np.mean(covered)), "over_bound": summary.get("reports_over_device_bound", 0)}
