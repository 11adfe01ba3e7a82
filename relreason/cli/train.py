"""`relreason train`, `relreason eval` and `relreason export`."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from relreason.cli.common import (JsonOpt, SeedOpt, SeedStrategyOpt, err, out, parse_seeds, refuse_unread,
                                  report_errors, seeds_option)
from relreason.cli.data import graph_help, one_graph
from relreason.data.families import graph_name, parse_graphs
from relreason.errors import RelreasonError
from relreason.runtime import progress

RecipeOpt = Annotated[Optional[str], typer.Option(
    "--recipe", help="Recipe name (relreason list recipes) or YAML path. Default: the model's paper recipe.",
    show_default=False)]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="Override SECTION.KEY=VALUE (repeatable).",
                                                     show_default="none")]
DeviceOpt = Annotated[Optional[str], typer.Option("--device", help="auto, cpu, cuda or cuda:N (default: the config's).",
                                                  show_default=False)]


def command_line() -> str:
    return "relreason " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def canonical_model_name(name: str) -> str:
    """The model argument as registered (relreason.models.catalog.canonical_model): `train gforgetnet` trains
    g_forgetnet, and its run, config and records name g_forgetnet."""
    from relreason.models.catalog import canonical_model  # CLI start-up: torch loads on use

    return canonical_model(name)


def overrides_of(sets: list[str] | None, seed: int | None, device: str | None, graph: str | None = None,
                 init: Path | None = None) -> list[str]:
    """`--set` items plus the shortcut options, as --set items (one path for every override)."""
    items = list(sets or [])
    if init is not None:  # the absolute path: the run's record names the weights it started from wherever it is read
        from relreason.train.checkpoint import init_source  # CLI start-up: torch loads on use

        init_source(init)
        items.append(f"train.init={json.dumps(str(Path(init).resolve()))}")
    if seed is not None:
        items.append(f"train.seed={seed}")
    if device is not None:
        items.append(f"train.device={device}")
    if graph is not None:
        items.append(f"data.graph={json.dumps(one_graph(graph))}")  # quoted: read back as the exact text
    return items


def resolve(model: str, task: str, recipe: str | None, sets: list[str] | None, seed: int | None,
            device: str | None, graph: str | None = None, init: Path | None = None):
    from relreason.config import build_config  # CLI start-up: loads on use

    return build_config(model, task, recipe, overrides_of(sets, seed, device, graph, init))


def _config_of(model: str, task: str, recipe: str | None, sets: list[str] | None, seed: int | None,
               device: str | None, graph: str | None, init: Path | None, resumed: Path | None):
    """The config of `train`: the run directory `resumed`'s stored one with what may change on resume, or a
    new one resolved from the command line."""
    if resumed is not None:
        from relreason.train.resume import resume_config  # CLI start-up: torch loads on use

        return resume_config(resumed, overrides_of(sets, seed, device, graph, init), recipe)
    if graph is not None:
        _graph_task(task)
    return resolve(model, task, recipe, sets, seed, device, graph, init)


def quiet_on_workers(fn):
    """Under torchrun, the processes of rank > 0 print nothing: rank 0 prints the results, the progress
    and the errors for all (an error every rank shares ends a worker with exit code 1, silently)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from relreason.train.distributed import is_worker  # CLI start-up: torch loads on use

        if not is_worker():
            return fn(*args, **kwargs)
        try:
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                return fn(*args, **kwargs)
        except RelreasonError:
            raise typer.Exit(1) from None

    return wrapper


