"""Comparing runs: seeds of one (model, task, setting) aggregated as mean ± std, laid out as a table.

    cmp = compare(runs, group_by="task")      # tasks as rows, models side by side
    cmp.title, cmp.columns, cmp.rows          # rows hold str or Cell (a Stat in a metric's unit)
    compare(runs, "task", against="rt")       # and per other model: minus rt, Welch's interval, the verdict

Every score column (or, when metrics differ between rows, a metric column) names its metric and
direction; averages over tasks appear only when every task has the same metric. With `against`, each
other column's difference from that one is judged by the comparison every table uses
(relreason.runs.stats.difference: Welch's 95% interval and the verdict against a margin). Rendering the table
(rich, md, csv, latex, json) is relreason.runs.run_tables.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Optional

from relreason.errors import RelreasonError
from relreason.eval.metric_kinds import Metric, format_score
from relreason.runs.grouping import Group, group_runs
from relreason.runs.records import RunInfo, Status
from relreason.runs.stats import MARGIN, STD_KIND, Figure, Spread, Summary as Stat, check_margin, difference


class GroupBy(str, enum.Enum):
    MODEL = "model"  # one row per model (setting), tasks side by side
    TASK = "task"  # one row per task, models side by side (the papers' tables)
    SEED = "seed"  # one row per seed, every (model, task) side by side, then mean ± std


def parse_group_by(text: Optional[str]) -> Optional[GroupBy]:
    if text is None:
        return None
    try:
        return GroupBy(text)
    except ValueError:
        raise RelreasonError(f"unknown --group-by {text!r}", "use one of: " + ", ".join(g.value for g in GroupBy)) \
            from None


@dataclass(frozen=True)
class Cell:
    """A table cell holding scores: a Stat in a metric's unit."""

    stat: Stat
    metric: Metric
    show_n: bool = False  # seeds differ between cells of the table: say how many

    def text(self) -> str:
        if not self.stat.n:
            return "-"
        s = format_score(self.stat.mean, self.metric)
        if self.stat.n > 1:
            s += f" ± {format_score(self.stat.std, self.metric)}"
        return s + (f" (n={self.stat.n})" if self.show_n else "")

    def numbers(self) -> tuple[str, str]:
        scale = 100.0 if self.metric.percent else 1.0
        if not self.stat.n:
            return "", ""
        std = "" if self.stat.std is None else f"{self.stat.std * scale:.6g}"
        return f"{self.stat.mean * scale:.6g}", std


@dataclass
class Comparison:
    """A table ready to render: titled columns, rows of str or Cell, notes for stderr, and the groups."""

    title: str
    columns: list
    rows: list
    groups: list
    notes: list = field(default_factory=list)
    differences: list = field(default_factory=list)  # with `against`: {"task", "model", "against", ...}

    def to_dict(self) -> dict:
        return {"title": self.title, "std": STD_KIND, "groups": [g.to_dict() for g in self.groups],
                "notes": self.notes, "differences": self.differences}


def _uniform(groups: Iterable[Group]) -> Optional[Metric]:
    """The one metric of these groups' numbers, or None when they differ. Groups with nothing to show
    yet (unfinished runs that recorded no metric) do not count."""
    groups = list(groups)
    shown = [g for g in groups if g.test.n or g.best_val.n] or groups
    ms = list({(g.metric.name, g.metric.lower_is_better): g.metric for g in shown}.values())
    return ms[0] if len(ms) == 1 else None


