"""Losses per feature type, as the reference (google-deepmind/clrs `losses.py`), padding-aware.

scalar: squared error; mask: binary cross-entropy on logits (targets -1 ignored); mask_one and
categorical: cross-entropy over the last axis (entries with no positive class ignored); pointer:
cross-entropy over the pointed-to node (targets -1 ignored); permutation pointer: cross-entropy
against the log-Sinkhorn output. Every loss is the mean over its valid elements: real (unpadded)
nodes, and for hints the steps each sample really has.

    loss = feature_loss(feature, pred, truth, sample_valid, node_mask)
      pred   raw prediction, (B, ...) for outputs or (B, S, ...) for hints
      truth  Batch convention, same leading axes
      sample_valid  (B,) or (B, S) bool
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from relreason.data.specs import Feature, Location, Type


def element_mask(f: Feature, sample_valid: torch.Tensor, node_mask: torch.Tensor) -> torch.Tensor:
    """Validity of every element of a feature (before looking at the targets):
    (B, [S]) for graph features and node mask_one, (B, [S], N) for nodes, (B, [S], N, N) for edges."""
    extra = sample_valid.dim() - 1  # 1 when there is a time axis
    nm = node_mask.view(node_mask.shape[0], *([1] * extra), node_mask.shape[1])  # (B, [1], N)
    if f.location is Location.GRAPH or (f.location is Location.NODE and f.type is Type.MASK_ONE):
        return sample_valid
    if f.location is Location.NODE:
        return sample_valid[..., None] & nm
    return sample_valid[..., None, None] & nm[..., :, None] & nm[..., None, :]


def _masked_sum(loss: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.where(valid, loss, 0.0).sum(), valid.sum()


def feature_loss(f: Feature, pred: torch.Tensor, truth: torch.Tensor, sample_valid: torch.Tensor,
                 node_mask: torch.Tensor, relative: bool = False) -> torch.Tensor:
    """The scalar loss of one feature (see the module docstring). `relative`: scalars score
    |pred - truth| / |truth| instead of the squared error (end-to-end regression, e.g. lobsters)."""
    total, count = feature_loss_sum(f, pred, truth, sample_valid, node_mask, relative)
    # 0 (not NaN) when nothing is valid, as the reference's max(count, eps)
    return total / count.clamp(min=1)


def feature_loss_sum(f: Feature, pred: torch.Tensor, truth: torch.Tensor, sample_valid: torch.Tensor,
                     node_mask: torch.Tensor, relative: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss summed over the valid elements, and their number: `feature_loss` is sum / count.
    Distributed training divides each process's sum by the count over all processes."""
    valid = element_mask(f, sample_valid, node_mask)
    t = f.type
    if t is Type.SCALAR:
        if relative:
            return _masked_sum((pred - truth).abs() / truth.abs().clamp(min=1e-6), valid)
        return _masked_sum((pred - truth) ** 2, valid)
    if t is Type.MASK:
        loss = F.binary_cross_entropy_with_logits(pred, truth.clamp(min=0), reduction="none")
        return _masked_sum(loss, valid & (truth != -1))
    if t in (Type.MASK_ONE, Type.CATEGORICAL):
        loss = -(truth.clamp(min=0) * torch.log_softmax(pred, -1)).sum(-1)
        return _masked_sum(loss, valid & (truth == 1).any(-1))
    if t is Type.POINTER:
        logp = torch.log_softmax(pred, -1)
        loss = -logp.gather(-1, truth.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return _masked_sum(loss, valid & (truth >= 0))
    if t is Type.PERMUTATION_POINTER:
        loss = -pred.gather(-1, truth.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # pred is already log-Sinkhorn
        return _masked_sum(loss, valid & (truth >= 0))
    raise ValueError(f"{f.name}: no loss for type {t.value}")
