import math
import pickle

import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet


def test_symmetric_from_epsilon_has_that_epsilon_per_bit():
    c = Channel.symmetric_from_epsilon(1.3)
    assert c.p == pytest.approx(1 / (math.exp(1.3) + 1))
    assert c.q == pytest.approx(1 - c.p)
    assert c.epsilon_bit == pytest.approx(1.3)
    assert c.epsilon(3) == pytest.approx(3.9)
    assert c.swap_epsilon() == pytest.approx(2.6)


def test_optimized_unary_one_hot_swap_is_epsilon():
    c = Channel.optimized_unary(2.0)
    assert (c.p, c.q) == (pytest.approx(1 / (math.exp(2.0) + 1)), 0.5)
    # changing a one-hot value flips one bit up and one down: exactly eps (Wang et al. 2017)
    assert c.swap_epsilon() == pytest.approx(2.0)
    # the generic w * eps_bit bound is looser for this asymmetric channel
    assert c.epsilon(2) > 2.0


def test_warner_and_unrelated_question_translate_to_p_q():
    assert Channel.warner(0.75) == Channel(0.25, 0.75)
    u = Channel.unrelated_question(0.5)
    assert (u.p, u.q) == (0.25, 0.75)


def test_composition_matches_enumeration():
    first, second = Channel(0.1, 0.7), Channel(0.2, 0.95)
    both = first.then(second)
    for x, expected in ((0, first.p * second.q + (1 - first.p) * second.p),
                        (1, first.q * second.q + (1 - first.q) * second.p)):
        assert (both.q if x else both.p) == pytest.approx(expected)
    # identity is neutral on both sides (Carette eq. 4)
    assert first.then(Channel.identity()) == first
    assert Channel.identity().then(first) == first


def test_rappor_is_permanent_then_instantaneous():
    f, p, q = 0.5, 0.25, 0.75
    r = Channel.rappor(f, p, q)
    # P(report 1 | true 0) = P(perm 1 | 0) q + P(perm 0 | 0) p, with P(perm 1 | 0) = f/2
    assert r.p == pytest.approx(f / 2 * q + (1 - f / 2) * p)
    assert r.q == pytest.approx((1 - f / 2) * q + f / 2 * p)


def test_inverse_matrix_inverts():
    c = Channel(0.13, 0.71)
    assert np.allclose(c.inverse_matrix() @ c.matrix(), np.eye(2))


def test_noise_free_channel_has_infinite_epsilon():
    assert Channel.identity().epsilon_bit == math.inf
    assert Channel(0.0, 0.5).swap_epsilon() == math.inf


@pytest.mark.parametrize("kwargs, match", [
    (dict(p=0.6, q=0.4), r"q must be in \(p, 1\], got p=0.6, q=0.4"),
    (dict(p=-0.1, q=0.4), r"p must be in \[0, 1\], got p=-0.1"),
    (dict(p=0.1, q=1.5), r"q must be in \[0, 1\], got q=1.5"),
    (dict(p=float("nan"), q=0.5), r"p must be in \[0, 1\], got p=nan"),
    (dict(p="0.1", q=0.5), r"p must be a real number, got p='0.1'"),
])
def test_channel_validation_names_parameter_and_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Channel(**kwargs)


def test_constructor_validation():
    with pytest.raises(ValueError, match=r"flip must be in \[0, 0.5\), got flip=0.5"):
        Channel.symmetric(0.5)
    with pytest.raises(ValueError, match=r"epsilon must be > 0, got epsilon=0"):
        Channel.symmetric_from_epsilon(0)
    with pytest.raises(ValueError, match=r"truth_probability must be in \(0.5, 1\], got truth_probability=0.4"):
        Channel.warner(0.4)
    with pytest.raises(ValueError, match=r"f must be in \[0, 1\), got f=1.0"):
        Channel.rappor(1.0, 0.25, 0.75)
    with pytest.raises(ValueError, match=r"differing_bits must be >= 0, got differing_bits=-1"):
        Channel(0.1, 0.9).epsilon(-1)


def test_channel_is_frozen():
    c = Channel(0.1, 0.9)
    with pytest.raises(Exception):
        c.p = 0.2


def test_channel_set_arrays_and_report_epsilon():
    cs = ChannelSet((Channel.symmetric_from_epsilon(0.5), Channel.symmetric_from_epsilon(1.0),
                     Channel.symmetric_from_epsilon(2.0)))
    assert np.allclose(cs.epsilons, [0.5, 1.0, 2.0])
    assert cs.epsilon(1) == pytest.approx(2.0)
    assert cs.epsilon(2) == pytest.approx(3.0)
    assert cs.epsilon() == pytest.approx(3.5)
    assert cs.is_symmetric
    assert cs.subset([2, 0]).p.tolist() == [cs.p[2], cs.p[0]]
    assert pickle.loads(pickle.dumps(cs)) == cs
    with pytest.raises(ValueError, match="read-only"):
        cs.p[0] = 0.3


def test_channel_set_validation():
    with pytest.raises(ValueError, match=r"channels must name at least one bit, got channels=\(\)"):
        ChannelSet(())
    with pytest.raises(ValueError, match=r"p and q must have the same length, got len\(p\)=2, len\(q\)=1"):
        ChannelSet.from_arrays([0.1, 0.2], [0.9])
    with pytest.raises(ValueError, match=r"differing_bits must be <= 2 bits, got differing_bits=3"):
        ChannelSet.uniform(Channel(0.1, 0.9), 2).epsilon(3)
