"""Tests of the Edge Transformer processor (relreason/models/processors/et.py), called directly
through the processor contract."""

from __future__ import annotations

import math

import pytest
import torch

from compiled_kernels import assert_compiled_ran, compiled_kernels  # noqa: F401 (a fixture)
from relreason.errors import RelreasonError
from relreason.models import kernels
from relreason.models.processors import PROCESSORS
from relreason.models.processors import et
from relreason.models.processors.base import State
from relreason.models.processors.et import (EdgeTransformer, EdgeTransformerLayer, ETConfig, TriangularAttention,
                                            TriangularProduct)

H = 8  # the network's hidden size in these tests


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: one thread is faster, and avoids thread-sync stalls when the CPU is shared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

VARIANTS = {
    "default": {},
    "value_ablation": {"value_ablation": True},
    "attention_ablation": {"attention_ablation": True},
    "untied": {"tied": False},
    "no_carry": {"carry_state": False},
    "post_norm": {"norm": "post"},
    # Mueller et al.'s CLRS configuration (relreason/recipes/et.yaml), at the test width (= H, as edge_projection needs)
    "mueller": {"tied": False, "ff_factor": 2, "norm": "pre_and_post", "carry_state": False,
                "edge_projection": False, "graph_input": "nodes", "init": "haiku"},
}


def build(**kwargs) -> EdgeTransformer:
    torch.manual_seed(0)
    cfg = ETConfig(**{"width": 8, "heads": 2, "layers": 2, **kwargs})
    return PROCESSORS.get("et").build(cfg, H)


def inputs(b: int = 2, n: int = 5, seed: int = 1, width: int = 8):
    """Random encoded inputs and a random (non-zero, so every state weight gets a gradient) state."""
    g = torch.Generator().manual_seed(seed)
    node_in = torch.randn(b, n, H, generator=g)
    edge_in = torch.randn(b, n, n, H, generator=g)
    graph_in = torch.randn(b, H, generator=g)
    state = State(torch.randn(b, n, width, generator=g), torch.randn(b, n, n, width, generator=g),
                  torch.randn(b, width, generator=g))
    adj = torch.ones(b, n, n, dtype=torch.bool)
    mask = torch.ones(b, n, dtype=torch.bool)
    return node_in, edge_in, graph_in, state, adj, mask


