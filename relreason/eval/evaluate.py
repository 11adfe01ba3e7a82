"""Scoring a model on a dataset with the CLRS metric (shared by training, `eval` and `ablate`)."""

from __future__ import annotations

import numpy as np
import torch

from relreason.data.trajectory import Dataset


def batches(ds: Dataset, batch_size: int):
    """Consecutive slices of a dataset, each with its hints cut to the slice's longest trajectory."""
    for start in range(0, len(ds), batch_size):
        yield trim(ds.take(slice(start, start + batch_size)))


def trim(ds: Dataset) -> Dataset:
    """Cuts the padded time axis to the longest trajectory present (less work per step)."""
    t = int(ds.lengths.max())
    if t < ds.max_length:
        ds.hints = {k: v[:, :t] for k, v in ds.hints.items()}
    return ds


@torch.no_grad()
def evaluate_dataset(model, ds: Dataset, spec, model_cfg, device: torch.device, batch_size: int = 32,
                     progress=None, scorer=None, generator: torch.Generator | None = None):
    """Runs the model over `ds` in evaluation mode and returns the pooled Scores (the CLRS metric
    unless a `scorer` accumulator is given, e.g. `task.scorer(spec)`). A `generator` randomizes
    `pos` as in training (the reference validates so; it tests on the true positions)."""
    from relreason.eval.metrics import Scorer
    from relreason.models.batch import Batch

    was_training = model.training
    model.eval()
    scorer = scorer if scorer is not None else Scorer(spec)
    try:
        for part in batches(ds, batch_size):
            batch = Batch.from_dataset(part, model_cfg, spec, device, generator=generator)
            out = model(batch, train=False)
            scorer.update(model.predict(out), batch)
            if progress is not None:
                progress(len(part))
    finally:
        model.train(was_training)
    return scorer.result()


def step_indices(seed: int, step: int, n: int, batch_size: int) -> np.ndarray:
    """The training batch of `step`: drawn with replacement (as the reference sampler), from a stream
    seeded by (seed, step) so a resumed run sees exactly the batches an uninterrupted one would."""
    return np.random.RandomState([seed, step]).randint(0, n, size=batch_size)


def resolve_checkpoint(target, runs_dir="runs"):
    """A run directory (-> its best/), a checkpoint directory, or None (-> the newest run's best/)."""
    from pathlib import Path

    from relreason.errors import RelreasonError

    if target is None:
        runs = [p for p in Path(runs_dir).glob("*/best/config.json")] if Path(runs_dir).is_dir() else []
        if not runs:
            raise RelreasonError(f"no trained run found under {runs_dir}/",
                                 "train one first (relreason train mpnn bellman_ford --recipe quick) or give RUN")
        return max(runs, key=lambda p: p.stat().st_mtime).parent
    path = Path(target)
    if not path.exists():
        raise RelreasonError(f"{path} does not exist", "give a run directory (runs/NAME) or a checkpoint directory")
    if (path / "best" / "config.json").exists():
        return path / "best"
    return path


def evaluate_checkpoint(target=None, *, ood: int | None = None, split: str | None = None, num: int | None = None,
                        seed: int | None = None, device: str = "auto", batch_size: int | None = None,
                        runs_dir="runs", data_dir: str | None = None) -> dict:
    """Scores a checkpoint on a split. `ood=N`: the canonical test split when N is its size (and no
    num/seed is given), else a generated split of N nodes. Returns a dict with the scores and what was
    evaluated."""
    from relreason.errors import RelreasonError
    from relreason.train import checkpoint as ckpt
    from relreason.train.loop import build, resolve_device, scores_dict

    from relreason.runtime import keep_freed_memory

    keep_freed_memory()
    path = resolve_checkpoint(target, runs_dir)
    cfg = ckpt.load_config(path)
    if data_dir is not None:
        cfg.data.data_dir = data_dir
    if ood is not None and split is not None and split != "test":
        raise RelreasonError("--ood evaluates out of distribution (a test split); it cannot go with --split val",
                             "drop one of them")
    if ood is not None and ood < 2:
        raise RelreasonError(f"--ood {ood} is too small", "give a number of nodes >= 2, e.g. --ood 64")
    if num is not None and num <= 0:
        raise RelreasonError(f"--num {num} must be positive", "e.g. --num 64")
    dev = resolve_device(device)
    task, spec, model = build(cfg, dev)
    ckpt.load_weights(path, model)
    which = split or "test"
    size = ood if ood is not None else None
    ds = task.load(which, cfg.data, size=size, num=num, seed=seed)
    scores = evaluate_dataset(model, ds, spec, cfg.model, dev, batch_size or cfg.train.eval_batch_size,
                              scorer=task.scorer(spec))
    return {"checkpoint": str(path), "model": cfg.model_name, "task": cfg.task, "split": ds.meta.get("split"),
            "size": ds.n, "num": len(ds), "metric": task.metric, "lower_is_better": task.lower_is_better,
            **scores_dict(scores)}
