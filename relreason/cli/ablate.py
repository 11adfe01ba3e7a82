"""`relreason ablate`: a named ablation over tasks and seeds, as a paper-style table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from relreason.cli.common import JsonOpt, err, out, report_errors
from relreason.cli.train import RecipeOpt, SetOpt


@report_errors
def ablate_cmd(
    name: Annotated[str, typer.Argument(help="Ablation name, see `relreason list ablations`.", show_default=False)],
    tasks: Annotated[str, typer.Option("--tasks", help="Comma-separated tasks or groups (core8, clrs30, sorting...).")] = "core8",
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per (variant, task).")] = 3,
    recipe: RecipeOpt = None,
    sets: SetOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Where cells and tables are written.")] = Path("ablations"),
    rerun_stale: Annotated[bool, typer.Option("--rerun-stale", help="Move cells computed under another "
                                              "configuration aside and train them again.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a named ablation: every variant x task x seed, resumable; prints mean ± std per task
    beside the paper's figures. Each variant uses its model's paper recipe unless --recipe is given.

    Examples:\n
      relreason ablate no-edge-updates --recipe quick --tasks bellman_ford --seeds 2\n
      relreason ablate single-layer --tasks core8 --seeds 3\n
      relreason ablate dat-symbols --tasks sorting --recipe quick --json
    """
    from relreason.ablations import ABLATIONS, aggregate, run_ablation
    from relreason.data.store import atomic_path
    from relreason.eval.report import render, rich_table
    from relreason.tasks import expand_tasks

    abl = ABLATIONS.get(name)
    task_list = expand_tasks(tasks)
    result = run_ablation(name, task_list, seeds, recipe, out_dir, sets, rerun_stale=rerun_stale,
                          log=lambda m: err.print(escape(m), highlight=False))
    rows, columns = aggregate(result)
    base = Path(out_dir) / name
    for fmt, ext in (("json", "json"), ("csv", "csv"), ("md", "md")):
        body = json.dumps({**result, "table": rows}, indent=2) if fmt == "json" else render(rows, columns, fmt)
        with atomic_path(base / f"results.{ext}") as tmp:
            tmp.write_text(body)
    if as_json:
        out.print_json(json.dumps({**result, "table": rows}))
        return
    unit = "relative loss, lower is better" if result["lower_is_better"] else "test score %, higher is better"
    title = (f"{abl.name}: {abl.description} ({unit}; mean ± std over {seeds} seed{'s' * (seeds > 1)}; "
             f"recipe {result['recipe']}, {result['train_examples']:,} training examples per run)")
    out.print(rich_table(rows, columns, title))
    if result["paper_line"]:
        out.print(escape(result["paper_line"]), highlight=False)
    err.print(escape(f"tables: {base}/results.{{md,csv,json}}"), highlight=False)
