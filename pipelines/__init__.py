"""Runnable jobs and the ``ldp-marginals`` command line."""
