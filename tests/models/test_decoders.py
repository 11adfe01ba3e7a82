"""Decoders per (location, type) against the reference's formulas, Sinkhorn, and post-processing."""

from __future__ import annotations

import pytest
import torch

from relreason.data.specs import Feature, Location, Stage, Type
from relreason.models.config import PointerDecoding
from relreason.models.decoders import (NEG, DecodeContext, DecoderInputs, FeatureDecoder, feedback, fuse_permutation,
                                       harden, log_sinkhorn, pointer_logits)
from relreason.models.encoders import SUPPORTED, EdgeInput

B, N, H, D, C, F_RAW = 2, 5, 6, 4, 3, 3
HN = H + 2 * D


def make_ctx(edge_dim: int = 0, n: int = N, seed: int = 0, mask: torch.Tensor | None = None) -> DecodeContext:
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    edge = EdgeInput(r(B, n, n, F_RAW), r(F_RAW, H), r(H))
    return DecodeContext(h=r(B, n, HN), edge=edge, edge_state=r(B, n, n, edge_dim) if edge_dim else None,
                         prev_edge=r(B, n, n, edge_dim) if edge_dim else None, graph=r(B, H),
                         adj=torch.rand(B, n, n, generator=g) > 0.5,
                         node_mask=torch.ones(B, n, dtype=torch.bool) if mask is None else mask,
                         prev_graph=r(B, D), graph_state=r(B, D))


def decoder(loc: Location, typ: Type, edge_dim: int = 0, **kw) -> FeatureDecoder:
    f = Feature("x", Stage.OUTPUT, loc, typ, C if typ is Type.CATEGORICAL else 0)
    return FeatureDecoder(f, H, D, edge_dim, kw.pop("pointer_decoding", PointerDecoding.NODE),
                          kw.pop("carry_edge", False), **kw).double()


EXPECTED_SHAPE = {
    (Location.NODE, Type.SCALAR): (B, N), (Location.NODE, Type.MASK): (B, N), (Location.NODE, Type.MASK_ONE): (B, N),
    (Location.NODE, Type.CATEGORICAL): (B, N, C), (Location.NODE, Type.POINTER): (B, N, N),
    (Location.NODE, Type.PERMUTATION_POINTER): (B, N, N),
    (Location.EDGE, Type.SCALAR): (B, N, N), (Location.EDGE, Type.MASK): (B, N, N),
    (Location.EDGE, Type.CATEGORICAL): (B, N, N, C), (Location.EDGE, Type.POINTER): (B, N, N, N),
    (Location.GRAPH, Type.SCALAR): (B,), (Location.GRAPH, Type.MASK): (B,), (Location.GRAPH, Type.CATEGORICAL): (B, C),
    (Location.GRAPH, Type.POINTER): (B, N),
}


def test_every_supported_pair_has_a_shape():
    assert set(EXPECTED_SHAPE) == SUPPORTED


RT_READS = DecoderInputs(edge_history=True, graph_history=True)  # the RT authors' decoders, core mode
NO_EDGES = DecoderInputs(edge_features=False)  # the standard transformer's


@pytest.mark.parametrize("pair", sorted(SUPPORTED, key=lambda p: (p[0].value, p[1].value)), ids=lambda p: f"{p[0].value}-{p[1].value}")
@pytest.mark.parametrize("edge_dim,inputs", [(0, DecoderInputs()), (3, DecoderInputs()), (3, RT_READS), (0, NO_EDGES)],
                         ids=["clrs", "clrs-edge-state", "rt", "no-edges"])
