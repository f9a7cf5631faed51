"""What the reference clients of the whole-report kinds share (``ldp/hadamard_client.py``,
``ldp/subset_client.py``; docs/client.md sections 11 and 12): the client config's JSON (``collection``,
boolean ``features``, ``window``, and one object named for the kind holding its parameters, in a fixed
order) and the record a report is sent in. Each kind adds its parameters' checks and its randomizer."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ldp_marginals.ldp.client import _keys, _window, boolean_features, window_json


class WholeReportSpec:
    """Mixin of a kind's frozen client spec: ``KIND`` (the config object's name) and ``PARAMS`` (its keys,
    in the order the JSON writes them, each a field of the spec after ``collection``, ``features``,
    ``window``)."""

    KIND: str = ""
    PARAMS: tuple = ()

    def params_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in ((k, getattr(self, k)) for k in self.PARAMS)}

    def to_json(self) -> dict:
        return {"collection": self.collection, "features": [{"name": n, "type": "boolean"} for n in self.features],
                "window": window_json(self.window), self.KIND: self.params_json()}

    @classmethod
    def params_of(cls, spec) -> tuple:
        """``(collection, feature names, window, {param: value})`` of a client config, checked as every
        whole-report kind's (``Refusal`` ``bad_config`` naming the field)."""
        names, kind = boolean_features(spec, cls.KIND)
        return spec["collection"], tuple(names), _window(spec["window"]), _keys(kind, cls.KIND, cls.PARAMS)


def report_record(collection: str, event_ms: int, bits: list, dimensions: Mapping) -> dict:
    """The record of one report: ``bits`` (0/1 list) packed least significant first, ``client`` null."""
    packed = np.packbits(np.array(bits, dtype=np.uint8), bitorder="little").tobytes()
    return {"collection": collection, "event_time": event_ms, "bits": packed, "dimensions": dimensions,
            "client": None}
