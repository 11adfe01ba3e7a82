"""Specific tests of the baseline GNN processors (relreason/models/processors/gnn.py): each against
a plain-loop transcription of the reference formulas, plus the neighbourhood each may read, padding,
factored edges, gradients and a tiny learning task. (Shape and equivariance tests over every
processor live in test_processors.py.)"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from relreason.errors import RelreasonError
from processor_fit import fit_node_target
from relreason.models.processors import PROCESSORS, State
from relreason.models.processors import gnn

GNN_NAMES = [name for name, entry in PROCESSORS.items() if entry.cls.__module__ == gnn.__name__]
H = 8


def build(name: str, hidden: int = H, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    entry = PROCESSORS.get(name)
    return entry.build(entry.config(**overrides), hidden).double()


def random_inputs(b: int, n: int, hidden: int = H, seed: int = 1, edge_dim: int = 0, pad: int = 0):
    """Inputs in float64; the last `pad` nodes of every graph are padding (and adjacency rows/cols False)."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    adj = torch.rand(b, n, n, generator=g) < 0.5
    adj |= torch.eye(n, dtype=torch.bool)
    mask = torch.ones(b, n, dtype=torch.bool)
    if pad:
        mask[:, n - pad:] = False
        adj &= mask[:, :, None] & mask[:, None, :]
    state = State(r(b, n, hidden), r(b, n, n, edge_dim) if edge_dim else None, r(b, hidden))
    return r(b, n, hidden), r(b, n, n, hidden), r(b, hidden), state, adj, mask


def test_the_gnn_processors_are_registered():
    assert set(GNN_NAMES) == {"deepsets", "pgn", "pgn_masked", "triplet_gmpnn", "gat", "gatv2"}


# -- triplets ---------------------------------------------------------------------------------------

def naive_max_plus(a, c):
    return (a[:, :, :, None, :] + c[:, :, None, :, :]).amax(1)  # (B, J, K, T)


# chunks of one i (backward) and one sample (forward), then everything at once
@pytest.mark.parametrize("chunk_elements, cache_bytes", [(1, 1), (1 << 24, 1 << 18)])
def test_max_plus_matches_the_naive_product_and_its_gradient(monkeypatch, chunk_elements, cache_bytes):
    monkeypatch.setattr(gnn, "TRIPLET_CHUNK_ELEMENTS", chunk_elements)
    monkeypatch.setattr(gnn, "MAX_PLUS_CACHE_BYTES", cache_bytes)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2, 5, 5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    c = torch.randn(2, 5, 5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 5, 5, 3, generator=g, dtype=torch.float64)
    out = gnn.max_plus(a, c)
    ref = naive_max_plus(a, c)
    torch.testing.assert_close(out, ref)
    grads = torch.autograd.grad((out * w).sum(), (a, c))
    ref_grads = torch.autograd.grad((ref * w).sum(), (a, c))
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want)
    assert torch.autograd.gradcheck(gnn.max_plus, (a, c))


@pytest.mark.parametrize("chunk_elements", [1, 1 << 24])
def test_max_plus_splits_the_gradient_over_ties_like_amax_and_jax(monkeypatch, chunk_elements):
    """Small integers make many i attain the maximum: each gets an equal share (autograd amax, jnp.max)."""
    monkeypatch.setattr(gnn, "TRIPLET_CHUNK_ELEMENTS", chunk_elements)
    g = torch.Generator().manual_seed(1)
    a = torch.randint(0, 2, (2, 6, 4, 3), generator=g).double().requires_grad_()
    c = torch.randint(0, 2, (2, 6, 5, 3), generator=g).double().requires_grad_()
    w = torch.randn(2, 4, 5, 3, generator=g, dtype=torch.float64)
    ties = ((a[:, :, :, None] + c[:, :, None]) == naive_max_plus(a, c)[:, None]).sum(1)
    assert (ties > 1).float().mean() > 0.5  # the case under test
    got = torch.autograd.grad((gnn.max_plus(a, c) * w).sum(), (a, c))
    want = torch.autograd.grad((naive_max_plus(a, c) * w).sum(), (a, c))
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y)