@report_errors
@quiet_on_workers
def train_cmd(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="Model name, see `relreason list models` (case, '-' and '_' may "
                                         "differ: gforgetnet is g_forgetnet).", show_default=False,
                                         callback=canonical_model_name)],
    task: Annotated[str, typer.Argument(help="Task, task group or comma list (multi-task), see `relreason list tasks`.",
                                        show_default=False)],
    recipe: RecipeOpt = None,
    sets: SetOpt = None,
    seed: SeedOpt = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Run name (default: model-task-seed-time).",
                                                show_default=False)] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Directory holding runs.")] = Path("runs"),
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run --name from its last checkpoint "
                                                  "(the run's own command with --resume added does).")] = False,
    device: DeviceOpt = None,
    graph: Annotated[Optional[str], typer.Option(
        "--graph", help=graph_help("Graph family of the test split (data.graph; data.graph_splits chooses the "
                                    "splits)"), show_default="the benchmark's")] = None,
    print_config: Annotated[bool, typer.Option("--print-config",
                                               help="Print the resolved config, each key with its source, and exit.")] = False,
    as_json: JsonOpt = False,
    seeds: seeds_option("Train these seeds as one seed group in one process, each exactly its own run NAME-sSEED "
                        "(relreason.train.seed_group)", "one run, train.seed") = None,
    seed_strategy: SeedStrategyOpt = "auto",
    init: Annotated[Optional[Path], typer.Option(
        "--init", help="Fine-tune: start from these weights (a run directory's best/, a checkpoint, or an `export "
                       "--hub` folder) of the same model and task shapes, loaded strictly (train.init).",
        show_default="a fresh initialisation", readable=False)] = None,
) -> None:
    """Train a model on a task; keep the best-on-validation weights; test them out of distribution.

    Without --recipe the model's paper recipe is used (rt, et, dat, triplet_gmpnn, lobster_rt, ...;
    `default` where a model has none).

    Examples:\n
      relreason train rt bellman_ford --print-config\n
      relreason train mpnn bellman_ford --recipe quick\n
      relreason train triplet_gmpnn core8 --recipe quick --seed 1\n
      relreason train mpnn bfs --recipe quick --graph ws:k=4,p=0.1\n
      relreason train rt bellman_ford --recipe quick --seeds 4 --name rt-bf\n
      relreason train mpnn bellman_ford --recipe quick --init hub/mpnn-bellman_ford\n
      torchrun --nproc-per-node 2 -m relreason train mpnn bellman_ford --recipe quick
    """
    from relreason.config import config_yaml  # CLI start-up: loads on use
    from relreason.train import run  # CLI start-up: torch loads on use
    from relreason.train.loop import check_run_name  # CLI start-up: torch loads on use
    from relreason.train.resume import stored_config  # CLI start-up: torch loads on use

    if name is not None:
        check_run_name(name)
    if seeds is not None:
        return _train_group(model, task, recipe, sets, seed, name, out_dir, resume, device, graph, print_config,
                            as_json, seeds, seed_strategy, init)
    refuse_unread(ctx, "a single run (no --seeds)", {p.opts[0] for p in ctx.command.params} - {"--seed-strategy"},
                  "--seed-strategy is a seed group's (relreason train MODEL TASK --seeds 0,1,2 --seed-strategy loop)")
    if resume:
        if name is None:
            raise RelreasonError("--resume needs the run's --name", "e.g. relreason train mpnn bfs --name myrun --resume")
        stored = stored_config(out_dir / name)
        if (stored.model_name, stored.task) != (model, task):
            raise RelreasonError(f"run {name} trains {stored.model_name} on {stored.task}, not {model} on {task}",
                                 f"resume it with: relreason train {stored.model_name} {stored.task} --name {name} "
                                 f"--resume")
        # the run's own command with --resume added is accepted: --recipe, --set and --seed may restate
        # the run's configuration; a value that differs is refused, naming the keys
    cfg = _config_of(model, task, recipe, sets, seed, device, graph, init, out_dir / name if resume else None)
    if print_config:
        out.print(config_yaml(cfg, sources=True), highlight=False, markup=False, end="")
        return
    result = run(cfg, out=out_dir, name=name, resume=resume, command=command_line())
    if result.interrupted:
        raise typer.Exit(130)
    if as_json:
        out.print_json(json.dumps({"run": str(result.run_dir), "best_val": result.best_val,
                                   "examples": result.examples, "seconds": result.seconds, "metric": result.metric,
                                   "lower_is_better": result.lower_is_better, "test_label": result.test_label,
                                   "deviation": result.deviation, "test": result.test}))
        return
    from relreason.eval.report import rich_table  # CLI start-up: loads on use
    from relreason.models.catalog import model_label  # CLI start-up: torch loads on use
    from relreason.tasks import METRIC_LABELS  # CLI start-up: loads on use
    from relreason.train.export import result_table, result_title  # CLI start-up: torch loads on use

    best = "-" if result.best_val is None else f"{result.best_val:.4f}"
    err.print(f"run: {result.run_dir}  ({result.examples} examples, {result.seconds:.0f} s including the final test, "
              f"best validation {best} at {result.best_examples} examples)", highlight=False)
    if result.deviation:
        err.print(f"note: recipe {cfg.recipe}: {result.deviation}", highlight=False, markup=False)
    title = result_title(model_label(model, cfg.model), task, result.test_label,
                         METRIC_LABELS.get(result.metric, result.metric))
    out.print(rich_table(*result_table({**result.test, "metric": result.metric, "task": cfg.task}), title))


