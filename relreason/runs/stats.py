"""Honest statistics over seeds: mean, sample standard deviation (ddof = 1), 95% intervals, and the
verdict of ours against a published (or reference) figure.

Every table that aggregates seeds (`compare`, `ablate`, `reproduce`, RESULTS.md) uses `Summary`, so
"± std" means one thing everywhere: the sample standard deviation, as papers report it. One seed has
no spread and no interval (shown as such, never as ± 0). `Summary.ci95` is Student's t interval of
the mean, mean ± t(0.975, n - 1) · s / sqrt(n).

`difference` is the one comparison of every table: Welch's 95% interval of ours minus theirs, from
both means, stds and seed counts (Welch-Satterthwaite degrees of freedom, Student's t quantile), and a
verdict against an equivalence margin: `agrees` when the interval lies inside ± margin, `lower` /
`higher` when it excludes 0 on that side, otherwise `inconclusive`. A published "±" is read as the
paper defines it (`Spread`); where it does not, both readings (std, or standard error turned into a
std as se · sqrt(n)) are tried and the wider interval, the harder one to call agreement, is kept.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Iterable, Optional, Sequence

from relreason.errors import RelreasonError

MARGIN = 1.0  # default equivalence margin: 1 percentage point of a score in %, about a CLRS-30 seed's rounding
STD_KIND = "sample (ddof=1)"  # how every table's "±" is computed, stated in their notes and JSON


# -- Student's t quantile (no scipy: the regularized incomplete beta function, then bisection) ---------------
def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function, by the modified Lentz method
    (Numerical Recipes, 2nd ed., section 6.4, `betacf`)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _beta_inc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` (any positive real) degrees of freedom."""
    tail = 0.5 * _beta_inc(df / 2.0, 0.5, df / (df + t * t))  # P(T > |t|)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The `p` quantile of Student's t with `df` degrees of freedom (a positive real, as Welch's are;
    math.inf gives the normal quantile), to about 1e-10."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if math.isinf(df):
        return NormalDist().inv_cdf(p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):  # bisection: the cdf is increasing
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t (two-sided 95%) with `df` degrees of freedom."""
    return t_quantile(0.975, df)


@dataclass(frozen=True)
class Summary:
    """Scores of the seeds of one cell (NaN and missing values left out)."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Iterable[Optional[float]]) -> "Summary":
        return cls(tuple(float(v) for v in values if v is not None and not math.isnan(v)))

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> Optional[float]:
        return sum(self.values) / self.n if self.values else None

    @property
    def std(self) -> Optional[float]:
        """Sample standard deviation (ddof = 1); None below two values."""
        if self.n < 2:
            return None
        m = self.mean
        return math.sqrt(sum((x - m) ** 2 for x in self.values) / (self.n - 1))

    @property
    def ci95(self) -> Optional[tuple[float, float]]:
        """Student's t 95% interval of the mean; None below two values."""
        if self.n < 2:
            return None
        half = t975(self.n - 1) * self.std / math.sqrt(self.n)
        return self.mean - half, self.mean + half

    def text(self, digits: int = 2) -> str:
        """"94.10 ± 0.52" (sample std), "94.10" for one value, "-" for none."""
        if not self.n:
            return "-"
        s = f"{self.mean:.{digits}f}"
        return s + (f" ± {self.std:.{digits}f}" if self.n > 1 else "")

    def to_dict(self) -> dict:
        ci = self.ci95
        return {"mean": self.mean, "std": self.std, "n": self.n, "ci95": list(ci) if ci else None,
                "values": list(self.values), "std_kind": STD_KIND}


# -- ours against theirs: Welch's interval of the difference and a verdict -----------------------------------
class Spread(str, enum.Enum):
    """What a published "±" is."""

    STD = "std"  # the paper says: the standard deviation over its seeds
    SE = "se"  # the paper says: the standard error of its mean (std = se · sqrt(n))
    UNDEFINED = "undefined"  # the paper does not say: both readings are tried, the wider interval kept


class Verdict(str, enum.Enum):
    AGREES = "agrees"  # the interval lies inside ± margin
    LOWER = "lower"  # the interval lies below 0: ours is lower
    HIGHER = "higher"  # the interval lies above 0: ours is higher
    INCONCLUSIVE = "inconclusive"  # none of these: more seeds would tell


@dataclass(frozen=True)
class Figure:
    """Their side of a comparison: a mean, its printed "±" (None: not printed) with what that ± is, and the
    seed count (None: not given). The papers' figures are these (relreason.studies.variants.Published)."""

    mean: float
    pm: float | None = None
    seeds: int | None = None
    spread: Spread = Spread.UNDEFINED  # a "±" nobody defined is read the way that is harder to agree with

    def text(self) -> str:
        """"94.24 ± 1.50 (20 seeds)" (a std), "± 0.19 se" for a standard error, "(± undefined, ...)"."""
        s = f"{self.mean:.2f}"
        if self.pm is not None:
            s += f" ± {self.pm:.2f}" + (" se" if self.spread is Spread.SE else "")
        what = ["± undefined"] if self.pm is not None and self.spread is Spread.UNDEFINED else []
        what += [f"{self.seeds} seed{'s' * (self.seeds != 1)}"] if self.seeds else []
        return s + (f" ({', '.join(what)})" if what else "")


