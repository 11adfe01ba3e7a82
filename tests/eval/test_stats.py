"""Seed statistics: sample std (ddof 1) and Student's t 95% interval, against independent references."""

from __future__ import annotations

import statistics

import pytest

from relreason.eval.stats import Summary, t975


@pytest.mark.parametrize("df, value", [(1, 12.706), (2, 4.303), (4, 2.776), (19, 2.093), (30, 2.042),
                                       (40, 2.021), (60, 2.000), (120, 1.980)])
def test_t_quantile_matches_the_t_table(df, value):
    # df 40, 60 and 120 are beyond the stored table: the expansion must land on the printed quantiles
    assert t975(df) == pytest.approx(value, abs=1.5e-3)


def test_sample_std_and_interval():
    xs = [93.1, 95.0, 94.4, 92.2]
    s = Summary.of(xs)
    assert s.std == pytest.approx(statistics.stdev(xs))  # ddof 1, not pstdev
    lo, hi = s.ci95
    half = 3.182 * statistics.stdev(xs) / 2  # t(0.975, 3) s / sqrt(4)
    assert (lo, hi) == pytest.approx((statistics.mean(xs) - half, statistics.mean(xs) + half))
    assert s.contains(94.24) and not s.contains(97.39)
    assert s.text() == f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}"


def test_one_seed_has_no_spread_and_no_interval():
    s = Summary.of([0.5, None, float("nan")])
    assert (s.n, s.mean, s.std, s.ci95, s.contains(0.5)) == (1, 0.5, None, None, None)
    assert s.text() == "0.50" and Summary.of([]).text() == "-"
