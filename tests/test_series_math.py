"""series_math: the small statistics the rules and `compare` share."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_trainhealth import series_math
from tb_trainhealth.series_math import rank_correlation


@pytest.mark.parametrize("values", [np.full(50, 3.0), np.zeros(2), np.full(400, 1400.0)])
def test_a_flat_series_has_no_trend(values):
    assert rank_correlation(values) == 0.0


def test_short_series_have_no_trend():
    assert rank_correlation(np.array([])) == 0.0
    assert rank_correlation(np.array([1.0])) == 0.0


def test_strictly_monotonic_series_are_plus_and_minus_one():
    assert rank_correlation(np.arange(10.0) ** 2) == pytest.approx(1.0)
    assert rank_correlation(-np.arange(10.0)) == pytest.approx(-1.0)


def test_ties_get_average_ranks():
    # One jump, then flat: a step function, not a steady rise. Values 0,0,1,1 rank 1.5,1.5,3.5,3.5:
    # Pearson of (0,1,2,3) with (0,0,1,1) = 2/sqrt(5*1) ~ 0.894.
    assert rank_correlation(np.array([5.0, 5.0, 7.0, 7.0])) == pytest.approx(2 / np.sqrt(5))
    # A one-off jump at a third of the way, flat on both sides (the memory_growth false alarm).
    jump = np.concatenate([np.full(100, 1000.0), np.full(200, 1400.0)])
    assert rank_correlation(jump) == pytest.approx(np.sqrt(6) / 3, abs=1e-3)  # point-biserial, < 0.9
    # Ties placed against the trend do not count as a rise.
    assert rank_correlation(np.array([2.0, 1.0, 1.0, 1.0])) < 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-3, 3).map(float), min_size=2, max_size=40))
def test_matches_scipys_spearman_with_ties(values):
    stats = pytest.importorskip("scipy.stats")
    values = np.asarray(values)
    expected = 0.0 if np.all(values == values[0]) else stats.spearmanr(np.arange(len(values)), values).statistic
    assert rank_correlation(values) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("q", [10.0, 50.0, 95.0])
def test_trailing_percentile_is_numpys_percentile_of_the_points_before(q):
    rng = np.random.default_rng(int(q))
    values = rng.lognormal(size=300)
    values[rng.random(300) < 0.1] = np.nan
    values[[7, 150]] = np.inf  # a loss that went inf, as losses do
    window = 41
    got = series_math.trailing_percentile(values, window, q)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows
        expected = [np.nan] + [np.nanpercentile(values[max(0, i - window) : i], q) for i in range(1, window)]
    expected += [np.percentile(values[i - window : i], q) for i in range(window, 300)]
    np.testing.assert_allclose(got, expected, rtol=1e-12, equal_nan=True)
