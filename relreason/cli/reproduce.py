"""`relreason reproduce TABLE` (a paper's table at its protocol, ours beside the published figures) and
`relreason results` (result files under results/ and RESULTS.md, generated from finished cells) and
`relreason report` (the same results as one self-contained HTML page)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from relreason.cli.ablate import log_line, print_status, print_sweep
from relreason.cli.common import (JobsOpt, JsonOpt, LauncherOpt, MarginOpt, PackOpt, RerunStaleOpt, SeedBatchOpt,
                                  SeedStrategyOpt, ShardOpt, SlurmOpt, StatusOpt, WaitOpt, err, out, parse_seeds,
                                  refuse_unread, report_errors, seeds_option)
from relreason.cli.train import RecipeOpt, SetOpt
from relreason.errors import RelreasonError


@report_errors
def reproduce_cmd(
    ctx: typer.Context,
    table: Annotated[Optional[str], typer.Argument(help="Table name, see `relreason reproduce --list`.",
                                                   show_default=False)] = None,
    list_tables: Annotated[bool, typer.Option("--list", help="List the tables with their cells and measured costs, "
                                              "one after another and in seed groups; with TABLE, that table on "
                                              "--tasks at --seeds.")] = False,
    models: Annotated[Optional[str], typer.Option("--models", help="Comma list of the table's models (their "
                                                  "columns) or column labels (that column alone, e.g. 'text "
                                                  "transformer') to run.",
                                                  show_default="every column")] = None,
    tasks: Annotated[Optional[str], typer.Option("--tasks", help="Comma-separated tasks or groups.",
                                                 show_default="the table's")] = None,
    seeds_text: seeds_option("Seeds of each cell (the papers ran 3 to 20)",
                             "3: seeds 0, 1, 2; with --list, the paper's") = None,
    recipe: RecipeOpt = None,
    sets: SetOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Where cells and tables are written.")] = Path("reproduce"),
    rerun_stale: RerunStaleOpt = False,
    jobs: JobsOpt = 1,
    shard: ShardOpt = None,
    seed_batch: SeedBatchOpt = "auto",
    seed_strategy: SeedStrategyOpt = "auto",
    pack: PackOpt = "auto",
    no_train: Annotated[bool, typer.Option("--no-train", help="Train nothing: print the table of the cells "
                                           "finished so far.")] = False,
    costs: Annotated[Optional[Path], typer.Option("--costs", help="Measured cell costs (scripts/bench_reproduce.py).",
                                                  show_default="the costs shipped with relreason")] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Re-train each cell's first validations with today's "
                                         "code and compare them with its committed curve (results/curves).")] = False,
    verify_validations: Annotated[int, typer.Option("--verify-validations", help="How many validations --verify "
                                                    "re-trains (the first is before any training).")] = 3,
    results_dir: Annotated[Path, typer.Option("--results", help="The committed result files --verify reads and "
                                              "writes (results/verify).")] = Path("results"),
    committed: Annotated[Optional[Path], typer.Option("--committed", help="Count the cells finished under this "
                                                      "results directory (relreason results writes results/cells) "
                                                      "as done: not trained again, read from there.",
                                                      show_default="none: train every unfinished cell")] = None,
    margin: MarginOpt = None,
    launcher: LauncherOpt = "local",
    slurm: SlurmOpt = None,
    wait: WaitOpt = False,
    status: StatusOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Reproduce a published table: run its cells at the paper's protocol (resumable) and print ours
    (mean ± sample std, seeds) beside the published figure, ours minus the paper with Welch's 95%
    interval and a verdict: agrees (inside ± --margin), lower, higher or inconclusive. Cells under
    another recipe or a protocol-changing --set are printed but marked not comparable.

    Examples:\n
      relreason reproduce --list\n
      relreason reproduce rt-table19 --tasks core8 --seeds 3 --list\n
      relreason reproduce rt-table19 --models rt --tasks bellman_ford --seeds 1 --recipe quick\n
      relreason reproduce clrs30 --models mpnn --tasks bellman_ford --seeds 3 --jobs 2\n
      relreason reproduce rt-table19 --tasks core8 --seeds 3 --seed-batch 3\n
      relreason reproduce ibarz2022 --tasks core8 --seeds 3 --launcher slurm --slurm partition=gpu,time=600\n
      relreason reproduce ibarz2022 --tasks core8 --seeds 3 --status\n
      relreason reproduce clrs30 --models mpnn --tasks bellman_ford --seeds 3 --committed results\n
      relreason reproduce transnar-ood --seeds 3 --set nar.train.train_examples=32000
    """
    from relreason.studies.sweep import SweepOptions, run_table, sweep_status, table_costs  # CLI start-up: loads on use

    seeds = parse_seeds(seeds_text) if seeds_text is not None else None
    if list_tables:
        if table is None and (tasks is not None or seeds is not None):
            raise RelreasonError("--list takes --tasks and --seeds with a table name",
                                 "e.g. relreason reproduce rt-table19 --tasks core8 --seeds 3 --list")
        if models is not None:  # the listing costs every column: never a subset's cost under the table's name
            raise RelreasonError("--list costs a table's every column and does not take --models",
                                 "leave --models out: relreason reproduce TABLE --tasks ... --seeds N --list")
        refuse_unread(ctx, "--list", {"--list", "--tasks", "--seeds", "--costs", "--json"},
                      "relreason reproduce [TABLE --tasks ... --seeds N] --list [--costs FILE] [--json]")
        rows, machines = table_costs(costs, table, tasks, None if seeds is None else len(seeds))
        _print_list(rows, machines, as_json)
        return
    if table is None:
        raise RelreasonError("which table?", "give a table name (relreason reproduce --list shows them)")
    options = SweepOptions(tasks=tasks, seeds=(0, 1, 2) if seeds is None else seeds, recipe=recipe, out=out_dir,
                           sets=tuple(sets or ()), models=models, train=not no_train, rerun_stale=rerun_stale,
                           jobs=jobs, shard=shard, seed_batch=seed_batch, seed_strategy=seed_strategy,
                           committed=committed, margin=margin, launcher=launcher, slurm=slurm, wait=wait, pack=pack)
    picks = {"--models", "--tasks", "--seeds", "--out", "--json"}  # which cells, and where: every mode's
    if status:
        refuse_unread(ctx, "--status", picks | {"--status", "--recipe", "--set"},
                      "relreason reproduce TABLE --tasks ... --seeds N [--recipe R] [--set K=V] [--out DIR] --status")
        print_status(sweep_status("table", table, options), as_json)
        return
    if verify:  # each cell re-trains under the config its result file stored
        refuse_unread(ctx, "--verify", picks | {"--verify", "--verify-validations", "--results"},
                      "relreason reproduce TABLE --tasks ... --seeds N --verify [--verify-validations K] "
                      "[--results DIR] [--out DIR]")
        _verify(table, options, results_dir, verify_validations, as_json)
        return
    if no_train:
        refuse_unread(ctx, "--no-train", picks | {"--no-train", "--recipe", "--set", "--committed", "--margin"},
                      "relreason reproduce TABLE --tasks ... --seeds N [--recipe R] [--set K=V] [--committed DIR] "
                      "[--margin M] [--out DIR] --no-train")
    else:
        refuse_unread(ctx, "a training run", {p.opts[0] for p in ctx.command.params} - {
            "--costs", "--verify-validations", "--results"}, "--costs is --list's; --verify-validations and --results "
            "are --verify's")
    print_sweep(run_table(table, options, log=log_line), as_json)


