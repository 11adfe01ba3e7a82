"""A study's result as tables: the one table printer of `ablate` and `reproduce`, and the files they write.

`study_table` gives, per task and column, ours as mean ± sample std (ddof 1) with its seed count, the
published figure with its own, the difference, and whether the published mean lies inside our 95%
interval; `size_breakdown` the shape / parse / CLRS scores per algorithm and size of text cells.
`write_tables` writes them as BASE/results.{json,csv,md} (results.partial.* while cells are missing);
`study_view` is what the commands print: the tables, then the source and the notes.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from relreason.data.text import SCORE_TITLES
from relreason.eval.stats import Summary
from relreason.studies.variants import Published

MISSING_SHOWN = 10  # missing cells named in `missing_note` (the rest are counted)


def _published(result: dict) -> tuple[dict, dict]:
    figures = {(f["variant"], f["task"]): Published(f["mean"], f.get("std"), f.get("seeds"))
               for f in result.get("figures", [])}
    averages = {a["variant"]: Published(a["mean"], a.get("std"), a.get("seeds")) for a in result.get("averages", [])}
    if not averages:  # results written before averages had their own list
        averages = {p["variant"]: Published(p["value"]) for p in result.get("paper", [])}
    return figures, averages


def _verdict(ours: Summary, paper: Published | None, comparable: bool, why_not: str) -> tuple[str, str]:
    """(difference, "in our 95% CI?") of one cell."""
    if not ours.n:
        return "-", "-"
    if not comparable:
        return "-", f"not comparable: {why_not}"
    if paper is None:
        return "-", "-"
    diff = f"{ours.mean - paper.mean:+.2f}"
    inside = ours.contains(paper.mean)
    return diff, {None: "one seed: no interval", True: "yes", False: "no"}[inside]


def study_table(result: dict) -> tuple[list[dict], list[str]]:
    """The table of a study's result: one row per (task, column) with ours (mean ± sample std, seeds
    "k of n" where the paper ran n), the published figure, the difference, whether the published mean
    lies in our 95% interval; then per column an average row (over the tasks every column finished)
    beside the published average. Scores in percent; a lower-is-better metric (relative loss) in its unit."""
    scale = 1.0 if result.get("lower_is_better") else 100.0
    figures, averages = _published(result)
    planned = result.get("seeds")
    by: dict[tuple[str, str], list[dict]] = {}
    for c in result["cells"]:
        by.setdefault((c["task"], c["variant"]), []).append(c)
    columns = ["task", "model", "ours", "seeds", "paper", "diff", "paper in our 95% CI"]
    rows, means = [], {}
    for task in result["tasks"]:
        for v in result["variants"]:
            cells = by.get((task, v), [])
            ours = Summary.of(c["score"] * scale for c in cells)
            paper = figures.get((v, task))
            comparable = all(c.get("comparable", True) for c in cells)
            why = "; ".join(dict.fromkeys(c.get("why_not", "") for c in cells if c.get("why_not")))
            diff, verdict = _verdict(ours, paper, comparable, why)
            seeds = f"{ours.n}" + (f" of {paper.seeds}" if paper and paper.seeds else f" of {planned}"
                                   if planned and ours.n < planned else "")
            rows.append({"task": task, "model": v, "ours": ours.text(), "seeds": seeds if ours.n else "0",
                         "paper": paper.text() if paper else "-", "diff": diff, "paper in our 95% CI": verdict})
            if ours.n:
                means.setdefault(v, {})[task] = (ours.mean, comparable)
    for v in result["variants"]:
        got = means.get(v, {})
        paper = averages.get(v)
        if len(result["tasks"]) < 2:
            continue
        complete = len(got) == len(result["tasks"])
        avg = sum(m for m, _ in got.values()) / len(got) if complete else None
        comparable = complete and all(ok for _, ok in got.values())
        diff = f"{avg - paper.mean:+.2f}" if avg is not None and paper is not None and comparable else "-"
        rows.append({"task": "average", "model": v, "ours": "-" if avg is None else f"{avg:.2f}",
                     "seeds": f"{len(got)} of {len(result['tasks'])} tasks",
                     "paper": paper.text() if paper else "-", "diff": diff,
                     "paper in our 95% CI": "" if avg is None or comparable else "not comparable"})
    return rows, columns


def size_breakdown(result: dict) -> tuple[list[dict], list[str]] | None:
    """For text tasks (cells scored per algorithm and size): one row per (algorithm, size), and per
    variant the shape, parse and CLRS scores in percent, mean ± sample std over seeds, as the TransNAR
    paper's Figures 4-6 show them. None when no cell was scored per size."""
    by: dict[tuple[str, int, str, str], list[float]] = {}
    keys: list[tuple[str, int]] = []
    for c in result["cells"]:
        for entry in (c.get("per_task") or {}).values():
            if "size" not in entry or "clrs" not in entry.get("outputs", {}):
                continue
            key = (entry.get("algorithm", ""), int(entry["size"]))
            if key not in keys:
                keys.append(key)
            for score in SCORE_TITLES:
                by.setdefault((*key, c["variant"], score), []).append(100.0 * entry["outputs"][score])
    if not keys:
        return None
    variants = result["variants"]
    columns = ["algorithm", "size"] + [f"{v}: {name}" for v in variants for name in SCORE_TITLES.values()]
    rows = []
    for algorithm, size in sorted(keys):
        row: dict = {"algorithm": algorithm, "size": str(size)}
        for v in variants:
            for score, name in SCORE_TITLES.items():
                xs = by.get((algorithm, size, v, score))
                row[f"{v}: {name}"] = "-" if not xs else Summary.of(xs).text(1)
        rows.append(row)
    return rows, columns