def test_max_plus_values_without_autograd_equal_the_product():
    g = torch.Generator().manual_seed(2)
    a, c = torch.randn(3, 7, 4, 2, generator=g), torch.randn(3, 7, 6, 2, generator=g)
    with torch.no_grad():
        assert torch.equal(gnn.max_plus(a, c), naive_max_plus(a, c))


def test_triplet_messages_match_the_reference_formula():
    """t_ijk = t1(z_i)+t2(z_j)+t3(z_k)+te1(e_ij)+te2(e_ik)+te3(e_jk)+tg(g); out_jk = relu(o3(max_i t_ijk)),
    the max over real i only."""
    torch.manual_seed(0)
    tri = gnn.TripletMessages(2 * H, H, 4).double()
    node_in, edge_in, graph_in, state, _, mask = random_inputs(2, 5, pad=1)
    z = torch.cat([node_in, state.node], -1)
    t1, t2, t3 = tri.node(z).split(4, -1)
    te1, te2, te3 = tri.edge(edge_in).split(4, -1)
    tg = tri.graph(graph_in)
    full = (t1[:, :, None, None] + t2[:, None, :, None] + t3[:, None, None, :] + te1[:, :, :, None]
            + te2[:, :, None, :] + te3[:, None, :, :] + tg[:, None, None, None])  # (B, I, J, K, T)
    full = full.masked_fill(~mask[:, :, None, None, None], -math.inf)
    want = F.relu(tri.out(full.amax(1)))
    torch.testing.assert_close(tri(z, edge_in, graph_in, mask), want)


def loop_mpnn_update(p, node_in, edge_in, graph_in, hidden, allowed):
    """The reference MPNN/PGN update, one receiver and one sender at a time. allowed[b, s, r]."""
    b_, n, h = node_in.shape
    z = torch.cat([node_in, hidden], -1)
    out = torch.zeros(b_, n, h, dtype=z.dtype)
    aggs = torch.zeros(b_, n, h, dtype=z.dtype)
    for b in range(b_):
        for r in range(n):
            msgs = []
            for s in range(n):
                if allowed[b, s, r]:
                    m = F.relu(p.m1(z[b, r]) + p.m2(z[b, s]) + p.me(edge_in[b, s, r]) + p.mg(graph_in[b]))
                    m = p.mlp[1](F.relu(p.mlp[0](m)))
                    msgs.append(m)
            agg = torch.stack(msgs).amax(0) if msgs else torch.zeros(h, dtype=z.dtype)
            aggs[b, r] = agg
            out[b, r] = p.ln(F.relu(p.o1(z[b, r]) + p.o2(agg)))
    return out, aggs


def test_triplet_gmpnn_matches_a_loop_transcription_of_the_reference():
    p = build("triplet_gmpnn")
    node_in, edge_in, graph_in, state, adj, mask = random_inputs(2, 4, pad=1)
    allowed = mask[:, :, None].expand(-1, -1, 4)  # MPNN: every real sender
    ln_out, agg = loop_mpnn_update(p, node_in, edge_in, graph_in, state.node, allowed)
    z = torch.cat([node_in, state.node], -1)
    gate = torch.sigmoid(p.gate_out(F.relu(p.gate_z(z) + p.gate_agg(agg))))
    want = ln_out * gate + state.node * (1 - gate)
    out = p(node_in, edge_in, graph_in, state, adj, mask)
    real = mask[:, :, None]
    torch.testing.assert_close(out.node * real, want * real)
    torch.testing.assert_close(out.edge, p.triplets(z, edge_in, graph_in, mask))
    assert torch.all(p.gate_out.bias == -3.0)  # updates start mostly closed (Ibarz et al. 2022)
    assert not p.carry_edge and p.edge_dim == H


def test_triplet_features_must_be_positive():
    with pytest.raises(RelreasonError):
        build("triplet_gmpnn", triplet_features=0)


# -- message-passing neighbourhoods -----------------------------------------------------------------

