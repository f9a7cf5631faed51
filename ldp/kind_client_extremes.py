"""Extremes over a client's reports (``over: client``) for the whole-report channel kinds (``hadamard``,
``subset``): each report's unbiased term, and the rule that keeps the client rows from resting on few
reports (Beam-free; docs/design.md, "Extremes over clients of the whole-report kinds").

Per-report term. An extreme over bits B is, per client, ``OR = 1 - prod_r 1[x_r,B = 0]`` or ``AND = prod_r
1[x_r,B = 1]`` over its reports r. A report of these kinds does not carry its bits, but it gives an
unbiased estimate ``g_r`` of any indicator ``mu_r`` of its bits on a set the kind counts; the reports of a
client are randomized independently, so ``prod_r g_r`` is unbiased for ``prod_r mu_r`` (Hehir's argument,
with one factor per report instead of one per bit), and the client's state is the running product of
the per-bit path (:mod:`~ldp_marginals.ldp.aggregate`: sign, log-magnitude and zero count, O(1)).

- Hadamard sampling (:mod:`~ldp_marginals.ldp.hadamard`): ``1[x_B = 0] = 2^-|B| sum_{a subset B} phi_a(x)``
  and ``1[x_B = 1] = 2^-|B| sum_a (-1)^|a| phi_a(x)``. Slot j drew ``a_j`` with probability ``w_{a_j}`` and
  sent ``s_j = +-1`` with ``E[c s_j] = phi_{a_j}``, so with ``t_j = 1[a_j subset B] h_{a_j} c s_j / w_{a_j}``
  (``h_a`` the indicator's coefficient) ``g = 2^-|B| + mean_j t_j`` is unbiased. ``t_j^2`` does not depend
  on x (``s^2 = 1``): ``E[t^2] = K = c^2 4^-|B| sum_{a subset B} 1/w_a``, so
  ``E[g^2] = mu (1 - (1 - 2b)/m) + (K - b^2)/m`` (``b = 2^-|B|``, m slots), linear in ``mu``: ``v = (K -
  b^2)/m + g (1 - (1 - 2b)/m)`` is unbiased for it.
- Subset RR (:mod:`~ldp_marginals.ldp.subset_rr`): the report's subset S holds B with probability
  ``f = holding_share(d, s, |B|)``; then the pattern sent on B is k-ary RR with ``(p', q')``, ``delta = p' -
  q'``, so ``g = 1[B subset S] (1[sent_B = z] - q') / (delta f)`` (z all zeros or all ones) is unbiased, and
  ``E[g^2] = (q'(1 - q') + delta (1 - 2q') mu) / (delta^2 f)``: ``v = (q'(1 - q') + delta (1 - 2q') g) /
  (delta^2 f)``.

Then, as per bit, ``Var(prod g) = prod E[g^2] - prod mu`` and ``prod v - prod g`` estimates it unbiasedly.
Every subset of B (Hadamard) or B itself (subset) must be a set the kind counts (:func:`counted`); wider
extremes are refused by schemas/composition.py (``kind-analyses-over-order``).

Reads. A report's term depends on its content only through its *relevant* draws: the slots that drew a
coefficient within some client extreme's B (Hadamard), whether its subset holds each B (subset). The
draws are independent of content, and the rows that count them publish them (the thin-row rule's
view, :mod:`~ldp_marginals.ldp.thin_rows`), so the rule for the client rows treats them as metadata:
per report, its *read vector* (per relevant key, the slots or 0/1 that read it) and its *profile hash*
(a hash of that vector; 0 for a report nothing reads). The aggregator keeps, per client, beside each
extreme's state, one row holding the sum of its reports' profile hashes (column ``LOG_F``) and one row per
relevant key holding its reads (column ``ZEROS_F``): sums over reports, so they merge as the states do.
:func:`client_reads_fault` is the rule (module of the publication step: ``release.py``).
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

from ldp_marginals.ldp.devices import _mix

PROFILE_BITS = 40   # a report's profile hash: an integer below 2^40, so a client's sum of up to 2^13 is exact


def _subsets(bits: tuple) -> list:
    return [s for r in range(1, len(bits) + 1) for s in combinations(bits, r)]


def counted(kind: str, mechanism, bits) -> bool:
    """Whether the kind counts what an extreme over ``bits`` needs: every non-empty subset of them a
    coefficient (Hadamard) or the set itself a counted set no wider than the subsets (subset RR)."""
    bits = tuple(sorted(set(int(b) for b in bits)))
    family = mechanism.family
    if kind == "hadamard":
        return all(s in family for s in _subsets(bits))
    return bits in family and len(bits) <= mechanism.width


class KindClientTerms:
    """The per-report terms of a kind's client extremes ``extremes`` (``(op, bits)`` each) under
    ``mechanism`` (:class:`~ldp_marginals.ldp.hadamard.HadamardSampling` or
    :class:`~ldp_marginals.ldp.subset_rr.SubsetRR`), module docstring. ``keys``: the relevant keys, family
    indices of coefficients (Hadamard) or the extremes' distinct bit sets (subset)."""

    def __init__(self, kind: str, mechanism, extremes):
        if kind not in ("hadamard", "subset"):
            raise ValueError(f"kind must be 'hadamard' or 'subset', got kind={kind!r}")
        self.kind, self.mechanism = kind, mechanism
        self.extremes = tuple((op, tuple(sorted(set(int(b) for b in bits)))) for op, bits in extremes)
        for op, bits in self.extremes:
            if op not in ("or", "and"):
                raise ValueError(f"op must be 'or' or 'and', got op={op!r}")
            if not bits or not counted(kind, mechanism, bits):
                raise ValueError(f"extreme bits must be a set the kind counts (channel kind {kind!r}, "
                                 f"max_order={mechanism.max_order}), got bits={list(bits)}")
        family = mechanism.family
        if kind == "hadamard":
            self.keys = tuple(sorted({family.index(s) for _, bits in self.extremes for s in _subsets(bits)}))
        else:
            self.keys = tuple(sorted({bits for _, bits in self.extremes}))
        # a random 64-bit weight per key: a report's read vector -> one number, then mixed (module docstring)
        self._weights = _mix(np.arange(1, len(self.keys) + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))

    # -- per report ------------------------------------------------------------------------------------
    def factors(self, draws, values) -> tuple:
        """``(g, v)``, each float64 ``(n, n_extremes)``: per report and extreme the unbiased term and the
        unbiased estimate of its second moment. Hadamard: ``draws`` the ``(n, m)`` family indices,
        ``values`` the parities; subset: ``draws`` the ``(n,)`` subset masks, ``values`` the patterns (each
        bit at its own position)."""
        n = np.shape(draws)[0]
        g, v = np.empty((n, len(self.extremes))), np.empty((n, len(self.extremes)))
        for e, (op, bits) in enumerate(self.extremes):
            g[:, e], v[:, e] = (self._hadamard if self.kind == "hadamard" else self._subset)(op, bits, draws, values)
        return g, v

    def _hadamard(self, op, bits, indices, parities):
        mech = self.mechanism
        family, w = mech.family, mech.probabilities
        m, c, b = mech.slots, mech.scale, 2.0 ** -len(bits)
        coef = np.zeros(mech.n_coefficients + 1)   # h_a c / w_a by family index, 0 outside B
        k = 0.0
        for s in _subsets(bits):
            i = family.index(s)
            h = b * ((-1.0) ** len(s) if op == "and" else 1.0)
            coef[i] = h * c / w[i - 1]
            k += (h * c) ** 2 / w[i - 1]
        idx, par = np.atleast_2d(indices), np.atleast_2d(parities)
        g = b + (coef[idx] * (1.0 - 2.0 * par)).sum(axis=1) / m
        return g, (k - b * b) / m + g * (1.0 - (1.0 - 2.0 * b) / m)

    def _subset(self, op, bits, subsets, patterns):
        from ldp_marginals.ldp.subset_rr import holding_share
        mech = self.mechanism
        f = holding_share(mech.n_bits, mech.width, len(bits))
        p1, q1 = mech.projected(len(bits))
        delta = p1 - q1
        mask = sum(1 << x for x in bits)
        sub, pat = np.asarray(subsets, dtype=np.int64), np.asarray(patterns, dtype=np.int64)
        holds = (sub & mask) == mask
        sent = (pat & mask) == (mask if op == "and" else 0)
        g = np.where(holds, (sent - q1) / (delta * f), 0.0)
        return g, (q1 * (1 - q1) + delta * (1 - 2 * q1) * g) / (delta * delta * f)

    def reads(self, draws) -> np.ndarray:
        """float64 ``(n, n_keys)``: per report the reads of each relevant key (module docstring)."""
        if self.kind == "hadamard":
            idx = np.atleast_2d(draws)
            return np.stack([(idx == k).sum(axis=1) for k in self.keys], axis=1).astype(np.float64) \
                if self.keys else np.zeros((idx.shape[0], 0))
        sub = np.asarray(draws, dtype=np.int64)
        masks = [sum(1 << x for x in bits) for bits in self.keys]
        return np.stack([(sub & mk) == mk for mk in masks], axis=1).astype(np.float64)

    def profiles(self, reads: np.ndarray) -> np.ndarray:
        """float64 ``(n,)``: each report's profile hash, an integer in ``[0, 2^40)``, 0 when nothing reads
        it (module docstring)."""
        vec = (np.rint(reads).astype(np.uint64) * self._weights).sum(axis=1, dtype=np.uint64)
        h = (_mix(vec) >> np.uint64(64 - PROFILE_BITS)).astype(np.float64)
        return np.where(reads.any(axis=1), np.maximum(h, 1.0), 0.0)


