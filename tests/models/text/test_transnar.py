"""TransNAR: one layer equals a hand-written Eq. 3 (the paper's cross-attention block after the text
layer), closed gates are exactly the text model, padded nodes never matter, gradients reach the gates
and the cross-attention, the N^2 edge stream stays within its memory bound, decoding is cached."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from relreason.errors import RelreasonError
from relreason.models.text.tokenizer import CharTokenizer
from relreason.models.text.transformer import TextTransformer, TextTransformerConfig, random_positions, rope_tables
from relreason.models.text.transnar import CrossAttention, TransNAR, TransNARConfig

TOK = CharTokenizer.default()
TEXT = dict(layers=3, width=32, heads=4, context=128, max_position=512)
VARIANTS = {"default": {}, "nodes_only": {"nodes_only": True}, "every_2nd": {"cross_every": 2},
            "no_ffn": {"cross_ffn": False}, "own_width": {"cross_heads": 2, "cross_head_dim": 6}}


def build(**nar) -> tuple[TextTransformer, TransNAR]:
    """A text model and a TransNAR built from it (same shared weights)."""
    torch.manual_seed(0)
    text = TextTransformer(TextTransformerConfig(**TEXT)).eval()
    cfg = TransNARConfig(node_dim=12, edge_dim=10, **nar)
    return text, TransNAR.from_text_model(text, cfg).eval()


def nar_inputs(b: int = 2, n: int = 5, seed: int = 1, real: tuple[int, ...] = (3, 5)):
    g = torch.Generator().manual_seed(seed)
    node_mask = torch.arange(n)[None, :] < torch.tensor(real)[:, None]  # (B, N)
    return {"nodes": torch.randn(b, n, 12, generator=g), "edges": torch.randn(b, n, n, 10, generator=g),
            "node_mask": node_mask}


def text_batch():
    batch = TOK.batch_examples([("q: [1 2 3]\n", "6\n\n"), ("a longer question: [4 5]\n", "[5 4]\n\n")])
    pos = random_positions(batch.pad_mask, 512, torch.Generator().manual_seed(0))
    return batch, pos


def open_gates(model: TransNAR, value: float = 0.7) -> None:
    with torch.no_grad():
        for x in model.cross.values():
            for gate in x.gates().values():
                gate.fill_(value)


def layer_norm(x: torch.Tensor, norm) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def attend(z: torch.Tensor, attention, source: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """softmax((z Q×)(G K×)^T / sqrt(d_k)) G V× head by head and example by example, over the real keys
    only; z (B, T, D) queries, source (B, S, Ds) keys/values, real (B, S). Returns (B, T, heads x hd)."""
    h, hd = attention.heads, attention.head_dim
    w_k, w_v = attention.kv.weight[:h * hd], attention.kv.weight[h * hd:]  # keys first, then values
    rows = []
    for b in range(z.shape[0]):
        heads = []
        for i in range(h):
            cut = slice(i * hd, (i + 1) * hd)
            q, k, v = z[b] @ attention.q.weight[cut].T, source[b] @ w_k[cut].T, source[b] @ w_v[cut].T
            scores = (q @ k.T / math.sqrt(hd)).masked_fill(~real[b], float("-inf"))  # (T, S)
            heads.append(torch.softmax(scores, dim=-1) @ v)  # (T, hd)
        rows.append(torch.cat(heads, dim=-1))
    return torch.stack(rows)


def eq3_by_hand(block, theta: torch.Tensor, nodes, edges, node_mask) -> torch.Tensor:
    """Bounsi et al. 2024, Eq. 3 on the text layer's output Θ, written out: cross-attention to the nodes
    and (the same again) to the N^2 flattened edges, the two concatenated and put through a linear
    layer, added to Θ through tanh of the attention gate; then the feed-forward network, added through
    tanh of its own gate."""
    z = layer_norm(theta, block.norm_attn)
    parts = [attend(z, block.nodes, nodes, node_mask)]
    if block.edges is not None:
        b, n = node_mask.shape
        pairs = (node_mask[:, :, None] & node_mask[:, None, :]).reshape(b, n * n)
        parts.append(attend(z, block.edges, edges.reshape(b, n * n, -1), pairs))
    x = theta + torch.tanh(block.gate_attn) * (torch.cat(parts, dim=-1) @ block.out.weight.T)
    if block.ffn is None:
        return x
    hidden = layer_norm(x, block.norm_ffn) @ block.ffn.fc.weight.T
    gelu = 0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2)))
    return x + torch.tanh(block.gate_ffn) * (gelu @ block.ffn.proj.weight.T)


@pytest.mark.parametrize("variant", ["default", "nodes_only", "no_ffn"])
def test_one_layer_is_the_text_layer_then_eq3_written_by_hand(variant):
    torch.manual_seed(0)
    cfg = TextTransformerConfig(**{**TEXT, "layers": 1})
    model = TransNAR(cfg, TransNARConfig(node_dim=12, edge_dim=10, **VARIANTS[variant])).eval()
    (block,) = model.cross.values()
    with torch.no_grad():  # no parameter at its initial value: norms, gates and weights all matter
        for p in block.parameters():
            p.add_(0.3 * torch.randn_like(p))
        block.gate_attn.fill_(0.6)
        if block.ffn is not None:
            block.gate_ffn.fill_(-0.4)
    batch, pos = text_batch()
    inputs = nar_inputs(real=(3, 5))
    with torch.no_grad():
        got = model(batch.tokens, pos, batch.pad_mask, **inputs)
        rope = rope_tables(pos, cfg.head_dim, cfg.rope_base)
        theta = model.blocks[0](model.tok_emb(batch.tokens), rope, None, None)  # Eq. 1: the text layer
        edges = None if block.edges is None else inputs["edges"]
        x = eq3_by_hand(block, theta, inputs["nodes"], edges, inputs["node_mask"])
        want = model.head(model.norm_f(x))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_closed_gates_give_exactly_the_text_models_logits(variant):
    text, model = build(**VARIANTS[variant])
    batch, pos = text_batch()
    with torch.no_grad():
        expected = text(batch.tokens, pos, batch.pad_mask)
        got = model(batch.tokens, pos, batch.pad_mask, **nar_inputs())
    assert torch.equal(got, expected)
    open_gates(model)
    with torch.no_grad():
        assert not torch.allclose(model(batch.tokens, pos, batch.pad_mask, **nar_inputs()), expected)


def test_shared_parameters_keep_the_text_models_names():
    text, model = build()
    text_keys, keys = set(text.state_dict()), set(model.state_dict())
    assert text_keys < keys and all(k.startswith("cross.") for k in keys - text_keys)
    assert sorted(model.cross) == ["0", "1", "2"]  # an Eq. 3 block after every text layer by default
    assert sorted(build(cross_every=2)[1].cross) == ["0", "2"]
    # a TransNAR built with the same seed starts from the same text weights as the text model
    torch.manual_seed(0)
    fresh = TransNAR(TextTransformerConfig(**TEXT), TransNARConfig(node_dim=12, edge_dim=10))
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in text.state_dict().items())
    with pytest.raises(RelreasonError, match="missing"):
        model.load_text_weights({k: v for k, v in text.state_dict().items() if k != "head.weight"})


@pytest.mark.parametrize("variant", ["default", "nodes_only"])
def test_padded_nodes_never_change_a_prediction(variant):
    _, model = build(**VARIANTS[variant])
    open_gates(model)
    batch, pos = text_batch()
    small = nar_inputs(n=5, real=(3, 5))
    with torch.no_grad():
        expected = model(batch.tokens, pos, batch.pad_mask, **small)
        # the same real nodes with 4 more padded ones carrying garbage embeddings
        big = nar_inputs(n=9, seed=7, real=(3, 5))
        big["nodes"][:, :5] = small["nodes"]
        big["edges"][:, :5, :5] = small["edges"]
        got = model(batch.tokens, pos, batch.pad_mask, **big)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_an_example_without_real_nodes_reads_nothing_and_makes_no_nan():
    text, model = build(cross_ffn=False)  # the cross-attention alone: nothing but the NAR is added to the text model
    open_gates(model)
    batch, pos = text_batch()
    inputs = nar_inputs(real=(0, 5))
    with torch.no_grad():
        got = model(batch.tokens, pos, batch.pad_mask, **inputs)
        expected = text(batch.tokens, pos, batch.pad_mask)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-6)  # zero contribution from the NAR
    assert not torch.allclose(got[1], expected[1])
    _, model = build()  # with Eq. 3's feed-forward network: row 0 still ignores whatever its padded nodes hold
    open_gates(model)
    other = {**inputs, "nodes": inputs["nodes"] + 5.0, "edges": -inputs["edges"]}
    with torch.no_grad():
        got = model(batch.tokens, pos, batch.pad_mask, **inputs)
        moved = model(batch.tokens, pos, batch.pad_mask, **other)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(moved[0], got[0], rtol=0, atol=1e-6)
    assert not torch.allclose(moved[1], got[1])
    loss = model.loss(batch.tokens, pos, batch.target_mask, batch.pad_mask, **inputs)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_gradients_reach_the_gates_and_then_the_cross_attention():
    _, model = build()
    batch, pos = text_batch()

    def grads() -> dict[str, torch.Tensor]:
        model.zero_grad()
        model.loss(batch.tokens, pos, batch.target_mask, batch.pad_mask, **nar_inputs()).backward()
        return {n: p.grad for n, p in model.named_parameters() if n.startswith("cross.")}

    closed = grads()
    for name, grad in closed.items():
        if name.endswith((".gate_attn", ".gate_ffn")):
            assert grad.abs() > 0  # a closed gate still learns whether to open
        else:
            assert grad is None or torch.count_nonzero(grad) == 0  # tanh(0) = 0 blocks the rest
    open_gates(model, 0.5)
    for name, grad in grads().items():
        assert grad is not None and torch.count_nonzero(grad) > 0, name


@pytest.mark.parametrize("variant", ["default", "nodes_only"])
def test_cached_and_uncached_decoding_agree_and_cross_keys_are_computed_once(variant, monkeypatch):
    _, model = build(**VARIANTS[variant])
    open_gates(model)
    prompts, mask = TOK.batch_prompts(["sort: 3 1 2\n", "q\n"])
    inputs = nar_inputs()
    calls = []
    original = CrossAttention.keys_values
    monkeypatch.setattr(CrossAttention, "keys_values", lambda self, src: calls.append(1) or original(self, src))
    cached = model.generate(prompts, mask, 10, **inputs, generator=torch.Generator().manual_seed(3))
    streams = 1 if variant == "nodes_only" else 2
    assert len(calls) == streams * len(model.cross)  # once per prompt batch, not once per token
    uncached = model.generate(prompts, mask, 10, **inputs, generator=torch.Generator().manual_seed(3),
                              use_cache=False)
    assert torch.equal(cached, uncached)


class LargestTensor(TorchDispatchMode):
    """Records the largest tensor any operator returns (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.numel, self.op = 0, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > self.numel:
                self.numel, self.op = t.numel(), func
        return out


def test_edge_cross_attention_builds_nothing_beyond_batch_tokens_pairs_per_head():
    torch.manual_seed(0)
    b, t, n, heads, head_dim = 2, 40, 24, 2, 8
    text_cfg = TextTransformerConfig(layers=1, width=heads * head_dim, heads=heads, context=64, max_position=64)
    model = TransNAR(text_cfg, TransNARConfig(node_dim=8, edge_dim=16))
    open_gates(model)
    tokens = torch.randint(3, 99, (b, t))
    pos = torch.arange(t).expand(b, t)
    node_mask = torch.ones(b, n, dtype=torch.bool)
    node_mask[0, -3:] = False
    inputs = {"nodes": torch.randn(b, n, 8), "edges": torch.randn(b, n, n, 16), "node_mask": node_mask}
    target = torch.ones(b, t, dtype=torch.bool)
    with LargestTensor() as probe:
        model.loss(tokens, pos, target, None, **inputs).backward()
    bound = b * heads * t * n * n  # [B, tokens, N^2] per head: the attention weights, at most
    naive = b * t * n * n * heads * head_dim  # e.g. tokens broadcast against pairs at full width
    assert probe.numel <= bound < naive, (probe.numel, probe.op)


def test_inputs_are_checked():
    _, model = build()
    batch, pos = text_batch()
    inputs = nar_inputs()
    with pytest.raises(RelreasonError, match="edge embeddings"):
        model(batch.tokens, pos, batch.pad_mask, inputs["nodes"], None, inputs["node_mask"])
    with pytest.raises(RelreasonError, match="node_dim"):
        model(batch.tokens, pos, batch.pad_mask, inputs["nodes"][..., :8], inputs["edges"], inputs["node_mask"])
    _, nodes_only = build(nodes_only=True)
    assert not any(".edges." in k for k in nodes_only.state_dict())
    nodes_only(batch.tokens, pos, batch.pad_mask, inputs["nodes"], None, inputs["node_mask"])
    with pytest.raises(RelreasonError, match="cross_every"):
        TransNARConfig(cross_every=0)
