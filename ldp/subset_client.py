"""The reference client of a subset-randomized-response collection (``channel: {kind: subset}``), byte for
byte as docs/client.md section 12 specifies (test vectors: ``clients/test-vectors/subset.json``).

The client config a device receives (its numbers final: no client computes an exponential)::

    {"collection": "survey", "features": [{"name": "q0", "type": "boolean"}, ...],
     "window": {"type": "fixed", "size_seconds": 3600},
     "subset": {"max_order": 3, "width": 6, "keep": 0.4640...}}

``width`` s: how many of the d bits a report carries; ``keep``: the probability that it sends their true
pattern, ``p = e^epsilon / (e^epsilon + 2^s - 1)`` (:class:`~ldp_marginals.ldp.subset_rr.SubsetRR`); every
other pattern is sent with ``q = (1 - p) / (2^s - 1)``. Features are boolean or categorical
(``{name, type: categorical, values}``: one bit per value, one-hot; numeric ones have no client).
Optional top-level ``token`` and ``reports_per_day``: the device unit (:mod:`~ldp_marginals.ldp.whole_report_client`).

One report:

1. check the input as the per-bit client does (``bad_event_time``, ``bad_dimensions``,
   ``missing_feature``, ``unknown_feature``, ``bad_value``), drawing no coin on a refusal;
2. draw ``4 (d + 1 + s)`` bytes in one request: ``d`` subset coins, one keep coin, ``s`` mask coins;
3. encode the features to bits, in layout order: a boolean is its bit, a categorical value one-hot (one
   bit per value, the value's bit set), as the per-bit client encodes them;
4. the subset, by sequential selection: position ``i = 0..d-1`` joins iff ``decide(coin_i, r / (d - i))``,
   ``r`` the positions still to choose (``s`` minus those chosen), the quotient in doubles (``r = 0``
   never joins, ``r = d - i`` always does: exactly s join);
5. the flip mask, a uniform non-zero pattern of s bits, bit by bit ``j = 0..s-1`` with ``m = s - j`` bits
   left: once a bit is set, bit j is ``decide(coin, 0.5)``; before, ``decide(coin, h / (2h - 1))`` with
   ``h = 2^(m-1)`` in doubles (1 at the last bit, so the mask is never zero);
6. the sent pattern: bit j is the true bit of the j-th chosen position (ascending), XOR the mask's bit j
   unless ``decide(keep coin, keep)``;
7. pack as the job reads it (:mod:`~ldp_marginals.ldp.subset_reports`): the d-bit subset mask (bit i:
   position i chosen), then the s pattern bits in order, least significant first; ``client`` the device
   token of the event's slice when ``token`` is true (docs/client.md sections 5 and 14), else null;
   ``reports_per_day`` is enforced as the per-bit client enforces it (``rate_exceeded`` after the checks
   of step 1, before any coin).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ldp_marginals.ldp.client import (
    BAD_CONFIG,
    DeviceClient,
    Refusal,
    boolean_bits,
    check_whole_report,
    checked_event,
)
from ldp_marginals.ldp.coins import COIN_BYTES, decide
from ldp_marginals.ldp.subset_rr import SubsetRR
from ldp_marginals.ldp.whole_report_client import WholeReportSpec, permanent_coins, report_record
from ldp_marginals.ldp.windows import Window

@dataclass(frozen=True)
class SubsetClientSpec(WholeReportSpec):
    """What a device is told about a subset-RR collection (module docstring)."""

    KIND = "subset"
    PARAMS = ("max_order", "width", "keep")
    collection: str
    features: tuple          # in layout (bit) order: a boolean's name, a categorical's (name, values)
    window: Window
    max_order: int
    width: int
    keep: float
    permanent_keep: float | None = None   # memoized (section 13): the permanent pattern's keep
    # the device unit (docs/client.md section 14), keyword-only: reports carry the device token; the declared
    # rate the client enforces (None: no limit)
    token: bool = field(default=False, kw_only=True)
    reports_per_day: int | None = field(default=None, kw_only=True)

    def __post_init__(self):
        d = check_whole_report(self.collection, self.features)
        for name, value in (("max_order", self.max_order), ("width", self.width)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise Refusal(BAD_CONFIG, f"subset.{name} must be an integer >= 1, got {name}={value!r}")
        if not self.max_order <= self.width <= d:
            raise Refusal(BAD_CONFIG, f"subset.width must be in [max_order={self.max_order}, {d} bits], "
                                      f"got width={self.width}")
        keep = self.keep
        if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 2.0 ** -self.width < keep <= 1.0:
            raise Refusal(BAD_CONFIG, f"subset.keep must be a number in (2^-width, 1], got keep={keep!r}")
        self.check_device_fields()
        self.check_permanent_keep(2.0 ** -self.width)

    @classmethod
    def of(cls, collection: str, features, window: Window, mechanism: SubsetRR,
           permanent: SubsetRR | None = None, *, token: bool = False,
           reports_per_day: int | None = None) -> "SubsetClientSpec":
        """The spec the server publishes for a collection's mechanism: ``mechanism`` the instantaneous stage,
        ``permanent`` (memoized collections) the permanent one (same order and width); ``token`` and
        ``reports_per_day`` the device unit's (:mod:`~ldp_marginals.ldp.whole_report_client`)."""
        return cls(collection, cls.features_of(features), window, mechanism.max_order, mechanism.width, mechanism.p,
                   None if permanent is None else permanent.p, token=token,
                   reports_per_day=reports_per_day)

    @classmethod
    def from_json(cls, spec) -> "SubsetClientSpec":
        collection, names, window, s = cls.params_of(spec)
        return cls(collection, names, window, s["max_order"], s["width"], s["keep"], s.get("permanent_keep"),
                   **cls.device_of(spec))

    @property
    def n_coins(self) -> int:
        return self.n_bits + 1 + self.width


