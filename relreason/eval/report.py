"""Results as tables: rich for the terminal, and Markdown / CSV / LaTeX / JSON for papers and sheets."""

from __future__ import annotations

import csv
import io
import json
from typing import Callable

from rich.table import Table
from rich.markup import escape


def render(rows: list[dict], columns: list[str], fmt: str, title: str = "") -> str:
    """Renders rows (dicts) in `fmt`: md, csv, json or latex."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    cells = [[cell_text(r.get(c)) for c in columns] for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(columns)
        w.writerows(cells)
        return buf.getvalue()
    if fmt == "md":
        head = f"| {' | '.join(columns)} |\n|{'|'.join('---' for _ in columns)}|\n"
        return (f"**{title}**\n\n" if title else "") + head + "".join(f"| {' | '.join(r)} |\n" for r in cells)
    if fmt == "latex":
        esc = lambda s: s.replace("_", r"\_").replace("%", r"\%").replace("±", r"$\pm$")  # noqa: E731
        lines = [r"\begin{tabular}{l" + "r" * (len(columns) - 1) + "}", r"\toprule",
                 " & ".join(esc(c) for c in columns) + r" \\", r"\midrule"]
        lines += [" & ".join(esc(x) for x in r) + r" \\" for r in cells]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown format {fmt}")


def rich_table(rows: list[dict], columns: list[str], title: str = "") -> Table:
    """A rich Table of plain text (names like `[et-untied]` are shown, never read as markup)."""
    t = Table(title=escape(title) if title else None)
    for i, c in enumerate(columns):
        t.add_column(escape(c), justify="left" if i == 0 else "right", overflow="fold")
    for r in rows:
        t.add_row(*[escape(cell_text(r.get(c))) for c in columns])
    return t


def cell_text(v) -> str:
    """A table cell as text: None -> "-", a float to 4 decimals, anything else as str()."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def score_rows(scores: dict, task: str | None = None,
               measure: Callable[[str | None, str | None], str] = lambda task, feature=None: "") -> list[dict]:
    """Rows for one evaluation: each output feature, the algorithm score, and hints when present, each
    with how it is measured (`measure(task, feature)`, relreason.tasks.feature_measure: a scalar's squared
    error is lower-is-better, the rest higher); for a multi-task evaluation, each task's features and score,
    then the mean over tasks."""
    per_task = scores.get("per_task") or {}

    def rows_of(name: str | None, res: dict, prefix: str, headline: str) -> list[dict]:
        return ([{"feature": f"{prefix}output.{k}", "score": v, "measure": measure(name, k)}
                 for k, v in res["outputs"].items()]
                + [{"feature": headline, "score": res["score"], "measure": measure(name)}]
                + [{"feature": f"{prefix}hint.{k}", "score": v, "measure": measure(name, k)}
                   for k, v in res.get("hints", {}).items()])

    if per_task:
        rows = [r for name, res in per_task.items() for r in rows_of(name, res, f"{name}: ", f"{name}: score")]
        first = next(iter(per_task))
        rows.append({"feature": f"score (mean over {len(per_task)} tasks)", "score": scores["score"],
                     "measure": measure(first)})
        return rows
    return rows_of(task, scores, "", "score (mean of outputs)")
