"""Scoring a model on a dataset with its task's metric (shared by training, `eval` and `ablate`)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from relreason.data.trajectory import Dataset
from relreason.errors import RelreasonError
from relreason.eval.metrics import Scorer
from relreason.models.batch import Batch
from relreason.models.noise import Noise, as_noise, subset


@torch.no_grad()
def evaluate_dataset(model, ds: Dataset, spec, model_cfg, device: torch.device, batch_size: int = 32,
                     progress: Callable[[int], None] | None = None, scorer=None,
                     generator: torch.Generator | Noise | None = None):
    """Runs the model over `ds` in evaluation mode and returns the pooled Scores (the CLRS metric
    unless a `scorer` accumulator is given, e.g. `task.scorer(spec)`). A `generator` randomizes
    `pos` as in training (the reference validates so; it tests on the true positions).

    Raises:
        RelreasonError: when a batch does not fit in memory (with the batch size that failed)."""
    return score_dataset(model, ds, spec, model_cfg, device, batch_size, progress, scorer, generator).result()


@torch.no_grad()
def score_dataset(model, ds: Dataset, spec, model_cfg, device: torch.device, batch_size: int = 32,
                  progress: Callable[[int], None] | None = None, scorer=None,
                  generator: torch.Generator | Noise | None = None, shard: tuple[int, int] = (0, 1)):
    """`evaluate_dataset` over one shard of `ds`, returning the scorer instead of its result: with
    `shard` (rank, world) only the batches b with b % world == rank are scored; merging the world's
    scorer states (`scorer.merge(other.state())`) gives exactly the scores of the whole split.

    Random positions are drawn for the whole split (a sample's follow its row in `ds`), so they do
    not depend on the batch size or on the shard."""
    rank, world = shard
    was_training = model.training
    model.eval()
    scorer = scorer if scorer is not None else Scorer(spec)
    noise = as_noise(generator, len(ds))
    # batches of similar trajectory lengths: a batch then runs about as many steps as each of its
    # samples needs (no steps on a shrunken batch); the scores are exact sums, so order is free
    order = np.argsort(ds.lengths, kind="stable")
    try:
        for b, start in enumerate(range(0, len(ds), batch_size)):
            if b % world != rank:
                continue
            idx = order[start:start + batch_size]
            part = ds.take(idx)
            rows = torch.from_numpy(idx)
            batch = Batch.from_dataset(part, model_cfg, spec, device, generator=subset(noise, rows))
            try:
                out = model(batch, train=False, hard_hints=True)  # hints kept as scored: a pointer's index
            except torch.OutOfMemoryError:
                raise RelreasonError(f"evaluation ran out of memory at batch size {batch_size} (n={ds.n})",
                                     f"use a smaller batch: --batch-size {max(1, batch_size // 4)} "
                                     f"(or --set train.eval_batch_size=...)") from None
            scorer.update(model.predict(out), batch)
            if progress is not None:
                progress(len(part))
    finally:
        model.train(was_training)
    return scorer
