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

from ldp_marginals.ldp.aggregate import ReportAggregator, WindowAccumulator
from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.sets import SetFamily


class WholeReportAggregator(ReportAggregator):
    """Fills the job's accumulators of a whole-report kind: ``n_virtual`` virtual bits at order 1, the
    reports in ``wire_format`` (``n_bytes``), ``device_bound`` and ``collection_key`` as
    :class:`~ldp_marginals.ldp.aggregate.ReportAggregator`'s. No extreme sums: their extremes over reports come from the table of the extreme's bits
    (:mod:`~ldp_marginals.ldp.kind_analyses`), extremes over clients are refused.
    A kind implements :meth:`add_packed`, :meth:`marginals` and :attr:`shape_extra`."""

    kind: str = ""

    def __init__(self, n_virtual: int, mechanism, wire_format, device_bound: int | None = None,
                 collection_key: int = 0):
        super().__init__(SetFamily.all_up_to(n_virtual, 1), ChannelSet.uniform(Channel(0.0, 1.0), n_virtual),
                         device_bound=device_bound, collection_key=collection_key)
        self.mechanism = mechanism
        self.format = wire_format

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