def test_shapes_and_padding(pair, edge_dim, inputs):
    loc, typ = pair
    dec = decoder(loc, typ, edge_dim, inputs=inputs)
    out = dec(make_ctx(edge_dim), train=False, generator=None)
    assert out.shape == EXPECTED_SHAPE[pair]
    assert torch.isfinite(out).all()
    # padding: two extra masked nodes change nothing for the real ones, and are never chosen
    small, mask = make_ctx(edge_dim), torch.zeros(B, N + 2, dtype=torch.bool)
    mask[:, :N] = True
    big = make_ctx(edge_dim, n=N + 2, seed=7, mask=mask)
    big.h[:, :N] = small.h
    big.edge.raw[:, :N, :N] = small.edge.raw
    big.edge.weight.copy_(small.edge.weight)
    big.edge.bias.copy_(small.edge.bias)
    big.graph.copy_(small.graph)
    big.prev_graph.copy_(small.prev_graph)
    big.graph_state.copy_(small.graph_state)
    if edge_dim:
        big.edge_state[:, :N, :N] = small.edge_state
        big.prev_edge[:, :N, :N] = small.prev_edge
    if not inputs.edge_features:  # read nothing: the context may not even carry edges
        small.edge = big.edge = None
    out_big = dec(big, train=False, generator=None)
    node_axes = {Location.NODE: 1, Location.EDGE: 2, Location.GRAPH: 0}[loc] + (typ in (Type.POINTER, Type.PERMUTATION_POINTER))
    cut = out_big[(slice(None),) + (slice(0, N),) * node_axes]
    torch.testing.assert_close(cut, dec(small, train=False, generator=None))
    if typ in (Type.POINTER, Type.PERMUTATION_POINTER, Type.MASK_ONE):
        chosen = out_big.argmax(-1)  # real rows (pointers) or the sample's choice (mask_one, graph pointer)
        assert (chosen[(slice(None),) + (slice(0, N),) * (chosen.dim() - 1)] < N).all()


def test_node_pointer_formula():
    dec = decoder(Location.NODE, Type.POINTER)
    ctx = make_ctx()
    out = dec(ctx, train=False, generator=None)
    d = dec.d
    e = ctx.edge.dense()
    for b in range(B):
        for i in range(N):
            for j in range(N):
                m = torch.maximum(d[0](ctx.h[b, i]), d[1](ctx.h[b, j]) + d[2](e[b, j, i]))
                torch.testing.assert_close(out[b, i, j], d[3](m)[0])


def test_node_pointer_reads_the_edge_state():
    dec = decoder(Location.NODE, Type.POINTER, edge_dim=3)
    ctx = make_ctx(3)
    out = dec(ctx, train=False, generator=None)
    d = dec.d
    e = torch.cat([ctx.edge.dense(), ctx.edge_state], -1)
    m = torch.maximum(d[0](ctx.h[1, 2]), d[1](ctx.h[1, 4]) + d[2](e[1, 4, 2]))
    torch.testing.assert_close(out[1, 2, 4], d[3](m)[0])


@pytest.mark.parametrize("carry", [True, False])
def test_pointer_decoding_from_edges(carry):
    dec = decoder(Location.NODE, Type.POINTER, edge_dim=3, pointer_decoding=PointerDecoding.EDGE, carry_edge=carry)
    ctx = make_ctx(3)
    out = dec(ctx, train=False, generator=None)
    parts = [ctx.edge.dense()] + ([ctx.prev_edge] if carry else []) + [ctx.edge_state]
    torch.testing.assert_close(out, dec.d[0](torch.cat(parts, -1)).squeeze(-1))
    with pytest.raises(ValueError):
        decoder(Location.NODE, Type.POINTER, edge_dim=0, pointer_decoding=PointerDecoding.EDGE)


def _rt_edges(ctx: DecodeContext) -> torch.Tensor:
    """e as the RT authors' decoders read it: [encoded edges, previous edge state, new edge state]."""
    return torch.cat([ctx.edge.dense(), ctx.prev_edge, ctx.edge_state], -1)


@pytest.mark.parametrize("rt_reads", [False, True], ids=["edges", "rt-edge-history"])
@pytest.mark.parametrize("typ", [Type.SCALAR, Type.CATEGORICAL, Type.POINTER])
def test_edge_formulas(typ, rt_reads):
    """With the RT's reads (authors' nets.py), h_e_t = [edge_fts, e_hidden, nxt_e_hidden] feeds d2."""
    if rt_reads:
        dec, ctx = decoder(Location.EDGE, typ, edge_dim=3, inputs=RT_READS), make_ctx(3)
        assert dec.d[2].in_features == H + 2 * 3
    else:
        dec, ctx = decoder(Location.EDGE, typ), make_ctx()
    out = dec(ctx, train=False, generator=None)
    d, e = dec.d, (_rt_edges(ctx) if rt_reads else ctx.edge.dense())
    b, i, j, k = 1, 3, 0, 2
    pred = d[0](ctx.h[b, i]) + d[1](ctx.h[b, j]) + d[2](e[b, i, j])
    if typ is Type.POINTER:
        torch.testing.assert_close(out[b, i, j, k], d[4](torch.maximum(pred, d[3](ctx.h[b, k])))[0])
    elif typ is Type.CATEGORICAL:
        torch.testing.assert_close(out[b, i, j], pred)
    else:
        torch.testing.assert_close(out[b, i, j], pred[0])


