"""ldp-marginals: windowed private marginals from local-differential-privacy telemetry on Apache Beam.

This file is the package ``ldp_marginals`` itself (pyproject maps it here: the repository's top
level is fixed). Its subpackages: ``ldp`` (the math), ``schemas`` (the contracts), ``transforms``
(Beam), ``pipelines`` (jobs and commands). Importing it imports none of them; ``read`` loads its
module on first use.

    import ldp_marginals
    table = ldp_marginals.read("out/demo", "marginals", collection="app")
"""
from __future__ import annotations

__all__ = ["read", "read_rows", "to_pandas"]


def __getattr__(name):
    if name in __all__:
        import importlib
        return getattr(importlib.import_module("ldp_marginals.pipelines.read"), name)
    raise AttributeError(f"module 'ldp_marginals' has no attribute {name!r}")
