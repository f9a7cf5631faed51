"""A collection's promise over time against what the job enforces (docs/design.md, section 3, "A
device's day and month, enforced"): the message that refuses ``privacy.epsilon_per_day`` /
``epsilon_per_month`` when the enforced figures exceed it, with the figure, the slices and bounds it
comes from, the declared rate's figure beside it, and a window or bound that keeps it."""
from __future__ import annotations

import math

from ldp_marginals.ldp.longitudinal import enforced_epsilon, shortest_window_keeping


def promise_fault(cfg) -> str | None:
    """Why the enforced figures break ``privacy.epsilon_per_day`` / ``epsilon_per_month``, naming the
    figure, where it comes from and a window or bound that would keep it; None when they keep it."""
    p = cfg.privacy
    promised = {"day": p.epsilon_per_day, "month": p.epsilon_per_month} if p is not None else {}
    figures = cfg.enforced_epsilons()
    if figures is None or all(v is None for v in promised.values()):
        return None
    got = {"day": figures.per_day, "month": figures.per_month}
    broken = [span for span in ("month", "day") if promised[span] is not None
              and got[span] > promised[span] + 1e-12]
    if not broken:
        return None
    span = broken[0]
    n = {"day": figures.reports_per_day, "month": figures.reports_per_month}[span]
    slices = {"day": figures.slices_per_day, "month": figures.slices_per_month}[span]
    dev = cfg.device
    bound = f"max_reports_per_device {dev.max_reports_per_device}" + (
        f" x max_keys_per_device {dev.max_keys_per_device}" if cfg.dimensions else "")
    where = ("a global window (one slice for all time)" if cfg.window.is_global
             else f"{slices:,} slice{'s' if slices != 1 else ''} of {cfg.window.period_ms / 1000:g} s a {span}")
    text = (f"privacy promises epsilon_per_{span}={promised[span]:g}, but the job publishes up to {n:,} reports "
            f"of one device a {span} ({where} x {bound}: device tokens are scoped to a slice, so nothing "
            f"links a device across slices), epsilon_per_{span}={got[span]:.4g} with these channels "
            f"(epsilon_1={figures.one:.4g}, epsilon_infinity="
            f"{'infinite' if math.isinf(figures.infinity) else format(figures.infinity, '.4g')})")
    declared = cfg.epsilons()
    if declared is not None:
        text += (f"; the declared reports_per_day={declared.reports_per_day:g} would give epsilon_per_{span}="
                 f"{getattr(declared, 'per_' + span):.4g}, but the job does not enforce it")
    return text + "; " + _advice(cfg, promised)


def _advice(cfg, promised: dict) -> str:
    """What keeps the promise: a longer window at the current bounds, else one report per device and
    slice with a window of at least N s, else more noise."""
    cc = cfg.spend

    def spelled(window, m, where=""):
        figures = enforced_epsilon(cfg.layout, cc, window, m)
        kept = ", ".join(f"epsilon_per_{s}={getattr(figures, 'per_' + s):.4g}" for s in ("day", "month")
                         if promised[s] is not None)
        if window.is_global:
            return f"a global window (one slice for all time) gives {kept}{where}"
        day, month = figures.slices_per_day, figures.slices_per_month
        slices = f"{day} slice{'s' if day > 1 else ''} a day" + (f", {month} a month" if day == 1 else "")
        return (f"fixed windows of {window.size_seconds:g} s ({slices}) give {kept}{where} (so do sliding "
                "windows of that period)")
    window = shortest_window_keeping(cfg.layout, cc, cfg.reports_per_slice, promised["day"], promised["month"])
    if window is not None:
        return spelled(window, cfg.reports_per_slice, " at these bounds")
    window = shortest_window_keeping(cfg.layout, cc, 1, promised["day"], promised["month"])
    if window is not None:
        keys = " and max_keys_per_device: 1" if cfg.dimensions else ""
        return f"with max_reports_per_device: 1{keys}, " + spelled(window, 1)
    one = enforced_epsilon(cfg.layout, cc, cfg.window, 1).one
    return f"no window keeps it: one report spends epsilon_1={one:.4g}; add noise or promise more"
