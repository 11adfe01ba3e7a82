"""The training step's update (relreason.train.optimizer): Adam with torch's defaults, and global-norm
clipping with torch's coefficient that stays right where parameters share one gradient buffer."""

from __future__ import annotations

import pytest
import torch

from relreason.train.optimizer import adam, clip_grad_norm


def model_with_grads(scale: float) -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    (net(torch.randn(5, 3)).sum() * scale).backward()
    return net


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])  # below, around and far above the bound
def test_clipping_equals_torchs_clip_grad_norm(scale):
    ours, theirs = model_with_grads(scale), model_with_grads(scale)
    norm = clip_grad_norm(ours, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
    assert torch.allclose(norm, expected)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.allclose(a.grad, b.grad)
    clipped = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in ours.parameters()]))
    assert clipped <= 1.0 + 1e-5 and (scale > 1e-2 or torch.allclose(clipped, norm))


def test_clipping_scales_a_shared_gradient_buffer_once():
    """Two parameters whose .grad are views of one buffer (as autograd may leave the encoders' biases):
    each is scaled by the coefficient once, not once per parameter that sees the buffer."""
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    buffer = torch.tensor([3.0, 4.0])
    a.grad, b.grad = buffer, buffer  # norm 5 each, global norm sqrt(50)
    holder = torch.nn.Module()
    holder.a, holder.b = a, b
    norm = clip_grad_norm(holder, 1.0)
    coef = 1.0 / (50 ** 0.5 + 1e-6)
    assert norm.item() == pytest.approx(50 ** 0.5)
    assert torch.allclose(a.grad, torch.tensor([3.0, 4.0]) * coef) and torch.allclose(b.grad, a.grad)
    assert torch.equal(buffer, torch.tensor([3.0, 4.0]))  # out of place: the shared buffer is untouched


def test_adam_is_torchs_adam_with_its_defaults():
    params = [torch.nn.Parameter(torch.ones(3))]
    opt = adam(params, 0.01)
    group = opt.param_groups[0]
    assert isinstance(opt, torch.optim.Adam)
    assert (group["lr"], group["betas"], group["eps"], group["weight_decay"]) == (0.01, (0.9, 0.999), 1e-8, 0)
