"""The end-to-end regression metric of the lobster benchmark: mean relative loss |y - y_hat| / |y|
(lower is better), pooled over a split, one value per scalar output feature; the task's score is
their mean. Same interface as `relreason.eval.metrics.Scorer`, so training and `eval` use either."""

from __future__ import annotations

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
        self.total = {k: 0.0 for k in self.features}
        self.count = {k: 0 for k in self.features}

    def update(self, preds: dict[str, torch.Tensor], batch) -> None:
        for k in self.features:
            y = batch.outputs[k].detach().double()
            y_hat = preds[k].detach().double().reshape(y.shape)
            self.total[k] += float(((y - y_hat).abs() / y.abs()).sum())
            self.count[k] += int(y.numel())

    def result(self) -> Scores:
        outputs = {k: self.total[k] / max(self.count[k], 1) for k in self.features}
        return Scores(outputs, sum(outputs.values()) / len(outputs), {})
