"""The whole-report kinds' rollup decision on one window (issue 48 item 4; not part of ``make bench``):
1,000 capped keys (40 x 25 values), ``rollups: all``, 16 boolean bits at max_order 2, ``min_reports`` 20,
each key's accumulator from simulated uniform draws (subset: uniform subsets of the default width;
hadamard: uniform coefficients) of 1 to ``--max-reports`` - 1 reports. Prints, per kind, the time of
:func:`~ldp_marginals.transforms.publication.engine.rollup_decision` without the kinds' rule (the per-bit
decision alone) and with it (best of three), the rollup rows published and how many of their sets the
kinds' rule withholds: ``python -m benchmarks.kind_rollups [--max-reports 400]``."""
import argparse
import time

import numpy as np

from ldp_marginals.schemas.config import parse_config
from ldp_marginals.transforms.publication.engine import rollup_decision
from ldp_marginals.transforms.publication.kind_rollups import kind_part


def window(kind: str, max_reports: int, rng) -> tuple:
    """``(config, held, kinds)`` of one simulated window."""
    cfg = parse_config({"collection": "c", "features": [{"name": f"b{i}", "type": "boolean"} for i in range(16)],
                        "channel": {"kind": kind, "epsilon": 2.0}, "max_order": 2, "min_reports": 20,
                        "window": {"type": "fixed", "size_seconds": 3600},
                        "dimensions": {"r": {"max_values": 40}, "v": {"max_values": 40}}, "rollups": "all"})
    agg, fmt = cfg.aggregator, cfg.aggregator.format
    held, kinds = {}, {}
    for key in [(("r", f"r{i}"), ("v", f"v{j}")) for i in range(40) for j in range(25)]:
        n = int(rng.integers(1, max_reports))
        if kind == "subset":
            masks = [sum(1 << int(b) for b in rng.choice(16, cfg.sampling.width, replace=False)) for _ in range(n)]
            packed = fmt.pack(masks, [int(rng.integers(0, 1 << 16)) & m for m in masks])
        else:
            shape = (n, cfg.sampling.slots)
            packed = fmt.pack(rng.integers(1, cfg.sampling.n_coefficients + 1, shape), rng.integers(0, 2, shape))
        acc = agg.create()
        agg.add_packed(acc, packed)
        released = n >= cfg.min_reports
        held[key] = 0 if released else n
        kinds[key] = kind_part(cfg, acc if released else None, None if released else acc)
    return cfg, held, kinds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-reports", type=int, default=400)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    for kind in ("subset", "hadamard"):
        cfg, held, kinds = window(kind, args.max_reports, rng)
        for label, parts in (("without the kinds' rule", None), ("with the kinds' rule", kinds)):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                published, thin = rollup_decision(cfg, held, parts)
                best = min(best, time.perf_counter() - start)
            sets = len(set(cfg.published_sets))
            print(f"{kind}: {label}: {best:.2f} s; {len(published)} rollup rows published, "
                  f"{sum(len(v) for v in thin.values())} of their {len(published) * sets} sets withheld; "
                  f"{sum(1 for v in held.values() if v)} of {len(held)} keys withheld")


if __name__ == "__main__":
    main()
