"""Evaluating a saved checkpoint (`relreason eval`): the run's own workload, on any split or size.

    res = evaluate_checkpoint("runs/NAME", ood=128, num=64)
    res["score"], res["outputs"], res["label"]
    evaluate_checkpoint("runs/TEXT_RUN", dump="answers.jsonl")   # text runs: also every answer, as JSONL
    grid = evaluate_grid("runs/NAME", ["clrs", "ws:k=4,p=0.1", "delaunay"], [64])   # graph family x size
    grid["rows"]
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Iterator

import torch

from relreason.errors import RelreasonError
from relreason.rundir import BEST, CHECKPOINT_CONFIG, RunDir
from relreason.train import checkpoint as ckpt


def resolve_checkpoint(target, runs_dir="runs") -> Path:
    """A run directory (-> its best/), a checkpoint directory, or None (-> the newest run's best/)."""
    if target is None:
        runs = [p for p in Path(runs_dir).glob(f"*/{BEST}/{CHECKPOINT_CONFIG}")] if Path(runs_dir).is_dir() else []
        if not runs:
            raise RelreasonError(f"no trained run found under {runs_dir}/",
                                 "train one first (relreason train mpnn bellman_ford --recipe quick) or give RUN")
        return max(runs, key=lambda p: p.stat().st_mtime).parent
    path = Path(target)
    if not path.exists():
        raise RelreasonError(f"{path} does not exist", "give a run directory (runs/NAME) or a checkpoint directory")
    if not path.is_dir():
        raise RelreasonError(f"{path} is not a directory", "give a run directory (runs/NAME) or a checkpoint directory")
    best = RunDir(path).best
    if best.config.exists():
        return best.path
    return path


def _check_request(split, ood, num, seed, batch_size) -> None:
    if split is not None and split not in ("val", "test"):
        raise RelreasonError(f"unknown split {split!r}", "use --split val or --split test")
    if ood is not None and split is not None and split != "test":
        raise RelreasonError("--ood evaluates out of distribution (a test split); it cannot go with --split val",
                             "drop one of them")
    if ood is not None and ood < 2:
        raise RelreasonError(f"--ood {ood} is too small", "give a number of nodes >= 2, e.g. --ood 64")
    if num is not None and num <= 0:
        raise RelreasonError(f"--num {num} must be positive", "e.g. --num 64")
    if seed is not None and not 0 <= seed < 2**32:
        raise RelreasonError(f"--seed {seed} is out of range", "use 0 <= seed < 2**32, e.g. --seed 0")
    if batch_size is not None and batch_size <= 0:
        raise RelreasonError(f"--batch-size {batch_size} must be positive", "e.g. --batch-size 8")


@contextlib.contextmanager
def open_checkpoint(target=None, *, device: str | None = None, runs_dir="runs",
                    overrides: list[str] | None = None) -> Iterator[tuple[Path, Any, Any]]:
    """(checkpoint path, resolved config, workload with the weights loaded) of a run, closed on exit."""
    from relreason.config import Layer, parse_overrides, resolve
    from relreason.models.build import resolve_device
    from relreason.runtime import keep_freed_memory
    from relreason.train.workloads import build_workload

    keep_freed_memory()
    path = resolve_checkpoint(target, runs_dir)
    stored = ckpt.load_config(path)
    over = list(overrides or []) + ([f"train.device={device}"] if device is not None else [])
    plain = stored.to_dict()
    cfg = resolve(stored.model_name, stored.task, [Layer("stored", {s: plain[s] for s in stored.sections()}),
                                                   Layer("--set", parse_overrides(over))], stored.recipe)
    dev = resolve_device(cfg.train.device)
    if cfg.train.threads:  # the run's thread count (or --set train.threads=N), as in training
        torch.set_num_threads(cfg.train.threads)
    workload = build_workload(cfg, dev)
    try:
        ckpt.load_weights(path, workload.model)
        yield path, cfg, workload
    finally:
        workload.close()


def check_graphs(cfg, graphs: list[str]) -> None:
    """Refuses graph families (`--graph`) for a run they do not apply to: not graph algorithms, or a
    family some task's sampler cannot take."""
    from relreason.data.config import ClrsDataConfig

    if not isinstance(cfg.data, ClrsDataConfig):
        raise RelreasonError(f"--graph applies to the graph algorithms; {cfg.task} is not one of them",
                             "evaluate this run without --graph")
    for graph in graphs:
        problems = dataclasses.replace(cfg.data, graph=graph).task_problems(cfg.tasks)
        if problems:
            raise RelreasonError(problems[0].replace("data.graph", "--graph"), "evaluate this run without --graph")


def evaluated_graph(cfg, split: str, graph: str | None) -> str | None:
    """The canonical text of the graph family a split was drawn from (None: the benchmark's sampler)."""
    from relreason.data.families import parse_graph

    if graph is None:
        graph_of = getattr(cfg.data, "graph_of", None)  # only graph algorithms' data configs have graphs
        graph = graph_of(split) if graph_of is not None else None
    spec = parse_graph(graph) if graph is not None else None
    return None if spec is None else str(spec)


def _described(path: Path, cfg, workload, which: str) -> dict:
    """What an evaluation was of: checkpoint, model, task, split, metric."""
    from relreason.models.catalog import model_label

    randomized = which == "val" and bool(getattr(cfg.model, "random_pos", False))
    return {"checkpoint": str(path), "model": cfg.model_name, "model_label": model_label(cfg.model_name, cfg.model),
            "task": cfg.task, "split": which,
            "metric": workload.metric, "metric_label": workload.metric_label,
            "lower_is_better": workload.lower_is_better, "random_positions": randomized}


def evaluate_checkpoint(target=None, *, ood: int | None = None, split: str | None = None, num: int | None = None,
                        seed: int | None = None, device: str | None = None, batch_size: int | None = None,
                        runs_dir="runs", overrides: list[str] | None = None, on_examples=None,
                        sizes: list[int] | None = None, graph: str | None = None, dump=None) -> dict:
    """Scores a checkpoint. `ood=N`: the test split at N nodes (the canonical test split when N is its
    size and no num/seed is given); `split`: val or test at the run's sizes; `overrides`: `--set`
    items applied over the stored config (e.g. data.data_dir); `graph`: the graph family of the split
    (graph algorithms; "clrs": the benchmark's sampler; None: the run's); `dump`: a file that receives every
    example evaluated with our answer (text runs; relreason.eval.text_score.AnsweredExample lines, what
    `relreason score` reads). Returns the scores and what was evaluated (model, task, label, metric,
    checkpoint, graph)."""
    from relreason.eval.text_score import answers_writer
    from relreason.models.catalog import Family, find_model

    _check_request(split, ood, num, seed, batch_size)
    with open_checkpoint(target, device=device, runs_dir=runs_dir, overrides=overrides) as (path, cfg, workload):
        if dump is not None and find_model(cfg.model_name)[0] is not Family.TEXT:
            raise RelreasonError(f"--dump writes the answers of text runs (text_transformer, transnar); {path} is "
                                 f"a {cfg.model_name} run on {cfg.task}", "drop --dump")
        which = "test" if split is None else split
        kwargs = {"size": ood, "num": num, "seed": seed, "batch_size": batch_size}
        if sizes is not None:
            kwargs["sizes"] = sizes
        if graph is not None:
            check_graphs(cfg, [graph])
            kwargs["graph"] = graph
        with answers_writer(dump) if dump is not None else contextlib.nullcontext() as on_answers:
            if on_answers is not None:
                kwargs["on_answers"] = on_answers
            res = workload.evaluate(which, on_examples, **kwargs)
        return {**_described(path, cfg, workload, which), "graph": evaluated_graph(cfg, which, graph), **res,
                **({} if dump is None else {"dump": str(dump)})}


def evaluate_grid(target=None, graphs: list[str] = ("clrs",), sizes: list[int | None] = (None,), *,
                  split: str | None = None, num: int | None = None, seed: int | None = None,
                  device: str | None = None, batch_size: int | None = None, runs_dir="runs",
                  overrides: list[str] | None = None, on_examples=None) -> dict:
    """Scores a checkpoint on every (graph family, size) cell: what `evaluate_checkpoint` returns about
    the run, plus `rows` (`relreason.eval.grid.grid_rows`: graph, size, score, num, label per cell).
    `graphs` as `--graph` takes them ("clrs" is the benchmark's sampler); a size None is the run's."""
    from relreason.eval.grid import grid_rows

    for size in sizes:
        _check_request(split, size, num, seed, batch_size)
    with open_checkpoint(target, device=device, runs_dir=runs_dir, overrides=overrides) as (path, cfg, workload):
        check_graphs(cfg, list(graphs))
        which = "test" if split is None else split

        def score(graph: str, size: int | None) -> dict:
            res = workload.evaluate(which, on_examples, size=size, num=num, seed=seed, batch_size=batch_size,
                                    graph=graph)
            return {**res, "graph": evaluated_graph(cfg, which, graph)}

        return {**_described(path, cfg, workload, which), "rows": grid_rows(score, graphs, sizes)}
