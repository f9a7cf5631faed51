"""The dashboard's page: the app's template (``assets/page.html``, ``assets/app.js``) with Plotly and
the boot data inlined (:func:`render`), for the written page and the served one alike, and the
checks both make of the command's options. Importing this module does not import Beam.
"""
from __future__ import annotations

import json
import math
import os
from importlib import resources

from ldp_marginals.pipelines.read import read_collections


def check_dir(estimates_dir: str) -> None:
    """``--estimates`` must be a directory (of the job's outputs)."""
    if not os.path.isdir(estimates_dir):
        raise ValueError(f"estimates must be a directory of the job's outputs, got estimates={estimates_dir!r}")


def finite(value):
    """JSON-safe: NaN and infinities (not JSON) as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def _asset(name: str) -> str:
    return resources.files("ldp_marginals.pipelines.dashboard").joinpath("assets", name).read_text(encoding="utf-8")


def render(static: dict | None, view_url: str | None = None, refresh_seconds: float = 5.0,
           plotly_url: str | None = None) -> str:
    """The page: the app inlined; a static page's views inlined (:func:`static_views`), or a served
    page's views fetched from ``view_url`` per selection, looked for anew every ``refresh_seconds``.
    Plotly is inlined, or with ``plotly_url`` (served) loaded from there once the page's first view
    is drawn without it: Chromium takes ~1 s to parse Plotly's 4.8 MB, and the tables, numbers and
    pickers need none of it (the charts follow)."""
    from plotly.offline import get_plotlyjs
    boot = {"views": None, "bounded": None, **(static or {}), "viewUrl": view_url, "refreshSeconds": refresh_seconds,
            "plotlyUrl": plotly_url}
    # every "<" as \\u003c (the same JSON): the data can neither close nor comment out its script element
    boot_json = json.dumps(finite(boot), allow_nan=False).replace("<", "\\u003c")
    parts = {"/*PLOTLY*/": "" if plotly_url else get_plotlyjs(), "/*BOOT*/null": boot_json, "/*APP*/": _asset("app.js")}
    page = _asset("page.html")
    out = []
    for marker, content in parts.items():  # split on the template's markers, so content is never rescanned
        before, found, page = page.partition(marker)
        if not found:
            raise RuntimeError(f"dashboard template lacks {marker}")
        out += [before, content]
    return "".join(out + [page])


def check_marginals(estimates_dir: str, marginals: list | None) -> None:
    """A label in ``--marginal`` that names no bit, a numeric feature's name, or a set above the
    collection's ``max_order`` is an error saying which (a page would silently show nothing)."""
    collections = read_collections(estimates_dir)
    numeric = {name for c in collections for name in c.get("numeric", {})}
    known = {label for c in collections for label in c.get("labels", [])} - numeric
    for chosen in marginals or []:
        if set(chosen) & numeric:
            raise ValueError(f"--marginal {','.join(chosen)!r}: {sorted(set(chosen) & numeric)} are numeric features: "
                             "they publish means (shown on the page), not marginals")
        unknown = [label for label in chosen if label not in known]
        if (unknown or not chosen) and collections:
            raise ValueError(f"--marginal {','.join(chosen)!r}: unknown bit label(s) {unknown}; the labels are "
                             f"{sorted(known)}")
        counted = [c["max_order"] for c in collections if set(chosen) <= set(c.get("labels", []))]
        if counted and len(chosen) > max(counted):
            raise ValueError(f"--marginal {','.join(chosen)!r}: a set of {len(chosen)} bits is not counted: the "
                             f"collection counts sets of up to max_order={max(counted)} bits (raise max_order in "
                             "its config to publish it)")
