"""Co-occurrence counting kernels, side by side in one run (the measurement behind ldp/cooccurrence.py).

For order 2 it compares the float32 Gram matrix (BLAS) with bit-sliced popcount over all pairs;
for order 3 it reports the bit-sliced kernel's rate. Throughputs are reports per second on this
machine; the ratios are what to compare across machines.

    python -m benchmarks.counting [--reports N] [--bits D]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from ldp.cooccurrence import _bit_slices, count_bits
from ldp.sets import SetFamily


def _best_of(fn, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def pairs_by_popcount(bits: np.ndarray) -> np.ndarray:
    cols = _bit_slices(bits)
    d = bits.shape[1]
    out = np.zeros((d, d), dtype=np.int64)
    for i in range(d):
        out[i, i:] = np.bitwise_count(cols[i:] & cols[i]).sum(axis=1)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--bits", type=int, default=64)
    args = parser.parse_args(argv)
    n, d = args.reports, args.bits
    bits = (np.random.default_rng(0).random((n, d)) < 0.3).astype(np.uint8)
    fam2, fam3 = SetFamily.all_up_to(d, 2), SetFamily.all_up_to(d, 3)
    xf = bits.astype(np.float32)
    t_gram_raw = _best_of(lambda: xf.T @ xf)
    t_gram = _best_of(lambda: count_bits(bits, fam2))
    t_pop = _best_of(lambda: pairs_by_popcount(bits))
    t_three = _best_of(lambda: count_bits(bits, fam3), repeats=1)
    gram = count_bits(bits, fam2)
    pop = pairs_by_popcount(bits)
    pairs = fam2.members(2)
    assert np.array_equal(gram[fam2.order_slice(2)], pop[pairs[:, 0], pairs[:, 1]]), "kernels disagree"
    rows = [
        ("float32 X.T@X alone (floor)", t_gram_raw),
        ("count_bits order <= 2 (Gram)", t_gram),
        ("bit-sliced popcount, all pairs", t_pop),
        ("count_bits order <= 3", t_three),
    ]
    print(f"{n:,} reports x {d} bits")
    print(f"{'kernel':34} {'seconds':>8} {'reports/s':>12}")
    for name, t in rows:
        print(f"{name:34} {t:8.3f} {n / t:12,.0f}")
    print(f"ratio count_bits(<=2) / X.T@X rate: {t_gram_raw / t_gram:.2f}")
    print(f"ratio Gram / popcount rate for pairs: {t_pop / t_gram:.2f}")


if __name__ == "__main__":
    main()
