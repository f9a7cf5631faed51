"""The publication engine, free of Beam: the release rule (:mod:`.release`), the rows (:mod:`.rows`),
the dimension cap and the pane state machine (:mod:`.engine`) and its versioned state (:mod:`.state`).
The Beam steps in :mod:`ldp_marginals.transforms.estimate` and :mod:`ldp_marginals.transforms.panes`
only adapt it, so batch and streaming publish through one path, and property tests drive it directly."""
