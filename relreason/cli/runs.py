"""`relreason runs`, `relreason compare` and `relreason plot`: list, compare and plot finished and
unfinished runs (and ablation cells). Thin: the work is in relreason.runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from relreason.cli.common import JsonOpt, MarginOpt, err, out, report_errors
from relreason.errors import RelreasonError


def task_metric(task: str) -> Optional[tuple[str, bool]]:
    """The task registry's metric for runs whose results.json predates the "metric" key."""
    from relreason.tasks import TASKS  # CLI start-up: loads on use

    if task not in TASKS:
        return None
    t = TASKS.get(task)
    return t.metric, t.lower_is_better


def as_configured_today(runs) -> list:
    """The runs with each stored config as today's code resolves it: a key added since a run was stored
    counts with its default (options are added with the default that keeps what ran before), so a seed
    trained before the key existed is one setting with a seed trained after. A stored config today's
    code refuses stays as stored."""
    from relreason.config import config_from_dict  # CLI start-up: loads on use

    for r in runs:
        if r.config:
            try:
                r.config = config_from_dict(r.config).to_dict()
            except (RelreasonError, KeyError, TypeError):
                pass
    return runs


def _print_table(table) -> None:
    if out.is_terminal:
        out.print(table)
        return
    # piped or redirected: no terminal width to respect, so the table takes its natural width and no
    # name is folded or cut (a Console caps print(width=...) at its own width, hence a wide one)
    Console(file=out.file, width=100_000, soft_wrap=True).print(table)


def _warn_problems(runs) -> None:
    for r in runs:
        for p in r.problems:
            err.print(f"warning: {r.name}: {p}", highlight=False, markup=False)


@report_errors
def runs_cmd(
    directory: Annotated[Path, typer.Argument(help="Folder searched recursively for runs (ablation folders too).")]
    = Path("runs"),
    as_json: JsonOpt = False,
) -> None:
    """List runs, newest first: model, task, seed, examples, best validation, OOD test, status, age.

    Status: finished (results.json written), running (its lock names a live process on this host),
    interrupted (resume it with `relreason train ... --name NAME --resume`) or diverged at step K (its
    loss was not finite: resume it with a lower --set train.lr=...). Age: since the run last wrote
    anything. Damaged files and lines are listed under "problems" (--json).

    Examples:\n
      relreason runs\n
      relreason runs ablations/no-edge-updates\n
      relreason runs --json
    """
    from relreason.runs.discovery import discover_runs  # CLI start-up: loads on use
    from relreason.runs.run_tables import runs_table  # CLI start-up: loads on use

    runs = discover_runs(directory, task_metric)
    if as_json:
        out.print_json(json.dumps({"dir": str(directory), "runs": [r.to_dict() for r in runs]}))
        return
    _warn_problems(runs)
    _print_table(runs_table(runs, f"{len(runs)} run{'s' * (len(runs) != 1)} under {directory}"))


