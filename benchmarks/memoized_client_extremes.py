"""Extremes over clients on memoized channels: bias (in SE units of the replicates' spread) and 95% coverage
of the client OR/AND rows at reports_per_client c = 1, 2, 4 and unset (every report), for per-bit rappor
(f 0.5, p 0.25, q 0.75) and memoized hadamard/subset (epsilon_inf 4, epsilon_1 1), seeded, through the job's
aggregators (ldp level: the rule memoize-client-extremes, which refuses c != 1, is not in the way here).
1,000 devices of 24 hourly reports, of one value a day or of two (the value changes at noon).
Run: python -m benchmarks.memoized_client_extremes (a few minutes). docs/design.md, "Extremes over clients
and memoized channels", quotes its output."""
import numpy as np

from ldp_marginals.ldp.aggregate import ReportAggregator, client_key
from ldp_marginals.ldp.devices import report_ranks
from ldp_marginals.ldp.encoding import pack_bits
from ldp_marginals.ldp.hadamard import HadamardSampling
from ldp_marginals.ldp.hadamard_reports import HadamardAggregator, HadamardFormat
from ldp_marginals.ldp.kind_memoize import MemoizedKind, randomize_memoized_hadamard, randomize_memoized_subset
from ldp_marginals.ldp.memoized import ClientChannels
from ldp_marginals.ldp.sets import SetFamily
from ldp_marginals.ldp.subset_reports import SubsetAggregator, SubsetFormat
from ldp_marginals.ldp.subset_rr import SubsetRR

NB = 3
EXT = (("or", (0, 1, 2)), ("and", (0, 1)))   # per bit
KIND_EXT = (("or", (0, 1)), ("and", (1, 2)))   # kinds: at most max_order 2 bits
KEY = client_key("memo")

def values(rng, D, changing):
    rate = rng.uniform(0.1, 0.6, D)
    a = (rng.random((D, NB)) < rate[:, None]).astype(np.uint8)
    if not changing:
        return np.repeat(a, 24, axis=0)
    b = (rng.random((D, NB)) < rate[:, None]).astype(np.uint8)
    hour = np.tile(np.arange(24), D)
    return np.where((hour < 12)[:, None], np.repeat(a, 24, axis=0), np.repeat(b, 24, axis=0))

def perbit_noisy(rng, x, owner, D, ch):
    pp, qp = ch.permanent[0].p, ch.permanent[0].q
    inst = ch.instantaneous
    perm = (rng.random((D, NB, 2)) < np.array([pp, qp])).astype(np.uint8)   # per device, bit, value
    b = perm[owner[:, None], np.arange(NB)[None, :], x]
    return (rng.random(x.shape) < np.where(b == 1, inst.q, inst.p)).astype(np.uint8)

def truth_of(x, owner, ranks, c, D):
    out = np.zeros(2)
    order = np.lexsort((ranks, owner))
    for d in range(D):
        idx = order[d * 24:(d + 1) * 24]
        pick = idx if c is None else idx[:c]
        out[0] += x[pick].any()
        out[1] += x[pick][:, [0, 1]].all()
    return out

def run_per_bit(c, changing, D=1000, R=300, seed=1):
    rng = np.random.default_rng(seed)
    ch = ClientChannels.rappor(0.5, 0.25, 0.75, NB)
    owner = np.repeat(np.arange(D), 24)
    x = values(rng, D, changing)
    keys = np.array([client_key(f"d{i}") for i in range(D)], dtype=np.uint64)[owner]
    ms = 1_767_225_600_000 + np.tile(np.arange(24), D) * 3_600_000
    ranks = report_ranks(KEY, keys, ms)
    agg = ReportAggregator(SetFamily(NB, 1), ch.effective, (), EXT, None, KEY, c)
    want = truth_of(x, owner, ranks, c, D)
    est, var = np.empty((R, 2)), np.empty((R, 2))
    for r in range(R):
        y = perbit_noisy(rng, x, owner, D, ch)
        acc = agg.add_packed(agg.create(), pack_bits(y), keys, None, None if c is None else ranks)
        s = agg.client_sums(acc)
        est[r], var[r] = [a for a, _ in s], [v for _, v in s]
    se = est.std(axis=0, ddof=1) / np.sqrt(R)
    z = (est.mean(axis=0) - want) / se
    cover = (np.abs(est - want) <= 1.959964 * np.sqrt(np.maximum(var, 0))).mean(axis=0)
    return want, est.mean(axis=0), z, cover, np.sqrt(var.mean(axis=0))



