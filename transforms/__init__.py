"""Beam transforms of ldp-marginals: decoding with dead letters, thin CombineFn adapters over
``ldp/``, the windowed estimation composite, and sinks. No randomness and no math lives here."""