def compare(runs: list[RunInfo], group_by: Optional[GroupBy | str] = None, against: Optional[str] = None,
            margin: Optional[float] = None) -> Comparison:
    """Side-by-side table of runs, seeds of one (model, task, setting) aggregated as mean ± std.

    group_by None: one row per (model, task, setting) with seeds, examples, best validation and OOD
    test; "task" / "model": one row per task / model with the other side by side; "seed": one row
    per seed. Every score column (or, when metrics differ between rows, a metric column) names its
    metric and direction. Averages over tasks appear only when every task has the same metric.
    `against` (with "task"): a column per other model, its difference from that one with Welch's 95%
    interval and the verdict against `margin` (default 1 point for scores in %; none for other units)."""
    group_by = parse_group_by(group_by.value if isinstance(group_by, GroupBy) else group_by)
    if margin is not None:
        check_margin(margin)
    if against is not None and group_by is not GroupBy.TASK:
        raise RelreasonError("--against compares the columns of one task", "add --group-by task")
    groups, notes = group_runs(runs)
    if not groups:
        raise RelreasonError("none of these runs has a task and a score to compare",
                             "check them with `relreason runs DIR --json` (see `problems`)")
    ns = {g.test.n for g in groups if g.test.n}
    show_n = len(ns) > 1
    n = next(iter(ns)) if len(ns) == 1 else None
    seeds = "seeds" if n is None else f"{n} seed" + ("s" if n != 1 else "")
    note = f"mean ± std over {seeds}" + (", n per cell" if show_n else "") + " (sample std, ddof=1)"
    build = {None: _long, GroupBy.TASK: _by_task, GroupBy.MODEL: _by_model, GroupBy.SEED: _by_seed}[group_by]
    title, columns, rows = build(groups, show_n, note)
    cmp = Comparison(title, columns, rows, groups, notes)
    if against is not None:
        _add_differences(cmp, against, margin)
    return cmp


def _in_unit(stat: Stat, metric) -> Stat:
    """The stat in the unit shown (percent for a score stored as a fraction): the margin's unit."""
    return Stat(tuple(100.0 * v for v in stat.values)) if metric.percent else stat


def _add_differences(cmp: Comparison, against: str, margin: Optional[float]) -> None:
    """Adds to a by-task comparison, after each column but `against`, its difference from `against`."""
    labels = [c for c in cmp.columns if c not in ("task", "metric")]
    if against not in labels:
        raise RelreasonError(f"--against {against!r} is not a column of this comparison",
                             "use one of: " + ", ".join(labels))
    by = {(g.task, g.label): g for g in cmp.groups}
    for lab in labels:
        if lab == against:
            continue
        col = f"{lab} − {against}"
        cmp.columns.insert(cmp.columns.index(lab) + 1, col)
        for row in cmp.rows:
            if row["task"] == "average":
                row[col] = ""
                continue
            g, ref = by.get((row["task"], lab)), by.get((row["task"], against))
            if g is None or ref is None or not g.test.n or not ref.test.n:
                row[col] = "-"
                continue
            m = margin if margin is not None else MARGIN if g.metric.percent else None
            theirs = _in_unit(ref.test, ref.metric)
            d = difference(_in_unit(g.test, g.metric), Figure(theirs.mean, theirs.std, theirs.n, Spread.STD), m,
                           name="reference")
            verdict = d.verdict.value if d.verdict else "no verdict" + ("" if d.interval is None else ": no margin")
            row[col] = f"{d.diff:+.2f} " + (f"({d.note})" if d.interval is None else f"{d.interval_text()}: {verdict}")
            cmp.differences.append({"task": row["task"], "model": lab, "against": against, "margin": m,
                                    **d.to_dict()})
    judged = f"±{margin:g}" if margin is not None else f"±{MARGIN:g} point (scores in %; no verdict in other units)"
    cmp.title += f"; minus {against}: Welch's 95% interval, verdict against {judged}"


def _long(groups: list[Group], show_n: bool, note: str):
    one = _uniform(groups)
    test_col = f"OOD test ({one.describe()})" if one else "OOD test"
    val_col = "best val" + (f" ({one.label})" if one else "")
    has_setting = any(g.setting for g in groups)
    columns = ["model"] + (["setting"] if has_setting else []) + ["task"] + ([] if one else ["metric"]) + \
        ["seeds", "finished", "examples", val_col, test_col]
    rows = []
    for g in groups:
        examples = Stat.of(r.examples for r in g.runs)
        row = {"model": g.model, "setting": g.setting, "task": g.task, "metric": g.metric.describe(),
               "seeds": ",".join(map(str, g.seeds)) or "?",
               "finished": f"{sum(r.status is Status.FINISHED for r in g.runs)}/{len(g.runs)}",
               "examples": "-" if not examples.n else f"{examples.mean:,.0f}",
               val_col: Cell(g.best_val, g.metric, show_n), test_col: Cell(g.test, g.metric, show_n)}
        rows.append(row)
    return f"runs compared: {note}", columns, rows