@pytest.mark.parametrize("typ", [Type.SCALAR, Type.CATEGORICAL, Type.POINTER])
def test_graph_formulas(typ):
    dec = decoder(Location.GRAPH, typ)
    ctx = make_ctx()
    out = dec(ctx, train=False, generator=None)
    d = dec.d
    pred = d[0](ctx.h.amax(1)) + d[1](ctx.graph)  # (B, k)
    if typ is Type.POINTER:
        torch.testing.assert_close(out, pred + d[2](ctx.h).squeeze(-1))
    else:
        torch.testing.assert_close(out, pred if typ is Type.CATEGORICAL else pred.squeeze(-1))


@pytest.mark.parametrize("pointer_decoding", list(PointerDecoding))
def test_edge_history_node_pointers(pointer_decoding):
    """Both pointer decoders read [encoded edges, previous, new edge state]: from edges (authors'
    `ptr_from_edges`) as linear(e_ij), from node pairs with W3 e_ji."""
    dec = decoder(Location.NODE, Type.POINTER, edge_dim=3, inputs=RT_READS, pointer_decoding=pointer_decoding)
    ctx = make_ctx(3)
    out = dec(ctx, train=False, generator=None)
    d, e = dec.d, _rt_edges(ctx)
    if pointer_decoding is PointerDecoding.EDGE:
        torch.testing.assert_close(out, d[0](e).squeeze(-1))
        return
    for b, i, j in ((0, 1, 3), (1, 4, 2), (1, 2, 2)):
        m = torch.maximum(d[0](ctx.h[b, i]), d[1](ctx.h[b, j]) + d[2](e[b, j, i]))
        torch.testing.assert_close(out[b, i, j], d[3](m)[0])


@pytest.mark.parametrize("history", [False, True])
def test_graph_decoders_read_the_graph_states_with_graph_history(history):
    """Authors' core mode: h_g_t = [graph_fts, g_hidden, nxt_g_hidden] feeds the graph decoders' d1."""
    dec = decoder(Location.GRAPH, Type.SCALAR, inputs=DecoderInputs(graph_history=history))
    ctx = make_ctx()
    g = torch.cat([ctx.graph, ctx.prev_graph, ctx.graph_state], -1) if history else ctx.graph
    want = dec.d[0](ctx.h.amax(1)) + dec.d[1](g)
    torch.testing.assert_close(dec(ctx, train=False, generator=None), want.squeeze(-1))


@pytest.mark.parametrize("typ", [Type.POINTER, Type.SCALAR, Type.CATEGORICAL])
@pytest.mark.parametrize("loc", [Location.NODE, Location.EDGE])
def test_without_edge_features_decoders_read_node_pairs_only(loc, typ):
    """The standard transformer's decoders: no e term and no weight reading edges (node pointers
    w . max(W1 h_i, W2 h_j); edge features d0(h_i) + d1(h_j)), and they run without any edge input."""
    if loc is Location.NODE and typ is not Type.POINTER:
        return  # node scalars and categoricals never read edges
    dec = decoder(loc, typ, inputs=NO_EDGES)
    assert isinstance(dec.d[2], torch.nn.Identity)  # the edge map's slot, parameter-free
    ctx = make_ctx()
    ctx.edge = None
    out = dec(ctx, train=False, generator=None)
    d = dec.d
    b, i, j, k = 1, 3, 0, 2
    if loc is Location.NODE:
        torch.testing.assert_close(out[b, i, j], d[3](torch.maximum(d[0](ctx.h[b, i]), d[1](ctx.h[b, j])))[0])
        return
    pred = d[0](ctx.h[b, i]) + d[1](ctx.h[b, j])
    if typ is Type.POINTER:
        torch.testing.assert_close(out[b, i, j, k], d[4](torch.maximum(pred, d[3](ctx.h[b, k])))[0])
    else:
        torch.testing.assert_close(out[b, i, j], pred if typ is Type.CATEGORICAL else pred[0])


