"""`relreason ablate`: a named ablation over tasks and seeds, as a paper-style table.

Cells may train as seed groups (`--seed-batch K`), in parallel (`--jobs N` local worker processes) and
on several machines sharing the output directory (`--shard I/K` on each); the tables are written once
every cell has results (by the last shard to finish, or by any later `ablate` call), partial ones only
with `--partial`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from relreason.cli.common import (JobsOpt, JsonOpt, LauncherOpt, MarginOpt, PackOpt, RerunStaleOpt, SeedBatchOpt,
                                  SeedStrategyOpt, ShardOpt, SlurmOpt, StatusOpt, WaitOpt, err, out, parse_seeds,
                                  refuse_unread, report_errors, seeds_option)
from relreason.cli.train import RecipeOpt, SetOpt
from relreason.errors import RelreasonError
if TYPE_CHECKING:
    from relreason.studies.sweep import Sweep

@report_errors
def ablate_cmd(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Argument(help="Ablation name, see `relreason ablate --list`.",
                                                  show_default=False)] = None,
    list_ablations: Annotated[bool, typer.Option("--list", help="Train nothing: list the ablations (with NAME, that "
                                                 "one) with their cells at --tasks and --seeds and their predicted "
                                                 "cost from the measured cells shipped with relreason.")] = False,
    tasks: Annotated[Optional[str], typer.Option("--tasks", help="Comma-separated tasks or groups (core8, clrs30, "
                                                 "sorting...).", show_default="the ablation's (core8 for most)")] = None,
    seeds: seeds_option("Seeds of each (variant, task)", "3: seeds 0, 1, 2") = None,
    recipe: RecipeOpt = None,
    sets: SetOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Where cells and tables are written.")] = Path("ablations"),
    rerun_stale: RerunStaleOpt = False,
    jobs: JobsOpt = 1,
    shard: ShardOpt = None,
    seed_batch: SeedBatchOpt = "auto",
    seed_strategy: SeedStrategyOpt = "auto",
    pack: PackOpt = "auto",
    partial: Annotated[bool, typer.Option("--partial", help="While cells are missing, still write the tables "
                                          "(as results.partial.*).")] = False,
    margin: MarginOpt = None,
    launcher: LauncherOpt = "local",
    slurm: SlurmOpt = None,
    wait: WaitOpt = False,
    status: StatusOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a named ablation: every variant x task x seed, resumable; prints per task ours (mean ±
    sample std) beside the paper's figures, the difference with Welch's 95% interval and a verdict
    (agrees / lower / higher / inconclusive against --margin). Each variant uses its model's paper
    recipe unless --recipe is given.

    Before it trains, it prints how many cells, on which device, and their predicted time from the
    measured costs (as `--list` does); a progress bar follows the cells; interrupted (Ctrl-C), it names the
    command that resumes it.

    Examples:\n
      relreason ablate --list\n
      relreason ablate no-edge-updates --tasks core8 --seeds 3 --list\n
      relreason ablate no-edge-updates --recipe quick --tasks bellman_ford --seeds 2\n
      relreason ablate single-layer --tasks core8 --seeds 3\n
      relreason ablate dat-symbols --tasks sorting --recipe quick --json\n
      relreason ablate single-layer --tasks core8 --seeds 3 --jobs 2 --seed-batch 3\n
      relreason ablate single-layer --tasks core8 --seeds 3 --launcher slurm --slurm partition=gpu,time=600
    """
    from relreason.studies.report import missing_note  # CLI start-up: loads on use
    from relreason.studies.sweep import SweepOptions, ablation_costs, run_ablation, sweep_status  # CLI start-up: loads on use

    options = SweepOptions(tasks=tasks, seeds=parse_seeds("3" if seeds is None else seeds), recipe=recipe,
                           out=out_dir, sets=tuple(sets or ()), rerun_stale=rerun_stale, jobs=jobs, shard=shard,
                           seed_batch=seed_batch, seed_strategy=seed_strategy, margin=margin, partial=partial,
                           launcher=launcher, slurm=slurm, wait=wait, pack=pack)
    cells = {"--tasks", "--seeds", "--recipe", "--set", "--json"}  # which cells: what --list and --status read
    if list_ablations:
        refuse_unread(ctx, "--list", cells | {"--list"},
                      "relreason ablate [NAME] [--tasks ...] [--seeds N] [--recipe R] [--set K=V] --list")
        print_ablations(ablation_costs(name, options), as_json)
        return
    if name is None:
        raise RelreasonError("which ablation?", "give an ablation name (relreason ablate --list shows them)")
    if status:
        refuse_unread(ctx, "--status", cells | {"--status", "--out"},
                      "relreason ablate NAME [--tasks ...] [--seeds N] [--recipe R] [--set K=V] [--out DIR] --status")
        print_status(sweep_status("ablation", name, options), as_json)
        return
    sweep = run_ablation(name, options, log=log_line)
    if sweep.result["missing"]:
        err.print(escape(missing_note(sweep.result)), highlight=False)
    if sweep.stem is None:
        err.print("the tables are written when every cell has results: run the same command again once the "
                  "other shards or workers are done (it trains nothing then), or pass --partial", highlight=False)
        if as_json:
            out.print_json(json.dumps(sweep.result))
        return
    print_sweep(sweep, as_json)


