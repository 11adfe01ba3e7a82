"""`relreason ablate`: a named ablation over tasks and seeds, as a paper-style table.

Cells may train in parallel (`--jobs N` local worker processes) and on several machines sharing the
output directory (`--shard I/K` on each); the tables are written once every cell has results (by
the last shard to finish, or by any later `ablate` call), partial ones only with `--partial`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from relreason.cli.common import JsonOpt, err, out, report_errors
from relreason.cli.train import RecipeOpt, SetOpt
from relreason.errors import RelreasonError

MISSING_SHOWN = 10  # missing cells named in the message (the rest are counted)

# the sweep options `ablate` and `reproduce` share (one machinery: relreason.study)
RerunStaleOpt = Annotated[bool, typer.Option("--rerun-stale", help="Move cells computed under another "
                                             "configuration aside and train them again.")]
JobsOpt = Annotated[int, typer.Option("--jobs", help="Train this many cells at once, in worker processes "
                                      "(torch threads: cores / jobs unless train.threads is set).")]
ShardOpt = Annotated[Optional[str], typer.Option("--shard", help="I/K: train only cells I, I+K, I+2K, ... "
                                                 "(1-based, cell index % K == I-1), for K machines sharing --out.",
                                                 show_default="every cell")]


@report_errors
def ablate_cmd(
    name: Annotated[str, typer.Argument(help="Ablation name, see `relreason list ablations`.", show_default=False)],
    tasks: Annotated[Optional[str], typer.Option("--tasks", help="Comma-separated tasks or groups (core8, clrs30, "
                                                 "sorting...).", show_default="the ablation's (core8 for most)")] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per (variant, task).")] = 3,
    recipe: RecipeOpt = None,
    sets: SetOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Where cells and tables are written.")] = Path("ablations"),
    rerun_stale: RerunStaleOpt = False,
    jobs: JobsOpt = 1,
    shard: ShardOpt = None,
    partial: Annotated[bool, typer.Option("--partial", help="While cells are missing, still write the tables "
                                          "(as results.partial.*).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a named ablation: every variant x task x seed, resumable; prints per task ours (mean ±
    sample std) beside the paper's figures. Each variant uses its model's paper recipe unless --recipe is given.

    Examples:\n
      relreason ablate no-edge-updates --recipe quick --tasks bellman_ford --seeds 2\n
      relreason ablate single-layer --tasks core8 --seeds 3\n
      relreason ablate dat-symbols --tasks sorting --recipe quick --json\n
      relreason ablate single-layer --tasks core8 --seeds 3 --jobs 2\n
      relreason ablate single-layer --tasks core8 --seeds 3 --shard $SLURM_ARRAY_TASK_ID/8
    """
    from relreason.ablations import ABLATIONS, run_ablation
    from relreason.tasks import expand_tasks

    abl = ABLATIONS.get(name)
    if int(os.environ.get("WORLD_SIZE") or 1) > 1:
        raise RelreasonError("ablate starts its own processes; it does not run under torchrun",
                             "run it directly, with --jobs N (one machine) or --shard I/K (several)")
    task_list = expand_tasks(tasks if tasks is not None else abl.tasks)
    result = run_ablation(name, task_list, seeds, recipe, out_dir, sets, rerun_stale=rerun_stale,
                          log=lambda m: err.print(escape(m), highlight=False), jobs=jobs,
                          shard=parse_shard(shard) if shard is not None else None)
    base = Path(out_dir) / name
    missing = result["missing"]
    if missing:
        shown = "; ".join(missing[:MISSING_SHOWN]) + (f"; ... ({len(missing) - MISSING_SHOWN} more)"
                                                       if len(missing) > MISSING_SHOWN else "")
        err.print(escape(f"{len(missing)} of {result['planned']} cells have no results yet: {shown}"), highlight=False)
        if not partial:
            err.print("the tables are written when every cell has results: run the same command again once the "
                      "other shards or workers are done (it trains nothing then), or pass --partial", highlight=False)
            if as_json:
                out.print_json(json.dumps(result))
            return
    report_study(result, base, abl.description, as_json)


def report_study(result: dict, base: Path, description: str, as_json: bool) -> None:
    """Writes the study's tables under `base`, then prints the result as JSON or as the table."""
    stem = write_tables(result, base)
    if as_json:
        out.print_json(json.dumps(result))
        return
    print_study(result, description)
    err.print(escape(f"tables: {base}/{stem}.{{md,csv,json}}"), highlight=False)


def write_tables(result: dict, base: Path) -> str:
    """Writes the study's tables as BASE/results.{json,csv,md} (results.partial.* while cells are missing,
    a complete set removing every partial one; text tasks add results.sizes.csv). Returns the stem.
    The JSON is the study's result (every cell's record) with the printed table as "table"."""
    from relreason.ablations import aggregate, size_breakdown
    from relreason.data.store import atomic_path
    from relreason.eval.report import render

    rows, columns = aggregate(result)
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


def print_study(result: dict, description: str) -> None:
    """The study's table on stdout (the one printer of `ablate` and `reproduce`), then its notes."""
    from relreason.ablations import aggregate, size_breakdown
    from relreason.eval.report import rich_table

    rows, columns = aggregate(result)
    seeds = result["seeds"]
    unit = "relative loss, lower is better" if result["lower_is_better"] else "test score %, higher is better"
    title = (f"{result['study']}: {description} ({unit}; ours: mean ± sample std (ddof 1) over up to {seeds} "
             f"seed{'s' * (seeds > 1)}; recipe {result['recipe']}, {result['train_examples']:,} training examples "
             "per run)")
    if result["missing"]:
        title += f" — PARTIAL: {len(result['cells'])} of {result['planned']} cells"
    out.print(rich_table(rows, columns, title))
    sizes = size_breakdown(result)
    if sizes:
        out.print(rich_table(*sizes, f"{result['study']}: shape, parse and CLRS scores (%) per algorithm and size, "
                                     f"mean ± sample std over {seeds} seed{'s' * (seeds > 1)}"))
    if result.get("source"):
        out.print(escape(f"paper: {result['source']}" + (f"; {result['note']}" if result.get("note") else "")),
                  highlight=False)
    for why in result.get("not_comparable", []):
        out.print(escape(f"not comparable with the paper: {why}"), highlight=False)


def parse_shard(text: str) -> tuple[int, int]:
    """"I/K" -> (I, K) (the range is checked by relreason.ablations.shard_cells)."""
    i, sep, k = text.partition("/")
    try:
        return int(i), int(k) if sep else int("")
    except ValueError:
        raise RelreasonError(f"--shard {text!r} is not I/K", "e.g. --shard 1/4 ... --shard 4/4 (a SLURM array: "
                             "--array=1-4 and --shard $SLURM_ARRAY_TASK_ID/4)") from None