def test_inf_bias_puts_non_edges_below_edges():
    dec = decoder(Location.NODE, Type.POINTER, inf_bias=True)
    ctx = make_ctx()
    out = dec(ctx, train=False, generator=None)
    for b in range(B):
        assert out[b][~ctx.adj[b]].max() < out[b][ctx.adj[b]].min()


@pytest.mark.parametrize("edge_dim", [0, 3])
def test_pointer_logits_match_autograd_of_the_formula(edge_dim):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64, requires_grad=True)  # noqa: E731
    p1, p2, raw, w_enc, b_enc = r(B, N, H), r(B, N, H), r(B, N, N, F_RAW), r(F_RAW, H), r(H)
    state = r(B, N, N, edge_dim) if edge_dim else None
    w3, out = torch.nn.Linear(H + edge_dim, H).double(), torch.nn.Linear(H, 1).double()

    def fused(p1, p2, raw, w_enc, b_enc, *st):
        return pointer_logits(p1, p2, EdgeInput(raw, w_enc, b_enc), w3, out, st)

    def reference(p1, p2, raw, w_enc, b_enc, *st):
        e = raw @ w_enc + b_enc
        if st:
            e = torch.cat([e, st[0]], -1)
        q = p2[:, None] + w3(e).transpose(1, 2)  # [i, j] = W2 h_j + W3 e_ji
        return out(torch.maximum(p1[:, :, None], q)).squeeze(-1)

    args = (p1, p2, raw, w_enc, b_enc) + ((state,) if edge_dim else ())
    torch.testing.assert_close(fused(*args), reference(*args))
    torch.autograd.gradcheck(fused, args)
    params = list(w3.parameters()) + list(out.parameters())
    gf = torch.autograd.grad(fused(*args).pow(2).sum(), params)
    gr = torch.autograd.grad(reference(*args).pow(2).sum(), params)
    for a, b in zip(gf, gr):
        torch.testing.assert_close(a, b)


def test_sinkhorn_is_doubly_stochastic_and_decodes_to_a_permutation():
    g = torch.Generator().manual_seed(0)
    n = 6
    perm = torch.stack([torch.randperm(n, generator=g) for _ in range(4)])
    target = perm.roll(1, -1)  # a derangement of each permutation: no fixed point
    logits = torch.randn(4, n, n, generator=g)
    logits.scatter_(-1, perm[..., None], 0)
    logits[torch.arange(4)[:, None], perm, target] += 3.0  # a clear optimum
    mask = torch.ones(4, n, dtype=torch.bool)
    p = torch.exp(log_sinkhorn(logits, 10, 0.1, mask))
    torch.testing.assert_close(p.sum(-1), torch.ones(4, n), atol=1e-3, rtol=0)
    torch.testing.assert_close(p.sum(-2), torch.ones(4, n), atol=1e-3, rtol=0)
    assert p.diagonal(dim1=-2, dim2=-1).max() < 1e-6  # diagonal masked
    hard = harden(Feature("p", Stage.OUTPUT, Location.NODE, Type.PERMUTATION_POINTER),
                  log_sinkhorn(logits, 10, 0.1, mask), mask)
    assert all(sorted(row.tolist()) == list(range(n)) for row in hard)
    expected = torch.empty_like(perm)
    expected.scatter_(-1, perm, target)
    assert torch.equal(hard, expected)
    # with padding: the real block is what the real nodes alone give, padded nodes point to themselves
    mask[:, 4:] = False
    p = torch.exp(log_sinkhorn(logits, 10, 0.1, mask))
    alone = torch.exp(log_sinkhorn(logits[:, :4, :4], 10, 0.1, mask[:, :4]))
    torch.testing.assert_close(p[:, :4, :4], alone)
    torch.testing.assert_close(p[:, 4:, 4:], torch.eye(2).expand(4, 2, 2), atol=1e-6, rtol=0)
    assert p[:, :4, 4:].max() < 1e-6 and p[:, 4:, :4].max() < 1e-6


