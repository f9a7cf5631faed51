"""ldp: the pure numpy/scipy math core of ldp-marginals. It never imports Apache Beam.

Modules, each small and named for what it holds:

- :mod:`ldp.channels`     per-bit randomized-response channels ``(p, q)`` and channel sets
- :mod:`ldp.encoding`     feature layouts, bit labels, packing to and from bytes
- :mod:`ldp.randomizer`   the client randomizer (CSPRNG by default, seeded for simulation)
- :mod:`ldp.client`       the reference device client of docs/client.md (config, refusals, report records)
- :mod:`ldp.coins`        coins and decisions, HMAC_DRBG for tests, the OS generator for devices
- :mod:`ldp.device`       the device secret, its window-scoped token and its permanent coins
- :mod:`ldp.memoized`     memoized (two-stage) channels, the effective channel, repeated reports' variance
- :mod:`ldp.longitudinal` epsilon over time: one report, n reports, any number, per day and month
- :mod:`ldp.attacks`      averaging, change-detection and linkage attacks, exact or seeded
- :mod:`ldp.sets`         the canonical order of counted bit sets
- :mod:`ldp.cooccurrence` co-occurrence counts and their mergeable accumulator
- :mod:`ldp.tmdh`         TMDH means, variances, covariances and intervals (Carette 2022)
- :mod:`ldp.tables`       k-way marginal tables (Vinterbo 2018), categorical tables, phi
- :mod:`ldp.extremes`     online OR / AND estimators and union sizes (Hehir)
- :mod:`ldp.privacy`      local DP and sufficient DP calibration (Zhilyaev & Zeber)
- :mod:`ldp.efficiency`   Vinterbo's efficiency loss
"""
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator, count_bits, count_packed
from ldp_marginals.ldp.encoding import Feature, Layout, pack_bits, unpack_bits
from ldp_marginals.ldp.extremes import ExtremeAccumulator, union_cardinality
from ldp_marginals.ldp.randomizer import ClientRandomizer, randomize_bits
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.tables import (
    group_table,
    marginal_table,
    phi_coefficient,
    project_to_simplex,
)
from ldp_marginals.ldp.tmdh import TMDHEstimate, estimate_tmdh, expected_counts

__all__ = [
    "Channel", "ChannelSet", "ClientRandomizer", "CooccurrenceAccumulator", "ExtremeAccumulator", "Feature",
    "Layout", "SetFamily", "TMDHEstimate", "group_table", "count_bits", "count_packed", "estimate_tmdh",
    "expected_counts", "marginal_table", "pack_bits", "phi_coefficient", "project_to_simplex", "randomize_bits",
    "unpack_bits", "union_cardinality",
]
