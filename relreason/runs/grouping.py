"""Seeds pooled: runs of one (model, task, setting) are one experiment, aggregated as mean ± std.

    groups, notes = group_runs(runs)        # [Group], notes for the user
    g.label, g.seeds, g.test.mean, g.test.std

A run's setting is its config without what does not change what it computes: the one definition of
relreason.protocol (`setting_identity`: machine and kernel options, the NAR's path, the recipe's
label and the seed), the same the studies use for their cells. Seeds are aggregated with the sample
standard deviation (ddof = 1, relreason.runs.stats), as `relreason ablate` and `relreason reproduce`
do, so every command prints the same numbers for the same runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from relreason.errors import RelreasonError
from relreason.eval.metric_kinds import UNKNOWN_METRIC, Metric
from relreason.protocol import setting_identity
from relreason.runs.records import RunInfo, Status
from relreason.runs.stats import STD_KIND, Summary as Stat


def _flatten(tree: dict, prefix: tuple = ()) -> dict:
    flat = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            flat.update(_flatten(v, prefix + (k,)))
        else:
            flat[prefix + (k,)] = v
    return flat


def _setting_values(cfg: dict) -> dict:
    """{("section", "key"): value} of what a run's setting is made of."""
    return _flatten(setting_identity(cfg))


def setting_key(cfg: dict) -> str:
    """The setting of a stored config as one canonical string: equal for runs that are seeds of one experiment."""
    return json.dumps(sorted(([".".join(map(str, k)), v] for k, v in _setting_values(cfg).items()),
                             key=lambda kv: kv[0]), default=str)


@dataclass
class Group:
    """The runs of one (model, task, setting): seeds of the same experiment."""

    model: str
    task: str
    setting: str  # the ablation variant of its runs, or what tells it apart from a same-named group; else ""
    metric: Metric
    runs: list  # [RunInfo]
    test: Stat
    best_val: Stat
    is_variant: bool = False  # `setting` is an ablation variant, a name that stands on its own

    @property
    def label(self) -> str:
        if self.is_variant:
            return self.setting
        return self.model + (f" [{self.setting}]" if self.setting else "")

    @property
    def seeds(self) -> list:
        return sorted({r.seed for r in self.runs if r.seed is not None})

    def to_dict(self) -> dict:
        return {"model": self.model, "task": self.task, "setting": self.setting, "metric": self.metric.name,
                "metric_label": self.metric.describe(), "lower_is_better": self.metric.lower_is_better,
                "runs": [r.name for r in self.runs], "seeds": self.seeds,
                "finished": sum(r.status is Status.FINISHED for r in self.runs),
                "test": self.test.to_dict(), "best_val": self.best_val.to_dict(), "std": STD_KIND}


def group_runs(runs: list[RunInfo]) -> tuple[list[Group], list[str]]:
    """Groups (model, task, setting) over seeds; returns the groups and notes for the user.

    Multi-task runs contribute one entry per task of `per_task`. Raises RelreasonError when the
    runs of one group were scored with different metrics (their mean would mean nothing)."""
    entries: dict[tuple, list] = {}
    for r in runs:
        for task, (score, metric) in r.scores().items():
            # runs that differ only in seed (and machine settings) are one experiment
            key = (r.model or "?", task, setting_key(r.config) if r.config else f"unknown config: {r.name}")
            entries.setdefault(key, []).append((r, score, metric))
    notes: list[str] = []
    groups = []
    for (model, task, _), items in entries.items():
        # an unfinished run that recorded no metric yet has nothing to disagree with
        scored = [(r, s, m) for r, s, m in items if s is not None or m.name != UNKNOWN_METRIC.name] or items
        if len({(m.name, m.lower_is_better) for _, _, m in scored}) > 1:
            names = ", ".join(f"{r.name} ({m.name})" for r, _, m in scored)
            raise RelreasonError(f"cannot average {model} on {task}: its runs use different metrics: {names}",
                                 "compare runs scored with one metric; re-evaluate old runs with `relreason eval`")
        seeds = [r.seed for r, _, _ in items if r.seed is not None]
        if len(seeds) != len(set(seeds)):
            notes.append(f"{model} on {task}: several runs share a seed ({', '.join(r.name for r, _, _ in items)}); "
                         "each counts in the mean")
        multi = any(r.per_task for r, _, _ in items)
        best = Stat.of([] if multi else [r.best_val for r, _, _ in items])
        groups.append(Group(model, task, "", scored[0][2], [r for r, _, _ in items],
                            Stat.of(s for _, s, _ in items), best))
    _label_settings(groups)
    unfinished = [r.name for r in runs if r.status is not Status.FINISHED]
    if unfinished:
        notes.append(f"no OOD test yet for {len(unfinished)} unfinished run(s): {', '.join(unfinished)}")
    groups.sort(key=lambda g: (g.task, g.model, g.setting))
    return groups, notes


def _label_settings(groups: list[Group]) -> None:
    """Names each group by its ablation variant (when all its runs are cells of one); groups of one
    (model, task) that would still share a name get the config values that tell them apart."""
    for g in groups:
        variants = {r.variant for r in g.runs}
        g.is_variant = len(variants) == 1 and None not in variants
        g.setting = next(iter(variants)) if g.is_variant else ""
    clashes: dict[tuple, list[Group]] = {}
    for g in groups:
        clashes.setdefault((g.model, g.task, g.setting), []).append(g)
    for same in clashes.values():
        if len(same) == 1:
            continue
        flats = [_setting_values(g.runs[0].config) for g in same]
        keys = sorted({k for f in flats for k in f if len({json.dumps(x.get(k), default=str) for x in flats}) > 1})
        for g, f in zip(same, flats):
            parts = [f"{'.'.join(map(str, k))}={json.dumps(f.get(k), default=str)}" for k in keys[:3]]
            diff = ", ".join(parts) + (", …" if len(keys) > 3 else "") if g.runs[0].config else "config unknown"
            g.setting = f"{g.setting}: {diff}" if g.setting else diff


__all__ = ["Group", "group_runs", "setting_key"]