def _train_group(model, task, recipe, sets, seed, name, out_dir, resume, device, graph, print_config, as_json,
                 seeds_text, strategy, init=None) -> None:
    """`train --seeds`: one seed group (relreason.train.seed_group.run_group), a run directory per seed."""
    from relreason.config import config_yaml  # CLI start-up: loads on use
    from relreason.train.loop import default_run_name  # CLI start-up: torch loads on use
    from relreason.train.seed_group import Strategy, group_names, run_group  # CLI start-up: torch loads on use

    seeds = list(parse_seeds(seeds_text))
    if seed is not None:
        raise RelreasonError("--seed and --seeds together", "give the seeds with --seeds alone")
    if strategy not in [s.value for s in Strategy]:
        raise RelreasonError(f"--seed-strategy {strategy!r} is not one of {', '.join(s.value for s in Strategy)}",
                             "e.g. --seed-strategy auto")
    if resume and name is None:
        raise RelreasonError("--resume needs the group's --name", "e.g. relreason train mpnn bfs --seeds 0,1 --name g --resume")
    cfg = _config_of(model, task, recipe, sets, None, device, graph, init,
                     out_dir / group_names(name, seeds[:1])[0] if resume else None)
    if print_config:
        out.print(config_yaml(cfg, sources=True), highlight=False, markup=False, end="")
        return
    base = name or default_run_name(cfg).replace(f"-s{cfg.train.seed}-", "-")
    results = run_group(cfg, seeds, out=out_dir, names=group_names(base, seeds), resume=resume,
                        command=command_line(), strategy=strategy)
    if any(r.interrupted for r in results):
        raise typer.Exit(130)
    rows = [{"seed": s, "run": str(r.run_dir), "best_val": r.best_val, "examples": r.examples,
             "seconds": r.seconds, "metric": r.metric, "test": r.test} for s, r in zip(seeds, results)]
    if as_json:
        out.print_json(json.dumps({"runs": rows}))
        return
    for row in rows:
        out.print(f"seed {row['seed']}: {row['run']}  test {row['metric']} {row['test'].get('score', float('nan')):.4f}",
                  highlight=False)


def _graph_task(task: str) -> None:
    """Refuses --graph for tasks that are not graph algorithms (lobsters, text) before anything else."""
    from relreason.tasks import task_kind  # CLI start-up: loads on use

    if task_kind(task) != "clrs":
        raise RelreasonError(f"--graph applies to the graph algorithms; {task} is a {task_kind(task)} task",
                             "drop --graph")


OOD_GRAMMAR = "a list of sizes and ranges: 64; 16,32,64; 16-64:16 (every 16th); 16-256:x2 (doubling); 8-12 (every size)"


