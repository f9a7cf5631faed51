import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.efficiency import (
    bisymmetric_trace_constant,
    efficiency_loss,
    efficiency_loss_greenwood,
)
from ldp_marginals.ldp.tables import kron_apply


def test_vinterbo_figure_1_example():
    # pi = (0.05, 0.15, 0.3, 0.5), unrelated question p = 0.5: L ~ 9.75 by the Greenwood approximation
    chans = ChannelSet.uniform(Channel.unrelated_question(0.5), 2)
    assert bisymmetric_trace_constant(chans) == pytest.approx(((0.25 - 1 + 2) / (2 * 0.25)) ** 2)  # sec. 5.1's c_M
    assert efficiency_loss_greenwood(chans) == pytest.approx(9.75)
    # the exact loss for that pi (Thm 4.6 with s = pi^T pi = 0.365) is lower, as Thm 4.6 bounds it below by f_L(2^-n)
    exact = efficiency_loss(chans, [0.05, 0.15, 0.3, 0.5])
    assert exact == pytest.approx((6.25 - 0.365) / (1 - 0.365))
    assert exact >= (6.25 - 0.25) / (1 - 0.25)


def test_loss_equals_trace_ratio_for_unequal_channels():
    chans = ChannelSet.from_arrays([0.1, 0.3, 0.2], [0.8, 0.9, 0.6])
    pi = np.random.default_rng(0).dirichlet(np.ones(8))
    inv = [c.inverse_matrix() for c in chans]
    noisy = kron_apply([c.matrix() for c in chans], pi)
    cov = kron_apply(inv, kron_apply(inv, np.diag(noisy)).T).T - np.outer(pi, pi)  # Vinterbo's m * cov(pi_hat)
    plain = np.diag(pi) - np.outer(pi, pi)                                       # m * cov(pi_star)
    assert efficiency_loss(chans, pi) == pytest.approx(np.trace(cov) / np.trace(plain))


def test_validation():
    chans = ChannelSet.uniform(Channel(0.1, 0.8), 2)
    with pytest.raises(ValueError, match="channels must be bisymmetric"):
        bisymmetric_trace_constant(chans)
    with pytest.raises(ValueError, match=r"pi must be a probability vector of length 4"):
        efficiency_loss(chans, [0.5, 0.5])
    with pytest.raises(ValueError, match=r"pi must not put all its mass on one cell"):
        efficiency_loss(chans, [1.0, 0, 0, 0])
