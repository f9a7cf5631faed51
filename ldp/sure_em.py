"""The joint of d bits by EM stopped where Stein's unbiased risk estimate of the published tables is least.

The maximum likelihood over the ``2^d`` joint (:func:`~ldp_marginals.ldp.consistent.joint_mle`) fits the
noise of the highest-order interactions, which the channel amplifies most (a j-way Hadamard coefficient by
``(2p - 1)^-j``). EM from the uniform joint (Richardson-Lucy deconvolution) fits the low orders first:
stopped early, it is the classical regularization of this inverse problem. Where to stop is chosen per
window, from the data alone, by SURE (Stein 1981) of the squared error of the tables the window publishes:
with ``y`` the noisy histogram's frequencies, ``u = A^-1 y`` the unbiased joint, ``S`` the covariance of ``y`` given
the window's reports (their joint ``theta`` is the tables' truth; each report is randomized on its own):
``S = (diag(A theta) - A diag(theta) A^T) / n``, estimated without bias with ``u`` for ``theta`` (the multinomial
``(diag(A theta) - A theta theta^T A^T) / n`` adds the reports' sampling variance, no error of the tables, which
the channel does not shrink: it overstated the risk of the unbiased joint's 2-way tables by 80% at per-bit
epsilon 2), ``M`` the map from the joint to the published tables' cells and
``P = M^T M``, an estimate ``f(y)`` of the joint has

    E ||M (f(y) - theta)||^2 = E[ (f - u)^T P (f - u) + 2 tr(J_f^T P A^-1 S) ] - tr(P A^-1 S A^-T),

``J_f = df/dy`` (Stein's identity, y taken as Gaussian: n is large). The trace is Hutchinson's estimate
with :data:`SURE_PROBES` Rademacher probes seeded by the counts themselves (exact, with the unit vectors,
when ``2^d`` is at most that), ``J_f`` times the probes carried along EM's steps by the chain rule, and,
for the maximum likelihood, by the implicit function theorem on its positive cells.

The candidates, in the order of how closely they fit the data: EM's iterates at checkpoints ``10 * 1.08^i``
steps (stopped when no checkpoint has improved the estimate for 4x the steps of the best one, when it
gains less than 1e-4 of itself over a doubling of the steps, or at :data:`SURE_MAX_STEPS`), then the
maximum likelihood. The one chosen is the last whose estimated risk is within 5% of the least: the
estimate has noise of its own, and the published accuracy measure is total variation, which a
sparser fit serves better than squared error says (at per-bit epsilon 2 on GSS, 15 windows, EM at the
least risk took 1% more total variation than the exact MLE; the MLE a candidate and the 5% rule, 0.2%
more over 400 windows). On GSS (d = 7,
33,144 respondents, 400 seeded windows per epsilon; the README's benchmark section), the 3-way tables'
mean total variation as a share of the raw tables', at per-bit epsilon 0.5 / 1 / 2: this choice 0.293 /
0.638 / 0.916, the exact MLE alone 0.343 / 0.717 / 0.915. The rule's constants (5%, the checkpoints,
the stop) were set on 45 windows of other seeds. Off GSS (5 other real data sets of 5-8 yes/no columns
and synthetic independent, latent-class, sparse and near-uniform joints; n = 300 / 3,000 / 30,000; per-bit
epsilon 0.5 / 1 / 2; 30 windows a cell, 108 cells) it beat the exact MLE by more than 2 standard errors in
70 cells (by up to 56% of the raw tables' 3-way TV) and lost in 8, by 0.05-1.4%: sparse joints (6 of 128
or 256 cells) and GSS at n = 300, epsilon 2.

Every candidate is non-negative and sums to one (EM's step keeps both; the likelihood's fit is
bounded), so its tables are consistent; the choice is a function of the noisy histogram alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SURE_MAX_BITS = 8        # dense 2^d x 2^d matrices, three 2^d x 2^d x probes products per EM step
SURE_PROBES = 16
SURE_MAX_STEPS = 5000
_FIRST, _GROW, _PATIENCE, _FLAT, _SLACK = 10, 1.08, 4.0, 1e-4, 0.05
_TINY = 1e-100


@dataclass(frozen=True)
class SureFit:
    """The chosen joint (cell z: bit i of z <-> bit i), ``method`` ``"joint-em"`` (EM stopped after
    ``iterations`` steps) or ``"joint-mle"`` (the maximum likelihood, ``iterations`` its solver's steps),
    ``risk`` its estimated squared error of the published tables, and every candidate's ``(steps, risk)``
    (the maximum likelihood's steps -1)."""

    joint: np.ndarray
    method: str
    iterations: int
    risk: float
    path: tuple


def published_gram(d: int, sets) -> np.ndarray:
    """``P = M^T M`` of the map M from the joint of d bits to the cells of the tables of ``sets``:
    ``P[z, z']`` = how many of the sets z and z' agree on."""
    z = np.arange(1 << d)
    diff = z[:, None] ^ z[None, :]
    out = np.zeros((1 << d, 1 << d))
    for s in sets:
        mask = sum(1 << int(b) for b in s)
        out += (diff & mask) == 0
    return out


class _Risk:
    """SURE of the published tables for one noisy histogram (see the module docstring)."""

    def __init__(self, counts: np.ndarray, mats: list, sets):
        d = len(mats)
        counts = np.asarray(counts, dtype=np.float64)
        self.n = float(counts.sum())
        self.y = counts / self.n
        a, inv = np.ones((1, 1)), np.ones((1, 1))
        for m in mats:
            a, inv = np.kron(m, a), np.kron(np.linalg.inv(m), inv)
        self.a = a
        self.u = inv @ self.y
        # the noise of y given the window's reports (the tables' truth): each report's noisy pattern is drawn on
        # its own, so S = (diag(A theta) - A diag(theta) A^T) / n, estimated without bias by theta -> u
        cov = (np.diag(self.y) - a @ (self.u[:, None] * a.T)) / self.n
        p = published_gram(d, sets)
        self.const = float(np.trace(p @ inv @ cov @ inv.T))
        if (1 << d) <= SURE_PROBES:
            self.probes, self.weight = np.eye(1 << d), 1.0
        else:
            seed = np.frombuffer(np.ascontiguousarray(counts).tobytes(), dtype=np.uint32)
            rng = np.random.default_rng(seed)
            self.probes, self.weight = rng.choice([-1.0, 1.0], size=(1 << d, SURE_PROBES)), 1.0 / SURE_PROBES
        self.p = p
        self.hv = p @ (inv @ (cov @ self.probes))

    def __call__(self, joint: np.ndarray, jv: np.ndarray) -> float:
        r = joint - self.u
        return float(r @ self.p @ r + 2.0 * self.weight * np.sum(jv * self.hv) - self.const)

    def em(self, max_steps: int):
        """EM from the uniform joint: yields ``(steps, joint, J times the probes)`` at the checkpoints."""
        a, y, v = self.a, self.y, self.probes
        joint = np.full(a.shape[1], 1.0 / a.shape[1])
        jv = np.zeros_like(v)
        mark = float(_FIRST)
        for t in range(1, max_steps + 1):
            e = a @ joint
            g = a.T @ (y / e)
            # d step / d joint = diag(g) - diag(joint) A^T diag(y / e^2) A;  d step / d y = diag(joint) A^T diag(1 / e)
            jv = g[:, None] * jv + joint[:, None] * (a.T @ ((v - (y / e)[:, None] * (a @ jv)) / e[:, None]))
            joint = joint * g
            tiny = joint < _TINY     # EM's vanishing cells, held at 0: subnormal floats would cost ~100x a step
            joint[tiny], jv[tiny] = 0.0, 0.0
            if t >= mark or t == max_steps:
                mark = max(mark * _GROW, t + 1.0)
                yield t, joint, jv

    def mle_jv(self, joint: np.ndarray) -> np.ndarray:
        """J times the probes at the maximum likelihood: on its positive cells F,
        ``A_F^T (y / e) = lambda`` and ``sum(joint) = 1``, differentiated in y."""
        free = joint > 0
        a_f = self.a[:, free]
        e = self.a @ joint
        h = a_f.T @ ((self.y / e ** 2)[:, None] * a_f)
        k = int(free.sum())
        bordered = np.zeros((k + 1, k + 1))
        bordered[:k, :k], bordered[:k, k], bordered[k, :k] = h, 1.0, 1.0
        rhs = np.zeros((k + 1, self.probes.shape[1]))
        rhs[:k] = a_f.T @ (self.probes / e[:, None])
        out = np.zeros_like(self.probes)
        out[free] = np.linalg.lstsq(bordered, rhs, rcond=None)[0][:k]
        return out


def joint_sure_em(counts, channel_of, d: int, sets, mle=None, *, max_steps: int = SURE_MAX_STEPS) -> SureFit:
    """The joint of d bits chosen by SURE of the tables of ``sets`` (the window's published tables) among
    EM's iterates and ``mle`` (``(joint, iterations)`` of :func:`~ldp_marginals.ldp.consistent.joint_mle`,
    or None). ``counts``: the noisy histogram of all d bits (cell z: bit i <-> bit i); ``channel_of(i)``:
    bit i's channel matrix."""
    if not 1 <= d <= SURE_MAX_BITS:
        raise ValueError(f"joint_sure_em holds dense 2^d x 2^d matrices: d must be in 1..{SURE_MAX_BITS}, got d={d}")
    counts = np.asarray(counts, dtype=np.float64).reshape(-1)
    if counts.size != 1 << d or counts.min() < 0 or counts.sum() <= 0:
        raise ValueError(f"counts must be {1 << d} non-negative counts holding reports, got {counts.size} "
                         f"summing to {counts.sum()}")
    if not sets:
        raise ValueError("sets must name at least one published table, got sets=[]")
    risk = _Risk(counts, [np.asarray(channel_of(i), dtype=np.float64) for i in range(d)], sets)
    found, best = [], None
    for t, joint, jv in risk.em(max_steps):
        r = risk(joint, jv)
        if best is None or r < found[best][1]:
            best = len(found)
        found.append((t, r, joint.copy(), "joint-em"))
        half = [c[1] for c in found if c[0] <= t / 2]
        if t >= _PATIENCE * found[best][0] or (half and half[-1] - r < _FLAT * abs(r)):
            break
    if mle is not None:
        joint, steps = mle
        found.append((steps, risk(joint, risk.mle_jv(joint)), joint, "joint-mle"))
    least = min(c[1] for c in found)
    t, r, joint, method = [c for c in found if c[1] <= least + _SLACK * abs(least)][-1]
    path = tuple((c[0] if c[3] == "joint-em" else -1, c[1]) for c in found)
    return SureFit(joint, method, int(t), float(r), path)