def test_permutation_decoder_uses_gumbel_noise_only_in_training():
    dec = decoder(Location.NODE, Type.PERMUTATION_POINTER)
    ctx = make_ctx()
    a = dec(ctx, train=False, generator=None)
    torch.testing.assert_close(a, dec(ctx, train=False, generator=None))
    t1 = dec(ctx, train=True, generator=torch.Generator().manual_seed(1))
    t2 = dec(ctx, train=True, generator=torch.Generator().manual_seed(1))
    t3 = dec(ctx, train=True, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(t1, t2)
    assert not torch.allclose(t1, t3)
    # 10 iterations (the reference's) end with the column normalization; rows converge more slowly
    torch.testing.assert_close(a.exp().sum(-2), torch.ones(B, N, dtype=a.dtype))


def test_feedback_and_harden_conventions():
    mask = torch.ones(1, 3, dtype=torch.bool)
    f = lambda t, loc=Location.NODE: Feature("x", Stage.HINT, loc, t, 3 if t is Type.CATEGORICAL else 0)  # noqa: E731
    logits = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    assert torch.equal(feedback(f(Type.MASK), logits, True, mask), torch.tensor([[1.0, 0.0, 1.0]]))
    torch.testing.assert_close(feedback(f(Type.MASK), logits, False, mask), torch.sigmoid(logits))
    torch.testing.assert_close(feedback(f(Type.MASK_ONE), logits, False, mask), torch.softmax(logits, -1))
    assert torch.equal(feedback(f(Type.MASK_ONE), logits, True, mask), torch.tensor([[0.0, 0.0, 1.0]]))
    assert feedback(f(Type.SCALAR), logits, False, mask).requires_grad
    assert not feedback(f(Type.SCALAR), logits, True, mask).requires_grad
    kept = feedback(f(Type.SCALAR), logits, True, mask, scalar_grad=True)  # CLRS v1 / the RT authors' fork
    assert kept.requires_grad and torch.equal(kept, logits)
    assert not feedback(f(Type.MASK), logits, True, mask, scalar_grad=True).requires_grad
    ptr = torch.tensor([[[0.0, 3.0, 1.0], [2.0, 0.0, 0.0], [0.0, 0.0, 5.0]]])
    torch.testing.assert_close(feedback(f(Type.POINTER), ptr, False, mask), torch.softmax(ptr, -1))
    assert torch.equal(harden(f(Type.POINTER), ptr, mask), torch.tensor([[1, 0, 2]]))
    assert torch.equal(harden(f(Type.MASK), logits, mask), torch.tensor([[1.0, 0.0, 1.0]]))
    assert torch.equal(harden(f(Type.CATEGORICAL), ptr, mask), torch.eye(3)[[1, 0, 2]][None])
    # fuse: the node marked first points to itself
    assert torch.equal(fuse_permutation(torch.tensor([2, 0, 1]), torch.tensor([0.0, 1.0, 0.0])), torch.tensor([2, 1, 1]))


def test_masked_logits_are_finite_and_lowest():
    dec = decoder(Location.NODE, Type.MASK_ONE)
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[:, -2:] = False
    out = dec(make_ctx(mask=mask), train=False, generator=None)
    assert torch.isfinite(out).all() and (out[:, -2:] == NEG).all()


def test_edge_pointer_logits_in_slabs_without_autograd(monkeypatch):
    import relreason.models.decoders as decoders

    g = torch.Generator().manual_seed(5)
    pred, target = torch.randn(B, N, N, H, generator=g), torch.randn(B, N, H, generator=g)
    out = torch.nn.Linear(H, 1)
    full = decoders.edge_pointer_logits(pred, target, out)
    torch.testing.assert_close(full, out(torch.maximum(pred[:, :, :, None], target[:, None, None])).squeeze(-1))
    monkeypatch.setattr(decoders, "EDGE_POINTER_CHUNK", 2 * B * N * N * H)  # two rows i per slab
    with torch.no_grad():
        torch.testing.assert_close(decoders.edge_pointer_logits(pred, target, out), full)
