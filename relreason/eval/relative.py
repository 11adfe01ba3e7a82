"""The end-to-end regression metric of the lobster benchmark: mean relative loss |y - y_hat| / |y|
(lower is better), pooled over a split, one value per scalar output feature; the task's score is
their mean. Same interface as `relreason.eval.metrics.Scorer` (also `state` / `merge`), so training
and `eval` use either."""

from __future__ import annotations

import math

import torch

from relreason.data.specs import Spec, Stage, Type
from relreason.eval.metrics import Scores
from relreason.errors import RelreasonError


class RelativeLossScorer:
    def __init__(self, spec: Spec):
        self.features = [f.name for f in spec.values() if f.stage is Stage.OUTPUT]
        bad = [f.name for f in spec.values() if f.stage is Stage.OUTPUT and f.type is not Type.SCALAR]
        if bad:
            raise RelreasonError(f"relative loss scores scalar outputs only, not {bad}", "use the CLRS metric")
        self.total: dict[str, list[float]] = {k: [] for k in self.features}  # per batch, summed exactly at the end
        self.count = {k: 0 for k in self.features}

    def state(self) -> dict:
        """The accumulated statistics (picklable), for `merge` into another scorer of the same spec."""
        return {"total": self.total, "count": self.count}

    def merge(self, state: dict) -> None:
        """Adds the batches another scorer (of the same spec) saw: its `state()`."""
        for k in self.features:
            self.total[k].extend(state["total"][k])
            self.count[k] += state["count"][k]

    def update(self, preds: dict[str, torch.Tensor], batch) -> None:
        for k in self.features:
            y = batch.outputs[k].detach().double()
            y_hat = preds[k].detach().double().reshape(y.shape)
            self.total[k].append(float(((y - y_hat).abs() / y.abs()).sum()))
            self.count[k] += int(y.numel())

    def result(self) -> Scores:
        outputs = {k: math.fsum(self.total[k]) / max(self.count[k], 1) for k in self.features}
        return Scores(outputs, sum(outputs.values()) / len(outputs), {})
