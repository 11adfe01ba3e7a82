"""Evaluating a saved checkpoint (`relreason eval`): the run's own workload, on any split or size.

    res = evaluate_checkpoint("runs/NAME", ood=128, num=64)
    res["score"], res["outputs"], res["label"]
"""

from __future__ import annotations

from pathlib import Path

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


def evaluate_checkpoint(target=None, *, ood: int | None = None, split: str | None = None, num: int | None = None,
                        seed: int | None = None, device: str | None = None, batch_size: int | None = None,
                        runs_dir="runs", overrides: list[str] | None = None, on_examples=None,
                        sizes: list[int] | None = None) -> dict:
    """Scores a checkpoint. `ood=N`: the test split at N nodes (the canonical test split when N is its
    size and no num/seed is given); `split`: val or test at the run's sizes; `overrides`: `--set`
    items applied over the stored config (e.g. data.data_dir). Returns the scores and what was
    evaluated (model, task, label, metric, checkpoint)."""
    from relreason.config import Layer, parse_overrides, resolve
    from relreason.models.build import resolve_device
    from relreason.models.catalog import model_label
    from relreason.runtime import keep_freed_memory
    from relreason.train.workloads import build_workload

    keep_freed_memory()
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
        which = "test" if split is None else split
        kwargs = {"size": ood, "num": num, "seed": seed, "batch_size": batch_size}
        if sizes is not None:
            kwargs["sizes"] = sizes
        res = workload.evaluate(which, on_examples, **kwargs)
    finally:
        workload.close()
    randomized = which == "val" and bool(getattr(cfg.model, "random_pos", False))
    return {"checkpoint": str(path), "model": cfg.model_name, "model_label": model_label(cfg.model_name, cfg.model),
            "task": cfg.task, "split": which,
            "metric": workload.metric, "metric_label": workload.metric_label,
            "lower_is_better": workload.lower_is_better, "random_positions": randomized, **res}
