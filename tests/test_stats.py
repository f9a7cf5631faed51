"""The power of the statistical bands of tests/stats.py: a band over ``replicates_for()`` replicates
catches a variance formula 5% off (either way) except with probability MISS, one replicate fewer
does not, too few replicates are refused, and a seeded draw shows it."""
import numpy as np
import pytest

from tests.stats import (
    ALPHA,
    DETECT,
    MISS,
    _passes,
    assert_variance_ratio,
    detectable_error,
    replicates_for,
)


@pytest.mark.parametrize("elements, kurtosis", [(1, None), (25, None), (1, 36.75)])
def test_replicates_for_is_the_fewest_that_catch_the_error(elements, kurtosis):
    r = replicates_for(DETECT, elements, kurtosis)
    for factor in (1 - DETECT, 1 + DETECT):   # P(the band passes a formula 5% off) <= MISS
        assert _passes(r, factor, elements, kurtosis, ALPHA) <= MISS
    assert max(_passes(r - 1, f, elements, kurtosis, ALPHA) for f in (1 - DETECT, 1 + DETECT)) > MISS
    assert _passes(r, 1.0, elements, kurtosis, ALPHA) >= 1 - ALPHA / elements   # the false-alarm rate


def test_the_old_bands_let_a_15_percent_error_pass_and_are_refused():
    # 1,000 replicates: the band [0.80, 1.23] passes a formula 15% high with probability ~0.97
    assert _passes(1000, 1.15, 1, None, ALPHA) > 0.9 and detectable_error(1000) > 0.4
    with pytest.raises(ValueError, match=r"1000 replicates cannot catch a variance 5.0% off .* = 53728"):
        assert_variance_ratio(np.zeros((1000, 1)), 1.0)
    with pytest.raises(ValueError, match="detect must be in"):
        assert_variance_ratio(np.zeros((60_000, 1)), 1.0, detect=0.2)


@pytest.mark.statistical
def test_a_seeded_band_passes_the_truth_and_fails_5_percent_either_way():
    samples = np.random.default_rng(5).standard_normal(replicates_for())
    assert_variance_ratio(samples, 1.0)
    for wrong in (1 - DETECT, 1 + DETECT):
        with pytest.raises(AssertionError, match="variance ratio outside"):
            assert_variance_ratio(samples, wrong)
