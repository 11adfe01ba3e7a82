"""Losses per type against hand-computed values and torch's own losses on the valid elements."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from relreason.data.specs import Feature, Location, Stage, Type
from relreason.models.losses import feature_loss


def feat(typ: Type, loc: Location = Location.NODE, classes: int = 0) -> Feature:
    return Feature("x", Stage.OUTPUT, loc, typ, classes)


ALL = torch.ones(1, dtype=torch.bool)


def test_scalar_is_mean_squared_error():
    loss = feature_loss(feat(Type.SCALAR), torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, 4.0]]), ALL,
                        torch.ones(1, 2, dtype=torch.bool))
    assert loss.item() == pytest.approx(2.5)


def test_mask_is_bce_ignoring_minus_one():
    loss = feature_loss(feat(Type.MASK), torch.tensor([[0.0, 2.0, -1.0]]), torch.tensor([[1.0, -1.0, 0.0]]), ALL,
                        torch.ones(1, 3, dtype=torch.bool))
    assert loss.item() == pytest.approx((math.log(2) + math.log(1 + math.e ** -1)) / 2)


def test_mask_one_is_cross_entropy_over_nodes():
    logits = torch.tensor([[0.0, 0.0, math.log(2)]])
    loss = feature_loss(feat(Type.MASK_ONE), logits, torch.tensor([[0.0, 0.0, 1.0]]), ALL,
                        torch.ones(1, 3, dtype=torch.bool))
    assert loss.item() == pytest.approx(-math.log(2 / 4))


def test_categorical_ignores_masked_rows():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 4, 3, generator=g)
    labels = torch.tensor([[0, 2, 1, 1], [2, 2, 0, 1]])
    truth = F.one_hot(labels, 3).float()
    truth[0, 1] = -1  # a masked (unknown) target
    loss = feature_loss(feat(Type.CATEGORICAL, classes=3), logits, truth, torch.ones(2, dtype=torch.bool),
                        torch.ones(2, 4, dtype=torch.bool))
    keep = torch.ones(2, 4, dtype=torch.bool)
    keep[0, 1] = False
    assert loss.item() == pytest.approx(F.cross_entropy(logits[keep], labels[keep]).item(), rel=1e-6)


def test_pointer_is_cross_entropy_over_targets_and_ignores_padding_and_minus_one():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 5, generator=g)
    truth = torch.randint(0, 4, (2, 5), generator=g)
    truth[1, 0] = -1
    node_mask = torch.ones(2, 5, dtype=torch.bool)
    node_mask[:, 4] = False  # a padded node: its own pointer is not a target
    loss = feature_loss(feat(Type.POINTER), logits, truth, torch.ones(2, dtype=torch.bool), node_mask)
    keep = node_mask & (truth >= 0)
    assert loss.item() == pytest.approx(F.cross_entropy(logits[keep], truth[keep]).item(), rel=1e-6)


def test_edge_pointer_and_graph_pointer():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 3, 3, 3, generator=g)
    truth = torch.randint(0, 3, (2, 3, 3), generator=g)
    loss = feature_loss(feat(Type.POINTER, Location.EDGE), logits, truth, torch.ones(2, dtype=torch.bool),
                        torch.ones(2, 3, dtype=torch.bool))
    assert loss.item() == pytest.approx(F.cross_entropy(logits.reshape(-1, 3), truth.reshape(-1)).item(), rel=1e-6)
    gl, gt = torch.randn(2, 3, generator=g), torch.tensor([2, 0])
    loss = feature_loss(feat(Type.POINTER, Location.GRAPH), gl, gt, torch.ones(2, dtype=torch.bool),
                        torch.ones(2, 3, dtype=torch.bool))
    assert loss.item() == pytest.approx(F.cross_entropy(gl, gt).item(), rel=1e-6)


def test_permutation_pointer_reads_log_probabilities():
    logp = torch.log(torch.tensor([[[0.1, 0.9], [0.8, 0.2]]]))
    loss = feature_loss(feat(Type.PERMUTATION_POINTER), logp, torch.tensor([[1, 0]]), ALL,
                        torch.ones(1, 2, dtype=torch.bool))
    assert loss.item() == pytest.approx(-(math.log(0.9) + math.log(0.8)) / 2)


def test_hint_losses_average_over_valid_steps_only():
    # (B=2, S=3, N=2) scalars; sample 0 has 2 valid steps, sample 1 has 1
    pred = torch.zeros(2, 3, 2)
    truth = torch.tensor([[[1.0, 1.0], [3.0, 3.0], [100.0, 100.0]], [[2.0, 2.0], [100.0, 100.0], [100.0, 100.0]]])
    valid = torch.tensor([[True, True, False], [True, False, False]])
    loss = feature_loss(feat(Type.SCALAR), pred, truth, valid, torch.ones(2, 2, dtype=torch.bool))
    assert loss.item() == pytest.approx((1 + 1 + 9 + 9 + 4 + 4) / 6)


def test_no_valid_element_gives_zero_not_nan():
    loss = feature_loss(feat(Type.POINTER), torch.randn(1, 2, 3, 3), torch.zeros(1, 2, 3, dtype=torch.long),
                        torch.zeros(1, 2, dtype=torch.bool), torch.ones(1, 3, dtype=torch.bool))
    assert loss.item() == 0.0


def test_relative_scalar_loss_is_the_lobster_metric():
    f = Feature("distance", Stage.OUTPUT, Location.GRAPH, Type.SCALAR)
    pred, truth = torch.tensor([2.0, 6.0]), torch.tensor([4.0, 5.0])
    ones, nodes = torch.ones(2, dtype=torch.bool), torch.ones(2, 3, dtype=torch.bool)
    got = feature_loss(f, pred, truth, ones, nodes, relative=True)
    assert float(got) == pytest.approx((0.5 + 0.2) / 2)
    assert float(feature_loss(f, pred, truth, ones, nodes)) == pytest.approx((4.0 + 1.0) / 2)