@report_errors
def compare_cmd(
    run_dirs: Annotated[Optional[list[Path]], typer.Argument(help="Run directories to compare.", show_default=False)]
    = None,
    runs_dir: Annotated[Optional[Path], typer.Option("--runs", help="Compare every run under this folder.",
                                                     show_default="none: give RUN_DIRS")] = None,
    group_by: Annotated[Optional[str], typer.Option(
        "--group-by", help="Rows of the table: model, task or seed (default: one row per model and task).",
        show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, md, csv, latex or json.")] = "table",
    against: Annotated[Optional[str], typer.Option(
        "--against", help="With --group-by task: after each other column, its difference from this one "
                          "(Welch's 95% interval and a verdict, as `reproduce` judges a paper's figure).",
        show_default="none: no differences")] = None,
    margin: MarginOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare runs side by side; seeds of one (model, task, setting) become mean ± std.

    The std is the sample std (ddof=1), as `relreason ablate` and `reproduce` print. Each score column names
    its metric and direction; runs scored with different metrics are never averaged together. With
    --against, each other column is judged against that one as `reproduce` judges a published figure:
    agrees (Welch's 95% interval of the difference inside ± --margin), lower, higher or inconclusive.

    Examples:\n
      relreason compare --runs runs\n
      relreason compare --runs ablations/no-edge-updates --group-by task --format md\n
      relreason compare runs/rt-bfs-s0 runs/rt-bfs-s1 runs/mpnn-bfs-s0 --json\n
      relreason compare --runs ablations/no-edge-updates --group-by task --against rt --margin 2
    """
    from relreason.runs.comparison import compare, parse_group_by  # CLI start-up: loads on use
    from relreason.runs.discovery import load_runs  # CLI start-up: loads on use
    from relreason.runs.run_tables import Format, comparison_table, parse_format, render_comparison  # CLI start-up: loads on use
    from relreason.runs.stats import check_margin  # CLI start-up: loads on use

    grouping = parse_group_by(group_by)
    if margin is not None:
        check_margin(margin)
    form = parse_format(fmt)
    if as_json and form not in (Format.TABLE, Format.JSON):
        raise RelreasonError(f"--json and --format {fmt} ask for two formats", "give one of them")
    if as_json:
        form = Format.JSON
    if not run_dirs and runs_dir is None:
        raise RelreasonError("nothing to compare", "name run directories, or pass --runs DIR (e.g. --runs runs)")
    runs = as_configured_today(load_runs(run_dirs or [], runs_dir, task_metric))
    _warn_problems(runs)
    cmp = compare(runs, grouping, against, margin)
    for note in cmp.notes:
        err.print(f"note: {note}", highlight=False)
    if form is Format.TABLE:
        _print_table(comparison_table(cmp))
    elif form is Format.JSON:
        out.print_json(render_comparison(cmp, form))
    else:
        out.print(render_comparison(cmp, form), highlight=False, markup=False, end="")


@report_errors
def plot_cmd(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Run directories, or one ablation folder (ablations/NAME).", show_default=False)] = None,
    runs_dir: Annotated[Optional[Path], typer.Option("--runs", help="Plot the curves of every run under this folder.",
                                                     show_default="none: give PATHS")] = None,
    out_file: Annotated[Optional[Path], typer.Option(
        "--out", help="Figure file, .png, .svg or .pdf (default: FIRST_RUN/curves.png, DIR/curves.png with --runs, "
                "ABLATION/bars.png; --ood: FIRST_RUN/ood.png or SWEEP.png).",
        show_default=False)] = None,
    ood: Annotated[bool, typer.Option("--ood", help="Plot size sweeps instead (score against size): PATHS are sweep "
                                                    "files of `relreason eval --ood LIST --save`, or run directories "
                                                    "holding one (ood_sweep.json).")] = False,
    by: Annotated[str, typer.Option("--by", help="With --ood: a line per run, or per model (the seeds as a band, "
                                                 "mean ± std).")] = "run",
) -> None:
    """Plot learning curves of runs (validation score and training loss against examples, one line
    per run), the bar chart of an ablation (mean ± std per task and variant), or with --ood the scores
    of size sweeps against size. Prints the file.

    Examples:\n
      relreason plot runs/mpnn-bfs-s42 runs/rt-bfs-s42\n
      relreason plot --runs ablations/no-edge-updates/rt --out rt-curves.svg\n
      relreason plot ablations/no-edge-updates\n
      relreason plot --ood runs/mpnn-bfs-s1 runs/mpnn-bfs-s2 runs/rt-bfs-s1 --by model --out sizes.svg
    """
    from relreason.runs.discovery import load_runs  # CLI start-up: loads on use
    from relreason.runs.plot import FORMATS, ablation_figure, curves_figure, require_matplotlib, save_figure  # CLI start-up: loads on use
    from relreason.runs.records import read_ablation  # CLI start-up: loads on use

    require_matplotlib()
    if out_file is not None and out_file.suffix.lstrip(".").lower() not in FORMATS:
        raise RelreasonError(f"unknown figure format {out_file.suffix or '(none)'!r} in --out {out_file}",
                             "end --out with " + ", ".join(f".{f}" for f in FORMATS))
    paths = list(paths or [])
    if ood:
        ood_plot(paths, runs_dir, by, out_file)
        return
    if by != "run":
        raise RelreasonError("--by groups the lines of size sweeps", "add --ood, or drop --by")
    if not paths and runs_dir is None:
        raise RelreasonError("nothing to plot", "name run directories or an ablation folder, or pass --runs DIR")
    ablations = [(p, read_ablation(p)) for p in paths]
    ablations = [(p, a) for p, a in ablations if a is not None]
    if ablations and (len(paths) > 1 or runs_dir is not None):
        raise RelreasonError(f"{ablations[0][0]} is an ablation folder: plot it on its own",
                             f"relreason plot {ablations[0][0]}")
    if ablations:
        path, data = ablations[0]
        fig = ablation_figure(path, data, task_metric)
        target = out_file if out_file is not None else path / "bars.png"
    else:
        runs = load_runs(paths, runs_dir, task_metric)
        _warn_problems(runs)
        fig = curves_figure(runs)
        default = runs[0].path if paths else runs_dir  # the first run named, else the folder plotted
        target = out_file if out_file is not None else default / "curves.png"
    out.print(str(save_figure(fig, target)), highlight=False)


def ood_plot(paths: list[Path], runs_dir: Optional[Path], by: str, out_file: Optional[Path]) -> None:
    """`plot --ood`: the sweeps named (files, or run directories holding ood_sweep.json) in one figure."""
    from relreason.eval.grid import read_sweep, sweep_path  # CLI start-up: loads on use
    from relreason.runs.plot import ood_figure, save_figure  # CLI start-up: loads on use

    if runs_dir is not None:
        raise RelreasonError("--runs lists runs for learning curves; --ood plots the sweeps named",
                             "name the sweep files or run directories")
    if not paths:
        raise RelreasonError("nothing to plot", "name sweep files or run directories: relreason plot --ood runs/NAME")
    fig = ood_figure([(str(p), read_sweep(p)) for p in paths], by)
    first = sweep_path(paths[0])
    target = out_file if out_file is not None else (first.parent / "ood.png" if Path(paths[0]).is_dir()
                                                    else first.with_suffix(".png"))
    out.print(str(save_figure(fig, target)), highlight=False)
