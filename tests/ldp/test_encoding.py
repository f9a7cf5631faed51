import numpy as np
import pytest

from ldp_marginals.ldp.channels import Channel, ChannelSet
from ldp_marginals.ldp.encoding import Feature, Layout, has_padding, pack_bits, padding_mask, unpack_bits
from ldp_marginals.ldp.randomizer import ClientRandomizer, SecureUniform, randomize_bits
from tests.stats import Z


@pytest.fixture
def layout():
    return Layout((Feature.boolean("dark_mode"), Feature.categorical("os", ["mac", "win", "linux"]),
                   Feature.boolean("beta")))


def test_layout_labels_and_bits(layout):
    assert layout.labels == ("dark_mode", "os=mac", "os=win", "os=linux", "beta")
    assert layout.n_bits == 5 and layout.n_bytes == 1
    assert list(layout.bits_of("os")) == [1, 2, 3]
    assert layout.bit_index("os=linux") == 3
    assert layout.exclusive_groups == ((1, 2, 3),)
    assert layout.encode({"dark_mode": True, "os": "win", "beta": False}).tolist() == [1, 0, 1, 0, 0]
    assert layout.group_sets(["os", "beta"]) == [(1, 4), (2, 4), (3, 4)]
    assert layout.group_sets(["dark_mode", "os"]) == [(0, 1), (0, 2), (0, 3)]


def test_layout_validation(layout):
    with pytest.raises(ValueError, match=r"value of feature 'os' must be one of \['mac', 'win', 'linux'\], got value='bsd'"):
        layout.encode({"dark_mode": True, "os": "bsd", "beta": False})
    with pytest.raises(ValueError, match=r"record must give a value for every feature, got missing=\['beta'\]"):
        layout.encode({"dark_mode": True, "os": "mac"})
    with pytest.raises(ValueError, match=r"feature names must be unique, got duplicates=\['a'\]"):
        Layout((Feature.boolean("a"), Feature.boolean("a")))
    with pytest.raises(ValueError, match=r"values must list at least 2 values for feature 'x', got values=\('a',\)"):
        Feature.categorical("x", ["a"])
    with pytest.raises(ValueError, match=r"kind must be one of \['boolean', 'categorical', 'numeric'\], "
                                         r"got kind='int'"):
        Feature("x", "int")
    with pytest.raises(ValueError, match=r"label must be one of the layout's bit labels, got label='os=bsd'"):
        layout.bit_index("os=bsd")


def test_pack_bit_order_is_fixed_by_the_product():
    bits = np.zeros(12, dtype=np.uint8)
    bits[[0, 3, 9, 11]] = 1
    data = pack_bits(bits)
    assert data.tolist() == [0b00001001, 0b00001010]
    for i in range(12):
        assert (data[i // 8] >> (i % 8)) & 1 == bits[i]


def test_pack_unpack_round_trip_and_errors():
    rng = np.random.default_rng(0)
    bits = (rng.random((100, 13)) < 0.5).astype(np.uint8)
    packed = pack_bits(bits)
    assert packed.shape == (100, 2)
    assert np.array_equal(unpack_bits(packed, 13), bits)
    assert np.array_equal(unpack_bits(packed[0].tobytes(), 13), bits[0])
    with pytest.raises(ValueError, match=r"packed reports must have 2 bytes for 13 bits, got length=3"):
        unpack_bits(np.zeros((1, 3), np.uint8), 13)
    bad = packed.copy()
    bad[5, 1] |= 0b1000_0000
    with pytest.raises(ValueError, match=r"padding bits past bit 12 must be 0"):
        unpack_bits(bad, 13)
    assert padding_mask(bad, 13).tolist() == [i == 5 for i in range(100)]
    assert [has_padding(row.tobytes(), 13) for row in bad] == padding_mask(bad, 13).tolist()
    assert not has_padding(b"\xff", 8) and has_padding(b"\x40", 6) and not has_padding(b"\x20", 6)
    with pytest.raises(ValueError, match="bits must contain only 0 and 1"):
        pack_bits([0, 2])


@pytest.mark.statistical
def test_seeded_randomizer_matches_channel_probabilities():
    chans = ChannelSet.from_arrays([0.1, 0.3, 0.0], [0.8, 0.6, 1.0])
    n = 200_000
    truth = np.tile([[1, 0, 1], [0, 1, 0]], (n // 2, 1)).astype(np.uint8)
    noisy = randomize_bits(truth, chans, np.random.default_rng(7))
    for x in (1, 0):
        rows = noisy[truth[:, 0] == x]
        # in these rows bits 0 and 2 are x and bit 1 is 1 - x
        expect = np.where(np.array([x, 1 - x, x]) == 1, chans.q, chans.p)
        rate = rows.mean(axis=0)
        tol = Z * np.sqrt(np.maximum(expect * (1 - expect), 1e-12) / rows.shape[0])
        assert np.all(np.abs(rate - expect) <= tol)
    # q = 1 and p = 0 are exact, not approximately so
    assert noisy[truth[:, 2] == 1, 2].all() and not noisy[truth[:, 2] == 0, 2].any()
    # same seed, same reports
    assert np.array_equal(noisy, randomize_bits(truth, chans, np.random.default_rng(7)))


@pytest.mark.statistical
def test_secure_source_is_uniform_and_randomizes(layout):
    u = SecureUniform().random((100_000,))
    assert 0.0 <= u.min() and u.max() < 1.0
    # mean of U(0,1) has sd sqrt(1/12/n)
    assert abs(u.mean() - 0.5) <= Z * np.sqrt(1 / 12 / u.size)
    client = ClientRandomizer(layout, ChannelSet.uniform(Channel.symmetric(0.25), layout.n_bits))
    reports = [client.randomize({"dark_mode": True, "os": "mac", "beta": False}) for _ in range(4000)]
    bits = unpack_bits(np.frombuffer(b"".join(reports), np.uint8).reshape(-1, 1), 5)
    expect = np.array([0.75, 0.75, 0.25, 0.25, 0.25])
    assert np.all(np.abs(bits.mean(0) - expect) <= Z * np.sqrt(expect * (1 - expect) / 4000))


def test_client_randomizer_validation(layout):
    with pytest.raises(ValueError, match=r"channels must have one channel per bit \(5\), got len\(channels\)=4"):
        ClientRandomizer(layout, ChannelSet.uniform(Channel(0.1, 0.9), 4))
    client = ClientRandomizer(layout, ChannelSet.uniform(Channel(0.1, 0.9), 5), np.random.default_rng(1))
    assert client.randomize_many(np.zeros((3, 5), np.uint8)).shape == (3, 1)
