"""The shape-static step (`Net.forward(static=True)`, `train.static_step`): finished samples masked, not
dropped; the same loss, gradients and outputs as the dropping step for every processor; and no host
synchronisation in a training step (counted by intercepting the calls that read values back)."""

from __future__ import annotations

import pytest
import torch

from relreason.data import generate
from relreason.models import Batch, ModelConfig, build_model, prepare_spec
from relreason.models.noise import Noise
from relreason.models.processors import PROCESSORS
from relreason.runtime import count_host_syncs
from relreason.train.optimizer import adam, clip_grad_norm


def net_and_batch(name: str, task: str = "bellman_ford", num: int = 6):
    # teacher forcing and dropout on: every noise site of the step is drawn; lengths differ within the batch
    cfg = ModelConfig(hidden=8, teacher_forcing=0.5, dropout=0.1)
    ds = generate(task, num=num, size=6, seed=3)
    spec = prepare_spec(ds.spec, cfg, task)
    torch.manual_seed(0)
    net = build_model(spec, cfg, name)
    return net, Batch.from_dataset(ds, cfg, spec, generator=Noise.whole(5, num))


def loss_and_grads(net, batch, static: bool):
    net.zero_grad()
    out = net(batch, train=True, generator=Noise.whole(7, batch.size), static=static)
    loss, _ = net.loss(batch, out, read_terms=not static)
    loss.backward()
    return out, loss.detach(), {k: p.grad.clone() for k, p in net.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", PROCESSORS.names())
def test_the_masked_step_equals_the_dropping_step(name):
    net, batch = net_and_batch(name)
    assert len(set(batch.lengths.tolist())) > 2  # samples end at different steps: dropping happens
    out_d, loss_d, grads_d = loss_and_grads(net, batch, static=False)
    out_s, loss_s, grads_s = loss_and_grads(net, batch, static=True)
    torch.testing.assert_close(loss_s, loss_d, rtol=1e-5, atol=1e-6)
    assert grads_s.keys() == grads_d.keys() and grads_d
    for k in grads_d:  # float rounding: the dropping step multiplies smaller matrices
        torch.testing.assert_close(grads_s[k], grads_d[k], rtol=1e-4, atol=1e-4, msg=k)
    for k in out_d.outputs:  # each sample decoded at its own last step
        torch.testing.assert_close(out_s.outputs[k], out_d.outputs[k], rtol=1e-4, atol=1e-5, msg=k)
    for k in out_d.hints:  # zero after a sample's trajectory ended, as the dropping step gives
        torch.testing.assert_close(out_s.hints[k], out_d.hints[k], rtol=1e-4, atol=1e-5, msg=k)
    with torch.no_grad():  # a finished sample's state stays as its last step left it
        final_d = net(batch, train=False, return_state=True).state
        final_s = net(batch, train=False, return_state=True, static=True).state
    torch.testing.assert_close(final_s.node, final_d.node, rtol=1e-4, atol=1e-5)


def test_a_batch_padded_to_a_longer_trajectory_trains_the_same():
    """A seed group pads every seed's hints to the group's longest trajectory: extra, fully masked steps."""
    net, batch = net_and_batch("mpnn")
    longer = Batch(batch.spec, batch.inputs, {k: torch.cat([v, torch.zeros_like(v[:, :3])], 1) for k, v in
                                              batch.hints.items()}, batch.outputs, batch.lengths, batch.node_mask)
    _, loss, grads = loss_and_grads(net, batch, static=True)
    _, loss_long, grads_long = loss_and_grads(net, longer, static=True)
    torch.testing.assert_close(loss_long, loss)
    for k in grads:
        torch.testing.assert_close(grads_long[k], grads[k], msg=k)


def training_step(net, batch, opt, static: bool) -> torch.Tensor:
    opt.zero_grad(set_to_none=True)
    out = net(batch, train=True, generator=Noise.whole(7, batch.size), static=static)
    loss, _ = net.loss(batch, out, read_terms=not static)
    loss.backward()
    clip_grad_norm(net, 1.0)
    opt.step()
    return loss.detach()


@pytest.mark.parametrize("name", PROCESSORS.names())
def test_the_static_step_reads_nothing_back_to_the_host(name):
    net, batch = net_and_batch(name)
    opt = adam(net.parameters(), 1e-3)
    training_step(net, batch, opt, static=True)  # first step: lazy initialisations (Adam's state) done
    with count_host_syncs() as seen:
        training_step(net, batch, opt, static=True)
    assert not seen, dict(seen)


def test_the_counter_sees_the_dropping_steps_reads():
    """The guard's own check: the dropping step reads lengths and running samples back, and is caught."""
    net, batch = net_and_batch("mpnn")
    opt = adam(net.parameters(), 1e-3)
    with count_host_syncs() as seen:
        training_step(net, batch, opt, static=False)
    assert seen["tolist"] >= 2, dict(seen)  # the lengths, the loss terms