def population(rng, D, changing):
    rate = rng.uniform(0.1, 0.6, D)
    a = (rng.random((D, NB)) < rate[:, None]).astype(np.uint8)
    if not changing:
        return a, np.full(D, 24), np.arange(D), np.tile(np.arange(24), D)
    b = (rng.random((D, NB)) < rate[:, None]).astype(np.uint8)
    vals, reps, dev, hours = [], [], [], []
    for d in range(D):
        if (a[d] == b[d]).all():
            vals.append(a[d]); reps.append(24); dev.append(d); hours.extend(range(24))
        else:
            vals += [a[d], b[d]]; reps += [12, 12]; dev += [d, d]; hours.extend(range(24))
    return np.array(vals), np.array(reps), np.array(dev), np.array(hours)

def run_kind(kind, c, changing, D=1000, R=200, seed=2):
    rng = np.random.default_rng(seed)
    mech = HadamardSampling(NB, 2, 4.0) if kind == "hadamard" else SubsetRR(NB, 2, 4.0, width=2)
    memo = MemoizedKind.of(mech, 1.0)
    eff = memo.effective
    vals, reps, vdev, hours = population(rng, D, changing)
    owner_v = np.repeat(np.arange(len(reps)), reps)
    owner = vdev[owner_v]
    x = vals[owner_v]
    keys = np.array([client_key(f"d{i}") for i in range(D)], dtype=np.uint64)[owner]
    ms = 1_767_225_600_000 + hours * 3_600_000
    Agg, Fmt, rand = ((HadamardAggregator, HadamardFormat, randomize_memoized_hadamard) if kind == "hadamard"
                      else (SubsetAggregator, SubsetFormat, randomize_memoized_subset))
    agg = Agg(eff, client_extremes=KIND_EXT, client_sample=c)
    ranks = report_ranks(agg.collection_key, keys, ms)
    order = np.lexsort((ranks, owner))
    want = np.zeros(2)
    for d in range(D):
        idx = order[d * 24:(d + 1) * 24]
        pick = idx if c is None else idx[:c]
        want[0] += x[pick][:, [0, 1]].any(); want[1] += x[pick][:, [1, 2]].all()
    est, var = np.empty((R, 2)), np.empty((R, 2))
    for r in range(R):
        a, b, _ = rand(vals, reps, memo, rng)
        acc = agg.add_packed(agg.create(), Fmt(eff).pack(a, b), keys, np.ones(keys.size, dtype=bool),
                             None if c is None else ranks)
        s = agg.client_sums(acc)
        est[r], var[r] = [u for u, _ in s], [v for _, v in s]
    se = est.std(axis=0, ddof=1) / np.sqrt(R)
    z = (est.mean(axis=0) - want) / se
    cover = (np.abs(est - want) <= 1.959964 * np.sqrt(np.maximum(var, 0))).mean(axis=0)
    return want, est.mean(axis=0), z, cover


def main():
    for changing in (False, True):
        for c in (1, 2, 4, None):
            w, m, z, cov, sd = run_per_bit(c, changing)
            print(f"per-bit rappor changing={changing} c={c}: truth={w} mean={np.round(m,1)} bias/SE={np.round(z,1)} "
                  f"coverage={np.round(cov,3)} sd={np.round(sd,1)}", flush=True)

    for kind in ("hadamard", "subset"):
        for changing in (False, True):
            for c in (1, 2, 4, None):
                w, m, z, cov = run_kind(kind, c, changing)
                print(f"{kind} memoized changing={changing} c={c}: truth={w} mean={np.round(m,1)} "
                      f"bias/SE={np.round(z,1)} coverage={np.round(cov,3)}", flush=True)


if __name__ == "__main__":
    main()
