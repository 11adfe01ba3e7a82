"""`relreason train`, `relreason eval` and `relreason export`."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from relreason.cli.common import JsonOpt, SeedOpt, err, out, report_errors
from relreason.errors import RelreasonError

RecipeOpt = Annotated[Optional[str], typer.Option("--recipe", help="Recipe name (relreason list recipes) or YAML path.")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="Override SECTION.KEY=VALUE (repeatable).")]
DeviceOpt = Annotated[Optional[str], typer.Option("--device", help="auto, cpu or cuda.")]


def command_line() -> str:
    return "relreason " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def resolve(model: str, task: str, recipe: str | None, sets: list[str] | None, seed: int | None,
            device: str | None):
    from relreason.config import build_config

    overrides = list(sets or [])
    if seed is not None:
        overrides.append(f"train.seed={seed}")
    if device is not None:
        overrides.append(f"train.device={device}")
    return build_config(model, task, recipe, overrides)


@report_errors
def train_cmd(
    model: Annotated[str, typer.Argument(help="Model (processor) name, see `relreason list models`.")],
    task: Annotated[str, typer.Argument(help="Task name, see `relreason list tasks`.")],
    recipe: RecipeOpt = None,
    sets: SetOpt = None,
    seed: SeedOpt = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Run name (default: model-task-seed-time).")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Directory holding runs.")] = Path("runs"),
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run --name from its last checkpoint.")] = False,
    device: DeviceOpt = None,
    print_config: Annotated[bool, typer.Option("--print-config", help="Print the resolved config and exit.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Train a model on a task; keep the best-on-validation weights; test them out of distribution.

    Examples:\n
      relreason train mpnn bellman_ford --recipe quick\n
      relreason train rt bellman_ford --recipe rt --seed 1\n
      relreason train mpnn bfs --set train.lr=3e-4 --set model.hidden=64 --name bfs-small
    """
    from relreason.config import config_yaml
    from relreason.eval.report import rich_table, score_rows
    from relreason.train import run

    cfg = resolve(model, task, recipe, sets, seed, device)
    if print_config:
        out.print(config_yaml(cfg), highlight=False, markup=False)
        return
    result = run(cfg, out=out_dir, name=name, resume=resume, command=command_line())
    if result.interrupted:
        raise typer.Exit(130)
    if as_json:
        out.print_json(json.dumps({"run": str(result.run_dir), "best_val": result.best_val,
                                   "examples": result.examples, "seconds": result.seconds, "test": result.test}))
        return
    err.print(f"run: {result.run_dir}  ({result.examples} examples, {result.seconds:.0f} s, "
              f"best validation {result.best_val:.4f} at {result.best_examples} examples)")
    from relreason.tasks import TASKS

    metric = ": relative loss, lower is better" if TASKS.get(task).metric == "relative_loss" else ""
    out.print(rich_table(score_rows(result.test), ["feature", "score"],
                         f"{model} on {task}: test (OOD, n={result.test_size}){metric}"))


@report_errors
def eval_cmd(
    run_dir: Annotated[Optional[Path], typer.Argument(help="Run or checkpoint directory (default: newest run).")] = None,
    ood: Annotated[Optional[int], typer.Option("--ood", help="Test at this many nodes (64 = canonical test).")] = None,
    split: Annotated[Optional[str], typer.Option("--split", help="Canonical split: val or test.")] = None,
    num: Annotated[Optional[int], typer.Option("--num", help="Number of samples (custom split).")] = None,
    seed: SeedOpt = None,
    hints: Annotated[bool, typer.Option("--hints", help="Also show hint accuracies.")] = False,
    device: DeviceOpt = None,
    runs: Annotated[Path, typer.Option("--runs", help="Where to look for the newest run.")] = Path("runs"),
    as_json: JsonOpt = False,
) -> None:
    """Evaluate a checkpoint with the CLRS metric (per output feature, and the algorithm score).

    Examples:\n
      relreason eval --ood 64\n
      relreason eval runs/mpnn-bellman_ford-s42-20261121-101500 --ood 128 --num 64\n
      relreason eval runs/myrun/last --split val --hints --json
    """
    from relreason.eval.evaluate import evaluate_checkpoint
    from relreason.eval.report import rich_table, score_rows

    if split is not None and split not in ("val", "test"):
        raise RelreasonError(f"unknown split {split!r}", "use --split val or --split test")
    res = evaluate_checkpoint(run_dir, ood=ood, split=split, num=num, seed=seed, device=device or "auto",
                              runs_dir=runs)
    if not hints:
        res["hints"] = {}
    if as_json:
        out.print_json(json.dumps(res))
        return
    title = f"{res['model']} on {res['task']}: {res['split']} (n={res['size']}, {res['num']} samples)"
    if res["metric"] == "relative_loss":
        title += ": relative loss, lower is better"
    out.print(rich_table(score_rows(res), ["feature", "score"], title))
    err.print(f"checkpoint: {res['checkpoint']}")


@report_errors
def export_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory to export.")],
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Bundle directory (default: RUN/export).")] = None,
    results: Annotated[Optional[str], typer.Option("--results", help="Print result tables: md, csv, json or latex.")] = None,
) -> None:
    """Export a run as a portable bundle (weights, config, model card) or its results as a table.

    Examples:\n
      relreason export runs/mpnn-bellman_ford-s42-20261121-101500\n
      relreason export runs/myrun --results latex
    """
    from relreason.train.export import export_bundle, results_table

    if results is not None:
        out.print(results_table(run_dir, results), highlight=False, markup=False, end="")
        return
    path = export_bundle(run_dir, out_dir)
    out.print(str(path))
