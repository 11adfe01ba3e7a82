"""Tests of the Dual Attention Transformer processor (relreason/models/processors/dat.py), called
directly through the processor contract."""

from __future__ import annotations

import math

import pytest
import torch

from relreason.errors import RelreasonError
from relreason.models.processors import PROCESSORS
from relreason.models.processors.base import State
from relreason.models.processors.dat import DATConfig, DualAttention, DualAttentionTransformer, SymbolKind

H = 8  # the network's hidden size in these tests
W = 12  # processor width: 3 heads (1 sensory + 2 relational) of width 4

VARIANTS = {
    "symbolic": {"symbols": "symbolic_attention"},
    "positional": {"symbols": "positional"},
    "relative": {"symbols": "position_relative"},
    "pure": {"use_edges": False},
    "symmetric_post_norm": {"symmetric_relations": True, "norm_first": False},
    "relational_only": {"n_heads_sa": 0, "n_heads_ra": 3, "n_relations": 2},
}


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: one thread is faster, and avoids thread-sync stalls when the CPU is shared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def config(**kwargs) -> DATConfig:
    return DATConfig(**{"width": W, "layers": 2, "n_heads_sa": 1, "n_heads_ra": 2, "n_symbols": 6,
                        "symbol_heads": 2, "max_positions": 16, **kwargs})


def build(**kwargs) -> DualAttentionTransformer:
    torch.manual_seed(0)
    return PROCESSORS.get("dat").build(config(**kwargs), H)


def inputs(b: int = 2, n: int = 5, seed: int = 1):
    """Random encoded inputs and a random (non-zero, so every state weight gets a gradient) state."""
    g = torch.Generator().manual_seed(seed)
    node_in = torch.randn(b, n, H, generator=g)
    edge_in = torch.randn(b, n, n, H, generator=g)
    graph_in = torch.randn(b, H, generator=g)
    state = State(torch.randn(b, n, W, generator=g), None, torch.randn(b, W, generator=g))
    adj = torch.ones(b, n, n, dtype=torch.bool)
    mask = torch.ones(b, n, dtype=torch.bool)
    return node_in, edge_in, graph_in, state, adj, mask


def softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    w = [math.exp(s - top) for s in logits]
    return [v / sum(w) for v in w]


def reference_dual_attention(att: DualAttention, x: torch.Tensor, symbols: torch.Tensor, edge: torch.Tensor,
                             mask: torch.Tensor) -> torch.Tensor:
    """Dual attention written out as plain loops over receivers i, heads, senders j and relations l,
    for one graph: x (N, D), symbols (N, D) or, position-relative, (N, N, D), edge (N, N, H)."""
    n = x.shape[0]
    hd = att.head_dim
    real = [j for j in range(n) if mask[j]]
    out = []
    for i in range(n):
        sensory, relational = [], []
        for h in range(att.n_sa):
            sl = slice(h * hd, (h + 1) * hd)
            logits = []
            for j in real:
                s = float((att.sa_q.weight[sl] @ x[i]) @ (att.sa_k.weight[sl] @ x[j])) / math.sqrt(hd)
                if att.use_edges:
                    s += float(att.edge_bias.weight[h] @ edge[i, j])
                logits.append(s)
            acc = torch.zeros(hd)
            for a, j in zip(softmax(logits), real):
                acc = acc + a * (att.sa_v.weight[sl] @ x[j])
            sensory.append(acc)
        for h in range(att.n_ra):
            sl = slice(h * hd, (h + 1) * hd)
            logits = []
            for j in real:
                s = float((att.ra_q.weight[sl] @ x[i]) @ (att.ra_k.weight[sl] @ x[j])) / math.sqrt(hd)
                if att.use_edges:
                    s += float(att.edge_bias.weight[att.n_sa + h] @ edge[i, j])
                logits.append(s)
            acc = torch.zeros(hd)
            for a, j in zip(softmax(logits), real):
                r = []
                for rel in range(att.n_rel):
                    rs = slice(rel * att.rel_dim, (rel + 1) * att.rel_dim)
                    phi_q, phi_k = att.rel_q.weight[rs] @ x[i], att.rel_k.weight[rs] @ x[j]
                    r.append(float(phi_q @ phi_k) / math.sqrt(att.rel_dim))
                if att.use_edges:
                    r.extend(float(att.edge_rel.weight[rel] @ edge[i, j]) for rel in range(att.n_rel))
                s_j = symbols[i, j] if symbols.dim() == 3 else symbols[j]
                acc = acc + a * (att.w_r[h] @ torch.tensor(r) + att.w_s.weight[sl] @ s_j)
            relational.append(acc)
        parts = []
        if att.n_sa:
            parts.append(att.sa_out.weight @ torch.cat(sensory))
        if att.n_ra:
            parts.append(att.ra_out.weight @ torch.cat(relational))
        out.append(torch.cat(parts))
    return torch.stack(out)


