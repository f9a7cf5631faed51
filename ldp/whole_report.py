"""The job's accumulator of a whole-report channel kind (``hadamard``, ``subset``): one base for what the
kinds share, so a kind adds only its wire format and its counts (Beam-free).

A kind's window accumulator is the per-bit :class:`~ldp_marginals.ldp.aggregate.WindowAccumulator` over
the kind's *virtual bits* counted at order 1 (its sums over reports; merging is addition), so the
coders, the versioned state, the combiners and the publication rule see an ordinary accumulator.

Under ``privacy.unit: device`` (``device_bound`` M) the open accumulator is the same
:class:`~ldp_marginals.ldp.devices.DeviceTable` as per bit: each device's kept reports, chosen blind to
their content (ranks hash the device and the event ms), held as their *wire* bytes
(:attr:`WholeReportAggregator.wire_bytes`, the kind's format, not the virtual bits); ``settle`` counts
the kept ones with the kind's :meth:`add_packed`, so ``min_reports`` counts devices as per bit.
"""
from __future__ import annotations

import numpy as np

from ldp_marginals.ldp.aggregate import (
    LOG_F, REPORTS, STATE_WIDTH, ZEROS_F, ReportAggregator, WindowAccumulator, factor_states,
)
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.kind_client_extremes import KindClientTerms
from ldp_marginals.ldp.sets import SetFamily


class WholeReportAggregator(ReportAggregator):
    """Fills the job's accumulators of a whole-report kind: ``n_virtual`` virtual bits at order 1, the
    reports in ``wire_format`` (``n_bytes``), ``device_bound``, ``collection_key`` and ``client_sample`` as
    :class:`~ldp_marginals.ldp.aggregate.ReportAggregator`'s. No extreme sums: their extremes over reports
    come from the table of the extreme's bits (:mod:`~ldp_marginals.ldp.kind_analyses`). Extremes over
    clients (``client_extremes``, ``(op, bits)`` each) keep per client the running products of the
    per-bit path, one factor per report (:mod:`~ldp_marginals.ldp.kind_client_extremes`), and after the
    extremes' rows of a client state one row of its reports' profile hashes (:attr:`profile_row`) and one
    row per relevant key of its reads (:attr:`read_rows`).
    A kind implements :meth:`add_packed` (calling :meth:`add_client_terms`), :meth:`marginals`,
    :meth:`read_totals` and :attr:`shape_extra`."""

    kind: str = ""

    def __init__(self, n_virtual: int, mechanism, wire_format, device_bound: int | None = None,
                 collection_key: int = 0, client_extremes=(), client_sample: int | None = None):
        super().__init__(SetFamily.all_up_to(n_virtual, 1), ChannelSet.uniform(Channel(0.0, 1.0), n_virtual),
                         client_extremes=client_extremes, device_bound=device_bound, collection_key=collection_key,
                         client_sample=client_sample)
        self.mechanism = mechanism
        self.format = wire_format
        self.terms = KindClientTerms(self.kind, mechanism, self.client_extremes) if self.client_extremes else None

    @property
    def profile_row(self) -> int:
        """The row of a client state holding the sum of its reports' profile hashes (column ``LOG_F``)."""
        return len(self.client_extremes)

    @property
    def read_rows(self) -> slice:
        """The rows of a client state holding its reads of each relevant key (column ``ZEROS_F``)."""
        return slice(self.profile_row + 1, self.profile_row + 1 + len(self.terms.keys))

    @property
    def client_state_rows(self) -> int:
        return self.read_rows.stop if self.client_extremes else 0

    def add_client_terms(self, acc: WindowAccumulator, draws, values, client_keys, named=None, ranks=None) -> None:
        """The client states of a block of reports (``draws``, ``values``: the kind's, as
        :meth:`~ldp_marginals.ldp.kind_client_extremes.KindClientTerms.factors` reads them) into ``acc``:
        every report naming a client (``named``) adds one factor to each extreme's running products."""
        if not self.client_extremes or client_keys is None:
            return
        if self.client_sample is not None and ranks is None:
            raise ValueError(f"add_packed needs each report's rank for the client sample "
                             f"(client_sample={self.client_sample}), got ranks=None")
        keys = np.asarray(client_keys, dtype=np.uint64)
        draws, values = np.asarray(draws), np.asarray(values)
        if named is not None:
            named = np.asarray(named, dtype=bool)
            keys, draws, values = keys[named], draws[named], values[named]
            ranks = None if ranks is None else np.asarray(ranks, dtype=np.uint64)[named]
        if keys.size == 0:
            return
        g, v = self.terms.factors(draws, values)
        states = np.zeros((keys.size, self.client_state_rows, STATE_WIDTH))
        for e in range(len(self.client_extremes)):
            states[:, e, :] = factor_states(g[:, e:e + 1], v[:, e:e + 1])
        reads = self.terms.reads(draws)
        states[:, self.profile_row, LOG_F] = self.terms.profiles(reads)
        states[:, self.read_rows, ZEROS_F] = reads
        states[:, :, REPORTS] = 1.0
        self._add_client_states(acc, keys, states, None if ranks is None else np.asarray(ranks, dtype=np.uint64))

    def _add_client_states(self, acc, keys, per_reports, ranks=None):
        """:meth:`ReportAggregator._add_client_states`, each column of a client's rows summed by one bincount
        over a contiguous copy (a kind's state has many rows: strided columns are slow), in report order."""
        uniq, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        columns = np.ascontiguousarray(per_reports.reshape(keys.size, -1).T)
        sums = np.stack([np.bincount(inverse, weights=col, minlength=uniq.size) for col in columns], axis=1)
        self._merge_clients(acc, uniq, sums.reshape((uniq.size,) + per_reports.shape[1:]))
        if self.client_sample is not None:   # each client's c + 1 reports of smallest rank, one state each
            self._merge_sample(acc, [(keys, ranks, per_reports)])

    def read_totals(self, acc: WindowAccumulator) -> np.ndarray:
        """float64 per relevant key: the reads the window's linear counts hold (every report's)."""
        raise NotImplementedError

    @property
    def wire_bytes(self) -> int:
        """A report's bytes in the kind's wire format (what the device table keeps per kept report)."""
        return self.format.n_bytes

    def add_packed(self, acc: WindowAccumulator, packed, client_keys=None, named=None,
                   ranks=None) -> WindowAccumulator:
        raise NotImplementedError

    def marginals(self, acc: WindowAccumulator):
        raise NotImplementedError

    @property
    def shape_extra(self) -> dict:
        raise NotImplementedError