def test_pgn_matches_a_loop_transcription_restricted_to_the_adjacency():
    p = build("pgn")
    node_in, edge_in, graph_in, state, adj, mask = random_inputs(2, 4, pad=1)
    want, _ = loop_mpnn_update(p, node_in, edge_in, graph_in, state.node, adj & mask[:, :, None])
    out = p(node_in, edge_in, graph_in, state, adj, mask).node
    real = mask[:, :, None]
    torch.testing.assert_close(out * real, want * real)


def changed_outputs(p, change_node: int, adj_full: bool = False):
    """Which nodes' outputs move when node `change_node`'s features (and its outgoing edges) change."""
    node_in, edge_in, graph_in, state, adj, mask = random_inputs(1, 5)
    if adj_full:
        adj = torch.ones_like(adj)
    base = p(node_in, edge_in, graph_in, state, adj, mask).node
    node2, edge2 = node_in.clone(), edge_in.clone()
    node2[:, change_node] += 1.0
    edge2[:, change_node, :] += 1.0  # edges (s, r) with s = the changed node
    edge2[:, :, change_node] += 1.0  # and (i, j) with j = the changed node (GAT's sender axis)
    edge2[:, change_node, change_node] -= 2.0  # leave its self edge as it was (one change = one node)
    new = p(node2, edge2, graph_in, state, adj, mask).node
    return (new - base).abs().amax(-1)[0] > 1e-9, adj[0]


def test_deepsets_reads_each_node_alone():
    p = build("deepsets")
    moved, _ = changed_outputs(p, change_node=2)
    assert moved.tolist() == [False, False, True, False, False]


@pytest.mark.parametrize("name", ["pgn", "pgn_masked", "gat", "gatv2"])
def test_adjacency_restricted_processors_read_neighbours_only(name):
    p = build(name)
    moved, adj = changed_outputs(p, change_node=2)
    # PGN: r receives from s along adj[s, r]; GAT: i attends to j along adj[i, j]
    reads = adj[2, :] if name.startswith("pgn") else adj[:, 2]
    assert moved[2] and not (moved & ~reads).any(), (moved, reads)
    if name.startswith("gat"):  # softmax weights move with every logit (a max may not)
        assert torch.equal(moved, reads)


# -- the maximum over senders: masked (default) or the CLRS-30 release's adjacency product -----------------

def hand_processor(name: str, reduction: str):
    """`name` at width 1 whose message from sender i is node_in_i alone (m2 reads node_in; m1, me, mg are 0; no
    message MLP) and whose output is relu(5 - agg) (o1 is the bias 5, o2 is -1, no LayerNorm)."""
    p = build(name, hidden=1, msg_mlp_layers=0, use_ln=False, reduction=reduction)
    with torch.no_grad():
        for layer in (p.m1, p.m2, p.me, p.mg, p.o1, p.o2):
            layer.weight.zero_()
            layer.bias.zero_()
        p.m2.weight[0, 0] = 1.0  # z = [node_in, hidden]: the sender's node_in
        p.o2.weight[0, 0] = -1.0
        p.o1.bias[0] = 5.0
    return p


def hand_graph():
    """Nodes 0, 1, 2 real with node_in -2, -0.5, -1, node 3 padded with 7; edges 0-1 and 0-2 and self-loops.
    Node 0's neighbours are every real node; node 1 lacks 2, node 2 lacks 1."""
    node_in = torch.tensor([[[-2.0], [-0.5], [-1.0], [7.0]]], dtype=torch.float64)
    adj = torch.eye(4, dtype=torch.bool)[None].clone()
    for i, j in ((0, 1), (0, 2)):
        adj[0, i, j] = adj[0, j, i] = True
    adj[0, 3, 3] = False
    mask = torch.tensor([[True, True, True, False]])
    zeros = torch.zeros(1, 4, 1, dtype=torch.float64)
    return node_in, torch.zeros(1, 4, 4, 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64), \
        State(zeros, None, torch.zeros(1, 1, dtype=torch.float64)), adj, mask


