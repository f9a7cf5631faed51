"""Collecting a pipeline's output in the test process.

The DirectRunner does not hold a stateful step's output watermark at its pending timers (Dataflow
and Flink do), so output a timer emits at the end of a stream can come after ``assert_that``'s own
grouping has fired. The streaming tests collect into this process instead and assert afterwards.
"""
import itertools
import threading

import apache_beam as beam

_LOCK = threading.Lock()
_SEEN = {}
_IDS = itertools.count()


def _append(value, key):
    with _LOCK:
        _SEEN.setdefault(key, []).append(value)


class Collected:
    """``c = Collected(); pcoll | c.into("label")``, then, after the pipeline ran, ``c["label"]``."""

    def __init__(self):
        self.id = next(_IDS)

    def into(self, label: str) -> beam.PTransform:
        return f"Collect[{label}]" >> beam.Map(_append, (self.id, label))

    def __getitem__(self, label: str) -> list:
        with _LOCK:
            return list(_SEEN.get((self.id, label), []))
