"""Runs and comparisons as tables: the `relreason runs` listing (one row per run) and the renderings
of a comparison (a rich table for the terminal; md, csv, latex and json for papers and sheets).

    print(render_comparison(compare(runs, "task"), "md"))
    console.print(runs_table(runs, "3 runs under runs"))

Text is never read as rich markup (a setting such as `[processor.layers=1]` is shown as written).
"""

from __future__ import annotations

import enum
import json
import time
from typing import Optional

from rich.markup import escape
from rich.table import Table

from relreason.errors import RelreasonError
from relreason.eval.metric_kinds import format_score
from relreason.eval.report import render
from relreason.runs.comparison import Cell, Comparison
from relreason.runs.records import RunInfo, Status


def format_age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


RUN_COLUMNS = ("name", "model", "task", "seed", "examples", "best val", "OOD test", "metric", "status", "age")


def run_rows(runs: list[RunInfo], now: Optional[float] = None) -> list[dict]:
    now = time.time() if now is None else now
    rows = []
    for r in runs:
        test = format_score(r.test, r.metric)
        if r.per_task and r.test is None:
            test = f"{len(r.per_task)} tasks"
        rows.append({"name": r.name, "model": r.model or "?", "task": r.task or "?",
                     "seed": "?" if r.seed is None else str(r.seed),
                     "examples": "-" if r.examples is None else f"{r.examples:,}",
                     "best val": format_score(r.best_val, r.metric), "OOD test": test, "metric": r.metric.short,
                     "status": r.status.value + ("" if r.diverged_step is None else f" at step {r.diverged_step}"),
                     "age": format_age(now - r.updated)})
    return rows


_STATUS_STYLE = {Status.FINISHED: "green", Status.RUNNING: "yellow", Status.INTERRUPTED: "red", Status.DIVERGED: "red"}


def runs_table(runs: list[RunInfo], title: str = "", now: Optional[float] = None) -> Table:
    """A rich table of runs; the name column folds rather than truncates. Text is never read as markup."""
    t = Table(title=escape(title) if title else None)
    for c in RUN_COLUMNS:
        if c == "name":
            t.add_column(c, no_wrap=True, overflow="fold")
        else:
            t.add_column(c, justify="right" if c in ("seed", "examples", "best val", "OOD test", "age") else "left",
                         no_wrap=True)
    for r, row in zip(runs, run_rows(runs, now)):
        cells = [escape(row[c]) for c in RUN_COLUMNS]
        cells[RUN_COLUMNS.index("status")] = f"[{_STATUS_STYLE[r.status]}]{row['status']}[/]"
        t.add_row(*cells)
    return t


class Format(str, enum.Enum):
    TABLE = "table"  # rich, for the terminal
    JSON = "json"
    MD = "md"
    CSV = "csv"  # mean and std in separate columns, for sheets
    LATEX = "latex"


def parse_format(text: str) -> Format:
    try:
        return Format(text)
    except ValueError:
        raise RelreasonError(f"unknown format {text!r}", "use one of: " + ", ".join(f.value for f in Format)) \
            from None


def _text(v) -> str:
    if v is None:
        return "-"
    return v.text() if isinstance(v, Cell) else str(v)


def comparison_table(cmp: Comparison) -> Table:
    """A rich table of a comparison (settings such as `[processor.layers=1]` are text, not markup)."""
    t = Table(title=escape(cmp.title))
    for i, c in enumerate(cmp.columns):
        t.add_column(escape(c), justify="left" if i == 0 or c in ("model", "setting", "task", "metric") else "right",
                     overflow="fold")
    for r in cmp.rows:
        t.add_row(*[escape(_text(r.get(c))) for c in cmp.columns])
    return t


def render_comparison(cmp: Comparison, fmt: Format | str) -> str:
    """md / latex: cells as "mean ± std"; csv: each score column as "<col> mean" and "<col> std";
    json: the groups with every value."""
    fmt = parse_format(fmt.value if isinstance(fmt, Format) else fmt)
    if fmt is Format.JSON:
        return json.dumps(cmp.to_dict(), indent=2)
    if fmt is Format.TABLE:
        raise ValueError("the rich table is comparison_table(cmp)")
    if fmt is Format.CSV:
        score_cols = [c for c in cmp.columns if any(isinstance(r.get(c), Cell) for r in cmp.rows)]
        columns = []
        for c in cmp.columns:
            columns += [f"{c} mean", f"{c} std"] if c in score_cols else [c]
        rows = []
        for r in cmp.rows:
            row = {}
            for c in cmp.columns:
                if c in score_cols:
                    v = r.get(c)
                    row[f"{c} mean"], row[f"{c} std"] = v.numbers() if isinstance(v, Cell) else ("", "")
                else:
                    row[c] = _text(r.get(c))
            rows.append(row)
        return render(rows, columns, "csv")
    rows = [{c: _text(r.get(c)) for c in cmp.columns} for r in cmp.rows]
    body = render(rows, cmp.columns, fmt.value, title=cmp.title)
    return body if fmt is not Format.LATEX else f"% {cmp.title}\n{body}"


__all__ = ["format_age", "RUN_COLUMNS", "run_rows", "runs_table", "Format", "parse_format", "comparison_table",
           "render_comparison"]