# relu(5 - agg) at the real nodes, worked out by hand from hand_graph's messages m_ij = node_in_i:
# PGN masked:  agg_0 = max(-2, -0.5, -1) = -0.5, agg_1 = max(-2, -0.5) = -0.5, agg_2 = max(-2, -1) = -1
# PGN product: agg_0 = -0.5 (all real nodes are its neighbours; the padded node is none of its senders),
#              agg_1 = max(-2, -0.5, 0 x -1) = 0, agg_2 = max(-2, 0 x -0.5, -1) = 0
# Deep Sets masked: agg_j = m_jj = node_in_j;  Deep Sets product: max(m_jj, 0, 0) = 0
HAND = {("pgn", "masked_max"): [5.5, 5.5, 6.0], ("pgn", "adjacency_product_max"): [5.5, 5.0, 5.0],
        ("pgn_masked", "masked_max"): [5.5, 5.5, 6.0], ("pgn_masked", "adjacency_product_max"): [5.5, 5.0, 5.0],
        ("deepsets", "masked_max"): [7.0, 5.5, 6.0], ("deepsets", "adjacency_product_max"): [5.0, 5.0, 5.0]}


@pytest.mark.parametrize("name, reduction", list(HAND))
def test_the_maximum_over_senders_matches_hand_values(name, reduction):
    out = hand_processor(name, reduction)(*hand_graph()).node
    assert out[0, :3, 0].tolist() == pytest.approx(HAND[name, reduction])


@pytest.mark.parametrize("name", ["pgn", "deepsets"])
def test_the_sparse_form_computes_the_adjacency_product_too(name):
    from relreason.models.encoders import EdgeInput
    from relreason.models.sparse import SparseGraph

    p = build(name, reduction="adjacency_product_max")
    node_in, edge_in, graph_in, state, adj, mask = random_inputs(2, 5, pad=1)
    adj = adj | adj.transpose(1, 2)  # the sparse form's entries are symmetric
    raw = torch.randn(2, 5, 5, 3, dtype=torch.float64)
    w, bias = torch.randn(3, H, dtype=torch.float64), torch.randn(H, dtype=torch.float64)
    dense = p(node_in, EdgeInput(raw, w, bias), graph_in, state, adj, mask).node
    graph = SparseGraph.from_adjacency(adj, mask)
    sparse = p.forward_sparse(node_in, EdgeInput(graph.gather(raw), w, bias), graph_in, state, graph, mask).node
    torch.testing.assert_close(sparse[mask], dense[mask])


def test_an_unknown_reduction_is_refused_with_the_choices():
    with pytest.raises(RelreasonError, match="processor.reduction: unknown value 'sum'.*"):
        build("pgn", reduction="sum")


def test_pgn_masked_asks_the_decoders_for_the_adjacency_bias():
    assert build("pgn_masked").inf_bias and build("pgn_masked").inf_bias_edge
    assert not any(build(n).inf_bias for n in GNN_NAMES if n != "pgn_masked")


# -- attention --------------------------------------------------------------------------------------

def loop_gat(p, node_in, edge_in, graph_in, hidden, adj, mask, v2: bool):
    """The reference GAT / GATv2 for node i over the j with adj[i, j], one (i, head) at a time."""
    b_, n, h = node_in.shape
    heads, f = p.heads, p.head_dim
    z = torch.cat([node_in, hidden], -1)
    values, skip = p.values_skip(z).split(h, -1)
    s = p.logits
    out = torch.zeros(b_, n, h, dtype=z.dtype)
    for b in range(b_):
        for i in range(n):
            js = [j for j in range(n) if adj[b, i, j] and mask[b, j]]
            if not js:  # a padded receiver: not compared
                continue
            for hd in range(heads):
                logits = []
                for j in js:
                    if v2:
                        w1 = s.pre_z.weight[:h] @ z[b, j] + s.pre_z.bias[:h]
                        w2 = s.pre_z.weight[h:] @ z[b, i] + s.pre_z.bias[h:]
                        pre = F.leaky_relu(w1 + w2 + s.pre_e(edge_in[b, i, j]) + s.pre_g(graph_in[b]), 0.01)
                        logits.append(pre[hd * f:(hd + 1) * f] @ s.score[hd])
                    else:
                        a1 = s.att_z.weight[hd] @ z[b, i] + s.att_z.bias[hd]
                        a2 = s.att_z.weight[heads + hd] @ z[b, j] + s.att_z.bias[heads + hd]
                        logits.append(F.leaky_relu(a1 + a2 + s.att_e(edge_in[b, i, j])[hd]
                                                   + s.att_g(graph_in[b])[hd], 0.01))
                coef = torch.softmax(torch.stack(logits), 0)
                out[b, i, hd * f:(hd + 1) * f] = sum(c * values[b, j, hd * f:(hd + 1) * f] for c, j in zip(coef, js))
    return p.norm(F.relu(out + skip))


