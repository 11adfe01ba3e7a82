"""Seed statistics: sample std (ddof 1), Student's t quantile and interval, Welch's interval of a difference
and its verdict, against independent references (closed forms, printed t tables, hand computations)."""

from __future__ import annotations

import math
import statistics

import pytest

from relreason.errors import RelreasonError
from relreason.runs.stats import Figure, Spread, Summary, Verdict, check_margin, difference, t975, t_quantile


@pytest.mark.parametrize("df, value", [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (6, 2.4469), (8, 2.3060),
                                       (10, 2.2281), (19, 2.0930), (30, 2.0423), (40, 2.0211), (60, 2.0003),
                                       (120, 1.9799)])
def test_t_quantile_matches_the_printed_t_table(df, value):
    # NIST/SEMATECH e-Handbook 1.3.6.7.2, upper critical values of the t distribution, alpha 0.025, 4 decimals
    assert t975(df) == pytest.approx(value, abs=6e-5)


def test_t_quantile_matches_closed_forms_and_the_normal_limit():
    # df = 1 is the Cauchy distribution: q(p) = tan(pi (p - 1/2)); df = 2: q(p) = (2p - 1) / sqrt(2 p (1 - p))
    for p in (0.6, 0.9, 0.975, 0.995):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
        assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)
    assert t_quantile(0.025, 5) == pytest.approx(-2.5706, abs=6e-5)  # symmetric: -t(0.975, 5)
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959964, abs=1e-6)
    assert t975(1e7) == pytest.approx(1.959964, abs=1e-5)


@pytest.mark.parametrize("df", [1.3, 2.5, 7.25, 15.8])
def test_t_quantile_at_fractional_df_integrates_the_density_to_p(df):
    """Welch's df are fractional: the quantile must hold P(0 < T < q) = 0.475 for the t density itself,
    integrated here by Simpson's rule (independent of the incomplete beta function the code uses)."""
    q = t975(df)
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    n = 20000
    h = q / n
    f = [c * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(n + 1)]
    area = h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))
    assert area == pytest.approx(0.475, abs=1e-9)


def test_sample_std_and_interval():
    xs = [93.1, 95.0, 94.4, 92.2]
    s = Summary.of(xs)
    assert s.std == pytest.approx(statistics.stdev(xs))  # ddof 1, not pstdev
    lo, hi = s.ci95
    half = 3.182446 * statistics.stdev(xs) / 2  # t(0.975, 3) s / sqrt(4)
    assert (lo, hi) == pytest.approx((statistics.mean(xs) - half, statistics.mean(xs) + half))
    assert s.text() == f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}"


def test_one_seed_has_no_spread_and_no_interval():
    s = Summary.of([0.5, None, float("nan")])
    assert (s.n, s.mean, s.std, s.ci95) == (1, 0.5, None, None)
    assert s.text() == "0.50" and Summary.of([]).text() == "-"


def _ours(mean: float, std: float, n: int) -> Summary:
    """n values with exactly this mean and sample std (the first two spread, the rest at the mean)."""
    a = std * math.sqrt((n - 1) / 2)
    return Summary((mean - a, mean + a) + (mean,) * (n - 2))


def test_welch_interval_of_the_difference_by_hand():
    # ours 95 ± 2 over 5 seeds, paper 94 ± 2 (std) over 5: each side's variance of the mean 4 / 5 = 0.8, so
    # se = sqrt(1.6) = 1.264911; Welch-Satterthwaite df = 1.6^2 / (0.8^2 / 4 + 0.8^2 / 4) = 8; t(0.975, 8) = 2.306004
    # -> half width 2.306004 x 1.264911 = 2.916891: [1 - 2.916891, 1 + 2.916891]
    d = difference(_ours(95.0, 2.0, 5), Figure(94.0, 2.0, 5, Spread.STD), margin=1.0)
    assert d.diff == pytest.approx(1.0) and d.df == pytest.approx(8.0)
    assert d.interval == pytest.approx((1 - 2.916891, 1 + 2.916891), abs=1e-5)
    assert d.verdict is Verdict.INCONCLUSIVE and d.note == ""
    # unequal sides: ours 10 ± 3 over 4 (v = 9 / 4 = 2.25, df 3), paper 8 ± 1 (std) over 10 (v = 0.1, df 9):
    # df = 2.35^2 / (2.25^2 / 3 + 0.1^2 / 9) = 5.5225 / 1.6886111 = 3.270395
    d = difference(_ours(10.0, 3.0, 4), Figure(8.0, 1.0, 10, Spread.STD))
    assert d.df == pytest.approx(5.5225 / (2.25 ** 2 / 3 + 0.01 / 9))
    assert d.interval[1] - d.diff == pytest.approx(t975(3.270395) * math.sqrt(2.35), rel=1e-5)


