"""The written dashboard (``ldp-marginals dashboard --out``): one self-contained HTML file to share,
holding a bounded part of the outputs (:func:`static_views`: the latest complete window of each
collection and key, the charts over the windows before it), and saying so on the page.
"""
from __future__ import annotations

import json
import os

from ldp_marginals.pipelines.dashboard.page import check_dir, check_marginals, render
from ldp_marginals.pipelines.dashboard.view import DEFAULT_SPAN, FileCache, parse_selection, view


STATIC_KEYS = 16   # a static page holds at most this many keys per collection


def static_views(estimates_dir: str, marginals: list | None = None, span: int = DEFAULT_SPAN) -> dict:
    """What a static page holds: per collection, the view of its latest complete window for each of
    its keys there (up to :data:`STATIC_KEYS`), the charts spanning ``span`` windows; and the text
    the page shows to say so."""
    check_dir(estimates_dir)
    cache = FileCache(estimates_dir)
    chosen = [list(m) for m in marginals] if marginals else None
    selection = dict(parse_selection({}), sets=chosen, span=span)
    first = view(estimates_dir, selection, cache)
    views, dropped = {view_key(first["collection"], first["dims"]): first}, 0
    for collection in first.get("collections_named", []):
        # the collection's default view names its keys (the first of them is that view)
        head = first if collection == first["collection"] else view(
            estimates_dir, dict(selection, collection=collection), cache)
        views[view_key(collection, head["dims"])] = head
        for dims in head["keys"][:STATIC_KEYS]:
            if view_key(collection, dims) not in views:
                views[view_key(collection, dims)] = view(estimates_dir, dict(selection, collection=collection,
                                                                            dims=dims), cache)
        dropped += max(0, len(head["keys"]) - STATIC_KEYS)
    note = (f"A static page: for each collection its latest complete window, with the charts over the {span} "
            f"windows before it, for up to {STATIC_KEYS} keys" + (f" ({dropped} more not included)" if dropped else "")
            + ". Serve the dashboard (ldp-marginals dashboard --serve PORT) to choose any window, key and span.")
    return {"views": views, "bounded": note}


def view_key(collection, dims: dict) -> str:
    """The static page's index of a view: collection and key."""
    return json.dumps([collection, dims], sort_keys=True)


def write(estimates_dir: str, out_path: str, marginals: list | None = None, span: int = DEFAULT_SPAN) -> str:
    check_dir(estimates_dir)
    check_marginals(estimates_dir, marginals)
    page = render(static_views(estimates_dir, marginals, span))
    folder = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(folder, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as fh:
        fh.write(page)
    return out_path