@pytest.mark.parametrize("name", ["gat", "gatv2"])
@pytest.mark.parametrize("heads", [1, 2])
def test_gat_matches_a_loop_transcription_of_the_reference(name, heads):
    p = build(name, heads=heads)
    node_in, edge_in, graph_in, state, adj, mask = random_inputs(2, 4, pad=1)
    want = loop_gat(p, node_in, edge_in, graph_in, state.node, adj, mask, v2=name == "gatv2")
    out = p(node_in, edge_in, graph_in, state, adj, mask).node
    real = mask[:, :, None]
    torch.testing.assert_close(out * real, want * real)


def test_gat_heads_must_divide_the_width():
    with pytest.raises(RelreasonError):
        build("gat", heads=3)


# -- stacked layers (`processor.layers`, the RT authors' fork's `--num_layers`) ----------------------

STACKABLE = ["mpnn", "pgn", "pgn_masked", "deepsets", "gat", "gatv2"]


def fork_parameter_count(name: str, hidden: int, layers: int, heads: int = 1) -> int:
    """Parameters of the RT authors' stacked processor (CameronDiao/relational-transformer 09f6469,
    clrs/_src/base_modules/Basic_MPNN_jax.py and Basic_GAT_jax.py, hk.Linear with bias, LayerNorm with
    scale and offset), written from their layers: layer 1 reads [node features, hidden] (2H), the
    others the previous layer's output (H). Our GATv2 leaves out the per-head score biases (a constant
    over the softmax axis), `heads` numbers per layer."""
    H = hidden

    def lin(i: int, o: int) -> int:
        return i * o + o

    def layer(z: int) -> int:
        if name in ("gat", "gatv2"):
            att = 2 * lin(z, heads) + 2 * lin(H, heads) if name == "gat" else 2 * lin(z, H) + 2 * lin(H, H) + H
            return 2 * lin(z, H) + att + 2 * H  # values m, skip, attention, LayerNorm
        # m_1, m_2, o1 read z; m_e, m_g, the two message-MLP layers and o2 read H; LayerNorm
        return 3 * lin(z, H) + 5 * lin(H, H) + 2 * H

    return layer(2 * H) + (layers - 1) * layer(H)


@pytest.mark.parametrize("name", STACKABLE)
@pytest.mark.parametrize("layers", [1, 3])
def test_stacked_layers_have_the_rt_forks_parameters(name, layers):
    heads = 2 if name.startswith("gat") else 1
    kw = {"heads": heads} if heads > 1 else {}
    p = build(name, layers=layers, **kw)
    assert sum(t.numel() for t in p.parameters()) == fork_parameter_count(name, H, layers, heads)
    if layers == 1:  # the CLRS processors' checkpoints are unchanged: no parameter of a stack
        assert not any(k.startswith("stack.") for k in p.state_dict())


@pytest.mark.parametrize("name", STACKABLE)
def test_a_second_layer_reads_the_first_layers_output_alone(name):
    """Two layers = the loop transcription of layer 1 on [node_in, hidden], then of layer 2 (its own
    weights) on that output, with the same edge and graph features and neighbourhood."""
    kw = {"heads": 2} if name.startswith("gat") else {}
    p = build(name, layers=2, **kw)
    node_in, edge_in, graph_in, state, adj, mask = random_inputs(2, 4, pad=1)
    nothing = node_in[..., :0]  # (B, N, 0): z = the previous output alone
    if name.startswith("gat"):
        first = loop_gat(p, node_in, edge_in, graph_in, state.node, adj, mask, v2=name == "gatv2")
        want = loop_gat(p.stack[0], first, edge_in, graph_in, nothing, adj, mask, v2=name == "gatv2")
    else:
        senders = {"mpnn": torch.ones_like(adj), "deepsets": torch.eye(4, dtype=torch.bool).expand_as(adj)}
        allowed = senders.get(name, adj) & mask[:, :, None]
        first, _ = loop_mpnn_update(p, node_in, edge_in, graph_in, state.node, allowed)
        want, _ = loop_mpnn_update(p.stack[0], first, edge_in, graph_in, nothing, allowed)
    out = p(node_in, edge_in, graph_in, state, adj, mask).node
    real = mask[:, :, None]
    torch.testing.assert_close(out * real, want * real)
    reads = p.stack[0].values_skip if name.startswith("gat") else p.stack[0].m1
    assert reads.in_features == H  # not [node_in, hidden]


