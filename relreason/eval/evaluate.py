"""Scoring a model on a dataset with its task's metric (shared by training, `eval` and `ablate`)."""

from __future__ import annotations

from typing import Callable

import torch

from relreason.data.trajectory import Dataset
from relreason.errors import RelreasonError


def batches(ds: Dataset, batch_size: int):
    """Consecutive slices of a dataset (Batch.from_dataset cuts each to its longest trajectory)."""
    for start in range(0, len(ds), batch_size):
        yield ds.take(slice(start, start + batch_size))


@torch.no_grad()
def evaluate_dataset(model, ds: Dataset, spec, model_cfg, device: torch.device, batch_size: int = 32,
                     progress: Callable[[int], None] | None = None, scorer=None,
                     generator: torch.Generator | None = None):
    """Runs the model over `ds` in evaluation mode and returns the pooled Scores (the CLRS metric
    unless a `scorer` accumulator is given, e.g. `task.scorer(spec)`). A `generator` randomizes
    `pos` as in training (the reference validates so; it tests on the true positions).

    Raises:
        RelreasonError: when a batch does not fit in memory (with the batch size that failed)."""
    from relreason.eval.metrics import Scorer
    from relreason.models.batch import Batch

    was_training = model.training
    model.eval()
    scorer = scorer if scorer is not None else Scorer(spec)
    try:
        for part in batches(ds, batch_size):
            batch = Batch.from_dataset(part, model_cfg, spec, device, generator=generator)
            try:
                out = model(batch, train=False)
            except torch.OutOfMemoryError:
                raise RelreasonError(f"evaluation ran out of memory at batch size {batch_size} (n={ds.n})",
                                     f"use a smaller batch: --batch-size {max(1, batch_size // 4)} "
                                     f"(or --set train.eval_batch_size=...)") from None
            scorer.update(model.predict(out), batch)
            if progress is not None:
                progress(len(part))
    finally:
        model.train(was_training)
    return scorer.result()