def write_tables(result: dict, base: Path) -> str:
    """Writes the study's tables as BASE/results.{json,csv,md} (results.partial.* while cells are missing,
    a complete set removing every partial one; text tasks add results.sizes.csv). Returns the stem.
    The JSON is the study's result (every cell's record) with the printed table as "table"."""
    from relreason.data.store import atomic_path
    from relreason.eval.report import render

    rows, columns = study_table(result)
    sizes = size_breakdown(result)  # text tasks: shape / parse / CLRS per algorithm and size
    extra = {"sizes_table": sizes[0]} if sizes else {}
    stem = "results.partial" if result["missing"] else "results"
    # the markdown holds both tables; the sizes' CSV is a file of its own (results.sizes.csv)
    files = {"json": json.dumps({**result, "table": rows, **extra}, indent=2),
             "csv": render(rows, columns, "csv"),
             "md": render(rows, columns, "md") + ("\n" + render(*sizes, "md") if sizes else "")}
    if sizes:
        files["sizes.csv"] = render(*sizes, "csv")
    for ext, body in files.items():
        with atomic_path(base / f"{stem}.{ext}") as tmp:
            tmp.write_text(body)
    if not result["missing"]:  # the complete tables supersede every partial one
        for ext in ("json", "csv", "md", "sizes.csv"):
            (base / f"results.partial.{ext}").unlink(missing_ok=True)
    return stem


def study_view(result: dict, description: str) -> tuple[list[Table], list[str]]:
    """What `ablate` and `reproduce` print of a study's result: its table (and the per-size table of text
    cells), then the lines under them: where the published figures are printed, and why cells are not
    comparable."""
    from relreason.eval.report import rich_table

    rows, columns = study_table(result)
    seeds = result["seeds"]
    unit = "relative loss, lower is better" if result["lower_is_better"] else "test score %, higher is better"
    title = (f"{result['study']}: {description} ({unit}; ours: mean ± sample std (ddof 1) over up to {seeds} "
             f"seed{'s' * (seeds > 1)}; recipe {result['recipe']}, {result['train_examples']:,} training examples "
             "per run)")
    if result["missing"]:
        title += f" — PARTIAL: {len(result['cells'])} of {result['planned']} cells"
    tables = [rich_table(rows, columns, title)]
    sizes = size_breakdown(result)
    if sizes:
        tables.append(rich_table(*sizes, f"{result['study']}: shape, parse and CLRS scores (%) per algorithm and "
                                         f"size, mean ± sample std over {seeds} seed{'s' * (seeds > 1)}"))
    lines = []
    if result.get("source"):
        lines.append(f"paper: {result['source']}" + (f"; {result['note']}" if result.get("note") else ""))
    lines += [f"not comparable with the paper: {why}" for why in result.get("not_comparable", [])]
    return tables, lines


def missing_note(result: dict) -> str:
    """How many cells have no results yet, the first MISSING_SHOWN of them named."""
    missing = result["missing"]
    shown = "; ".join(missing[:MISSING_SHOWN]) + (f"; ... ({len(missing) - MISSING_SHOWN} more)"
                                                   if len(missing) > MISSING_SHOWN else "")
    return f"{len(missing)} of {result['planned']} cells have no results yet: {shown}"
