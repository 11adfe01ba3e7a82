"""Honest statistics over seeds: mean, sample standard deviation (ddof = 1) and a 95% interval.

Every table that aggregates seeds (`compare`, `ablate`, `reproduce`) uses `Summary`, so "± std" means
one thing everywhere: the sample standard deviation, as papers report it. One seed has no spread and
no interval (shown as such, never as ± 0). The interval is Student's t interval for the mean,
mean ± t(0.975, n - 1) · s / sqrt(n); `contains` says whether a published mean lies inside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

# t(0.975, df) for df = 1..30 (two-sided 95%), from the standard t table (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964  # the normal quantile the t quantile tends to


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (table up to 30, then the
    Cornish-Fisher expansion around the normal quantile, exact to 3 decimals there)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


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

    def contains(self, value: float) -> Optional[bool]:
        """Whether `value` lies in the 95% interval; None when there is no interval (one seed)."""
        ci = self.ci95
        return None if ci is None else ci[0] <= value <= ci[1]

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


STD_KIND = "sample (ddof=1)"  # how every table's "±" is computed, stated in their notes and JSON
