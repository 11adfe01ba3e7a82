"""The CLRS-30 metric (google-deepmind/clrs `evaluation.py`), accumulated over a whole split.

Per output feature: pointer, mask_one and categorical score the accuracy of the predicted index
(per node for pointers: the pointed-to index against the true index, never element by element over
one-hot rows); mask scores F1 pooled over every element (threshold 0.5); scalar scores the mean
squared error. Targets equal to -1 are ignored, and so are padded nodes. A permutation pointer is
scored as the plain pointer it stands for (its `_mask` marks the node that points to itself). The
algorithm's score is the unweighted mean over its output features, each pooled over the split, of the
kind its headline metric averages (relreason.data.catalog.OUTPUT_METRICS: the accuracy-scored outputs,
higher is better, or the scalar outputs' squared error, lower is better; the 30 benchmark algorithms
have no scalar output, so for them it is the reference's mean over every output).

Hints are scored per step s (prediction s against hints[s + 1], samples still running), then
averaged over steps weighted by the number of samples running, as the reference's `evaluate_hints`.

    scorer = Scorer(batch.spec)
    for batch in split:
        scorer.update(net.predict(net(batch, train=False, hard_hints=True)), batch)
    scores = scorer.result()   # Scores(outputs={"pi": 0.97}, score=0.97, hints={...})

A split scored in parts (distributed evaluation: each process scores its batches) is put together
with `merge`: `whole.merge(part.state())` for every part gives exactly the scores of one scorer that
saw every batch, because the statistics are kept per batch and summed exactly (`math.fsum`) at the
end, so the order in which batches arrive cannot change a bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from relreason.data.specs import Feature, Spec, Stage, Type
from relreason.models.batch import Batch, permutation_mask_of
from relreason.models.decoders import fuse_permutation
from relreason.models.losses import element_mask

@dataclass
class Scores:
    """Per-feature scores of a split; `score` is the benchmark number (mean over outputs)."""

    outputs: dict[str, float]
    score: float
    hints: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"score": float(self.score), "outputs": {k: float(v) for k, v in self.outputs.items()},
                "hints": {k: float(v) for k, v in self.hints.items()}}


def _kind(f: Feature) -> Type:
    """The type a feature is scored as (permutation pointers as the pointers they fuse into)."""
    return Type.POINTER if f.type in (Type.PERMUTATION_POINTER, Type.SHOULD_BE_PERMUTATION) else f.type


def f1(tp: float, fp: float, fn: float) -> float:
    """F1 with the reference's conventions: precision/recall 1 when undefined, F1 0 when both are 0."""
    precision = tp / (tp + fp) if tp + fp > 0 else 1.0
    recall = tp / (tp + fn) if tp + fn > 0 else 1.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _finish(kind: Type, s: dict[str, float]) -> float | None:
    """A score from accumulated statistics (None when nothing was scored)."""
    if kind is Type.MASK:
        return f1(s["tp"], s["fp"], s["fn"]) if s["seen"] > 0 else None
    num, den = (s["sse"], s["count"]) if kind is Type.SCALAR else (s["correct"], s["total"])
    return num / den if den > 0 else None


