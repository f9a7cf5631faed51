"""The deployments (``dataflow/``, ``flink/``) and, in ``local/``, the local cluster of ``make
cluster-up``: repository tooling, never part of the installed package (a Python package only so
that ``python -m deploy.local.cluster``, the tests and the benchmarks import it by one name)."""
