"""`relreason ablate`: a named ablation over tasks and seeds, as a paper-style table.

Cells may train as seed groups (`--seed-batch K`), in parallel (`--jobs N` local worker processes) and
on several machines sharing the output directory (`--shard I/K` on each); the tables are written once
every cell has results (by the last shard to finish, or by any later `ablate` call), partial ones only
with `--partial`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from relreason.cli.common import JsonOpt, MarginOpt, err, out, report_errors
from relreason.cli.train import RecipeOpt, SetOpt
if TYPE_CHECKING:
    from relreason.studies.sweep import Sweep

# the sweep options `ablate` and `reproduce` share (one machinery: relreason.studies)
RerunStaleOpt = Annotated[bool, typer.Option("--rerun-stale", help="Move cells computed under another "
                                             "configuration aside and train them again.")]
JobsOpt = Annotated[int, typer.Option("--jobs", help="Train this many cells (or seed groups) at once, in worker "
                                      "processes (torch threads: cores / jobs unless train.threads is set).")]
ShardOpt = Annotated[Optional[str], typer.Option("--shard", help="I/K: train only seed groups I, I+K, I+2K, ... "
                                                 "(1-based, group index % K == I-1; with --seed-batch 1 the groups "
                                                 "are the cells), for K machines sharing --out; give every shard the "
                                                 "same --seeds and --seed-batch.", show_default="every cell")]
SeedBatchOpt = Annotated[str, typer.Option("--seed-batch", help="Train the cells of one column and task that differ "
                                           "only in seed as seed groups of up to K seeds, one process each, every cell "
                                           "its own run directory as if trained alone; 1: each cell alone. auto: the "
                                           "seed count up to 4 on a GPU (one vmapped step for the group; expected "
                                           "faster, not yet measured), 1 on CPU (a group buys one process for K cells "
                                           "but measured no faster: reproduce --list).")]
SeedStrategyOpt = Annotated[str, typer.Option("--seed-strategy", help="How a seed group shares its step: auto (vmap "
                                              "where it applies on a GPU, else loop), vmap, loop (each seed's own "
                                              "step, bit for bit its single run).")]
PackOpt = Annotated[str, typer.Option("--pack", help="Train the cells in packs of up to 8 (any columns and tasks) in "
                                      "one process, each its own run directory as if trained alone, their captured "
                                      "steps on separate CUDA streams: auto (on CUDA; on CPU nothing changes), on, "
                                      "off.")]
LauncherOpt = Annotated[str, typer.Option("--launcher", help="Where the cells train: local (here), slurm (one job "
                                          "array through submitit, a seed group per job) or local-submitit (the "
                                          "same jobs as processes here).")]
SlurmOpt = Annotated[Optional[str], typer.Option("--slurm", help="KEY=VALUE,... of each job: partition, time "
                                                 "(minutes or [D-]HH:MM:SS; required for slurm), gpus_per_node, "
                                                 "cpus_per_task, mem_gb, account, qos, constraint, array_parallelism.",
                                                 show_default="the cluster's")]
WaitOpt = Annotated[bool, typer.Option("--wait", help="With a submitit launcher: wait for the jobs to end, then "
                                       "print the tables (fails naming a failed job).")]
StatusOpt = Annotated[bool, typer.Option("--status", help="Train nothing: each cell's status (done, running with "
                                         "its job, partial, missing, stale).")]


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

    Examples:\n
      relreason ablate no-edge-updates --recipe quick --tasks bellman_ford --seeds 2\n
      relreason ablate single-layer --tasks core8 --seeds 3\n
      relreason ablate dat-symbols --tasks sorting --recipe quick --json\n
      relreason ablate single-layer --tasks core8 --seeds 3 --jobs 2 --seed-batch 3\n
      relreason ablate single-layer --tasks core8 --seeds 3 --launcher slurm --slurm partition=gpu,time=600
    """
    from relreason.studies.report import missing_note
    from relreason.studies.sweep import run_ablation, sweep_status

    if status:
        print_status(sweep_status("ablation", name, tasks, seeds, recipe, out_dir, sets), as_json)
        return
    sweep = run_ablation(name, tasks, seeds, recipe, out_dir, sets, partial=partial, rerun_stale=rerun_stale,
                         log=lambda m: err.print(escape(m), highlight=False), jobs=jobs, shard=shard, margin=margin,
                         launcher=launcher, slurm=slurm, wait=wait, seed_batch=seed_batch,
                         seed_strategy=seed_strategy, pack=pack)
    if sweep.result["missing"]:
        err.print(escape(missing_note(sweep.result)), highlight=False)
    if sweep.stem is None:
        err.print("the tables are written when every cell has results: run the same command again once the "
                  "other shards or workers are done (it trains nothing then), or pass --partial", highlight=False)
        if as_json:
            out.print_json(json.dumps(sweep.result))
        return
    print_sweep(sweep, as_json)


def print_status(rows: list[dict], as_json: bool) -> None:
    """`--status`: a row per cell (status, job, progress), then the counts (stderr)."""
    from collections import Counter

    if as_json:
        out.print_json(json.dumps({"cells": rows}))
        return
    from rich.table import Table

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
    from relreason.studies.report import study_view

    if as_json:
        out.print_json(json.dumps(sweep.result))
        return
    tables, notes = study_view(sweep.result, sweep.study.description)
    for table in tables:
        out.print(table)
    for line in notes:
        out.print(escape(line), highlight=False)
    err.print(escape(f"tables: {sweep.tables}/{sweep.stem}.{{md,csv,json}}"), highlight=False)