def _stats(f: Feature, pred: torch.Tensor, truth: torch.Tensor, valid: torch.Tensor,
           keep_time: bool) -> dict[str, torch.Tensor]:
    """Sufficient statistics summed over everything except the time axis (axis 1) when `keep_time`."""
    kind = _kind(f)

    def total(x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        return x.transpose(0, 1).flatten(1).sum(-1) if keep_time else x.sum()  # (S,) or ()

    if kind is Type.POINTER:
        ok = valid & (truth >= 0)
        return {"correct": total((pred == truth) & ok), "total": total(ok)}
    if kind in (Type.MASK_ONE, Type.CATEGORICAL):
        ok = valid & (truth != -1).all(-1)
        return {"correct": total((pred.argmax(-1) == truth.argmax(-1)) & ok), "total": total(ok)}
    if kind is Type.MASK:
        ok = valid & (truth != -1)
        p, t = pred > 0.5, truth > 0.5
        return {"tp": total(p & t & ok), "fp": total(p & (truth < 0.5) & ok), "fn": total((pred < 0.5) & t & ok),
                "seen": total(ok)}
    err = torch.where(valid, (pred.double() - truth.double()) ** 2, 0.0)
    return {"sse": total(err), "count": total(valid)}


class Scorer:
    """Accumulates predictions against a batch's truth over many batches (see the module docstring)."""

    def __init__(self, spec: Spec, headline: str = "clrs"):
        self.spec = spec
        self.headline = headline  # which outputs `score` averages: "clrs" accuracy-scored, "clrs_mse" scalar
        scored = [f for f in spec.values() if not permutation_mask_of(spec, f.name)]
        self.output_features = [f for f in scored if f.stage is Stage.OUTPUT]
        self.hint_features = [f for f in scored if f.stage is Stage.HINT]
        # statistics per batch (summed exactly in `result`): feature -> statistic -> [value per batch]
        self._outputs: dict[str, dict[str, list[float]]] = {f.name: {} for f in self.output_features}
        self._hints: dict[str, dict[str, list[np.ndarray]]] = {f.name: {} for f in self.hint_features}  # (steps,) each
        self._running: list[np.ndarray] = []  # per batch: samples running at each hint step

    def state(self) -> dict:
        """The accumulated statistics (picklable), for `merge` into another scorer of the same spec."""
        self._read()
        return {"outputs": self._outputs, "hints": self._hints, "running": self._running}

    def merge(self, state: dict) -> None:
        """Adds the batches another scorer (of the same spec) saw: its `state()`."""
        for mine, theirs in ((self._outputs, state["outputs"]), (self._hints, state["hints"])):
            for name, stats in theirs.items():
                for k, values in stats.items():
                    mine[name].setdefault(k, []).extend(values)
        self._running.extend(state["running"])

    def _truth(self, store: dict[str, torch.Tensor], f: Feature) -> torch.Tensor:
        truth = store[f.name]
        if f.type is Type.PERMUTATION_POINTER:
            truth = fuse_permutation(truth, store[f.name + "_mask"])
        return truth

    def update(self, preds: dict[str, torch.Tensor], batch: Batch) -> None:
        """Adds one batch. `preds` as `Net.predict` returns them; hints are scored if present."""
        every = torch.ones(batch.size, dtype=torch.bool, device=batch.device)
        for f in self.output_features:
            valid = element_mask(f, every, batch.node_mask)
            stats = _stats(f, preds[f.name], self._truth(batch.outputs, f), valid, keep_time=False)
            acc = self._outputs[f.name]
            for k, v in stats.items():
                acc.setdefault(k, []).append(v)  # a 0-d float64 tensor, on the device until `_read`
        hint_feats = [f for f in self.hint_features if f.name in preds]
        if not hint_feats:
            return
        steps = min(preds[hint_feats[0].name].shape[1], batch.max_length - 1)
        running = batch.lengths[:, None] > torch.arange(1, steps + 1, device=batch.device)[None, :]  # (B, steps)
        self._running.append(running.sum(0).double())  # (steps,), on the device until `_read`
        truths = {k: v[:, 1:steps + 1] for k, v in batch.hints.items()}
        for f in hint_feats:
            valid = element_mask(f, running, batch.node_mask)
            stats = _stats(f, preds[f.name][:, :steps], self._truth(truths, f), valid, keep_time=True)
            acc = self._hints[f.name]
            for k, v in stats.items():
                acc.setdefault(k, []).append(v)  # (steps,) float64, on the device until `_read`

    def _read(self) -> None:
        """Reads the statistics `update` kept on the device back to the host in one copy: `update` reads
        nothing back, so a split costs one wait for the device, not one per batch and statistic (on a GPU,
        where each read waits for every kernel launched before it). The values are the same float64 numbers."""
        lists = [v for stats in (*self._outputs.values(), *self._hints.values()) for v in stats.values()]
        pending = [(values, i, t) for values in [*lists, self._running] for i, t in enumerate(values)
                   if isinstance(t, torch.Tensor)]
        if not pending:
            return
        flat = torch.cat([t.reshape(-1) for *_, t in pending]).cpu().numpy()  # float64 (every statistic is)
        at = 0
        for values, i, t in pending:
            part = flat[at:at + t.numel()]
            at += t.numel()
            values[i] = float(part[0]) if t.dim() == 0 else part.copy()

    def result(self) -> Scores:
        self._read()
        outputs = {}
        for f in self.output_features:
            acc = {k: math.fsum(v) for k, v in self._outputs[f.name].items()}
            value = _finish(_kind(f), acc) if acc else None
            outputs[f.name] = float("nan") if value is None else value
        counted = [outputs[f.name] for f in self.output_features
                   if (_kind(f) is Type.SCALAR) == (self.headline == "clrs_mse")]
        score = float(np.mean(counted)) if counted else float("nan")
        hints = {}
        running = exact_step_sums(self._running)
        for f in self.hint_features:
            acc = {k: exact_step_sums(v) for k, v in self._hints[f.name].items()}
            if not acc:
                continue
            total_weight, weighted = 0.0, 0.0
            for t, weight in enumerate(running):
                value = _finish(_kind(f), {k: v[t] for k, v in acc.items()}) if weight > 0 else None
                if value is not None:
                    weighted += value * weight
                    total_weight += weight
            hints[f.name] = float(weighted / total_weight) if total_weight > 0 else float("nan")
        return Scores(outputs, score, hints)


def exact_step_sums(parts: list[np.ndarray]) -> np.ndarray:
    """Per-step sums of per-batch vectors of possibly different lengths, exactly rounded (math.fsum),
    so they do not depend on the order of the batches."""
    steps = max((len(p) for p in parts), default=0)
    table = np.zeros((len(parts), steps))  # (batches, steps)
    for i, p in enumerate(parts):
        table[i, : len(p)] = p
    if np.array_equal(table, np.round(table)) and np.abs(table).sum() < 2.0**53:
        return table.sum(0)  # counts: integer sums below 2**53 are exact in any order
    return np.array([math.fsum(table[:, t]) for t in range(steps)])
