"""The publication rule: which increments of reports may be published, and when a window may publish
its statistics over clients. docs/design.md (section 7) states the rule and proves it.

- An *atom* is an increment of one slice and key released together. An increment is released, for
  good, once it holds at least ``min_reports`` reports. Every published row except the extremes over
  clients is a function of a sum of released atoms.
- The extremes over clients of a window and key are published once, in the window's final pane
  (fixed and global windows only: the config refuses them on overlapping windows), from the window's
  released content U, and only when U has at least ``min_reports`` clients that sent two or more
  reports, or has no such client and no report without a client (the per-client sum is then a sum
  over reports, which the other rows already determine).
"""
from __future__ import annotations


def releasable(config, acc) -> bool:
    """Whether a pending increment may be released: at least ``min_reports`` reports (and at least one)."""
    return acc.n >= max(1, config.min_reports)


def client_rule(config, acc) -> str | None:
    """None when a window's extremes over clients may be published from ``acc`` (its released
    content, in its final pane), else the reason they are withheld.

    Why: a client row is ``sum_c g(c)`` over the window's clients. A client with one report adds the
    same per-report term that the linear rows (marginals, extremes over reports) sum, so the client
    row minus a combination of linear rows leaves the terms of the clients with two or more reports
    and of the reports without a client; at least ``min_reports`` clients with several reports keep
    any such combination a function of at least that many clients."""
    m = config.min_reports
    counts = acc.client_reports
    if counts.size and not (counts == counts).all():
        return ("client extremes withheld: the window's state was written by an earlier version that did not "
                "count each client's reports")
    several = int((counts >= 2).sum())
    unnamed = acc.n - int(counts.sum())
    if several >= m or (several == 0 and unnamed == 0):
        return None
    return (f"client extremes withheld: fewer than min_reports={m} clients sent two or more reports in the "
            "window (a per-client sum minus the per-report rows would single them out)")