@pytest.mark.parametrize("variant", ["plain", "pure", "symmetric", "relative", "more_relations", "padded"])
def test_dual_attention_matches_loops(variant):
    kwargs = {"pure": {"use_edges": False}, "symmetric": {"symmetric_relations": True},
              "relative": {"symbols": "position_relative"},
              "more_relations": {"n_relations": 4}}.get(variant, {})
    torch.manual_seed(0)
    cfg = config(**kwargs)
    att = DualAttention(cfg, W, H)
    n = 3
    x, edge = torch.randn(1, n, W), torch.randn(1, n, n, H)
    relative = cfg.symbols is SymbolKind.POSITION_RELATIVE
    symbols = torch.randn(n, n, W) if relative else torch.randn(1, n, W)  # (N, N, D) or (B, N, D)
    mask = torch.tensor([[True, True, variant != "padded"]])
    with torch.no_grad():
        got = att(x, symbols, edge, mask[:, None, None, :])[0]
        want = reference_dual_attention(att, x[0], symbols if relative else symbols[0], edge[0], mask[0])
    real = 2 if variant == "padded" else 3
    assert torch.allclose(got[:real], want[:real], atol=1e-5)


def test_paper_dimension_conventions():
    att = DualAttention(config(), W, H)
    assert att.head_dim == W // 3  # width / (n_heads_sa + n_heads_ra)
    assert att.n_rel == 2 and att.rel_dim == 4  # one relation per relational head, head_dim * n_ra / d_r dims
    assert att.w_r.shape == (2, 4, 2 * 2)  # per head: (d_r relations + d_r edge relations) -> head_dim
    assert DualAttention(config(use_edges=False), W, H).w_r.shape == (2, 4, 2)


def test_symmetric_relations_share_phi():
    sym, plain = DualAttention(config(symmetric_relations=True, use_edges=False), W, H), \
        DualAttention(config(use_edges=False), W, H)
    assert sym.rel_k is sym.rel_q and plain.rel_k is not plain.rel_q
    x = torch.randn(2, 4, W)
    with torch.no_grad():
        r_sym, r_plain = sym.relations(x, None), plain.relations(x, None)  # (B, N, N, d_r)
    assert torch.allclose(r_sym, r_sym.transpose(1, 2), atol=1e-6)
    assert not torch.allclose(r_plain, r_plain.transpose(1, 2), atol=1e-3)


PERM = torch.tensor([3, 0, 4, 2, 1])


def permuted_outputs(model: DualAttentionTransformer):
    node_in, edge_in, graph_in, state, adj, mask = inputs()
    p = PERM
    with torch.no_grad():
        out = model(node_in, edge_in, graph_in, state, adj, mask)
        p_out = model(node_in[:, p], edge_in[:, p][:, :, p], graph_in, State(state.node[:, p], None, state.graph),
                      adj[:, p][:, :, p], mask[:, p])
    return out, p_out


@pytest.mark.parametrize("variant", ["symbolic", "pure", "symmetric_post_norm", "relational_only"])
def test_equivariant_with_symbolic_attention(variant):
    # Symbolic attention retrieves a symbol from a node's own features, never from its index, so
    # DAT with it is equivariant to node permutations (like a plain transformer).
    out, p_out = permuted_outputs(build(**VARIANTS[variant]))
    assert torch.allclose(p_out.node, out.node[:, PERM], atol=1e-5)
    assert torch.allclose(p_out.graph, out.graph, atol=1e-5)