def reference_triangular(att: TriangularAttention, e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Triangular attention written out as plain loops over x, y, heads and l, for one graph e (N, N, D)."""
    n, _, d = e.shape
    h, c = att.heads, att.head_dim
    out = torch.zeros(n, n, d, dtype=e.dtype)
    real = [l for l in range(n) if mask[l]]
    for x in range(n):
        for y in range(n):
            heads = []
            for head in range(h):
                sl = slice(head * c, (head + 1) * c)
                logits = []
                for l in real:
                    q = att.query.weight[sl] @ e[x, l]  # q_xl
                    k_at = e[x, y] if att.attention_ablation else e[l, y]
                    k = att.key.weight[sl] @ k_at  # k_ly (ablation: k_xy)
                    logits.append(float(q @ k) / math.sqrt(c))
                top = max(logits)
                weights = [math.exp(s - top) for s in logits]
                total = sum(weights)
                acc = torch.zeros(c, dtype=e.dtype)
                for w, l in zip(weights, real):
                    v = att.value1.weight[sl] @ e[x, l]
                    if not att.value_ablation:
                        v = v * (att.value2.weight[sl] @ e[l, y])
                    acc = acc + (w / total) * v
                heads.append(acc)
            out[x, y] = att.out.weight @ torch.cat(heads)
    return out


@pytest.mark.parametrize("value_ablation", [False, True])
@pytest.mark.parametrize("attention_ablation", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_triangular_attention_matches_loops(value_ablation, attention_ablation, padded):
    torch.manual_seed(0)
    att = TriangularAttention(8, 2, value_ablation, attention_ablation, chunk_mb=1, dropout=0.0)
    e = torch.randn(1, 3, 3, 8)
    mask = torch.tensor([[True, True, not padded]])  # padded: node 2 must drop out of every sum over l
    with torch.no_grad():
        got = att(e, mask)[0]
        want = reference_triangular(att, e[0], mask[0])
    real = 2 if padded else 3
    assert torch.allclose(got[:real, :real], want[:real, :real], atol=1e-5)


def layer_norm(x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    """LayerNorm over the last axis written out: (x - mean) / sqrt(biased variance + eps) * weight + bias."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def reference_layer(layer: EdgeTransformerLayer, norm: str, e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """One layer for one graph e (N, N, D), each placement written as its paper / code states it."""
    def att(x):
        return reference_triangular(layer.attention, x, mask)

    def ffn(x):
        return torch.relu(x @ layer.ffn_in.weight.T + layer.ffn_in.bias) @ layer.ffn_out.weight.T + layer.ffn_out.bias

    if norm == "bergen":  # Bergen et al.'s clutrr/model.py: normalize the stream, then add the sub-block's output
        e = layer_norm(e, layer.norm1)
        e = e + att(e)
        e = layer_norm(e, layer.norm2)
        return e + ffn(e)
    if norm == "post":  # post-LN: x = LN(x + attn(x)); x = LN(x + ffn(x))
        e = layer_norm(e + att(e), layer.norm1)
        return layer_norm(e + ffn(e), layer.norm2)
    # Mueller et al.'s fork, norm_first_att: the attention reads LN(x), its residual adds to the raw x_in,
    # then FFN(x_prior, x_upd): x = LN_aggregate(x_prior + x_upd); return LN(x + W2 relu(W1 x))
    e = layer_norm(e + att(layer_norm(e, layer.norm0)), layer.norm1)
    return layer_norm(e + ffn(e), layer.norm2)


@pytest.mark.parametrize("norm", ["bergen", "post", "pre_and_post"])
def test_layer_norm_placements_match_their_equations(norm):
    torch.manual_seed(0)
    layer = EdgeTransformerLayer(ETConfig(width=8, heads=2, ff_factor=2, norm=norm, dropout=0.0), 8)
    with torch.no_grad():  # LayerNorms away from the identity, so each one's place shows in the output
        for ln in (m for m in layer.modules() if isinstance(m, torch.nn.LayerNorm)):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.normal_()
    assert (layer.norm0 is not None) == (norm == "pre_and_post")
    e = torch.randn(1, 3, 3, 8) * 2 + 1
    mask = torch.ones(1, 3, dtype=torch.bool)
    with torch.no_grad():
        got = layer(e, mask)[0]
        want = reference_layer(layer, norm, e[0], mask[0])
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_mueller_composer_is_their_concat_then_one_linear():
    # Their ET_Processor: u_x = [node_fts_x, hidden_x, graph_fts] (use_graph_fts), z_xy = W [u_x, u_y] + b + edge_fts_xy
    # (no map on the edges): our blocks must be that one matrix, split by input.
    model = build(**VARIANTS["mueller"])
    node_in, edge_in, graph_in, state, _, _ = inputs(n=4)
    b, n = node_in.shape[:2]
    w = torch.cat([model.from_sender.weight, model.from_state_sender.weight, model.from_graph_sender.weight,
                   model.from_receiver.weight, model.from_state_receiver.weight, model.from_graph_receiver.weight], 1)
    want = torch.empty(b, n, n, 8)
    for i in range(b):
        u = [torch.cat([node_in[i, x], state.node[i, x], graph_in[i]]) for x in range(n)]  # (3H,) per node
        for x in range(n):
            for y in range(n):
                want[i, x, y] = w @ torch.cat([u[x], u[y]]) + model.from_sender.bias + edge_in[i, x, y]
    with torch.no_grad():
        got = model.compose(node_in, edge_in, graph_in, state)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_edge_projection_false_adds_the_encoded_edges_as_they_are():
    node_in, edge_in, graph_in, state, _, _ = inputs()
    delta = torch.randn(edge_in.shape, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        for projection in (False, True):
            model = build(edge_projection=projection)
            assert (model.from_edge is None) == (not projection)
            change = model.compose(node_in, edge_in + delta, graph_in, state) - model.compose(node_in, edge_in, graph_in, state)
            torch.testing.assert_close(change, delta if not projection else model.from_edge(delta), rtol=1e-5, atol=1e-5)


def test_graph_features_on_nodes_reach_a_pair_through_both_node_blocks():
    # graph_input nodes: pair (x, y) gets W_gx g + W_gy g (g appended to u_x and u_y); pairs: one map W_g g.
    node_in, edge_in, graph_in, state, _, _ = inputs()
    delta = torch.randn(graph_in.shape, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        for mode in ("nodes", "pairs"):
            model = build(graph_input=mode)
            change = model.compose(node_in, edge_in, graph_in + delta, state) - model.compose(node_in, edge_in, graph_in, state)
            if mode == "nodes":
                want = delta @ model.from_graph_sender.weight.T + delta @ model.from_graph_receiver.weight.T
                assert not hasattr(model, "from_graph")
            else:
                want = delta @ model.from_graph.weight.T
            torch.testing.assert_close(change, want[:, None, None, :].expand_as(change), rtol=1e-5, atol=1e-5)


def test_haiku_init_is_truncated_normal_over_fan_in_with_zero_biases():
    # Haiku's Linear default: truncated normal at +-2 std, std = 1/sqrt(fan_in), bias 0. The std of a normal
    # truncated at +-2 sigma is 0.8796 sigma. The composer's blocks are one matrix of fan-in 2 x (H + D + H).
    torch.manual_seed(0)
    hidden = 96
    model = PROCESSORS.get("et").build(ETConfig(heads=4, layers=2, tied=False, carry_state=False, ff_factor=2,
                                                edge_projection=False, graph_input="nodes", init="haiku"), hidden)
    truncated = math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(2 / math.sqrt(2)))
    composer = 6 * hidden
    checked = 0
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        fan_in = composer if name.startswith("from_") else module.in_features
        std = 1 / math.sqrt(fan_in)
        w = module.weight.detach()
        assert w.abs().max() <= 2 * std + 1e-7, name
        assert abs(w.std().item() / (truncated * std) - 1) < 0.05, (name, w.std().item(), truncated * std)
        if module.bias is not None:
            assert torch.count_nonzero(module.bias) == 0, name
        checked += 1
    assert checked == 6 + 2 * 7 + 1  # 6 composer blocks, 2 untied layers of 5 attention + 2 FFN maps, readout


@pytest.mark.parametrize("compiled", [False, True])  # eager chunked kernels / compiled fused loops
@pytest.mark.parametrize("budget", [1, 10 ** 9])  # one row per chunk / everything in one chunk
def test_triangular_product_forward_and_gradients(request, budget, compiled):
    if compiled:
        request.getfixturevalue("compiled_kernels")
    g = torch.Generator().manual_seed(0)
    a, p, q = (torch.randn(*shape, generator=g, dtype=torch.double, requires_grad=True)
               for shape in ((3, 4, 5, 6), (3, 4, 6, 2), (3, 5, 6, 2)))
    out = TriangularProduct.apply(a, p, q, budget, compiled)
    assert torch.allclose(out, torch.einsum("gijk,gikc,gjkc->gijc", a, p, q))
    assert torch.autograd.gradcheck(lambda a, p, q: TriangularProduct.apply(a, p, q, budget, compiled), (a, p, q))
    if compiled:
        assert_compiled_ran()


def test_compiled_and_eager_triangular_products_agree_in_float32(compiled_kernels):
    g = torch.Generator().manual_seed(3)
    a = torch.softmax(torch.randn(8, 16, 16, 16, generator=g), -1).requires_grad_()
    p, q = (torch.randn(8, 16, 16, 4, generator=g, requires_grad=True) for _ in range(2))
    w = torch.randn(8, 16, 16, 4, generator=g)
    results = []
    for compiled in (False, True):
        out = TriangularProduct.apply(a, p, q, 1 << 20, compiled)
        results.append((out, *torch.autograd.grad((out * w).sum(), (a, p, q))))
    assert_compiled_ran()  # else "fused" below is the eager kernel again
    for eager, fused in zip(*results):
        torch.testing.assert_close(fused, eager, rtol=1e-5, atol=1e-5)


def test_a_failed_compilation_falls_back_to_the_eager_kernels_and_says_so_once(monkeypatch, capsys):
    def broken(fn, **kwargs):
        def run(*args):
            raise torch._dynamo.exc.BackendCompilerFailed(fn, RuntimeError("no C++ compiler found"), None)
        return run

    monkeypatch.setattr(torch, "compile", broken)
    monkeypatch.setattr(kernels, "_compiled", {})
    monkeypatch.setattr(kernels, "_state", {"on": True, "broken": "", "compiled_calls": 0,
                                            "smallest_chunks": False})
    g = torch.Generator().manual_seed(4)
    a, p, q = torch.randn(2, 3, 4, 5, generator=g), torch.randn(2, 3, 5, 2, generator=g), torch.randn(2, 4, 5, 2, generator=g)
    for _ in range(2):
        torch.testing.assert_close(et.tri_sum(a, p, q, 1 << 20, True), torch.einsum("gijk,gikc,gjkc->gijc", a, p, q))
    err = capsys.readouterr().err
    assert err.count("fused kernels unavailable") == 1 and "no C++ compiler found" in err


@pytest.mark.parametrize("loop", [True, False])  # multiply-add loop / one small matmul per pair
@pytest.mark.parametrize("budget", [1, 10 ** 9])
def test_triangular_product_loop_and_matmul_forms_are_the_same_product(monkeypatch, loop, budget):
    monkeypatch.setattr(et, "LOOP_MAX_TERMS", 10 ** 9 if loop else 0)
    g = torch.Generator().manual_seed(1)
    a, p, q = (torch.randn(*shape, generator=g, dtype=torch.double, requires_grad=True)
               for shape in ((3, 4, 5, 6), (3, 4, 6, 2), (3, 5, 6, 2)))
    out = TriangularProduct.apply(a, p, q, budget, False)
    want = torch.einsum("gijk,gikc,gjkc->gijc", a, p, q)
    torch.testing.assert_close(out, want)
    w = torch.randn(out.shape, generator=g, dtype=torch.double)
    got = torch.autograd.grad((out * w).sum(), (a, p, q))
    for x, y in zip(got, torch.autograd.grad((want * w).sum(), (a, p, q))):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("variant", VARIANTS)
def test_equivariant_to_node_permutations(variant):
    model = build(**VARIANTS[variant])
    node_in, edge_in, graph_in, state, adj, mask = inputs()
    perm = torch.tensor([3, 0, 4, 2, 1])
    with torch.no_grad():
        out = model(node_in, edge_in, graph_in, state, adj, mask)
        p_state = State(state.node[:, perm], state.edge[:, perm][:, :, perm], state.graph)
        p_out = model(node_in[:, perm], edge_in[:, perm][:, :, perm], graph_in, p_state,
                      adj[:, perm][:, :, perm], mask[:, perm])
    assert torch.allclose(p_out.node, out.node[:, perm], atol=1e-5)
    assert torch.allclose(p_out.edge, out.edge[:, perm][:, :, perm], atol=1e-5)
    assert torch.allclose(p_out.graph, out.graph, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_padded_nodes_never_reach_real_ones(variant):
    model = build(**VARIANTS[variant])
    node_in, edge_in, graph_in, state, adj, mask = inputs(n=6)
    real = 4
    mask[:, real:] = False
    with torch.no_grad():
        padded = model(node_in, edge_in, graph_in, state, adj, mask)
        alone = model(node_in[:, :real], edge_in[:, :real, :real], graph_in,
                      State(state.node[:, :real], state.edge[:, :real, :real], state.graph),
                      adj[:, :real, :real], mask[:, :real])
    assert torch.allclose(padded.node[:, :real], alone.node, atol=1e-5)
    assert torch.allclose(padded.edge[:, :real, :real], alone.edge, atol=1e-5)
    assert torch.allclose(padded.graph, alone.graph, atol=1e-5)


def test_value_ablation_drops_the_e_ly_value_path():
    # With uniform attention (Wq = 0), a_xy = Wo mean_l v_xly: under the value ablation v_xly = V1 e_xl
    # does not depend on y at all; with the full value V1 e_xl * V2 e_ly it does.
    for ablation in (True, False):
        torch.manual_seed(0)
        att = TriangularAttention(8, 2, ablation, False, chunk_mb=1, dropout=0.0)
        assert (att.value2 is None) == ablation
        with torch.no_grad():
            att.query.weight.zero_()
            out = att(torch.randn(2, 4, 4, 8), torch.ones(2, 4, dtype=torch.bool))  # (B, X, Y, D)
        same_for_all_y = torch.allclose(out, out[:, :, :1].expand_as(out), atol=1e-6)
        assert same_for_all_y == ablation


def test_attention_ablation_weighs_l_by_row_x_alone():
    # Ablated: alpha_xyl = softmax_l(q_xl . k_xy) reads only row x of e. Full: it reads e_ly too.
    for ablation in (True, False):
        torch.manual_seed(0)
        att = TriangularAttention(8, 2, False, ablation, chunk_mb=1, dropout=0.0)
        e = torch.randn(1, 4, 4, 8)
        changed = e.clone()
        changed[:, 1:] += torch.randn(1, 3, 4, 8)  # every row except x = 0
        mask = torch.ones(1, 4, dtype=torch.bool)
        with torch.no_grad():
            weights = [att.weights(*att.projections(x)[:2], mask)[:, :, 0] for x in (e, changed)]
        before, after = weights
        assert torch.allclose(before, after) == ablation


def test_tied_layers_share_one_layer():
    tied, untied = build(tied=True, layers=3), build(tied=False, layers=3)
    assert len(tied.layers) == 1 and len(untied.layers) == 3
    # untied layers all loaded with the tied layer's weights compute exactly the tied model
    state = tied.state_dict()
    for i in range(3):
        for key, value in tied.layers[0].state_dict().items():
            state[f"layers.{i}.{key}"] = value
    untied.load_state_dict(state)
    args = inputs()
    with torch.no_grad():
        assert torch.allclose(tied(*args).edge, untied(*args).edge, atol=1e-6)


def test_carried_state():
    node_in, edge_in, graph_in, state, adj, mask = inputs()
    other_edge = State(state.node, state.edge + 1.0, state.graph)
    other_node = State(state.node + 1.0, state.edge, state.graph)
    with torch.no_grad():
        carry = build(carry_state=True)
        assert carry.carry_edge and carry.edge_dim == 8
        base = carry(node_in, edge_in, graph_in, state, adj, mask).edge
        assert not torch.allclose(base, carry(node_in, edge_in, graph_in, other_edge, adj, mask).edge)
        no_carry = build(carry_state=False)
        assert not no_carry.carry_edge
        base = no_carry(node_in, edge_in, graph_in, state, adj, mask).edge
        assert torch.allclose(base, no_carry(node_in, edge_in, graph_in, other_edge, adj, mask).edge)
        assert not torch.allclose(base, no_carry(node_in, edge_in, graph_in, other_node, adj, mask).edge)


def test_node_state_is_the_diagonal_of_the_pair_state():
    out = build()(*inputs())
    for i in range(5):
        assert torch.equal(out.node[:, i], out.edge[:, i, i])


def test_width_defaults_to_hidden():
    model = PROCESSORS.get("et").build(ETConfig(heads=2), H)
    assert model.node_dim == model.edge_dim == H
    s = model.initial_state(2, 3, torch.device("cpu"))
    assert s.edge.shape == (2, 3, 3, H)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_reach_every_parameter(variant):
    model = build(**VARIANTS[variant])
    out = model(*inputs())
    g = torch.Generator().manual_seed(5)
    loss = sum((t * torch.randn(t.shape, generator=g)).sum() for t in (out.node, out.edge, out.graph))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_bad_config_is_a_user_error():
    with pytest.raises(RelreasonError, match="divisible"):
        PROCESSORS.get("et").build(ETConfig(width=10, heads=4), H)
    with pytest.raises(RelreasonError, match="layers"):
        PROCESSORS.get("et").build(ETConfig(layers=0), H)
    with pytest.raises(RelreasonError, match="model.hidden"):
        PROCESSORS.get("et").build(ETConfig(width=16, heads=4, edge_projection=False), H)
    with pytest.raises(RelreasonError, match="processor.norm"):
        ETConfig(norm="pre")


def test_learns_two_hop_sums():
    # Target per pair: (A @ A)_xy, A an edge scalar: one triangle, exactly what triangular attention sees.
    # Must beat the best constant predictor (its loss: the target's variance) 4x.
    torch.manual_seed(0)
    model = build(width=16, heads=2, layers=1)
    head = torch.nn.Linear(16, 1)
    g = torch.Generator().manual_seed(3)
    b, n = 16, 5
    a = torch.rand(b, n, n, generator=g)
    edge_in = a[..., None] * torch.ones(H)  # (B, N, N, H)
    target = a @ a  # (B, N, N)
    node_in, graph_in = torch.zeros(b, n, H), torch.zeros(b, H)
    adj, mask = torch.ones(b, n, n, dtype=torch.bool), torch.ones(b, n, dtype=torch.bool)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=3e-3)
    for _ in range(40):
        state = model.initial_state(b, n, a.device)
        pred = head(model(node_in, edge_in, graph_in, state, adj, mask).edge)[..., 0]
        loss = torch.nn.functional.mse_loss(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.25 * target.var().item()


@pytest.mark.parametrize("attention_ablation", [False, True])  # logits l-major then permuted / already contiguous
def test_compiled_evaluation_softmax_equals_the_eager_one(compiled_kernels, attention_ablation):
    torch.manual_seed(0)
    att = TriangularAttention(8, 2, False, attention_ablation, chunk_mb=1, dropout=0.0)
    e = torch.randn(1, 5, 5, 8)  # one graph: the evaluation batch where inductor once failed (KeyError 'buf1')
    mask = torch.tensor([[True] * 3 + [False] * 2])
    with torch.no_grad():  # evaluation: the compiled transpose-mask-softmax
        q, k = att.projections(e)[:2]
        got = att.weights(q, k, mask)
        assert_compiled_ran()
        att.compiled = False
        want = att.weights(q, k, mask)
    torch.testing.assert_close(got, want)
    assert got.is_contiguous()