@dataclass(frozen=True)
class Difference:
    """Ours minus theirs, Welch's 95% interval of it and the verdict; no interval, df or verdict when our
    side has one seed (the difference is then not meaningful)."""

    diff: float
    interval: tuple[float, float] | None
    df: float | None  # Welch-Satterthwaite; None when no side has any spread
    verdict: Verdict | None
    note: str = ""  # how their "±" was read, or why the interval is from our side only or missing

    def interval_text(self, digits: int = 2) -> str:
        """"[-0.95, +1.09], df 2.3" (then the note), or the note alone when there is no interval."""
        if self.interval is None:
            return self.note
        lo, hi = self.interval
        s = f"[{lo:+.{digits}f}, {hi:+.{digits}f}]" + (f", df {self.df:.1f}" if self.df is not None else "")
        return s + (f"; {self.note}" if self.note else "")

    def to_dict(self) -> dict:
        return {"diff": self.diff, "interval95": list(self.interval) if self.interval else None, "df": self.df,
                "verdict": self.verdict.value if self.verdict else None, "note": self.note}


def check_margin(margin: float) -> float:
    """The margin itself when it is a positive finite number; otherwise a one-line error."""
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise RelreasonError(f"--margin {margin} must be a positive number (in the table's unit)",
                             f"e.g. --margin {MARGIN:g} (percentage points)")
    return float(margin)


def _their_readings(fig: Figure, name: str) -> list[tuple[float, str]]:
    """(the variance of their mean, how their ± was read) for each reading of it; [] when their side adds
    nothing to the interval (no spread printed, a seed count not given or of one, a ± of 0)."""
    if fig.pm is None or fig.seeds is None or fig.seeds < 2 or fig.pm == 0:
        return []
    n = fig.seeds
    std = fig.pm * math.sqrt(n)  # a standard error turned into a std
    if fig.spread is Spread.STD:
        return [(fig.pm ** 2 / n, "")]
    if fig.spread is Spread.SE:
        return [(std ** 2 / n, f"{name} ± is a standard error: std = {fig.pm:g} x √{n} = {std:.2f}")]
    return [(fig.pm ** 2 / n, f"{name} ± undefined, read as a std (the wider interval)"),
            (std ** 2 / n, f"{name} ± undefined, read as a standard error (the wider interval): std = {fig.pm:g} "
                           f"x √{n} = {std:.2f}")]


def _only_ours(fig: Figure, name: str) -> str:
    if fig.pm is None:
        return f"interval from ours only: {name} spread not printed"
    if fig.seeds is None:
        return f"interval from ours only: {name} seed count not given"
    if fig.seeds < 2:
        return f"interval from ours only: {name} figure is one seed"
    return f"interval from ours only: {name} ± is 0"


def _welch(diff: float, parts: Sequence[tuple[float, float]], margin: float | None,
           note: str) -> Difference:
    """Welch's 95% interval of `diff` from the variances of its independent parts, each (variance, df)."""
    var = sum(v for v, _ in parts)
    if var == 0:
        lo = hi = diff
        df = None
    else:
        df = var ** 2 / sum(v ** 2 / d for v, d in parts if v > 0)  # Welch-Satterthwaite
        half = t975(df) * math.sqrt(var)
        lo, hi = diff - half, diff + half
    if margin is None:
        verdict = None
    elif -margin <= lo and hi <= margin:
        verdict = Verdict.AGREES
    elif hi < 0:
        verdict = Verdict.LOWER
    elif lo > 0:
        verdict = Verdict.HIGHER
    else:
        verdict = Verdict.INCONCLUSIVE
    return Difference(diff, (lo, hi), df, verdict, note)


def difference(ours: Sequence[Summary] | Summary, theirs: Sequence[Figure] | Figure, margin: float | None = MARGIN,
               name: str = "published") -> Difference | None:
    """Ours minus theirs with Welch's 95% interval and the verdict (`margin` None: no verdict, e.g. a unit
    with no declared margin). Given lists (one Summary and one Figure per task), the difference of the
    means over the tasks, its variance the sum of the tasks' over the tasks' count squared. None when ours
    has no value; an interval-less Difference when any of ours is one seed. `name` says whose figure it is."""
    ours_l = [ours] if isinstance(ours, Summary) else list(ours)
    theirs_l = [theirs] if isinstance(theirs, Figure) else list(theirs)
    if len(ours_l) != len(theirs_l) or not ours_l:
        raise ValueError("one figure per summary, at least one")
    if any(not o.n for o in ours_l):
        return None
    k = len(ours_l)
    diff = sum(o.mean for o in ours_l) / k - sum(f.mean for f in theirs_l) / k
    if any(o.n < 2 for o in ours_l):
        return Difference(diff, None, None, None, "one seed: the difference is not meaningful")
    mine = [(o.std ** 2 / o.n / k ** 2, o.n - 1) for o in ours_l]
    readings = [_their_readings(f, name) for f in theirs_l]
    if not any(readings):
        notes = dict.fromkeys(_only_ours(f, name) for f in theirs_l)
        return _welch(diff, mine, margin, "; ".join(notes))
    # a figure whose ± is undefined has two readings: all of them read as std, or all as se; the wider is kept
    candidates = []
    for pick in (0, -1):
        parts, notes = list(mine), []
        for f, r in zip(theirs_l, readings):
            if r:
                var, note = r[pick]
                parts.append((var / k ** 2, f.seeds - 1))
                notes.append(note)
            else:
                notes.append(_only_ours(f, name).replace("interval from ours only: ", "nothing from their side: ")
                             if k > 1 else "")
        candidates.append(_welch(diff, parts, margin, "; ".join(dict.fromkeys(n for n in notes if n))))
    return max(candidates, key=lambda d: d.interval[1] - d.interval[0])