def test_layers_must_be_positive_and_triplet_gmpnn_has_one():
    for name in ("mpnn", "gat"):
        with pytest.raises(RelreasonError, match="processor.layers"):
            build(name, layers=0)
    with pytest.raises(RelreasonError, match="processor.layers"):
        build("triplet_gmpnn", layers=2)


# -- generic properties of every processor in gnn.py ------------------------------------------------

def edge_dim(name: str) -> int:
    return build(name).edge_dim


@pytest.mark.parametrize("name", GNN_NAMES)
def test_padded_nodes_change_nothing(name):
    p = build(name)
    e = edge_dim(name)
    real = random_inputs(2, 4, edge_dim=e)
    padded = random_inputs(2, 6, seed=9, edge_dim=e, pad=2)  # garbage everywhere, then the real part copied in
    node_in, edge_in, graph_in, state, adj, mask = padded
    node_in[:, :4], edge_in[:, :4, :4], graph_in[:] = real[0], real[1], real[2]
    state.node[:, :4], state.graph[:] = real[3].node, real[3].graph
    if e:
        state.edge[:, :4, :4] = real[3].edge
    adj[:, :4, :4] = real[4]
    a = p(*real)
    b = p(node_in, edge_in, graph_in, state, adj, mask)
    torch.testing.assert_close(b.node[:, :4], a.node)
    if a.edge is not None:
        torch.testing.assert_close(b.edge[:, :4, :4], a.edge)


@pytest.mark.parametrize("name", GNN_NAMES)
def test_gradients_reach_every_parameter(name):
    p = build(name)
    node_in, edge_in, graph_in, state, adj, mask = random_inputs(2, 4, edge_dim=edge_dim(name))
    out = p(node_in, edge_in, graph_in, state, adj, mask)
    g = torch.Generator().manual_seed(5)
    # a random readout: LayerNorm outputs sum to a constant, so a plain sum has no gradient
    loss = (out.node * torch.randn(out.node.shape, generator=g, dtype=torch.float64)).sum()
    if out.edge is not None:
        loss = loss + (out.edge * torch.randn(out.edge.shape, generator=g, dtype=torch.float64)).sum()
    loss.backward()
    for pname, param in p.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, pname


def fit(p, steps: int, n: int = 5, batch: int = 8) -> tuple[float, float]:
    """Fits a per-node target that depends on neighbours (max of adjacent features) through a linear
    readout over two processor steps; returns (first loss, last loss)."""
    p = p.float()
    g = torch.Generator().manual_seed(0)
    hidden = p.hidden
    node_in = torch.randn(batch, n, hidden, generator=g)
    edge_in = torch.randn(batch, n, n, hidden, generator=g)
    graph_in = torch.randn(batch, hidden, generator=g)
    adj = (torch.rand(batch, n, n, generator=g) < 0.5) | torch.eye(n, dtype=torch.bool)
    mask = torch.ones(batch, n, dtype=torch.bool)
    target = node_in[..., 0].unsqueeze(2).expand(-1, -1, n).masked_fill(~adj, -1e9).amax(1)  # (B, N)
    return fit_node_target(p, node_in, edge_in, graph_in, adj, mask, target, steps)


@pytest.mark.parametrize("name", GNN_NAMES)
def test_each_processor_lowers_a_simple_loss(name):
    first, last = fit(build(name, hidden=16), steps=40)
    assert last < 0.5 * first, (first, last)