def test_a_standard_error_is_turned_into_a_std_and_an_undefined_one_read_the_wider_way():
    # paper 94 ± 1 over 4 seeds; ours 95 ± 2 over 4 (v = 1, df 3).
    # as a std: v = 1 / 4 = 0.25, df = 1.25^2 / (1 / 3 + 0.0625 / 3) = 4.411765: half t(0.975, 4.41) x sqrt(1.25)
    # as a standard error: std = 1 x sqrt(4) = 2, v = 1, df = 4 / (1 / 3 + 1 / 3) = 6:
    # half 2.446912 x sqrt(2) = 3.460453
    ours, paper = _ours(95.0, 2.0, 4), dict(mean=94.0, pm=1.0, seeds=4)
    as_std = difference(ours, Figure(**paper, spread=Spread.STD))
    as_se = difference(ours, Figure(**paper, spread=Spread.SE))
    undefined = difference(ours, Figure(**paper, spread=Spread.UNDEFINED))
    assert as_std.df == pytest.approx(4.411765, abs=1e-6)
    assert as_std.interval[1] - 1 == pytest.approx(t975(4.411765) * math.sqrt(1.25), rel=1e-6)
    assert as_se.df == pytest.approx(6.0) and as_se.interval[1] - 1 == pytest.approx(3.460453, abs=1e-5)
    assert "std = 1 x √4 = 2.00" in as_se.note
    assert undefined.interval == as_se.interval and "undefined" in undefined.note  # the wider of the two
    # where Welch's df make the std reading the wider one (ours 3 seeds, paper's ± small), it is kept instead
    ours3 = Summary((96.68, 97.80, 97.90))
    wide = difference(ours3, Figure(97.39, 0.19, 10, Spread.UNDEFINED))
    both = [difference(ours3, Figure(97.39, 0.19, 10, s)) for s in (Spread.STD, Spread.SE)]
    assert wide.interval == max((d.interval for d in both), key=lambda i: i[1] - i[0]) == both[0].interval


def test_the_verdict_against_the_margin():
    # paper 50 ± 0 over 10 (its side adds nothing); ours over 4 seeds with std 0.2: half = 3.182446 x 0.1 = 0.318
    paper = Figure(50.0, 0.0, 10, Spread.STD)
    assert difference(_ours(50.3, 0.2, 4), paper, margin=1.0).verdict is Verdict.AGREES  # [-0.02, +0.62] in ±1
    # [+0.18, +0.82]: inside ±1, so agrees although it excludes 0 (a difference shown smaller than the margin);
    # with a margin of 0.5 it is not inside, and it lies above 0: higher
    assert difference(_ours(50.5, 0.2, 4), paper, margin=1.0).verdict is Verdict.AGREES
    assert difference(_ours(50.5, 0.2, 4), paper, margin=0.5).verdict is Verdict.HIGHER
    assert difference(_ours(48.0, 0.2, 4), paper, margin=1.0).verdict is Verdict.LOWER  # [-2.32, -1.68]
    assert difference(_ours(50.3, 2.0, 4), paper, margin=1.0).verdict is Verdict.INCONCLUSIVE  # [-2.9, +3.5]
    assert difference(_ours(50.3, 0.2, 4), paper, margin=None).verdict is None  # no margin: interval only


def test_the_agrees_verdict_needs_the_whole_interval_inside_the_margin():
    # ours 50.7 ± 0.2 over 4 against 50 ± 0: [0.382, 1.018] (half 0.3182446): higher, and not inside ±1
    d = difference(_ours(50.7, 0.2, 4), Figure(50.0, 0.0, 10, Spread.STD), margin=1.0)
    assert d.interval == pytest.approx((0.7 - 0.3182446, 0.7 + 0.3182446), abs=1e-6)
    assert d.verdict is Verdict.HIGHER
    assert difference(_ours(50.6, 0.2, 4), Figure(50.0, 0.0, 10, Spread.STD), margin=1.0).verdict is Verdict.AGREES


@pytest.mark.parametrize("paper, why", [(Figure(94.0, 0.0, 10, Spread.STD), "± is 0"),
                                        (Figure(94.0, 1.5, 1, Spread.STD), "one seed"),
                                        (Figure(94.0, None, 20), "not printed"),
                                        (Figure(94.0, 1.5, None, Spread.UNDEFINED), "seed count not given")])
def test_a_paper_side_without_spread_gives_the_interval_from_ours_alone_and_says_so(paper, why):
    # ours 95 ± 2 over 4: from our side only, df 3 and half 3.182446 x 2 / 2
    d = difference(_ours(95.0, 2.0, 4), paper)
    assert d.df == pytest.approx(3.0) and d.interval == pytest.approx((1 - 3.182446, 1 + 3.182446), abs=1e-5)
    assert "interval from ours only" in d.note and why in d.note


def test_one_seed_of_ours_gets_the_difference_but_no_interval_or_verdict():
    d = difference(Summary((96.48,)), Figure(94.24, 1.5, 20, Spread.STD))
    assert d.diff == pytest.approx(2.24) and (d.interval, d.df, d.verdict) == (None, None, None)
    assert "not meaningful" in d.note and difference(Summary(()), Figure(94.24)) is None
    same = difference(_ours(95.0, 0.0, 3), Figure(95.0, 0.0, 3, Spread.STD))  # no spread anywhere: a point
    assert same.interval == (0.0, 0.0) and same.df is None and same.verdict is Verdict.AGREES


def test_an_average_over_tasks_sums_the_tasks_variances():
    # two tasks, each ours ± 2 over 5 (v 0.8) and paper ± 2 (std) over 5 (v 0.8): the mean's variance is
    # (0.8 + 0.8 + 0.8 + 0.8) / 2^2 = 0.8; df = 0.8^2 / (4 x 0.2^2 / 4) = 16; t(0.975, 16) = 2.119905
    # -> half 2.119905 x sqrt(0.8) = 1.896104; diff = (95 + 80) / 2 - (94 + 80.5) / 2 = 0.25
    d = difference([_ours(95.0, 2.0, 5), _ours(80.0, 2.0, 5)],
                   [Figure(94.0, 2.0, 5, Spread.STD), Figure(80.5, 2.0, 5, Spread.STD)])
    assert d.diff == pytest.approx(0.25) and d.df == pytest.approx(16.0)
    assert d.interval == pytest.approx((0.25 - 1.896104, 0.25 + 1.896104), abs=1e-5)


@pytest.mark.parametrize("bad", [-1.0, 0.0, math.nan, math.inf])
def test_a_margin_must_be_a_positive_number(bad):
    with pytest.raises(RelreasonError, match="must be a positive number"):
        check_margin(bad)
    assert check_margin(0.5) == 0.5