@report_errors
def eval_cmd(
    run_dir: Annotated[Optional[Path], typer.Argument(help="Run or checkpoint directory (default: newest run).",
                                                      show_default=False, readable=False)] = None,
    ood: Annotated[Optional[str], typer.Option(
        "--ood", help="Test at this many nodes (64 = canonical CLRS test; lobsters: the backbone length), or at "
                      f"several, one table: {OOD_GRAMMAR}. Each size is drawn with the split's seed (or --seed).",
        show_default="the run's test size")] = None,
    split: Annotated[Optional[str], typer.Option("--split", help="Split: val or test (default: test).",
                                                 show_default=False)] = None,
    num: Annotated[Optional[int], typer.Option("--num", help="Number of samples (default: the split's).",
                                               show_default=False)] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the evaluated samples, at every size.",
                                                show_default="the split's")] = None,
    sizes: Annotated[Optional[str], typer.Option("--sizes", help="Text tasks: lengths to test, e.g. 10,12,14.",
                                                 show_default="the split's")] = None,
    graph: Annotated[Optional[str], typer.Option(
        "--graph", help=graph_help("Graph family of the evaluated split; a comma list (er,ws,delaunay) gives a "
                                    "table by family and size"), show_default="the run's")] = None,
    hints: Annotated[bool, typer.Option("--hints", help="Also show hint accuracies.")] = False,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size", help="Evaluation batch (default: sized to "
                                                      "the available memory).", show_default=False)] = None,
    sets: SetOpt = None,
    device: DeviceOpt = None,
    sparse: Annotated[Optional[str], typer.Option(
        "--sparse", help="Graph models on edge lists: auto (large sparse graphs, where it computes the dense "
        "numbers), always or never; --set model.sparse=... (default: the run's).", show_default=False)] = None,
    runs: Annotated[Path, typer.Option("--runs", help="Where to look for the newest run.")] = Path("runs"),
    dump: Annotated[Optional[Path], typer.Option("--dump", help="Text runs: also write every example evaluated "
                                                 "with the model's answer to this JSONL file (what `relreason score` "
                                                 "reads).", show_default="none: no file")] = None,
    save: Annotated[Optional[Path], typer.Option(
        "--save", help="Keep the table as a sweep file (JSON, what `relreason plot --ood` reads); a directory, "
                       "e.g. the run's, gets DIR/ood_sweep.json.", show_default="none: no file")] = None,
    memory_check: Annotated[bool, typer.Option(
        "--memory-check/--no-memory-check", help="Refuse --ood sizes whose estimated memory for one sample does not "
                                                 "fit, before anything runs (--no-memory-check: try them anyway).")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate a checkpoint with its task's metric (per output feature, and the task score).

    Sizes are checked before anything runs: one whose estimated memory for a single sample exceeds
    what is available is refused with the estimate.

    Examples:\n
      relreason eval --ood 64\n
      relreason eval runs/mpnn-bellman_ford-s42-20261121-101500 --ood 128 --num 64\n
      relreason eval runs/myrun --ood 16-256:x2 --save runs/myrun\n
      relreason eval runs/myrun/last --split val --hints --json\n
      relreason eval runs/transnar-run --dump answers.jsonl\n
      relreason eval --ood 16,64 --graph clrs,er,ws,delaunay\n
      relreason eval runs/pgn-bfs-s42-20261121-101500 --sparse always --ood 256
    """
    from relreason.eval.report import rich_table  # CLI start-up: loads on use
    from relreason.models.build import resolve_device  # CLI start-up: torch loads on use
    from relreason.train.evaluation import evaluate_checkpoint  # CLI start-up: torch loads on use
    from relreason.train.export import result_table, result_title  # CLI start-up: torch loads on use

    if device is not None:
        resolve_device(device)
    ood_sizes = parse_ood(ood) if ood is not None else None
    size_list = parse_sizes(sizes) if sizes is not None else None
    overrides = [*(sets or []), *([f"model.sparse={sparse}"] if sparse is not None else [])]
    graphs = [graph_name(g) for g in parse_graphs(graph)] if graph is not None else None
    several = (graphs is not None and len(graphs) > 1) or (ood_sizes is not None and len(ood_sizes) > 1)
    if several or save is not None:
        if hints or size_list is not None or dump is not None:
            given = "hints" if hints else "sizes" if size_list is not None else "dump"
            what = "--save" if not several else "a list of graphs or sizes"
            raise RelreasonError(f"--{given} does not go with {what}",
                                 "evaluate one graph at one size for hint accuracies; --sizes and --dump are for "
                                 "text tasks")
        grid_cmd(run_dir, graphs if graphs is not None else [None], ood_sizes if ood_sizes is not None else [None],
                 split, num, seed, batch_size, overrides, device, runs, as_json, save, memory_check)
        return
    with progress(None, "evaluating", unit="ex") as bar:
        res = evaluate_checkpoint(run_dir, ood=None if ood_sizes is None else ood_sizes[0], split=split, num=num,
                                  seed=seed, device=device, batch_size=batch_size, runs_dir=runs, overrides=overrides,
                                  on_examples=bar.update, sizes=size_list, graph=None if graphs is None else graphs[0],
                                  dump=dump, memory_check=memory_check)
    if not hints:
        res["hints"] = {}
        for r in (res.get("per_task") or {}).values():
            r["hints"] = {}
    if as_json:
        out.print_json(json.dumps(res))
        return
    title = result_title(res["model_label"], res["task"], res["label"], res["metric_label"])
    if res["split"] == "val" and res["metric"] != "text_clrs":  # text models: see their positions option
        title += " (positions randomized, as in training's validation)" if res["random_positions"] else \
            " (true positions)"
    out.print(rich_table(*result_table(res), title))
    err.print(f"checkpoint: {res['checkpoint']}", highlight=False)
    if dump is not None:
        err.print(f"answers: {dump} (score them with `relreason score {dump}`)", highlight=False, markup=False)


def grid_cmd(run_dir, graphs: list[str | None], sizes: list[int | None], split, num, seed, batch_size, sets, device,
             runs, as_json: bool, save: Path | None, memory_check: bool = True) -> None:
    """`eval --graph a,b,c` and `eval --ood LIST`: one table of scores, a row per graph family and a column
    per size (a row per size for one family); `save`: also the sweep file."""
    from relreason.eval.grid import grid_table, size_table, write_sweep  # CLI start-up: loads on use
    from relreason.eval.report import rich_table  # CLI start-up: loads on use
    from relreason.train.evaluation import evaluate_grid  # CLI start-up: torch loads on use

    with progress(None, "evaluating", unit="ex") as bar:
        res = evaluate_grid(run_dir, graphs, sizes, split=split, num=num, seed=seed, device=device,
                            batch_size=batch_size, runs_dir=runs, overrides=sets, on_examples=bar.update,
                            memory_check=memory_check)
    saved = write_sweep(save, res) if save is not None else None
    if as_json:
        out.print_json(json.dumps(res))
    else:
        head = f"{res['model_label']} on {res['task']}: {res['split']}"
        if len(graphs) > 1:
            title = f"{head} by graph family and size — {res['metric_label']}"
            out.print(rich_table(*grid_table(res["rows"], seeds=len(sizes) > 1), title))
        else:
            family = res["rows"][0]["graph"]
            title = f"{head} by size{'' if family == 'clrs' else f', {family} graphs'} — {res['metric_label']}"
            out.print(rich_table(*size_table(res["rows"]), title))
        err.print(f"checkpoint: {res['checkpoint']}", highlight=False)
    if saved is not None:
        err.print(f"sweep: {saved} (plot it with `relreason plot --ood {saved}`)", highlight=False, markup=False)


def parse_sizes(text: str) -> list[int]:
    """"10,12,14" or "4-8,12" -> sorted distinct sizes; a one-line error for anything else."""
    out: list[int] = []
    for item in (x.strip() for x in text.split(",")):
        lo, sep, hi = item.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise RelreasonError(f"--sizes {text!r}: {item!r} is not a size or a range", "e.g. --sizes 10,12,14 or 4-8,12") from None
        if a < 1 or b < a:
            raise RelreasonError(f"--sizes {text!r}: {item!r} is not a valid size or range", "sizes are >= 1, ranges lo-hi")
        out.extend(range(a, b + 1))
    return sorted(set(out))


def parse_ood(text: str) -> list[int]:
    """`--ood` text -> its sizes, ascending: items separated by commas, each a size (64), a range of
    every size (8-12), a range by a step (16-64:16 -> 16, 32, 48, 64) or by a factor (16-256:x2 -> 16,
    32, 64, 128, 256); a range ends at the last size not above its end. A one-line error for anything
    else, a size below 2, or a size listed twice."""
    def bad(item: str, why: str) -> RelreasonError:
        return RelreasonError(f"--ood {text!r}: {item!r} {why}", f"give {OOD_GRAMMAR}")

    out: list[int] = []
    for item in (x.strip() for x in text.split(",")):
        span, colon, by = item.partition(":")
        lo_text, dash, hi_text = span.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
            factor = int(by[1:]) if colon and by.startswith("x") else None
            step = int(by) if colon and factor is None else 1
        except ValueError:
            raise bad(item, "is not a size or a range") from None
        if colon and not dash:
            raise bad(item, "has a step but no range (lo-hi:step)")
        if lo < 2:
            raise bad(item, "starts below 2 nodes")
        if hi < lo:
            raise bad(item, "ends before it starts")
        if factor is not None and factor < 2:
            raise bad(item, "grows by a factor below 2")
        if step < 1:
            raise bad(item, "has a step below 1")
        if factor is not None:
            items = []
            while lo <= hi:
                items.append(lo)
                lo *= factor
        else:
            items = list(range(lo, hi + 1, step))
        out.extend(items)
    twice = sorted({n for n in out if out.count(n) > 1})
    if twice:
        raise RelreasonError(f"--ood {text!r} lists n={twice[0]} more than once", "give each size once")
    return sorted(out)


@report_errors
def export_cmd(
    ctx: typer.Context,
    run_dir: Annotated[Path, typer.Argument(help="Run directory to export.", show_default=False, readable=False)],
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Bundle directory (default: RUN/export).",
                                                    show_default=False)] = None,
    results: Annotated[Optional[str], typer.Option("--results", help="Print result tables: md, csv, json or latex.",
                                                   show_default="none: write the bundle")] = None,
    hub: Annotated[Optional[Path], typer.Option(
        "--hub", help="Write this folder in the Hugging Face model repository layout (model.safetensors, "
                      "config.json, README.md with the Hub's metadata) instead of the bundle.",
        show_default="none: the bundle")] = None,
) -> None:
    """Export a run as a portable bundle (weights, config, model card), as a Hugging Face model repository
    folder, or its results as a table. `relreason eval DIR` and `relreason train --init DIR` read both folders.

    Examples:\n
      relreason export runs/mpnn-bellman_ford-s42-20261121-101500\n
      relreason export runs/myrun --hub hub/mpnn-bellman_ford\n
      relreason export runs/myrun --results latex
    """
    from relreason.train.export import export_bundle, results_table  # CLI start-up: torch loads on use

    if hub is not None and (out_dir is not None or results is not None):
        raise RelreasonError(f"--hub does not go with {'--out' if out_dir is not None else '--results'}",
                             "--hub DIR names the folder written; drop the other option")
    if results is not None:
        refuse_unread(ctx, "--results", {"--results"}, "relreason export RUN --results md|csv|json|latex")
        out.print(results_table(run_dir, results), highlight=False, markup=False, end="")
        return
    path = export_bundle(run_dir, hub, hub=True) if hub is not None else export_bundle(run_dir, out_dir)
    out.print(str(path))
