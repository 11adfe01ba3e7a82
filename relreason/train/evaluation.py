"""Evaluating a saved checkpoint (`relreason eval`): the run's own workload, on any split or size.

    res = evaluate_checkpoint("runs/NAME", ood=128, num=64)
    res["score"], res["outputs"], res["label"]
    evaluate_checkpoint("runs/TEXT_RUN", dump="answers.jsonl")   # text runs: also every answer, as JSONL
    grid = evaluate_grid("runs/NAME", ["clrs", "ws:k=4,p=0.1", "delaunay"], [64])   # graph family x size
    sweep = evaluate_grid("runs/NAME", [None], [16, 32, 64, 128])   # a size sweep on the run's graphs
    sweep["rows"]                                                    # graph, size, seed, score, num, ... per cell

Sizes given (`ood`, the grid's) are checked before anything is evaluated: a size below an algorithm's smallest
graph is refused, and so is a size whose estimated memory for one sample exceeds what is available
(relreason.eval.memory: measured on the model at two small sizes and extrapolated); the others are
evaluated in batches sized to fit. `memory_check=False` (`eval --no-memory-check`) skips the estimate
(to try a size it refuses anyway). Each size is drawn with the split's own seed (the test split: 3, the
benchmark's, so n = 64 is the canonical test) unless `seed` is given, which then holds at every size: a
size of a sweep is the same samples as that size evaluated alone. Rows record the seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from pathlib import Path
from typing import Any, Iterator

import torch

from relreason.config import Layer, parse_overrides, resolve
from relreason.data.algorithms import ALGORITHMS, canonical_split
from relreason.data.config import ClrsDataConfig, LobsterDataConfig
from relreason.data.families import parse_graph
from relreason.data.generate import resolve_split
from relreason.data.lobster import MAX_BACKBONE
from relreason.data.store import owned_temporary
from relreason.errors import RelreasonError
from relreason.eval.grid import grid_rows
from relreason.eval.memory import Footprint, PROBE_MAX, PROBE_MIN, PROBE_NUM, PROBE_SEED, free_memory, largest_fitting
from relreason.eval.text_score import answers_writer
from relreason.models.build import resolve_device
from relreason.models.catalog import Family, find_model, model_label
from relreason.rundir import BEST, CHECKPOINT_CONFIG, LAST, RunDir
from relreason.runtime import keep_freed_memory
from relreason.train import checkpoint as ckpt
from relreason.train.workloads import NarWorkload, _pick_batch, build_workload


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
    if not isinstance(cfg.data, ClrsDataConfig):
        raise RelreasonError(f"--graph applies to the graph algorithms; {cfg.task} is not one of them",
                             "evaluate this run without --graph")
    for graph in graphs:
        problems = dataclasses.replace(cfg.data, graph=graph).task_problems(cfg.tasks)
        if problems:
            raise RelreasonError(problems[0].replace("data.graph", "--graph"), "evaluate this run without --graph")


def evaluated_graph(cfg, split: str, graph: str | None) -> str | None:
    """The canonical text of the graph family a split was drawn from (None: the benchmark's sampler)."""
    if graph is None:
        graph_of = getattr(cfg.data, "graph_of", None)  # only graph algorithms' data configs have graphs
        graph = graph_of(split) if graph_of is not None else None
    spec = parse_graph(graph) if graph is not None else None
    return None if spec is None else str(spec)


def _described(path: Path, cfg, workload, which: str) -> dict:
    """What an evaluation was of: checkpoint, model, task, split, metric."""
    randomized = which == "val" and bool(getattr(cfg.model, "random_pos", False))
    return {"checkpoint": str(path), "model": cfg.model_name, "model_label": model_label(cfg.model_name, cfg.model),
            "task": cfg.task, "split": which,
            "metric": workload.metric, "metric_label": workload.metric_label,
            "lower_is_better": workload.lower_is_better, "random_positions": randomized}


def evaluate_checkpoint(target=None, *, ood: int | None = None, split: str | None = None, num: int | None = None,
                        seed: int | None = None, device: str | None = None, batch_size: int | None = None,
                        runs_dir="runs", overrides: list[str] | None = None, on_examples=None,
                        sizes: list[int] | None = None, graph: str | None = None, dump=None,
                        memory_check: bool = True) -> dict:
    """Scores a checkpoint. `ood=N`: the test split at N nodes (the canonical test split when N is its
    size and no num/seed is given); `split`: val or test at the run's sizes; `overrides`: `--set`
    items applied over the stored config (e.g. data.data_dir); `graph`: the graph family of the split
    (graph algorithms; "clrs": the benchmark's sampler; None: the run's); `dump`: a file that receives every
    example evaluated with our answer (text runs; relreason.eval.text_score.AnsweredExample lines, what
    `relreason score` reads); `memory_check=False` evaluates `ood` without the memory estimate (module
    docstring). Returns the scores and what was evaluated (model, task, label, metric, checkpoint, graph)."""
    _check_request(split, ood, num, seed, batch_size)
    with open_checkpoint(target, device=device, runs_dir=runs_dir, overrides=overrides) as (path, cfg, workload):
        if dump is not None and find_model(cfg.model_name)[0] is not Family.TEXT:
            raise RelreasonError(f"--dump writes the answers of text runs (text_transformer, transnar); {path} is "
                                 f"a {cfg.model_name} run on {cfg.task}", "drop --dump")
        which = "test" if split is None else split
        if graph is not None:
            check_graphs(cfg, [graph])
        plan = SizePlan.make(cfg, workload, [graph], [ood], num, seed, memory_check) if ood is not None else None
        kwargs = {"size": ood, "num": num, "seed": seed,
                  "batch_size": batch_size if plan is None else plan.batch(graph, ood, batch_size)}
        if sizes is not None:
            kwargs["sizes"] = sizes
        if graph is not None:
            kwargs["graph"] = graph
        with answers_writer(dump) if dump is not None else contextlib.nullcontext() as on_answers:
            if on_answers is not None:
                kwargs["on_answers"] = on_answers
            res = workload.evaluate(which, on_examples, **kwargs)
        return {**_described(path, cfg, workload, which), "graph": evaluated_graph(cfg, which, graph), **res,
                **({} if dump is None else {"dump": str(dump)})}


def evaluate_grid(target=None, graphs: list[str | None] = ("clrs",), sizes: list[int | None] = (None,), *,
                  split: str | None = None, num: int | None = None, seed: int | None = None,
                  device: str | None = None, batch_size: int | None = None, runs_dir="runs",
                  overrides: list[str] | None = None, on_examples=None, memory_check: bool = True) -> dict:
    """Scores a checkpoint on every (graph family, size) cell: what `evaluate_checkpoint` returns about
    the run, its training seed (`train_seed`), and `rows` (`relreason.eval.grid.grid_rows`: graph, size,
    seed, score, num, label per cell). `graphs` as `--graph` takes them ("clrs" is the benchmark's
    sampler; None: the run's own); a size None is the run's. Every size is checked, and (unless
    `memory_check=False`) its memory estimated, before the first cell is evaluated (module docstring)."""
    for size in sizes:
        _check_request(split, size, num, seed, batch_size)
    with open_checkpoint(target, device=device, runs_dir=runs_dir, overrides=overrides) as (path, cfg, workload):
        named = [g for g in graphs if g is not None]
        if named:
            check_graphs(cfg, named)
        which = "test" if split is None else split
        plan = SizePlan.make(cfg, workload, list(graphs), [s for s in sizes if s is not None], num, seed,
                             memory_check)

        def score(graph: str | None, size: int | None) -> dict:
            res = workload.evaluate(which, on_examples, size=size, num=num, seed=seed,
                                    batch_size=plan.batch(graph, size, batch_size), graph=graph)
            seeds = split_seeds(workload, which, size, num, seed, graph)
            plan.release()
            return {**res, "graph": evaluated_graph(cfg, which, graph), "seed": seeds}

        return {**_described(path, cfg, workload, which), "run": str(run_of(path)), "train_seed": cfg.train.seed,
                "rows": grid_rows(score, graphs, sizes)}


def run_of(checkpoint: Path) -> Path:
    """The run directory of a checkpoint (its best/ or last/), or the checkpoint directory itself."""
    return checkpoint.parent if checkpoint.name in (BEST, LAST) else checkpoint


def split_seeds(workload, split: str, size: int | None, num: int | None, seed: int | None, graph: str | None):
    """The seed the evaluated split was drawn with (as its files record it): one int, or a list per
    task when a multi-task run's tasks differ; None for workloads that do not say (text)."""
    dataset = getattr(workload, "dataset", None)
    if dataset is None:
        return None
    seeds = [dataset(i, split, size, num, seed, graph).meta.get("seed") for i in range(len(workload.tasks))]
    return seeds[0] if len(set(seeds)) == 1 else seeds


class SizePlan:
    """The sizes a checkpoint is about to be evaluated at, checked up front, with each size's memory
    estimate (relreason.eval.memory) per graph and task: `make` refuses a size below an algorithm's
    smallest graph or too large for the memory, before anything runs; `batch` sizes each evaluation."""

    def __init__(self, workload, estimates: dict[tuple[str | None, int], list], num: int | None = None,
                 seed: int | None = None):
        self.workload = workload
        self.estimates = estimates  # (graph, size) -> one MemoryEstimate per task
        self.num, self.seed = num, seed  # of the splits evaluated

    @classmethod
    def make(cls, cfg, workload, graphs: list[str | None], sizes: list[int], num: int | None,
             seed: int | None, memory_check: bool = True) -> "SizePlan":
        if not sizes or not isinstance(workload, NarWorkload):  # text workloads refuse --ood themselves
            return cls(workload, {})
        for graph in graphs:
            for task in workload.tasks:
                for size in sizes:
                    check_size(cfg, task, size, num, seed, graph)
        if not memory_check:
            return cls(workload, {})
        free = free_memory(workload.device)  # read once: every size is judged against the same figure
        estimates: dict[tuple[str | None, int], list] = {}
        for graph in graphs:
            prints = [footprint(cfg, workload, i, graph, max(sizes)) for i in range(len(workload.tasks))]
            for size in sizes:
                estimates[graph, size] = cell = [fp.estimate(size, split_num(cfg, task, num), workload.device, free)
                                                 for fp, task in zip(prints, workload.tasks)]
                for fp, task, est in zip(prints, workload.tasks, cell):
                    if not est.fits:
                        room = largest_fitting(
                            lambda n: fp.estimate(n, split_num(cfg, task, num), workload.device, free), 2, size - 1)
                        hint = (f"sizes up to about {room} fit here: evaluate those, or on a machine with more "
                                f"memory" if room is not None else "not even the smallest size fits in the memory "
                                                                   "available now")
                        hint += " (--no-memory-check tries anyway)"
                        raise RelreasonError(f"--ood {size}: {est.describe()}", hint)
        return cls(workload, estimates, num, seed)

    def batch(self, graph: str | None, size: int | None, explicit: int | None) -> int | None:
        """The evaluation batch of a cell: `explicit` when given; None (the workload picks: the configured
        train.eval_batch_size, else its automatic batch) for cells without an estimate or with a configured
        batch; else the automatic batch capped by the samples the estimate lets fit."""
        if explicit is not None or self.workload.cfg.train.eval_batch_size is not None \
                or (graph, size) not in self.estimates:
            return explicit
        fits = []
        for i, est in enumerate(self.estimates[graph, size]):
            ds = self.workload.dataset(i, "test", size, self.num, self.seed, graph)  # loaded once: evaluate reuses it
            net = self.workload.built.net(self.workload.tasks[i].name)
            fits.append(min(est.batch(), _pick_batch(None, None, net, ds)))  # never above today's automatic batch
        return min(fits)

    def release(self) -> None:
        """Forgets the splits evaluated so far (a sweep holds one size's data at a time)."""
        if self.estimates:  # only NAR workloads get estimates
            self.workload.forget_evaluation_data()


def check_size(cfg, task, size: int, num: int | None, seed: int | None, graph: str | None) -> None:
    """Refuses a size a task's test split cannot be drawn at (below its algorithm's smallest graph or its
    family's, above the generator's largest), naming --ood, before anything is evaluated."""
    if isinstance(cfg.data, ClrsDataConfig):
        family = graph if graph is not None else cfg.data.graph_of("test")
        try:
            resolve_split(task.algorithm, "test", size, num, seed, family, cfg.data.matcher_v1("test", task.algorithm))
        except RelreasonError as e:
            raise RelreasonError(f"--ood {size}: {e.message}", e.hint) from None
    elif isinstance(cfg.data, LobsterDataConfig):
        if size > MAX_BACKBONE:
            raise RelreasonError(f"--ood {size}: lobster backbones are at most {MAX_BACKBONE} long",
                                 f"use 2 <= size <= {MAX_BACKBONE}")


def split_num(cfg, task, num: int | None) -> int:
    """How many samples a task's test split at `--ood` holds: `num`, else the run's data.test_num, else
    the benchmark's count for the algorithm."""
    if num is not None:
        return num
    if cfg.data.test_num is not None:
        return cfg.data.test_num

    return canonical_split(task.algorithm, "test").num


def footprint(cfg, workload, task_index: int, graph: str | None, largest: int):
    """How a run's model uses memory on one task's test graphs (`graph`: the family; None: the run's),
    measured on two small splits drawn into a temporary directory (relreason.eval.memory); on edge lists,
    scaled to the edges the family's graphs are expected to have (`GraphSpec.mean_degree`)."""
    task = workload.tasks[task_index]
    net = workload.built.net(task.name)
    proc = net.processor
    width = max(net.cfg.hidden, proc.node_dim, proc.edge_dim)
    hi = max(smallest_size(cfg, task, graph), min(largest, PROBE_MAX))
    lo = max(smallest_size(cfg, task, graph), PROBE_MIN, hi // 2)
    lo = min(lo, hi)
    data = cfg.data
    if graph is not None:
        data = dataclasses.replace(data, graph=graph, graph_splits=("test",))
    with owned_temporary(Path(tempfile.gettempdir()), "relreason-probe-", directory=True) as tmp:
        data = dataclasses.replace(data, data_dir=str(tmp))
        splits = {size: task.load("test", data, size=size, num=PROBE_NUM, seed=PROBE_SEED) for size in {lo, hi}}
        family = test_family(cfg, graph)
        return Footprint.measure(net, [(lo, splits[lo]), (hi, splits[hi])], workload.device,
                                 f"{cfg.model_name} at width {width}", None if family is None else family.mean_degree)


def test_family(cfg, graph: str | None):
    """The graph family (relreason.data.families.GraphSpec) of a run's test graphs, `graph` when given;
    None for the benchmark's sampler and for tasks without graph families."""
    if not isinstance(cfg.data, ClrsDataConfig):
        return None
    family = graph if graph is not None else cfg.data.graph_of("test")
    return parse_graph(family) if family is not None else None


def smallest_size(cfg, task, graph: str | None) -> int:
    """The smallest test size of a task: its algorithm's smallest graph and its family's (2 otherwise)."""
    if not isinstance(cfg.data, ClrsDataConfig):
        return 2

    spec = test_family(cfg, graph)
    return max(ALGORITHMS.get(task.algorithm).min_size, spec.min_size() if spec is not None else 2)