@dataclass(frozen=True)
class SubsetTrace:
    coins: bytes        # the bytes drawn
    encoded: tuple      # the true bits
    subset: tuple       # the chosen positions, ascending
    kept: int           # 1 when the true pattern was sent
    pattern: tuple      # the sent pattern, bit j <-> subset[j]
    permanent: bytes = b""        # memoized: the permanent coins drawn (section 13)
    permanent_pattern: tuple = () # memoized: the permanent pattern


def chosen_positions(coins: list, n_bits: int, width: int) -> list:
    """Step 4 of the module docstring: the positions sequential selection chooses with ``n_bits`` coins."""
    out = []
    for i in range(n_bits):
        if decide(coins[i], (width - len(out)) / (n_bits - i)):
            out.append(i)
    return out


def flip_mask(coins: list) -> list:
    """Step 5 of the module docstring: a non-zero pattern of ``len(coins)`` bits, uniform over the
    ``2^s - 1``."""
    s, out = len(coins), []
    for j, coin in enumerate(coins):
        if any(out):
            out.append(decide(coin, 0.5))
        else:
            h = 2.0 ** (s - j - 1)
            out.append(decide(coin, h / (2.0 * h - 1.0)))
    return out


class SubsetDeviceClient(DeviceClient):
    """One device's client for one subset-RR collection: ``report(values, event_ms)`` (the secret, the rate
    state, ``report`` and the declared rate as the per-bit client's)."""

    def report_with_trace(self, values: Mapping, event_ms: int, dimensions: Mapping | None = None):
        spec = self.spec
        dims = checked_event(event_ms, dimensions)
        bits = boolean_bits(values, list(spec.features))
        self._count(event_ms)
        d, s = len(bits), spec.width
        memo = spec.permanent_keep is not None
        n = COIN_BYTES * spec.n_coins
        # memoized: subset and permanent pattern from the value's permanent coins at permanent_keep; each report
        # then draws 1 + s fresh coins (a keep coin, s mask coins) and re-randomizes the pattern at keep
        first = permanent_coins(self.secret, spec.collection, spec.KIND, bits, n) if memo else None
        drawn = self.coins.generate(COIN_BYTES * (1 + s) if memo else n)
        coins = [c[k:k + COIN_BYTES] for c in ((first if memo else drawn),) for k in range(0, n, COIN_BYTES)]
        subset = chosen_positions(coins[:d], d, s)
        kept = decide(coins[d], spec.permanent_keep if memo else spec.keep)
        mask = flip_mask(coins[d + 1:])
        pattern = [bits[i] ^ (0 if kept else mask[j]) for j, i in enumerate(subset)]
        held = ()
        if memo:
            held = tuple(pattern)
            fresh = [drawn[k:k + COIN_BYTES] for k in range(0, len(drawn), COIN_BYTES)]
            kept = decide(fresh[0], spec.keep)
            mask = flip_mask(fresh[1:])
            pattern = [b ^ (0 if kept else mask[j]) for j, b in enumerate(held)]
        out = [int(i in subset) for i in range(d)] + pattern
        record = report_record(spec.collection, event_ms, out, dims, spec.token_of(self.secret, event_ms))
        return record, SubsetTrace(drawn, tuple(bits), tuple(subset), kept, tuple(pattern), first or b"", held)
