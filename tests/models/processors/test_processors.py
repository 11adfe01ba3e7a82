"""Contract tests every registered processor must pass with its default config (shapes, equivariance,
padding, carried state), plus a short end-to-end fit inside the network."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relreason.data import generate
from relreason.models import Batch, ModelConfig, build_model, prepare_spec
from relreason.models.encoders import EdgeInput
from relreason.models.processors import PROCESSORS, Processor, State, mpnn

NAMES = PROCESSORS.names()
B, N, H = 2, 5, 16


def build(name: str) -> Processor:
    torch.manual_seed(0)
    entry = PROCESSORS.get(name)
    return entry.build(entry.config(), H).double().eval()


def inputs(proc: Processor, n: int = N, seed: int = 0, node_mask: torch.Tensor | None = None):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    state = proc.initial_state(B, n, torch.device("cpu"), torch.float64)
    state = State(r(B, n, proc.node_dim), r(B, n, n, proc.edge_dim) if proc.edge_dim else None,
                  r(B, proc.node_dim) if state.graph is not None else None)
    adj = (torch.rand(B, n, n, generator=g) > 0.5) | torch.eye(n, dtype=torch.bool)
    mask = torch.ones(B, n, dtype=torch.bool) if node_mask is None else node_mask
    return r(B, n, H), r(B, n, n, H), r(B, H), state, adj & mask[:, :, None] & mask[:, None, :], mask


def permute(x: torch.Tensor | None, perm: torch.Tensor, axes: int) -> torch.Tensor | None:
    if x is None:
        return None
    for a in range(1, 1 + axes):
        x = x.index_select(a, perm)
    return x


@pytest.mark.parametrize("name", NAMES)
def test_output_shapes(name):
    proc = build(name)
    out = proc(*inputs(proc))
    assert out.node.shape == (B, N, proc.node_dim)
    assert torch.isfinite(out.node).all()
    if proc.edge_dim:
        assert out.edge.shape == (B, N, N, proc.edge_dim)
    assert proc.initial_state(B, N, torch.device("cpu")).node.abs().sum() == 0  # the state starts at zero


@pytest.mark.parametrize("name", NAMES)
def test_equivariant_to_node_permutations(name):
    proc = build(name)
    node, edge, graph, state, adj, mask = inputs(proc)
    perm = torch.tensor([3, 0, 4, 1, 2])
    out = proc(node, edge, graph, state, adj, mask)
    pstate = State(permute(state.node, perm, 1), permute(state.edge, perm, 2), state.graph)
    pout = proc(permute(node, perm, 1), permute(edge, perm, 2), graph, pstate, permute(adj, perm, 2),
                permute(mask, perm, 1))
    if not proc.permutation_equivariant:  # order-aware by design (RNAR): the order must matter
        assert not torch.allclose(pout.node, permute(out.node, perm, 1))
        return
    torch.testing.assert_close(pout.node, permute(out.node, perm, 1))
    if proc.edge_dim:
        torch.testing.assert_close(pout.edge, permute(out.edge, perm, 2))


@pytest.mark.parametrize("name", NAMES)
def test_padded_nodes_never_influence_real_ones(name):
    proc = build(name)
    small = inputs(proc)
    mask = torch.zeros(B, N + 3, dtype=torch.bool)
    mask[:, :N] = True
    big = inputs(proc, n=N + 3, seed=9, node_mask=mask)  # garbage everywhere, then the real part copied in
    node, edge, graph, state, adj, _ = big
    node[:, :N], edge[:, :N, :N], graph[:] = small[0], small[1], small[2]
    state.node[:, :N] = small[3].node
    if proc.edge_dim:
        state.edge[:, :N, :N] = small[3].edge
    if state.graph is not None:
        state.graph.copy_(small[3].graph)
    adj[:, :N, :N] = small[4]
    out_small, out_big = proc(*small), proc(node, edge, graph, state, adj, mask)
    torch.testing.assert_close(out_big.node[:, :N], out_small.node)
    if proc.edge_dim:
        torch.testing.assert_close(out_big.edge[:, :N, :N], out_small.edge)


@pytest.mark.parametrize("name", NAMES)
def test_output_depends_on_the_carried_state(name):
    proc = build(name)
    node, edge, graph, state, adj, mask = inputs(proc)
    a = proc(node, edge, graph, state, adj, mask)
    # the carried state: the node state, and the edge state for processors that carry it (ET keeps
    # its node state on the pair diagonal)
    moved = State(state.node + 1.0, state.edge + 1.0 if proc.carry_edge else state.edge, state.graph)
    b = proc(node, edge, graph, moved, adj, mask)
    assert not torch.allclose(a.node, b.node)


@pytest.mark.parametrize("name", [n for n in NAMES if PROCESSORS.get(n).cls.factored_edges])
def test_factored_edges_equal_dense_edges(name):
    proc = build(name)
    node, _, graph, state, adj, mask = inputs(proc)
    g = torch.Generator().manual_seed(3)
    factored = EdgeInput(torch.randn(B, N, N, 3, generator=g, dtype=torch.float64),
                         torch.randn(3, H, generator=g, dtype=torch.float64), torch.randn(H, generator=g, dtype=torch.float64))
    a = proc(node, factored, graph, state, adj, mask)
    b = proc(node, factored.dense(), graph, state, adj, mask)
    torch.testing.assert_close(a.node, b.node)


@pytest.mark.parametrize("name", NAMES)
def test_fits_a_tiny_batch_inside_the_network(name):
    torch.manual_seed(0)
    cfg = ModelConfig(hidden=H)
    ds = generate("bellman_ford", num=6, size=5, seed=0)
    spec = prepare_spec(ds.spec, cfg, "bellman_ford")
    net = build_model(spec, cfg, name)
    batch = Batch.from_dataset(ds, cfg, spec, generator=np.random.default_rng(0))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(30):
        loss, _ = net.loss(batch, net(batch, train=True, generator=gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:3])


# -- MPNN specifics: the reference formula and its hand-written backward ---------------------------

def naive_mpnn(proc, node, edge, graph, state, allowed):
    """The reference MPNN step written with plain autograd ops."""
    z = torch.cat([node, state.node], -1)
    msgs = proc.m1(z)[:, None] + proc.m2(z)[:, :, None] + proc.me(edge) + proc.mg(graph)[:, None, None]
    for layer in proc.mlp:
        msgs = layer(torch.relu(msgs))
    msgs = msgs.masked_fill(~allowed[..., None], -1e30)
    agg = msgs.amax(1)
    out = torch.relu(proc.o1(z) + proc.o2(agg))
    return proc.ln(out)


@pytest.mark.parametrize("padded", [False, True])
def test_mpnn_matches_the_reference_formula_and_gradients(padded):
    proc = build("mpnn")
    mask = torch.ones(B, N, dtype=torch.bool)
    if padded:
        mask[:, -2:] = False
    node, edge, graph, state, adj, mask = inputs(proc, node_mask=mask)
    params = [node, edge, state.node]
    for p in params:
        p.requires_grad_(True)
    out = proc(node, edge, graph, state, adj, mask).node
    ref = naive_mpnn(proc, node, edge, graph, state, mask[:, :, None].expand(B, N, N))
    real = mask[..., None]
    torch.testing.assert_close(out.masked_fill(~real, 0), ref.masked_fill(~real, 0))
    w = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad((out * w * real).sum(), params + list(proc.parameters()))
    grads_ref = torch.autograd.grad((ref * w * real).sum(), params + list(proc.parameters()))
    for g, r in zip(grads, grads_ref):
        torch.testing.assert_close(g, r)


def test_mpnn_messages_split_the_gradient_over_tied_senders_like_amax():
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    receiver, sender, raw, wc = r(B, 1, N, H), r(B, N, 1, H), r(B, N, N, 2), r(2, H)
    sender[:, 1], raw[:, 1] = sender[:, 0], raw[:, 0]  # senders 0 and 1 send identical messages: ties
    params = [r(H, H), r(H), r(H, H), r(H)]
    leaves = [receiver, sender, raw, wc, *params]
    for x in leaves:
        x.requires_grad_(True)
    out = mpnn._Messages.apply(receiver, sender, raw, wc, None, *params)
    msgs = torch.relu(torch.relu(receiver + sender + raw @ wc) @ params[0].t() + params[1]) @ params[2].t() + params[3]
    assert (msgs.argmax(1) == 0).any()  # the tied senders win somewhere
    ref = msgs.amax(1)  # autograd's amax splits the gradient evenly between tied maxima
    torch.testing.assert_close(out, ref)
    w = r(*out.shape)
    for got, want in zip(torch.autograd.grad((out * w).sum(), leaves), torch.autograd.grad((ref * w).sum(), leaves)):
        torch.testing.assert_close(got, want)
