"""The publication engine, free of Beam: the release rule (:mod:`.release`), the dimension cap (:mod:`.cap`),
the rows (:mod:`.rows`), atoms, a capped key's rows and the batch path (:mod:`.engine`), the three
streaming engines (:mod:`.clock` per collection, :mod:`.atoms` per key, :mod:`.panes` per capped key)
and their messages (:mod:`.messages`), and the versioned records of their state (:mod:`.state`). The
Beam steps in :mod:`ldp_marginals.transforms.estimate` and :mod:`ldp_marginals.transforms.panes` only
adapt it, so batch and streaming publish through one path, and property tests drive it directly."""