def _verify(table: str, options, results: Path, validations: int, as_json: bool) -> None:
    from relreason.studies.results import verify_table  # CLI start-up: loads on use
    from relreason.studies.results_report import code_label  # CLI start-up: loads on use

    rows = verify_table(table, options.tasks, options.seeds, options.models, results, validations,
                        Path(options.out) / "verify", log=log_line)
    if as_json:
        out.print_json(json.dumps({"verified": rows}))
    else:
        t = Table(title=f"{table}: each cell's first validations re-trained with today's code")
        for column in ("cell", "validations", "matches", "first difference", "stored code", "compared"):
            t.add_column(column)
        for r in rows:
            if "skipped" in r:
                t.add_row(r["cell"], "-", "not re-trained", "-", "-", r["skipped"])
                continue
            stored = r["stored_code"][-1] if r["stored_code"] else None
            t.add_row(r["cell"], str(r["validations"]), "yes" if r["matches"] else "NO", r["difference"] or "-",
                      code_label(stored), r["compared"])
        out.print(t, highlight=False, markup=False)
    failed = [r["cell"] for r in rows if "skipped" not in r and not r["matches"]]
    if failed:
        raise RelreasonError(f"{len(failed)} of {len(rows)} cell(s) follow another trajectory under today's code: "
                             f"{', '.join(failed)}", "see the first difference of each; results/verify holds them")
    skipped = [r for r in rows if "skipped" in r]
    if skipped:
        made = sorted({r["made_with_torch"] for r in skipped})
        raise RelreasonError(f"{len(skipped)} of {len(rows)} cell(s) were not re-trained, made with another torch "
                             f"release than this one ({', '.join(made)}): {', '.join(r['cell'] for r in skipped)}",
                             f"verify them under torch {made[0]}: scripts/torch_release_venv.sh {made[0]} makes a "
                             "virtualenv with it and prints the command (docs/reproducing.md)")


