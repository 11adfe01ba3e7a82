"""The metrics a run may be scored with: what a score means, its unit and which way is better.

    m = resolve_metric(res.metric, res.lower_is_better, task, metric_of)
    m.describe(), format_score(0.873, m)           # "accuracy/F1 %, higher is better", "87.30"

Scores are stored as the metric computes them (CLRS: fractions in [0, 1]) and shown in the metric's
unit (CLRS: percent). A run that recorded no metric (results.json written before the key existed, or
no results yet) takes what the caller's `metric_of(task)` knows, else it is said to be unknown,
never guessed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional

from relreason.registry import Registry


@dataclass(frozen=True)
class Metric:
    name: str  # the key results.json stores as "metric"
    label: str  # what the numbers are, in the unit shown
    short: str  # a narrow label for the `runs` table
    percent: bool  # stored as fractions in [0, 1], shown x 100
    lower_is_better: Optional[bool]  # None: the run did not say and no registry knows

    @property
    def direction(self) -> str:
        if self.lower_is_better is None:
            return "direction unknown"
        return "lower is better" if self.lower_is_better else "higher is better"

    @property
    def score_short(self) -> str:
        """The narrow label beside a score as stored, not in the metric's display unit: a fraction in [0, 1]
        where the metric is shown in percent ("acc/F1 ↑" for "acc/F1 % ↑")."""
        return self.short.replace(" %", "") if self.percent else self.short

    def describe(self) -> str:
        """E.g. "accuracy/F1 %, higher is better"."""
        return f"{self.label}, {self.direction}"


METRICS: Registry[Metric] = Registry("metric")
METRICS.register("clrs", Metric("clrs", "accuracy/F1 %", "acc/F1 % ↑", percent=True, lower_is_better=False))
METRICS.register("clrs_mse", Metric("clrs_mse", "mean squared error of the scalar outputs", "MSE ↓", percent=False,
                                    lower_is_better=True))
METRICS.register("text_clrs", Metric("text_clrs", "CLRS-Text accuracy/F1 %", "text acc/F1 % ↑", percent=True,
                                     lower_is_better=False))
METRICS.register("relative_loss", Metric("relative_loss", "relative loss", "rel. loss ↓", percent=False,
                                         lower_is_better=True))
UNKNOWN_METRIC = Metric("unknown", "score (metric not recorded)", "?", percent=False, lower_is_better=None)

# metric_of(task) -> (metric name, lower_is_better) or None: where scores come from when a run's
# results.json predates the "metric" key (the CLI passes the task registry's answer)
MetricLookup = Callable[[str], Optional[tuple[str, bool]]]


def resolve_metric(name: Optional[str], lower_is_better: Optional[bool], task: Optional[str] = None,
                   metric_of: Optional[MetricLookup] = None) -> Metric:
    """The metric a score was computed with: what the run recorded, else what `metric_of(task)` says."""
    if name is None and task is not None and metric_of is not None:
        known = metric_of(task)
        if known is not None:
            name, recorded = known
            lower_is_better = recorded if lower_is_better is None else lower_is_better
    if name is None:
        return dataclasses.replace(UNKNOWN_METRIC, lower_is_better=lower_is_better)
    if name in METRICS:
        m = METRICS.get(name)
        if lower_is_better is not None and lower_is_better != m.lower_is_better:
            m = dataclasses.replace(m, lower_is_better=lower_is_better)
        return m
    return Metric(name, name, name, percent=False, lower_is_better=lower_is_better)


def format_score(value: Optional[float], metric: Metric) -> str:
    if value is None:
        return "-"
    return f"{value * 100:.2f}" if metric.percent else f"{value:.4f}"


__all__ = ["Metric", "METRICS", "UNKNOWN_METRIC", "MetricLookup", "resolve_metric", "format_score"]