def _average(cells: list[Cell]) -> Optional[Cell]:
    """The mean over tasks of the per-task means (as the papers' averages); None if a task is missing."""
    if not cells or any(c is None or not c.stat.n for c in cells):
        return None
    return Cell(Stat((sum(c.stat.mean for c in cells) / len(cells),)), cells[0].metric)


def _by_task(groups: list[Group], show_n: bool, note: str):
    tasks = list(dict.fromkeys(g.task for g in groups))
    labels = list(dict.fromkeys(g.label for g in sorted(groups, key=lambda g: (g.model, g.setting))))
    cell = {(g.task, g.label): Cell(g.test, g.metric, show_n) for g in groups}
    one = _uniform(groups)
    rows = []
    for t in tasks:
        row_metric = _uniform(g for g in groups if g.task == t)
        row = {"task": t, "metric": row_metric.describe() if row_metric else "mixed"}
        row.update({lab: cell.get((t, lab)) for lab in labels})
        rows.append(row)
    columns = ["task"] + ([] if one else ["metric"]) + labels
    avg = {lab: _average([cell.get((t, lab)) for t in tasks]) for lab in labels}
    if one and len(tasks) > 1 and any(avg.values()):
        rows.append({"task": "average", **avg})
    title = f"OOD test, {one.describe()}: {note}" if one else f"OOD test: {note}"
    return title, columns, rows


def _by_model(groups: list[Group], show_n: bool, note: str):
    tasks = list(dict.fromkeys(g.task for g in groups))
    labels = list(dict.fromkeys(g.label for g in sorted(groups, key=lambda g: (g.model, g.setting))))
    cell = {(g.task, g.label): Cell(g.test, g.metric, show_n) for g in groups}
    one = _uniform(groups)
    task_metric = {t: _uniform(g for g in groups if g.task == t) for t in tasks}
    col = {t: t if one else f"{t} ({task_metric[t].describe() if task_metric[t] else 'mixed metrics'})"
           for t in tasks}
    avg = {lab: _average([cell.get((t, lab)) for t in tasks]) for lab in labels}
    with_avg = one is not None and len(tasks) > 1 and any(avg.values())
    rows = []
    for lab in labels:
        row = {"model": lab}
        row.update({col[t]: cell.get((t, lab)) for t in tasks})
        if with_avg:
            row["average"] = avg[lab]
        rows.append(row)
    columns = ["model"] + [col[t] for t in tasks] + (["average"] if with_avg else [])
    title = f"OOD test, {one.describe()}: {note}" if one else f"OOD test: {note}"
    return title, columns, rows


def _by_seed(groups: list[Group], show_n: bool, note: str):
    one = _uniform(groups)
    col = {id(g): f"{g.label} / {g.task}" + ("" if one else f" ({g.metric.describe()})") for g in groups}
    seeds = sorted({r.seed for g in groups for r in g.runs if r.seed is not None})
    rows = []
    for s in seeds:
        row = {"seed": str(s)}
        for g in groups:
            row[col[id(g)]] = Cell(Stat.of(sc for r in g.runs if r.seed == s for sc in [r.scores()[g.task][0]]),
                                   g.metric)
        rows.append(row)
    summary = {"seed": "mean ± std"}
    summary.update({col[id(g)]: Cell(g.test, g.metric, show_n) for g in groups})
    rows.append(summary)
    title = f"OOD test per seed, {one.describe()}" if one else "OOD test per seed"
    return f"{title}; last row: {note}", ["seed"] + [col[id(g)] for g in groups], rows


__all__ = ["GroupBy", "parse_group_by", "Cell", "Comparison", "compare"]