def log_line(message: str) -> None:
    """A sweep's log line, to stderr as plain text."""
    err.print(escape(message), highlight=False)


def print_ablations(rows: list[dict], as_json: bool) -> None:
    """`ablate --list`: a row per ablation with its cells and their predicted cost."""
    if as_json:
        out.print_json(json.dumps({"ablations": rows}))
        return

    t = Table(title="ablations (relreason ablate NAME; cells = variants x tasks x seeds; predicted: each cell as "
                    "the measured cell of its model, recipe and variant, scaled to its training examples, one "
                    "after another)")
    for column in ("ablation", "what", "cells", "predicted"):
        t.add_column(column, no_wrap=column == "ablation", justify="right" if column == "cells" else "left")
    for r in rows:
        t.add_row(r["ablation"], r["what"], f"{r['cells']} ({r['variants']} x {r['tasks']} x {r['seeds']})",
                  r["predicted"])
    out.print(t, highlight=False, markup=False)
    for machine in sorted({m for r in rows for m in r["measured_on"]}):
        err.print(f"costs measured on {machine} (relreason/studies/costs.json)", highlight=False, markup=False)


def print_status(rows: list[dict], as_json: bool) -> None:
    """`--status`: a row per cell (status, job, progress), then the counts (stderr)."""
    if as_json:
        out.print_json(json.dumps({"cells": rows}))
        return

    t = Table(title="cells")
    for column in ("cell", "status", "job", "examples", "run"):
        t.add_column(column)
    for r in rows:
        where = f"{r['job'] or '-'}" + (f" on {r['host']}" if r["host"] else "")
        done = f"{r['examples']:,} / {r['of']:,}" if r["examples"] is not None else "-"
        t.add_row(r["cell"], r["status"], where, done, r["run"])
    out.print(t, highlight=False, markup=False)
    counts = Counter(r["status"] for r in rows)
    err.print(", ".join(f"{n} {s}" for s, n in counts.items()) + f" ({len(rows)} cells)", highlight=False)


def print_sweep(sweep: Sweep, as_json: bool) -> None:
    """The sweep's result as JSON, or its table and notes, then where its tables were written (stderr)."""
    from relreason.studies.report import study_view  # CLI start-up: loads on use

    if as_json:
        out.print_json(json.dumps(sweep.result))
        return
    tables, notes = study_view(sweep.result, sweep.study.description)
    for table in tables:
        out.print(table)
    for line in notes:
        out.print(escape(line), highlight=False)
    err.print(escape(f"tables: {sweep.tables}/{sweep.stem}.{{md,csv,json}}"), highlight=False)
