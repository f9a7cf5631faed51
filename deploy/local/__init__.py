"""The local cluster of ``make cluster-up``, the Flink tests and the Flink bench (:mod:`.cluster`)."""