def _print_list(rows: list[dict], machines: list[str], as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps({"tables": rows}))
        return

    at = f"{rows[0]['seeds']} seeds" if rows and rows[0]["seeds"] else "paper seeds"
    t = Table(title="published tables (relreason reproduce TABLE; cells per seed = columns x tasks; one cell: "
                    "predicted from measured steps, CPU time of one thread, cheapest and dearest column; whole "
                    f"table: every column's cells x its {'seeds' if rows and rows[0]['seeds'] else 'paper seeds'}, "
                    "one after another (--seed-batch 1), and in seed groups of up to 4 (--seed-batch 4) by "
                    "strategy, with the measured speed-up)")
    for column in ("table", "what", "cells per seed", "paper seeds", "one cell", f"whole table at {at}",
                   "in seed groups"):
        t.add_column(column, no_wrap=column == "table", justify="right" if column in ("cells per seed",
                                                                                       "paper seeds") else "left")
    for r in rows:
        t.add_row(r["table"], r["what"], str(r["cells per seed"]), r["paper seeds"], r["one cell (measured)"],
                  r["at paper seeds (predicted)"], r["in seed groups (predicted)"])
    out.print(t, highlight=False, markup=False)
    for line in machines:
        err.print(f"costs measured on {line}", highlight=False, markup=False)


@report_errors
def results_cmd(
    ctx: typer.Context,
    source: Annotated[Path, typer.Option("--from", help="The reproduce output whose finished cells are collected.")] =
    Path("reproduce"),
    results: Annotated[Path, typer.Option("--results", help="Where the result files are kept (committed).")] =
    Path("results"),
    markdown: Annotated[Path, typer.Option("--md", help="The generated report.")] = Path("RESULTS.md"),
    collect: Annotated[bool, typer.Option("--collect/--no-collect", help="Copy finished cells' results into "
                                          "--results first.")] = True,
    margin: MarginOpt = None,
) -> None:
    """Collect the finished cells of `relreason reproduce` into result files and generate RESULTS.md
    from them: every table with results, ours beside the published figure, and per cell the command,
    the hardware and the wall time.

    Examples:\n
      relreason results\n
      relreason results --no-collect --md RESULTS.md
    """
    from relreason.runs.stats import check_margin  # CLI start-up: loads on use
    from relreason.studies.results import collect_results  # CLI start-up: loads on use
    from relreason.studies.results_report import write_report  # CLI start-up: loads on use

    if margin is not None:
        check_margin(margin)
    if not collect:
        refuse_unread(ctx, "--no-collect", {"--results", "--md", "--collect", "--margin"},
                      "relreason results --no-collect [--results DIR] [--md FILE] [--margin M]")
    if collect:
        copied = collect_results(source, results)
        err.print(f"{len(copied)} result file(s) written under {results}", highlight=False)
    n = write_report(results, markdown, margin)
    err.print(f"{markdown}: {n} table(s) with results", highlight=False)


@report_errors
def report_cmd(
    items: Annotated[Optional[list[str]], typer.Argument(
        help="Published tables (`relreason reproduce --list`) and/or finished run directories.",
        show_default="every table with results, as RESULTS.md")] = None,
    out_file: Annotated[Path, typer.Option("--out", help="The HTML page written.")] = Path("report.html"),
    results: Annotated[Path, typer.Option("--results", help="Where the result files are kept (committed).")] =
    Path("results"),
    margin: MarginOpt = None,
) -> None:
    """Write the results as one self-contained HTML page: each table beside the published one with its
    verdicts (the rows of RESULTS.md), learning curves, size sweeps where saved, the model-selection
    tables, and per cell the command, hardware and wall time; or the same for run directories.

    Examples:\n
      relreason report --out report.html\n
      relreason report clrs30 ibarz2022 --out tables.html\n
      relreason report runs/mpnn-bfs-s42-20261121-101500 --out run.html
    """
    from relreason.runs.stats import check_margin  # CLI start-up: loads on use
    from relreason.studies.html_report import write_page  # CLI start-up: loads on use

    if margin is not None:
        check_margin(margin)
    counts = write_page(list(items or []), out_file, results, margin)
    err.print(f"{out_file}: {counts['sections']} section(s), {counts['tables']} table(s), {counts['figures']} "
              "figure(s)", highlight=False, markup=False)
