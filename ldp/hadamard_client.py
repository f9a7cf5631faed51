"""The reference client of a Hadamard-sampling collection (``channel: {kind: hadamard}``), byte for byte as
docs/client.md section 11 specifies (test vectors: ``clients/test-vectors/hadamard.json``).

The client config a device receives (its numbers final: no client computes an exponential or a root)::

    {"collection": "survey", "features": [{"name": "q0", "type": "boolean"}, ...],
     "window": {"type": "fixed", "size_seconds": 3600},
     "hadamard": {"max_order": 3, "slots": 1, "keep": 0.8807970779778823,
                  "weights": [0.0116..., 0.0087..., 0.0067...]}}

``weights[j-1]``: the probability of each coefficient of order j (every coefficient of one order has
the same); ``keep``: the probability that a slot sends its true parity, ``e^e' / (1 + e^e')`` at
``e' = epsilon / slots``. Features are boolean or categorical
(``{name, type: categorical, values}``: one bit per value, one-hot; numeric ones have no client). A collection with
extra sets (tables wider than max_order: :class:`~ldp_marginals.ldp.hadamard.HadamardSampling` ``sets``)
adds ``"sets": [[0, 1, 2], ...]`` after ``weights`` (each a list of increasing bit indices, wider than
max_order) and one weight per order up to the widest: the pool, and so the coefficients' numbering, is
then every set of 1..max_order bits followed by the extra sets' subsets of more bits (docs/client.md
section 11). Without extra sets the key is absent and nothing differs.
``e' = epsilon / slots``. Optional
top-level ``token`` and ``reports_per_day``: the device unit (:mod:`~ldp_marginals.ldp.whole_report_client`).

One report:

1. check the input as the per-bit client does (``bad_event_time``, ``bad_dimensions``,
   ``missing_feature``, ``unknown_feature``, ``bad_value``), drawing no coin on a refusal;
2. draw ``8 * slots`` bytes in one request: per slot two coins, the index coin then the parity coin;
3. encode the features to bits, in layout order: a boolean is its bit, a categorical value one-hot (one
   bit per value, the value's bit set), as the per-bit client encodes them;
4. per slot: the coefficient ``a`` is the first (in family order: the sets of order 1, then 2, ...,
   each order in lexicographic order of its bit indices; ``a`` counts from 1) whose threshold
   ``units(S_a)`` is above the index coin's value, ``S_a`` the running sum of the weights of
   coefficients 1..a in doubles, left to right (the last threshold is ``2^32``, so some coefficient
   always is); the true parity is the number of 1 bits of the set, mod 2; the sent parity is the
   true one if ``decide(parity coin, keep)``, else flipped;
5. pack the slots as the job reads them (:mod:`~ldp_marginals.ldp.hadamard_reports`): per slot the
   index in ``B = T.bit_length()`` bits, least significant first, then the parity bit; ``client`` the
   device token of the event's slice when ``token`` is true (docs/client.md sections 5 and 14), else null;
   ``reports_per_day`` is enforced as the per-bit client enforces it (``rate_exceeded`` after the checks
   of step 1, before any coin).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Mapping

from ldp_marginals.ldp.client import (
    BAD_CONFIG,
    DeviceClient,
    Refusal,
    boolean_bits,
    check_whole_report,
    checked_event,
)
from ldp_marginals.ldp.coins import COIN_BYTES, MAX_REQUEST_BYTES, coin_value, decide, units
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.whole_report_client import WholeReportSpec, permanent_coins, report_record
from ldp_marginals.ldp.windows import Window

MAX_COEFFICIENTS = 1 << 18   # the pool's size a client accepts (the server's cap, schemas/channel_kinds.py)
MAX_POOL_WORK = 1 << 20      # the extra sets' subsets a client enumerates at most (sum of 2^|set|)


@dataclass(frozen=True)
class HadamardClientSpec(WholeReportSpec):
    """What a device is told about a Hadamard-sampling collection (module docstring)."""

    KIND = "hadamard"
    PARAMS = ("max_order", "slots", "keep", "weights")
    OPTIONAL = ("sets", "permanent_keep")
    collection: str
    features: tuple          # in layout (bit) order: a boolean's name, a categorical's (name, values)
    window: Window
    max_order: int
    slots: int
    keep: float
    weights: tuple           # per order 1..top (max_order, or the widest extra set): each coefficient's probability
    permanent_keep: float | None = None   # memoized (section 13): a permanent parity's keep
    sets: tuple = ()         # the extra sets (tuples of increasing bit indices, each wider than max_order)
    # the device unit (docs/client.md section 14), keyword-only: reports carry the device token; the declared
    # rate the client enforces (None: no limit)
    token: bool = field(default=False, kw_only=True)
    reports_per_day: int | None = field(default=None, kw_only=True)

    def __post_init__(self):
        d = check_whole_report(self.collection, self.features)
        for name, value, low in (("max_order", self.max_order, 1), ("slots", self.slots, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise Refusal(BAD_CONFIG, f"hadamard.{name} must be an integer >= {low}, got {name}={value!r}")
        if self.max_order > d:
            raise Refusal(BAD_CONFIG, f"hadamard.max_order must be <= the {d} bits, got max_order={self.max_order}")
        if 2 * self.slots * COIN_BYTES > MAX_REQUEST_BYTES:
            raise Refusal(BAD_CONFIG, f"hadamard.slots draws too many coins, got slots={self.slots}")
        if not _probability(self.keep) or not self.keep > 0.5:
            raise Refusal(BAD_CONFIG, f"hadamard.keep must be a number in (0.5, 1], got keep={self.keep!r}")
        self.check_device_fields()
        self.check_permanent_keep(0.5)
        self._check_sets(d)
        top = max([self.max_order] + [len(s) for s in self.sets])
        if len(self.weights) != top or not all(_probability(w) and w > 0 for w in self.weights):
            raise Refusal(BAD_CONFIG, f"hadamard.weights must hold {top} probabilities in (0, 1], one per "
                                      f"order, got weights={list(self.weights)!r}")
        sizes = self.order_sizes
        if sum(sizes) > MAX_COEFFICIENTS:
            raise Refusal(BAD_CONFIG, f"hadamard: the pool holds {sum(sizes)} coefficients, over {MAX_COEFFICIENTS}")
        total = sum(n * w for n, w in zip(sizes, self.weights))
        if abs(total - 1.0) > 1e-9:
            raise Refusal(BAD_CONFIG, f"hadamard.weights must sum to 1 over the coefficients, got {total!r}")

    def _check_sets(self, d: int) -> None:
        """``sets``: distinct lists of increasing bit indices in ``[0, d)``, each wider than max_order, whose
        subsets number at most ``MAX_POOL_WORK`` (``sum 2^|s|``, checked before any is enumerated)."""
        k = self.max_order
        for i, s in enumerate(self.sets):
            if (not isinstance(s, (list, tuple)) or any(isinstance(b, bool) or not isinstance(b, int) for b in s)
                    or any(not 0 <= b < d for b in s) or any(a >= b for a, b in zip(s, s[1:])) or len(s) <= k):
                raise Refusal(BAD_CONFIG, f"hadamard.sets[{i}] must be a list of more than max_order={k} increasing "
                                          f"bit indices in [0, {d}), got sets[{i}]={s!r}")
        if len({tuple(s) for s in self.sets}) != len(self.sets):
            raise Refusal(BAD_CONFIG, f"hadamard.sets must be distinct, got sets={[list(s) for s in self.sets]!r}")
        if sum(1 << len(s) for s in self.sets) > MAX_POOL_WORK:
            raise Refusal(BAD_CONFIG, f"hadamard.sets hold more than {MAX_POOL_WORK} subsets (sum of 2^|set|)")

    def params_json(self) -> dict:
        out = super().params_json()
        if self.sets:   # after weights, before permanent_keep
            keep = out.pop("permanent_keep", None)
            out["sets"] = [list(s) for s in self.sets]
            if keep is not None:
                out["permanent_keep"] = keep
        return out

    @classmethod
    def of(cls, collection: str, features, window: Window, mechanism: HadamardSampling,
           permanent: HadamardSampling | None = None, *, token: bool = False,
           reports_per_day: int | None = None) -> "HadamardClientSpec":
        """The spec the server publishes for a collection's mechanism: ``mechanism`` the instantaneous stage,
        ``permanent`` (memoized collections) the permanent one (same order, slots, weights and sets); ``token`` and
        ``reports_per_day`` the device unit's (:mod:`~ldp_marginals.ldp.whole_report_client`)."""
        fam = mechanism.family
        first = fam.offset(1)
        weights = tuple(float(mechanism.probabilities[fam.offset(j) - first]) for j in range(1, fam.top_order + 1))
        return cls(collection, cls.features_of(features), window, mechanism.max_order, mechanism.slots, mechanism.keep,
                   weights,
                   None if permanent is None else permanent.keep, tuple(mechanism.sets), token=token,
                   reports_per_day=reports_per_day)

    @classmethod
    def from_json(cls, spec) -> "HadamardClientSpec":
        collection, names, window, h = cls.params_of(spec)
        if not isinstance(h["weights"], list):
            raise Refusal(BAD_CONFIG, f"hadamard.weights must be a list, got weights={h['weights']!r}")
        sets = h.get("sets", [])
        if "sets" in h and (not isinstance(sets, list) or not sets):
            raise Refusal(BAD_CONFIG, f"hadamard.sets must be a non-empty list, got sets={sets!r}")
        return cls(collection, names, window, h["max_order"], h["slots"], h["keep"], tuple(h["weights"]),
                   h.get("permanent_keep"), tuple(tuple(s) if isinstance(s, list) else s for s in sets),
                   **cls.device_of(spec))

    @property
    def pool(self) -> list:
        """Each coefficient's set (family order, index a at position a - 1): every set of 1..max_order bits,
        then, order by order, the distinct subsets of the extra sets of more bits, lexicographically."""
        d, k = self.n_bits, self.max_order
        out = [s for j in range(1, k + 1) for s in combinations(range(d), j)]
        top = max([k] + [len(s) for s in self.sets])
        for j in range(k + 1, top + 1):
            out += sorted({sub for s in self.sets if len(s) >= j for sub in combinations(s, j)})
        return out

    @property
    def order_sizes(self) -> list:
        """The pool's coefficients of each order 1..top (counted, not enumerated, without extra sets)."""
        if not self.sets:
            return [math.comb(self.n_bits, j) for j in range(1, len(self.weights) + 1)]
        sizes = [0] * len(self.weights)
        for s in self.pool:
            if len(s) <= len(sizes):
                sizes[len(s) - 1] += 1
        return sizes

    @property
    def masks(self) -> list:
        """Bit mask of each coefficient's set, family order (index a at position a - 1)."""
        return [sum(1 << i for i in s) for s in self.pool]

    @property
    def thresholds(self) -> list:
        """``units(S_a)`` per coefficient (module docstring, step 4); the last is ``2^32``."""
        out, total = [], 0.0
        for s in self.pool:
            total += self.weights[len(s) - 1]
            out.append(units(min(total, 1.0)))
        out[-1] = 1 << 32
        return out

    @property
    def index_bits(self) -> int:
        return len(self.masks).bit_length()