def atom_profiles(profiles: np.ndarray, atom: np.ndarray) -> np.ndarray:
    """The reports' profile hashes with their atom folded in (``(2 atom + 1) h`` mod 2^40, a bijection per
    atom), so a client's sum tells which atom each read came in; float64, exact integers."""
    h = np.rint(profiles).astype(np.uint64) * (np.uint64(2) * atom.astype(np.uint64) + np.uint64(1))
    return (h & np.uint64((1 << PROFILE_BITS) - 1)).astype(np.float64)


def client_reads_fault(groups: np.ndarray, reads_any: np.ndarray, unread, min_reports: int,
                       per_device: int = 1) -> str | None:
    """Why a kind's client rows would rest on too few reports, or None (docs/design.md, "Extremes over
    clients of the whole-report kinds"). ``groups``: per client in the rows, a row of numbers that clients
    the rows treat alike share (its composition and the sum of its reports' profile hashes, atoms folded
    in: :func:`atom_profiles`); ``reads_any``: per client, whether any of its reports is read (a client
    nothing reads adds a constant); ``unread``: per atom, per relevant key, the reads the linear rows count
    and the client rows do not (reports without a client, reports left out of the sample).

    1. The clients whose reads are alike (one row of ``groups``, read) are exchangeable for every row:
       each such group must hold at least ``min_reports`` clients.
    2. Per atom and key, the unread reads must be 0 or at least ``min_reports`` (times ``per_device``, the
       most reports of one device in a row, under the device unit: the thin-row rule's bound)."""
    if min_reports <= 1:
        return None
    rows = np.asarray(groups, dtype=np.float64).reshape(len(reads_any), -1)[np.asarray(reads_any, dtype=bool)]
    if rows.shape[0]:
        _, sizes = np.unique(rows, axis=0, return_counts=True)
        if (sizes < min_reports).any():
            return (f"client extremes withheld: {int((sizes < min_reports).sum())} group(s) of clients whose "
                    f"reports' draws read the extremes alike hold fewer than min_reports={min_reports} clients (a "
                    "channel kind's report is read only through its relevant draws, which its rows publish)")
    floor = min_reports * per_device
    if any(0 < x < floor for row in unread for x in np.rint(np.asarray(row)).ravel()):
        return (f"client extremes withheld: a released increment holds between 1 and {floor - 1} reads of the "
                "extremes' draws that the client rows leave out (reports without a client or past the sample): "
                "the per-report rows minus the client rows would single them out")
    return None
