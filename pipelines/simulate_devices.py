"""Devices for ``ldp-marginals simulate --devices N`` (issue 49 item 6), and the one owner of how a
simulation turns devices into reports (``benchmarks/team_month.py`` uses :func:`randomize_devices` and
:func:`slice_tokens` too).

A device is what docs/client.md describes: a secret (32 bytes, :func:`device_secret`: derived from the seed
and the device's number, so a seed gives the same devices), its true values held for the run (one row of
:func:`~ldp_marginals.pipelines.simulate.draw_features` a device), one value of each drawn dimension (its
region) held for the run, and a rate: ``reports_per_day`` times a factor of its own (Gamma, mean 1, shape
:data:`RATE_SHAPE`), spread over the day by :func:`~ldp_marginals.pipelines.simulate.day_curve` (a Poisson
count per device and piece of time; a piece is an hour, cut at the slices' and days' bounds). Its reports
are randomized as the clients do (:func:`randomize_devices`: a memoized bit or kind draws its permanent
response once a device, each report its instantaneous one) and carry the device token of their slice
(:func:`slice_tokens`, docs/client.md section 5) when the collection needs it
(:func:`~ldp_marginals.schemas.client_config.needs_token`).

An honest device keeps to what its client and the collection say: the client refuses a report past the
declared ``reports_per_day`` of its UTC day (``rate_exceeded``, docs/client.md section 3), and the device
sends at most ``max_reports_per_device`` reports a slice (an app that schedules its reports to the
collection), from one region: the job drops none of its reports. Chatty devices exercise the job's bounds
(``privacy.unit: device``, or the report unit with device bounds):

- ``chatty_over``: a share of the devices whose client keeps to neither (it lost its rate state, or was
  modified): they send at ``chatty_factor`` times their rate, uncapped. The job keeps ``M`` of a device's
  reports a slice and key and leaves the rest out (``reports_over_device_bound``).
- ``chatty_regions``: a share of the devices that report from two regions (two values of the first drawn
  dimension that has two or more): in each slice they send as many reports from a second region as from
  their own (at most ``M`` in each). With ``max_keys_per_device`` 1 the job keeps one region's and leaves
  the other's out (``reports_over_key_bound``), whichever it keeps.

A device's event times are distinct milliseconds (reports of one device in one millisecond share a rank,
ldp/devices.py, and such a group across the M-th place drops whole), so what the job leaves out is known
exactly: :func:`simulate_devices` returns it by bound, with what the devices did not send.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ldp_marginals.ldp.device import device_token
from ldp_marginals.pipelines.simulate import (
    DEFAULT_START_MS, Population, _check_scenario, day_curve, draw_dimensions, draw_features,
)
from ldp_marginals.schemas.client_config import needs_token

HOUR_MS, DAY_MS = 3_600_000, 86_400_000
RATE_SHAPE = 4.0       # a device's own rate: reports_per_day times a Gamma(4, 1/4) factor (mean 1, sd 0.5)
_DEVICE_BLOCK = 4096   # devices drawn at a time (a block's Poisson counts: devices x pieces of time)


def device_secret(seed: int, device: int) -> bytes:
    """The secret of device ``device`` in a simulation of seed ``seed``: 32 bytes, stable (a real device's
    comes from the operating system's secure generator, :func:`~ldp_marginals.ldp.device.new_secret`)."""
    return hashlib.sha256(f"ldp-marginals simulate/{seed}/{device}".encode()).digest()


def slice_tokens(secrets, collection: str, window, owner, event_ms) -> np.ndarray:
    """Each report's device token, as the clients derive it: of its device's secret (``secrets[owner[i]]``),
    the collection and the slice of its event time (docs/client.md section 5); one HMAC a device and slice."""
    owner = np.asarray(owner, dtype=np.int64)
    if owner.size == 0:
        return np.zeros(0, dtype=object)
    starts = window.slice_starts(np.asarray(event_ms, dtype=np.int64))
    pairs, inverse = np.unique(np.stack([owner, starts], axis=1), axis=0, return_inverse=True)
    tokens = np.array([device_token(secrets[d], collection, int(s)) for d, s in pairs], dtype=object)
    return tokens[inverse.reshape(-1)]


def randomize_devices(cfg, truth, reports, rng, units: dict | None = None) -> tuple:
    """Devices holding ``truth`` ``(devices, n_bits)``, device d sending ``reports[d]`` reports, randomized as
    the clients do: ``(packed, owner, report_bits)``, the reports in the collection's wire format (a device's
    reports in a run, devices in order), each report's device, and each report's true bits.

    - per bit: :func:`~ldp_marginals.ldp.memoized.randomize_repeats` (a memoized bit's permanent bit drawn
      once a device, every report's instantaneous bit afresh). ``units``: ``{bit: (devices,) float in [0, 1]}``
      of numeric features, whose bit, when it does not memoize, the client encodes afresh each report
      (docs/client.md section 3, step 3); one that memoizes keeps the device's encoding (its encoding coin);
    - a memoized whole-report kind (``hadamard``, ``subset``): its memoized randomizer
      (:mod:`ldp_marginals.ldp.kind_memoize`: the permanent response to the device's value drawn once at
      epsilon_inf, each report re-randomized);
    - a whole-report kind that does not memoize: the kind's ``encode_reports``, each report afresh."""
    from ldp_marginals.ldp.encoding import pack_bits
    from ldp_marginals.ldp.kind_memoize import randomize_memoized_hadamard, randomize_memoized_subset
    from ldp_marginals.ldp.memoized import randomize_repeats
    from ldp_marginals.ldp.subset_rr import SubsetRR
    truth = np.asarray(truth, dtype=np.uint8)
    reports = np.asarray(reports, dtype=np.int64)
    units = units or {}
    if cfg.kind_memo is not None:
        subset = isinstance(cfg.kind_memo.permanent, SubsetRR)
        simulate = randomize_memoized_subset if subset else randomize_memoized_hadamard
        a, b, owner = simulate(truth, reports, cfg.kind_memo, rng)
        return cfg.wire.pack(a, b), owner, truth[owner]
    if cfg.sampling is not None:
        from ldp_marginals.ldp.channel_kind import channel_kind
        owner = np.repeat(np.arange(truth.shape[0]), reports)
        bits = _encoded_afresh(truth[owner], owner, units, range(truth.shape[1]), rng)
        return channel_kind(cfg.channel_kind).encode_reports(bits, cfg.sampling, rng), owner, bits
    channels = cfg.client_channels
    noisy, owner = randomize_repeats(truth, reports, channels, rng)
    afresh = [b for b in sorted(units) if not channels.memoizes[b]]
    bits = truth[owner]
    if afresh:
        bits = _encoded_afresh(bits, owner, units, afresh, rng)
        inst = channels.instantaneous
        cols = np.array(afresh)
        noisy[:, cols] = rng.random((owner.size, cols.size)) < np.where(bits[:, cols] == 1, inst.q[cols], inst.p[cols])
    return pack_bits(noisy), owner, bits


def _encoded_afresh(bits, owner, units: dict, among, rng) -> np.ndarray:
    """``bits`` with the numeric bits of ``units`` (those ``among``) encoded afresh for each report."""
    bits = np.array(bits, dtype=np.uint8)
    for b in sorted(set(units) & set(among)):
        bits[:, b] = rng.random(owner.size) < np.asarray(units[b])[owner]
    return bits


def _check(cfg, devices, rate, dims, chatty_over, chatty_regions, chatty_factor) -> None:
    if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 1:
        raise ValueError(f"devices must be a whole number >= 1, got devices={devices!r}")
    if rate is None:
        raise ValueError("reports_per_day: the config declares no privacy.reports_per_day; give the devices' mean "
                         "rate (simulate --reports-per-day R)")
    if not rate > 0:
        raise ValueError(f"reports_per_day must be > 0, got reports_per_day={rate!r}")
    for name, share in (("chatty_over", chatty_over), ("chatty_regions", chatty_regions)):
        if not 0 <= share <= 1:
            raise ValueError(f"{name} must be a share in [0, 1], got {name}={share!r}")
    if chatty_over + chatty_regions > 1:
        raise ValueError(f"chatty_over + chatty_regions must be at most 1, got {chatty_over} + {chatty_regions}")
    if not chatty_factor >= 1:
        raise ValueError(f"chatty_factor must be >= 1, got chatty_factor={chatty_factor!r}")
    if (chatty_over or chatty_regions) and cfg.device is None:
        raise ValueError(f"chatty devices exercise the device bounds, and collection {cfg.name!r} has none "
                         "(privacy.unit: device, or max_reports_per_device): nothing they send is over a bound")
    if chatty_regions and not any(len(weighted) >= 2 for _, weighted in dims or []):
        raise ValueError("chatty_regions: devices in two regions need a drawn dimension with two values or more "
                         "(simulate --dimension region=eu,us)")


def _pieces(cfg, start_ms: int, end_ms: int) -> tuple:
    """``(lo, hi)``: the span cut at every UTC hour and every slice bound (a piece lies in one hour, one day
    and one slice)."""
    cuts = [np.array([start_ms, end_ms]), np.arange(-(-start_ms // HOUR_MS) * HOUR_MS, end_ms, HOUR_MS)]
    period = cfg.window.period_ms
    if period:
        cuts.append(np.arange(-(-start_ms // period) * period, end_ms, period))
    cuts = np.unique(np.concatenate(cuts).astype(np.int64))
    return cuts[:-1], cuts[1:]


def _distinct_times(owner, piece, lo, hi, rng, times=None) -> np.ndarray:
    """Event times uniform in each report's piece, distinct among a device's reports (redrawn until so)."""
    width = (hi - lo)[piece]
    times = lo[piece] + (rng.random(owner.size) * width).astype(np.int64) if times is None else times.copy()
    for _ in range(100):
        order = np.lexsort((times, owner))
        o, t = owner[order], times[order]
        dup = order[np.flatnonzero((o[1:] == o[:-1]) & (t[1:] == t[:-1])) + 1]
        if dup.size == 0:
            return times
        times[dup] = lo[piece[dup]] + (rng.random(dup.size) * width[dup]).astype(np.int64)
    raise ValueError("a device has more reports in a piece of time than it has milliseconds; start the span "
                     "(--start-ms) on a second")


def _first(groups: np.ndarray, n: int, among: np.ndarray) -> np.ndarray:
    """Of reports sorted so that each group is consecutive (``groups``: a group code each), those ``among``
    that are among their group's first ``n`` of ``among`` (the rest of ``among``: False; others: True)."""
    keep = np.ones(groups.size, dtype=bool)
    idx = np.flatnonzero(among)
    if idx.size == 0:
        return keep
    g = groups[idx]
    new = np.ones(idx.size, dtype=bool)
    new[1:] = g[1:] != g[:-1]
    starts = np.flatnonzero(new)
    rank = np.arange(idx.size) - starts[np.cumsum(new) - 1]
    keep[idx[rank >= n]] = False
    return keep


def _group(*columns) -> np.ndarray:
    """A code per row of the columns (equal rows, equal codes)."""
    return np.unique(np.stack([np.asarray(c, dtype=np.int64) for c in columns], axis=1), axis=0,
                     return_inverse=True)[1].reshape(-1)


def simulate_devices(cfg, devices: int, seed: int = 0, start_ms: int = DEFAULT_START_MS,
                     span_seconds: float | None = None, reports_per_day: float | None = None,
                     dimensions: list | None = None, prevalences: dict | None = None, chatty_over: float = 0.0,
                     chatty_regions: float = 0.0, chatty_factor: float = 3.0) -> tuple:
    """``devices`` devices of collection ``cfg`` over ``span_seconds`` (default: a day, or a window when
    longer) from ``start_ms`` (module docstring): ``(population, summary)``, the reports as a
    :class:`~ldp_marginals.pipelines.simulate.Population` (``devices``: each report's device) in event-time
    order, and what happened:

    ``{"devices", "reports", "reports_per_day" (the mean rate), "chatty_over_bound", "chatty_two_regions"
    (devices of each kind), "not_sent": {"rate_exceeded", "past_max_reports_per_device"} (reports honest
    devices' clients refused and held back), "dropped_by_the_job": {"reports_over_device_bound",
    "reports_over_key_bound"}}`` (the reports the job leaves out by each bound, as its summary names them).

    ``reports_per_day``: the devices' mean rate (default: the config's ``privacy.reports_per_day``);
    ``dimensions``: ``[(name, [(value, weight), ...])]``, each device's value drawn with those weights;
    ``prevalences`` as :func:`~ldp_marginals.pipelines.simulate.simulate_population` takes them."""
    prevalences = dict(prevalences or {})
    _check_scenario(cfg, prevalences, None)
    bounds = cfg.device
    rate = reports_per_day if reports_per_day is not None else (bounds.reports_per_day if bounds else None)
    _check(cfg, devices, rate, dimensions, chatty_over, chatty_regions, chatty_factor)
    if span_seconds is None:
        span_seconds = 86_400.0 if cfg.window.is_global else max(86_400.0, cfg.window.size_seconds)
    span_ms = int(span_seconds * 1000)
    if span_ms < 1:
        raise ValueError(f"span_seconds must be at least a millisecond, got span_seconds={span_seconds!r}")
    rng = np.random.default_rng(seed)
    truth, values, _ = draw_features(cfg, devices, rng, prevalences)
    home = draw_dimensions(cfg, dimensions, devices, rng) or {}
    kind = rng.random(devices)
    over = kind < chatty_over
    roams = (kind >= chatty_over) & (kind < chatty_over + chatty_regions)
    own_rate = rate * rng.gamma(RATE_SHAPE, 1.0 / RATE_SHAPE, devices) * np.where(over, chatty_factor, 1.0)

    # each device's Poisson count in each piece of time, its rate following the day
    lo, hi = _pieces(cfg, start_ms, start_ms + span_ms)
    expected = day_curve((lo + hi) // 2) * (hi - lo) / DAY_MS
    owners, pieces = [], []
    for first in range(0, devices, _DEVICE_BLOCK):
        counts = rng.poisson(own_rate[first:first + _DEVICE_BLOCK, None] * expected[None, :])
        d, p = np.nonzero(counts)
        k = counts[d, p]
        owners.append(np.repeat(d + first, k))
        pieces.append(np.repeat(p, k))
    owner, piece = np.concatenate(owners).astype(np.int64), np.concatenate(pieces).astype(np.int64)
    times = _distinct_times(owner, piece, lo, hi, rng)
    order = np.lexsort((times, owner))
    owner, piece, times = owner[order], piece[order], times[order]

    # honest devices: the client's rate a UTC day and at most M a slice, the finer first (they nest; a slice of a
    # day or longer: the rate first, so a day's reports past both count as the client's refusals)
    sent = np.ones(owner.size, dtype=bool)
    not_sent = {"rate_exceeded": 0, "past_max_reports_per_device": 0}
    if bounds is not None:
        slices, days = cfg.window.slice_starts(times), times // DAY_MS
        caps = [("past_max_reports_per_device", slices, bounds.max_reports_per_device)]
        if bounds.reports_per_day is not None:
            day_cap = ("rate_exceeded", days, bounds.reports_per_day)
            caps = caps + [day_cap] if 0 < cfg.window.period_ms < DAY_MS else [day_cap] + caps
        for reason, scope, n in caps:
            among = sent & ~over[owner]
            keep = _first(_group(owner, scope), n, among)
            not_sent[reason] = int((among & ~keep).sum())
            sent &= keep
    owner, piece, times = owner[sent], piece[sent], times[sent]
    region = {name: values_[owner] for name, values_ in home.items()}

    # devices in two regions: as many reports from a second region as from their own, in each piece
    if roams.any():
        name, weighted = next((n, w) for n, w in dimensions if len(w) >= 2)
        names = np.array([v for v, _ in weighted], dtype=object)
        weights = np.array([w for _, w in weighted], dtype=float)
        second = np.empty(devices, dtype=object)
        for d in np.flatnonzero(roams):
            w = np.where(names == home[name][d], 0.0, weights)
            second[d] = names[rng.choice(names.size, p=w / w.sum())]
        twin = np.flatnonzero(roams[owner])
        owner = np.concatenate([owner, owner[twin]])
        piece = np.concatenate([piece, piece[twin]])
        twin_times = lo[piece[twin]] + (rng.random(twin.size) * (hi - lo)[piece[twin]]).astype(np.int64)
        times = _distinct_times(owner, piece, lo, hi, rng, np.concatenate([times, twin_times]))
        region = {n: np.concatenate([v, second[owner[-twin.size:]] if n == name else v[twin]])
                  for n, v in region.items()}
        order = np.lexsort((times, owner))
        owner, piece, times = owner[order], piece[order], times[order]
        region = {n: v[order] for n, v in region.items()}

    reports = np.bincount(owner, minlength=devices)
    units = {cfg.layout.bit_index(f.name): (values[f.name] - f.low) / (f.high - f.low)
             for f in cfg.layout.features if f.kind == "numeric"}
    packed, check_owner, bits = randomize_devices(cfg, truth, reports, rng, units)
    if not np.array_equal(check_owner, owner):   # randomize_devices keeps a device's reports in a run, in order
        raise RuntimeError("randomize_devices returned the reports of the devices in another order")
    dropped = _dropped_by_the_job(cfg, owner, times, region)
    clients = None
    if needs_token(cfg):
        secrets = [device_secret(seed, d) for d in range(devices)]
        clients = slice_tokens(secrets, cfg.name, cfg.window, owner, times)
    by_time = np.argsort(times, kind="stable")
    pop = Population(bits[by_time], packed[by_time], times[by_time],
                     None if clients is None else clients[by_time],
                     {n: v[owner][by_time] for n, v in values.items()},
                     {n: v[by_time] for n, v in region.items()} or None, owner[by_time])
    summary = {"devices": int(devices), "reports": int(owner.size), "reports_per_day": float(rate),
               "chatty_over_bound": int(over.sum()), "chatty_two_regions": int(roams.sum()),
               "not_sent": not_sent, "dropped_by_the_job": dropped}
    return pop, summary


def _dropped_by_the_job(cfg, owner, times, region: dict) -> dict:
    """The reports the job leaves out, by bound: per device and slice, the keys past ``K`` (a device's keys
    here hold as many reports each, so it does not matter which the job keeps), and in each kept key the
    reports past ``M``."""
    out = {"reports_over_device_bound": 0, "reports_over_key_bound": 0}
    if cfg.device is None or owner.size == 0:
        return out
    m = cfg.device.max_reports_per_device
    k = cfg.device.max_keys_per_device if cfg.bounds_keys else None
    codes = [np.unique(region[n], return_inverse=True)[1].reshape(-1) for n in sorted(region)]
    slices = cfg.window.slice_starts(times)
    cells, n = np.unique(np.stack([owner, slices, _group(*codes) if codes else np.zeros_like(owner)], axis=1),
                         axis=0, return_counts=True)
    device_slice = _group(cells[:, 0], cells[:, 1])
    keys = np.bincount(device_slice)
    each, least = np.zeros(keys.size, dtype=np.int64), np.full(keys.size, np.iinfo(np.int64).max)
    np.maximum.at(each, device_slice, n)
    np.minimum.at(least, device_slice, n)
    single = keys <= (k if k is not None else np.inf)
    if np.any((least != each) & ~single):
        raise RuntimeError("a device's keys of a slice hold different numbers of reports: which the job keeps "
                           "would decide what it drops")
    kept_keys = np.minimum(keys, k) if k is not None else keys
    out["reports_over_key_bound"] = int(((keys - kept_keys) * each).sum())
    past = np.maximum(n - m, 0)
    out["reports_over_device_bound"] = int(past[single[device_slice]].sum()
                                           + (kept_keys * np.maximum(each - m, 0))[~single].sum())
    return out
