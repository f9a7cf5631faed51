"""The dimension cap: which values of each dimension a window publishes under their own name, and which
it counts under :data:`OTHER`. Decided per window from the values' weights alone (how many reports each
value holds), never from accumulators, so it is a small side computation beside the publication keyed
by (collection, capped key).

A window keeps, per dimension, at most ``max_values`` values; a report's key is its dimensions with
each value that is not kept replaced by :data:`OTHER` (its *capped key*). Decisions are *sticky*: once
a value is decided (kept or not) in a window, it stays so for the window's life. Streaming decides at
each of a window's panes the values seen since its last one, the heaviest first while there is room
(:func:`decide`); batch decides once, from the window's complete weights, which is the same function
with nothing decided before: the ``max_values`` heaviest values (ties by value).

Why sticky: a key's content then only grows from pane to pane (a value never moves from its own key
into ``__other__``), so every keyed state of a window agrees on where each value's reports go without
moving state between keys, and a late report of a new value joins its own key (if the dimension has
room) or ``__other__``. The decisions read counts of reports only, which the publication rule's proof
allows (docs/design.md, section 7).
"""
from __future__ import annotations

OTHER = "__other__"   # the value that counts a dimension's values past max_values in a window


def value_weights(weights) -> dict:
    """``{(dims, reports)}`` pairs (or a ``{dims: reports}`` dict) -> ``{name: {value: reports}}``."""
    out = {}
    for dims, n in (weights.items() if isinstance(weights, dict) else weights):
        for name, value in dims:
            per = out.setdefault(name, {})
            per[value] = per.get(value, 0) + int(n)
    return out


def add_weights(into: dict, more: dict) -> dict:
    """``into`` += ``more`` (both ``{name: {value: reports}}``); returns ``into``."""
    for name, per in more.items():
        mine = into.setdefault(name, {})
        for value, n in per.items():
            mine[value] = mine.get(value, 0) + n
    return into


def decide(config, decided: dict, weights: dict) -> dict:
    """``decided`` (``{name: {value: kept}}``, not modified) with every value of ``weights`` that it
    does not decide yet decided: per dimension, the undecided values by weight (heaviest first, ties
    by value) are kept while fewer than its ``max_values`` are kept, the others are not."""
    out = {name: dict(per) for name, per in decided.items()}
    for dim in config.dimensions:
        seen = weights.get(dim.name, {})
        mine = out.setdefault(dim.name, {})
        fresh = sorted((v for v in seen if v not in mine), key=lambda v: (-seen[v], v))
        room = dim.max_values - sum(mine.values())
        for i, value in enumerate(fresh):
            mine[value] = i < room
    return {name: per for name, per in out.items() if per}


def capped(dims: tuple, decided: dict) -> tuple:
    """The capped key of ``dims`` under ``decided``: each value not kept becomes :data:`OTHER`. A value
    not decided yet raises ``KeyError`` (a key is published only once its values are decided)."""
    return tuple((name, value if name not in decided or decided[name][value] else OTHER)
                 for name, value in dims)