@pytest.mark.parametrize("variant", ["positional", "relative"])
def test_not_equivariant_with_positional_symbols(variant):
    # Positional and position-relative symbols encode the node index: by design the output depends
    # on the node order, so permuting the nodes does not simply permute the output.
    out, p_out = permuted_outputs(build(**VARIANTS[variant]))
    assert not torch.allclose(p_out.node, out.node[:, PERM], atol=1e-3)


@pytest.mark.parametrize("variant", VARIANTS)
def test_padded_nodes_never_reach_real_ones(variant):
    model = build(**VARIANTS[variant])
    node_in, edge_in, graph_in, state, adj, mask = inputs(n=6)
    real = 4
    mask[:, real:] = False
    with torch.no_grad():
        padded = model(node_in, edge_in, graph_in, state, adj, mask)
        alone = model(node_in[:, :real], edge_in[:, :real, :real], graph_in,
                      State(state.node[:, :real], None, state.graph), adj[:, :real, :real], mask[:, :real])
    assert torch.allclose(padded.node[:, :real], alone.node, atol=1e-5)
    assert torch.allclose(padded.graph, alone.graph, atol=1e-5)


def test_use_edges_switch():
    node_in, edge_in, graph_in, state, adj, mask = inputs()
    other = torch.randn_like(edge_in)
    with torch.no_grad():
        pure = build(use_edges=False)
        assert torch.allclose(pure(node_in, edge_in, graph_in, state, adj, mask).node,
                              pure(node_in, other, graph_in, state, adj, mask).node)
        with_edges = build(use_edges=True)
        assert not torch.allclose(with_edges(node_in, edge_in, graph_in, state, adj, mask).node,
                                  with_edges(node_in, other, graph_in, state, adj, mask).node)


def test_carried_state_and_contract():
    model = build()
    assert model.edge_dim == 0 and not model.carry_edge and model.node_dim == W
    init = model.initial_state(2, 5, torch.device("cpu"))
    assert init.edge is None and init.node.shape == (2, 5, W)
    node_in, edge_in, graph_in, state, adj, mask = inputs()
    with torch.no_grad():
        out = model(node_in, edge_in, graph_in, state, adj, mask)
        moved = model(node_in, edge_in, graph_in, State(state.node + 1.0, None, state.graph), adj, mask)
    assert out.edge is None and out.graph.shape == (2, W)
    assert not torch.allclose(out.node, moved.node)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_reach_every_parameter(variant):
    model = build(**VARIANTS[variant])
    out = model(*inputs())
    g = torch.Generator().manual_seed(5)
    loss = sum((t * torch.randn(t.shape, generator=g)).sum() for t in (out.node, out.graph))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_user_errors():
    with pytest.raises(RelreasonError, match="unknown value"):
        DATConfig(symbols="alphabetical")
    with pytest.raises(RelreasonError, match="divisible"):
        PROCESSORS.get("dat").build(config(width=10), H)
    with pytest.raises(RelreasonError, match="n_heads_sa"):
        PROCESSORS.get("dat").build(config(n_heads_sa=0, n_heads_ra=0), H)
    model = build(symbols="positional", max_positions=4)
    with pytest.raises(RelreasonError, match="max_positions"):
        model(*inputs(n=5))


def test_learns_node_plus_incident_edge_mean():
    # Target per node: x_i + mean_j A_ij, with x a node scalar and A an edge scalar (edge relations
    # and the edge bias carry A). Must beat the best constant predictor (its loss: the variance) 2.5x.
    torch.manual_seed(0)
    model = build(layers=1)
    head = torch.nn.Linear(W, 1)
    g = torch.Generator().manual_seed(3)
    b, n = 16, 5
    a, x = torch.rand(b, n, n, generator=g), torch.rand(b, n, generator=g)
    node_in, edge_in = x[..., None] * torch.ones(H), a[..., None] * torch.ones(H)
    target = x + a.mean(-1)  # (B, N)
    graph_in = torch.zeros(b, H)
    adj, mask = torch.ones(b, n, n, dtype=torch.bool), torch.ones(b, n, dtype=torch.bool)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=1e-2)
    for _ in range(60):
        state = model.initial_state(b, n, a.device)
        pred = head(model(node_in, edge_in, graph_in, state, adj, mask).node)[..., 0]
        loss = torch.nn.functional.mse_loss(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.4 * target.var().item()
