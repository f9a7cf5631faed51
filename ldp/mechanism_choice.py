"""Which mechanism a whole-report promise should use: a report of ``n_bits`` bits epsilon-LDP as a whole,
tables up to ``order`` bits.

Three candidates, each with the closed-form worst-case variance of a top-order table (N times the
trace of its frequency covariance, the summed cell variance, as N grows; every figure is
conditional on the window's true reports, like the estimators' own variances):

- ``per-bit``: randomized response on every bit at ``epsilon / n_bits``
  (:func:`~ldp_marginals.ldp.planning.table_variance_per_report`);
- ``hadamard``: Hadamard sampling at its best number of slots
  (:meth:`~ldp_marginals.ldp.hadamard.HadamardSampling.table_variance_per_report`);
- ``subset-rr``: subset randomized response at its best width
  (:func:`~ldp_marginals.ldp.subset_rr.table_variance_per_report`).

Each worst case is a uniform table, the same truth for all three, so the smallest figure is the better
mechanism whatever the data; on skewed data the per-cell variances of subset RR shrink with the cells
while Hadamard sampling's do not, so the choice never favours subset RR unduly. Per-bit randomization
stays the product's choice under the sufficient-DP promise, which this does not cover.
"""
from __future__ import annotations

from dataclasses import dataclass

from ldp_marginals.ldp._checks import check_int, check_positive
from ldp_marginals.ldp.channels import Channel
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.planning import table_variance_per_report as per_bit_variance
from ldp_marginals.ldp.subset_rr import SubsetRR

MECHANISMS = ("per-bit", "hadamard", "subset-rr")


@dataclass(frozen=True)
class Candidate:
    name: str                  # one of MECHANISMS
    mechanism: object          # Channel (per bit), HadamardSampling or SubsetRR
    variance_per_report: float

    @property
    def label(self) -> str:
        if self.name == "hadamard":
            return f"Hadamard sampling (m={self.mechanism.slots})"
        if self.name == "subset-rr":
            return f"subset RR (s={self.mechanism.width})"
        return "per-bit RR"


def candidates(n_bits: int, order: int, epsilon: float, sets=()) -> list:
    """The three mechanisms at their best parameters, with their worst-case top-order table variance
    per report, best first; ``sets``: the collection's extra sets (tables wider than ``order``), which
    the whole-report kinds count too (a larger Hadamard pool, a subset width of at least the widest)."""
    d = check_int("n_bits", n_bits, minimum=1)
    k = check_int("order", order, minimum=1)
    if k > d:
        raise ValueError(f"order must be <= n_bits={d}, got order={order}")
    eps = check_positive("epsilon", epsilon)
    bit = Channel.symmetric_from_epsilon(eps / d)
    had = HadamardSampling(d, k, eps, sets=sets)
    srr = SubsetRR(d, k, eps, sets=sets)
    out = [Candidate("per-bit", bit, per_bit_variance([bit.p] * k, [bit.q] * k)),
           Candidate("hadamard", had, had.table_variance_per_report()),
           Candidate("subset-rr", srr, srr.table_variance_per_report())]
    return sorted(out, key=lambda c: c.variance_per_report)


def best_mechanism(n_bits: int, order: int, epsilon: float) -> Candidate:
    """The candidate with the smallest worst-case variance of the top-order tables."""
    return candidates(n_bits, order, epsilon)[0]


# the candidates the job offers as channel kinds, and the config that asks for each
JOB_KINDS = {"per-bit": "per_bit", "hadamard": "hadamard", "subset-rr": "subset"}


def kind_choice(n_bits: int, order: int, epsilon: float, sets=()) -> dict:
    """For a ``local`` promise at whole-report ``epsilon`` over ``n_bits`` boolean bits and tables up to
    ``order``: the job's channel kinds (:data:`JOB_KINDS`) with their worst-case top-order table variance
    per report, best first, and the best one. ``{"candidates": [{kind, label, variance_per_report, channel}],
    "best": kind, "ratio": the runner-up's variance over the best's}``; ``channel`` is the config's ``channel``
    for it (hadamard's slots and subset's width are the kinds' defaults, the ones figured here)."""
    found = [c for c in candidates(n_bits, order, epsilon, sets) if c.name in JOB_KINDS]
    rows = []
    for c in found:
        if c.name == "hadamard":
            channel = {"kind": "hadamard", "epsilon": float(epsilon)}
        elif c.name == "subset-rr":
            channel = {"kind": "subset", "epsilon": float(epsilon)}
        else:
            channel = {"mechanism": "symmetric", "epsilon": float(epsilon) / n_bits}
        rows.append({"kind": JOB_KINDS[c.name], "label": c.label, "variance_per_report": c.variance_per_report,
                     "channel": channel})
    return {"candidates": rows, "best": rows[0]["kind"],
            "ratio": rows[1]["variance_per_report"] / rows[0]["variance_per_report"]}
