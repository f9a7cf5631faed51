"""The publication rule: which increments of reports may be published, and when a window may publish
its statistics over clients. docs/design.md (section 7) states the rule and proves it.

- An *atom* is an increment of one slice and key released together: a pending increment is released,
  for good, once it holds at least ``min_reports`` reports, and keeps its own number among its slice's
  atoms (the engine's entries, :class:`~ldp_marginals.transforms.publication.engine.Entry`). Every
  published row except the extremes over clients is a function of sums of whole atoms.
- The extremes over clients of a window and key are published once, in the window's final pane
  (fixed and global windows only: the config refuses them on overlapping windows), from the window's
  released content, and only when every group of reports or clients that the published rows treat
  alike is empty or holds at least ``min_reports`` members (:func:`client_rule`).
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.aggregate import LOG_F, REPORTS, ZEROS_F, client_groups, sampled_clients, unnamed_reports
from ldp_marginals.ldp.kind_client_extremes import PROFILE_BITS, atom_profiles, client_reads_fault


def releasable(config, acc) -> bool:
    """Whether a pending increment may be released: at least ``min_reports`` reports (and at least one);
    under ``privacy.unit: device``, at least ``min_reports`` distinct devices (the increment's own,
    exact: one slice and key)."""
    return (acc.n_devices if config.counts_devices else acc.n) >= max(1, config.min_reports)


def client_rule(config, atoms) -> str | None:
    """None when a window's extremes over clients may be published from ``atoms``, else why they are
    withheld. ``atoms``: the disjoint parts of one key's released content that rows may have been
    published from apart (streaming: the atoms of each slice and value the capped key holds; batch:
    the content, one part).

    The groups the published rows treat alike: per atom, the reports that name no client; and the
    clients of each *composition*, the numbers of reports a client sent in each atom. Every row is
    unchanged when reports of one group trade their contents (a linear row sums each atom; a client
    row sums one function per client of the multiset of its reports), so no combination of rows can
    depend on part of a group (docs/design.md, section 7). Each group must be empty or hold at
    least ``min_reports`` reports (no client) or clients (a composition).

    The reason names no group (a count of reports per client is about clients, even if not about
    what their reports say)."""
    m = config.min_reports
    if m <= 1:
        return None
    if getattr(config, "client_sample", None) is not None:
        return sample_rule(config, atoms)
    if any(np.isnan(a.client_reports).any() for a in atoms):
        return ("client extremes withheld: the window's state was written by an earlier version that did not "
                "keep each client's reports per released increment")
    if any(0 < unnamed_reports(a) < m for a in atoms):
        return (f"client extremes withheld: a released increment holds between 1 and {m - 1} reports without a "
                "client (the client rows minus the per-report rows would single them out)")
    if (client_groups(atoms)[0] < m).any():
        return (f"client extremes withheld: a group of clients that sent the same numbers of reports (in each "
                f"released increment) holds fewer than min_reports={m} clients (the rows treat them alike and "
                "would single them out)")
    return kind_client_rule(config, atoms)


def kind_client_rule(config, atoms, sample=None) -> str | None:
    """A whole-report kind's rule for its client rows beside the groups or sample rule (None for per-bit
    channels): the clients whose relevant draws are alike, and the reads the client rows leave out
    (:func:`~ldp_marginals.ldp.kind_client_extremes.client_reads_fault`). ``sample``: the
    :func:`~ldp_marginals.ldp.aggregate.sampled_clients` of ``atoms`` under a client sample."""
    if getattr(config, "sampling", None) is None:
        return None
    agg = config.aggregator
    row, reads = agg.profile_row, agg.read_rows
    if sample is not None:   # every kept client holds c reports: its folded profile groups it
        groups = sample.states[:, row, LOG_F]
        reads_any = sample.states[:, reads, ZEROS_F].sum(axis=1) > 0
        unread = [agg.read_totals(a) - sample.by_atom[i, reads, ZEROS_F] for i, a in enumerate(atoms)]
    else:                    # every named client: its reports per atom and its folded profile
        keys = np.unique(np.concatenate([a.clients for a in atoms]))
        table = np.zeros((keys.size, len(atoms) + 1))
        reads_any = np.zeros(keys.size, dtype=bool)
        unread = []
        for i, a in enumerate(atoms):
            at = np.searchsorted(keys, a.clients)
            table[at, i] = a.client_states[:, 0, REPORTS]
            wrap = float(1 << PROFILE_BITS)
            folded = atom_profiles(np.mod(a.client_states[:, row, LOG_F], wrap), np.full(a.clients.size, i))
            table[at, -1] = np.mod(table[at, -1] + folded, wrap)
            reads_any[at] |= a.client_states[:, reads, ZEROS_F].sum(axis=1) > 0
            unread.append(agg.read_totals(a) - a.client_states[:, reads, ZEROS_F].sum(axis=0))
        groups = table
    per_device = config.repeats_per_window if config.device is not None else 1
    return client_reads_fault(groups, reads_any, unread, config.min_reports, per_device)


def sample_rule(config, atoms) -> str | None:
    """:func:`client_rule` under a client sample of ``c = config.client_sample`` reports: the client rows
    take each client's ``c`` reports of smallest rank (a keyed hash of client and event time, never of
    bits), and only the clients kept by :func:`~ldp_marginals.ldp.aggregate.sampled_clients`: at least
    ``c`` reports, and a composition (kept reports per atom) shared by at least ``min_reports`` kept
    clients. So every kept client holds exactly ``c`` reports and the rows treat the kept clients of a
    composition alike; the reports the client rows leave out (of clients left out, a kept client's
    reports past its ``c``, reports without a client) enter the linear rows only. The groups: the kept
    clients of each composition (at least ``min_reports`` by construction, and there must be one), and
    per atom the reports left out, whose *parties* (a client, or a report without one) must number 0 or
    at least ``min_reports`` (docs/design.md, section 7, "a sample of c reports")."""
    m, c = config.min_reports, config.client_sample
    if any(np.isnan(a.client_reports).any() for a in atoms) or any(
            a.named_reports > 0 and a.sample_owner.size == 0 for a in atoms):
        return ("client extremes withheld: the window's state was written by an earlier version that did not "
                f"keep each client's sample of reports_per_client={c} reports")
    if getattr(config, "sampling", None) is None:
        sample = sampled_clients(atoms, c, m)
    else:   # a whole-report kind: each report's profile folded with its atom (kind_client_rule)
        sample = sampled_clients(atoms, c, m, fold_row=config.aggregator.profile_row)
    if sample.keys.size < m:
        return (f"client extremes withheld: fewer than min_reports={m} clients sent at least reports_per_client={c} "
                "reports in the window alike (the rows would single them out)")
    if any(0 < n < m for n in sample.left_out):
        return (f"client extremes withheld: a released increment holds reports of between 1 and {m - 1} clients (or "
                f"reports without a client) that the client rows leave out (past a client's {c} sampled reports, or "
                "of a client left out): the client rows minus the per-report rows would single them out")
    if shares_permanent(config):
        reason = memoized_groups_fault(config, atoms, sample)
        if reason:
            return reason
    return kind_client_rule(config, atoms, sample)


def shares_permanent(config) -> bool:
    """Whether a client extreme reads bits that memoize (every bit of a memoized kind; a rappor bit with
    ``memoize: true``): then the reports of a device repeat its permanent response."""
    if getattr(config, "kind_memo", None) is not None:
        return True
    perm = getattr(config, "permanent", None) or ()
    return any(b < len(perm) and perm[b] is not None for e in config.client_extremes for b in e.bits)


def memoized_groups_fault(config, atoms, sample) -> str | None:
    """Under a client sample with memoized bits (:func:`shares_permanent`): the devices that every published row
    treats alike must be groups of 0 or at least ``min_reports``. A device repeats its permanent response, so
    the linear rows count it once per report it sent in each atom and the client rows once per kept report:
    with the marginal ``sum_d M_d x_d`` and the client row ``sum_d x_d``, ``marginal - k * client`` is
    supported on the devices that did not send ``k`` reports (docs/design.md, "Extremes over clients and
    memoized channels", tests/transforms/test_memoized_client_attacks.py). The group of a device: its reports
    per atom, whether the sample keeps it, and (a kind) its reports' profile hashes per atom and its kept
    reports' (what its reads are)."""
    m = config.min_reports
    keys = np.unique(np.concatenate([a.clients for a in atoms]))
    kind = getattr(config, "sampling", None) is not None
    table = np.zeros((keys.size, (2 if kind else 1) * len(atoms) + (2 if kind else 1)))
    wrap = float(1 << PROFILE_BITS)
    for i, a in enumerate(atoms):
        at = np.searchsorted(keys, a.clients)
        table[at, i] = np.rint(a.client_reports)
        if kind:
            row = config.aggregator.profile_row
            table[at, len(atoms) + i] = np.mod(a.client_states[:, row, LOG_F], wrap)
    kept = np.searchsorted(keys, sample.keys)
    table[kept, -1] = 1.0
    if kind:
        table[kept, -2] = sample.states[:, config.aggregator.profile_row, LOG_F]
    _, sizes = np.unique(table, axis=0, return_counts=True)
    if (sizes < m).any():
        return (f"client extremes withheld: {int((sizes < m).sum())} group(s) of devices that sent the same numbers "
                f"of memoized reports (in each released increment, kept alike by the sample) hold fewer than "
                f"min_reports={m} devices: a device repeats its permanent response, so the per-report rows minus a "
                "multiple of the client rows would single them out")
    return None