def _probability(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and 0.0 <= float(v) <= 1.0


@dataclass(frozen=True)
class HadamardTrace:
    coins: bytes        # the bytes drawn
    encoded: tuple      # the true bits
    indices: tuple      # per slot, the coefficient's family index (1..T)
    parities: tuple     # per slot, the sent parity
    permanent: bytes = b""          # memoized: the permanent coins drawn (section 13)
    permanent_parities: tuple = ()  # memoized: per slot, the permanent parity


class HadamardDeviceClient(DeviceClient):
    """One device's client for one Hadamard-sampling collection: ``report(values, event_ms)`` (the secret,
    the rate state, ``report`` and the declared rate as the per-bit client's)."""

    def __init__(self, spec: HadamardClientSpec, secret: bytes, coins, rate_state=None):
        super().__init__(spec, secret, coins, rate_state)
        self._masks, self._thresholds = spec.masks, spec.thresholds

    def report_with_trace(self, values: Mapping, event_ms: int, dimensions: Mapping | None = None):
        spec = self.spec
        dims = checked_event(event_ms, dimensions)
        bits = boolean_bits(values, list(spec.features))
        self._count(event_ms)
        memo = spec.permanent_keep is not None
        n = 2 * COIN_BYTES * spec.slots
        # memoized: the slots' index and parity coins are the value's permanent ones, drawn at permanent_keep;
        # each report then draws one fresh coin per slot and keeps the permanent parity with probability keep
        slot_coins = permanent_coins(self.secret, spec.collection, spec.KIND, bits, n) if memo else None
        drawn = self.coins.generate(COIN_BYTES * spec.slots if memo else n)
        if not memo:
            slot_coins = drawn
        x = sum(b << i for i, b in enumerate(bits))
        b = spec.index_bits
        out, indices, parities, held = [], [], [], []
        for j in range(spec.slots):
            at = 2 * COIN_BYTES * j
            u = coin_value(slot_coins[at:at + COIN_BYTES])
            a = next(i for i, t in enumerate(self._thresholds) if u < t) + 1
            parity = bin(x & self._masks[a - 1]).count("1") & 1
            first = spec.permanent_keep if memo else spec.keep
            sent = parity if decide(slot_coins[at + COIN_BYTES:at + 2 * COIN_BYTES], first) else 1 - parity
            if memo:
                held.append(sent)
                fresh = drawn[COIN_BYTES * j:COIN_BYTES * (j + 1)]
                sent = sent if decide(fresh, spec.keep) else 1 - sent
            indices.append(a)
            parities.append(sent)
            out += [(a >> i) & 1 for i in range(b)] + [sent]
        record = report_record(spec.collection, event_ms, out, dims, spec.token_of(self.secret, event_ms))
        return record, HadamardTrace(drawn, tuple(bits), tuple(indices), tuple(parities),
                                     slot_coins if memo else b"", tuple(held))
