"""TransNAR (Bounsi et al. 2024, "Transformers meet Neural Algorithmic Reasoners", Section 3, Eq. 1-3 and
Figure 3): the text transformer with a gated cross-attention block after each layer that reads a frozen
NAR's node and edge embeddings.

    text = TextTransformer(text_cfg)                      # e.g. trained on CLRS-Text first
    model = TransNAR.from_text_model(text, TransNARConfig(node_dim=128, edge_dim=128))
    with torch.no_grad():
        nodes, edges = frozen_nar(graph_view_of_the_same_examples)   # (B, N, Dn), (B, N, N, De)
    loss = model.loss(tokens, positions, target_mask, pad_mask, nodes, edges, node_mask)
    out = model.generate(prompts, prompt_mask, 200, nodes, edges, node_mask, generator=gen)

The NAR is not part of this module: its node and edge embeddings are inputs (the caller runs the
frozen NAR under no_grad on the graph version of the same problem).

What the paper says (arXiv 2406.09308v1: Section 3, and Section 4 on combining nodes and edges).
Layer t first runs the Transformer's own layer on the tokens, Eq. 1: Θ = FFN(softmax(T Q (T K)^T /
sqrt(d_k)) T V), self-attention and the layer's feed-forward network. Then Eq. 3: the tokens
cross-attend to the NAR's embeddings G (queries from Θ, keys and values from G, through the
cross-attention's own Q×, K×, V×) and a feed-forward network follows, T' = FFN(softmax(Θ Q× (G K×)^T /
sqrt(d_k)) G V×); G itself is not transformed within the layer, and every layer reads the NAR's final
embeddings. The edges are read by the same Eq. 3 over the N x N edge embeddings flattened to N^2 keys,
and the two contributions are joined by concatenation and a linear layer. Figure 3 calls these
Flamingo-like gated cross-attention layers, interleaved with the Transformer's, whose gate is closed
at the start so that training begins from the language model. So block l (l = 0, k, 2k, ...;
k = `cross_every`, 1 in the paper) comes after text block l (pre-LN self-attention and MLP, unchanged):

    z = LN_a(x)                                                    (B, T, D)
    a_nodes = MHA(q = z Wq, k/v = nodes Wk/Wv, real nodes only)    (B, T, h x hd)
    a_edges = MHA(q = z Wq', k/v = edges Wk'/Wv' over the N x N pairs (i, j), both real)
    x = x + tanh(alpha_l) * W_o [a_nodes ; a_edges]                concatenation + linear layer
    x = x + tanh(beta_l) * FFN(LN_f(x))                            Eq. 3's feed-forward network

alpha_l and beta_l are scalars initialised at 0. The equations omit residual connections, LayerNorms
and where the gate acts: the residuals and pre-LayerNorms here are those of the text blocks (Eq. 1
stands for such a block too), and the two tanh gates, one per sublayer, are those of Flamingo's
gated cross-attention-dense block (the paper names one closed gate without saying what it covers;
closing both is what keeps the text model intact at the start). The paper does not say whether each
stream has its own feed-forward network before the concatenation; here the concatenated, projected
contribution goes through one. `cross_ffn: false` drops the feed-forward sublayer (attention alone).

With every gate at 0 the model computes exactly the text transformer (same parameter names for the
shared parts: `tok_emb`, `blocks`, `norm_f`, `head`; the new ones live under `cross.<layer>`), so a
text checkpoint loads into it with `load_text_weights`. `nodes_only` drops the edge stream (the
`transnar-nodes-only` ablation).

Padded nodes (node_mask False) are hidden from both cross-attentions (a pair is real only if both
its nodes are), so they never change a token's prediction; an example with no real node at all
gets a zero contribution instead of an empty softmax. The edge stream goes through
`scaled_dot_product_attention` with a (B, 1, 1, N^2) key mask: its keys/values are (B, h, N^2, hd)
and no tensor beyond the (B, h, T, N^2) attention weights is ever built (the CPU flash kernel
does not even build those). In decoding, the cross keys/values are computed once per prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.processors.base import check_config
from relreason.models.text.transformer import MLP, KVCache, TextTransformer, TextTransformerConfig


@dataclass
class TransNARConfig:
    """Cross-attention options; the text part is a TextTransformerConfig."""

    node_dim: int = 128  # Dn: the NAR's node embedding width (CLRS / Triplet-GMPNN hidden size 128)
    edge_dim: int = 128  # De: the NAR's edge embedding width (same hidden size)
    nodes_only: bool = False  # cross-attend to node embeddings only (on in the transnar-nodes-only ablation)
    cross_every: int = 1  # an Eq. 3 block after text layers 0, k, 2k, ...; the paper has one after every layer
    cross_heads: int | None = None  # None: the text model's heads
    cross_head_dim: int | None = None  # None: the text model's head width
    cross_ffn: bool = True  # Eq. 3's feed-forward network after the cross-attention (false: the attention alone)

    def __post_init__(self) -> None:
        check_config(self, {"node_dim": 1, "edge_dim": 1, "cross_every": 1})
        for name in ("cross_heads", "cross_head_dim"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise RelreasonError(f"processor.{name} must be >= 1 or null, got {value}",
                                     "null uses the text model's value")


@dataclass
class SourceMasks:
    """Which keys each example may attend to, for one source (nodes, or node pairs)."""

    keys: torch.Tensor  # (B, 1, 1, S) bool; rows with no real key are all True (their output is zeroed)
    any_key: torch.Tensor  # (B, 1, 1, 1) float: 0 for an example with no real key, else 1


def source_masks(key_mask: torch.Tensor) -> SourceMasks:
    any_key = key_mask.any(1)  # (B,)
    keys = key_mask | ~any_key[:, None]  # an empty row would make the softmax NaN
    return SourceMasks(keys[:, None, None, :], any_key.to(torch.float32)[:, None, None, None])


class CrossAttention(nn.Module):
    """Multi-head attention from tokens (queries) to one source of NAR embeddings (keys, values)."""

    def __init__(self, width: int, source_dim: int, heads: int, head_dim: int):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.q = nn.Linear(width, heads * head_dim, bias=False)
        self.kv = nn.Linear(source_dim, 2 * heads * head_dim, bias=False)

    def keys_values(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """source (B, S, Ds) -> k, v each (B, h, S, hd)."""
        b, s, _ = source.shape
        k, v = self.kv(source).view(b, s, 2, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return k, v

    def forward(self, z: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], masks: SourceMasks) -> torch.Tensor:
        b, t, _ = z.shape
        q = self.q(z).view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, h, T, hd)
        y = F.scaled_dot_product_attention(q, *kv, attn_mask=masks.keys)  # (B, h, T, hd)
        y = y * masks.any_key.to(y.dtype)
        return y.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)


class GatedCrossAttention(nn.Module):
    """The paper's Eq. 3 after a text layer (module docstring): a gated cross-attention to the nodes and
    edges, their contributions concatenated and projected, then a gated feed-forward network; both
    gates start closed."""

    def __init__(self, width: int, cfg: TransNARConfig, heads: int, head_dim: int, mlp_ratio: int):
        super().__init__()
        self.norm_attn = nn.LayerNorm(width)
        self.nodes = CrossAttention(width, cfg.node_dim, heads, head_dim)
        self.edges = None if cfg.nodes_only else CrossAttention(width, cfg.edge_dim, heads, head_dim)
        streams = 1 if cfg.nodes_only else 2
        self.out = nn.Linear(streams * heads * head_dim, width, bias=False)  # [nodes ; edges] -> D (paper, Section 4)
        self.gate_attn = nn.Parameter(torch.zeros(()))  # tanh(0) = 0: training starts from the text model
        if cfg.cross_ffn:
            self.norm_ffn = nn.LayerNorm(width)
            self.ffn = MLP(width, mlp_ratio)  # the text blocks' feed-forward shape (4 D GELU)
            self.gate_ffn = nn.Parameter(torch.zeros(()))
        else:
            self.ffn = None

    def keys_values(self, nodes: torch.Tensor, pairs: torch.Tensor | None) -> dict[str, tuple]:
        kv = {"nodes": self.nodes.keys_values(nodes)}
        if self.edges is not None:
            kv["edges"] = self.edges.keys_values(pairs)
        return kv

    def forward(self, x: torch.Tensor, kv: dict[str, tuple], masks: dict[str, SourceMasks]) -> torch.Tensor:
        z = self.norm_attn(x)  # (B, T, D): the text layer's output (the paper's Θ), normalized
        parts = [self.nodes(z, kv["nodes"], masks["nodes"])]
        if self.edges is not None:
            parts.append(self.edges(z, kv["edges"], masks["edges"]))
        x = x + torch.tanh(self.gate_attn) * self.out(torch.cat(parts, dim=-1))
        if self.ffn is not None:
            x = x + torch.tanh(self.gate_ffn) * self.ffn(self.norm_ffn(x))
        return x

    def gates(self) -> dict[str, torch.Tensor]:
        """The block's gate parameters by sublayer (tanh of each is the fraction let through)."""
        return {"attn": self.gate_attn} if self.ffn is None else {"attn": self.gate_attn, "ffn": self.gate_ffn}


@dataclass
class CrossContext:
    """The NAR side, computed once per batch / prompt: per-layer keys/values and the key masks."""

    kv: dict[str, dict[str, tuple]]  # layer -> source -> (k, v), each (B, h, S, hd)
    masks: dict[str, SourceMasks]  # source -> masks


class TransNAR(TextTransformer):
    """The text transformer, each layer (every `cross_every`-th) followed by the paper's Eq. 3 block."""

    def __init__(self, text_cfg: TextTransformerConfig, cfg: TransNARConfig):
        super().__init__(text_cfg)
        self.nar_cfg = cfg
        heads = cfg.cross_heads if cfg.cross_heads is not None else text_cfg.heads
        head_dim = cfg.cross_head_dim if cfg.cross_head_dim is not None else text_cfg.head_dim
        self.cross = nn.ModuleDict({str(layer): GatedCrossAttention(text_cfg.width, cfg, heads, head_dim,
                                                                    text_cfg.mlp_ratio)
                                    for layer in range(0, text_cfg.layers, cfg.cross_every)})
        for module in self.cross.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)

    @classmethod
    def from_text_model(cls, text: TextTransformer, cfg: TransNARConfig) -> "TransNAR":
        """A TransNAR whose shared parts are copies of `text`'s weights (gates closed: same outputs)."""
        model = cls(text.cfg, cfg)
        model.load_text_weights(text.state_dict())
        return model

    def load_text_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Loads a TextTransformer state dict into the shared parts; cross-attention stays as it is.

        Raises:
            RelreasonError: the state dict lacks a text parameter or has one this model does not know.
        """
        text_keys = {k for k in self.state_dict() if not k.startswith("cross.")}
        missing, unexpected = sorted(text_keys - set(state_dict)), sorted(set(state_dict) - text_keys)
        if missing or unexpected:
            raise RelreasonError(f"not a text transformer of this shape: missing {missing[:5]}, unexpected "
                                 f"{unexpected[:5]}", "load a checkpoint of the same TextTransformerConfig")
        self.load_state_dict(state_dict, strict=False)

    # --- the NAR side ---------------------------------------------------------------------------

    def _prepare_context(self, nodes: torch.Tensor, edges: torch.Tensor | None = None,
                         node_mask: torch.Tensor | None = None) -> CrossContext:
        """Per-layer cross keys/values from nodes (B, N, Dn), edges (B, N, N, De), node_mask (B, N)."""
        cfg = self.nar_cfg
        b, n, dn = nodes.shape
        if dn != cfg.node_dim:
            raise RelreasonError(f"node embeddings have width {dn}, TransNAR expects node_dim={cfg.node_dim}",
                                 "set processor.node_dim to the NAR's hidden size")
        if node_mask is None:
            node_mask = torch.ones(b, n, dtype=torch.bool, device=nodes.device)
        masks = {"nodes": source_masks(node_mask)}
        pairs = None
        if not cfg.nodes_only:  # with nodes_only, `edges` is not read
            if edges is None:
                raise RelreasonError("this TransNAR cross-attends to edge embeddings but none were given",
                                     "pass the NAR's (B, N, N, De) edge embeddings, or build it with nodes_only")
            if edges.shape[:3] != (b, n, n) or edges.shape[3] != cfg.edge_dim:
                raise RelreasonError(f"edge embeddings have shape {tuple(edges.shape)}, expected "
                                     f"({b}, {n}, {n}, {cfg.edge_dim})", "set processor.edge_dim to the NAR's width")
            pairs = edges.reshape(b, n * n, cfg.edge_dim)  # (B, N^2, De), pair (i, j) at i * N + j
            masks["edges"] = source_masks((node_mask[:, :, None] & node_mask[:, None, :]).reshape(b, n * n))
        kv = {layer: xattn.keys_values(nodes, pairs) for layer, xattn in self.cross.items()}
        return CrossContext(kv, masks)

    def _hidden(self, x: torch.Tensor, rope, mask: torch.Tensor | None, cache: KVCache | None,
                context: CrossContext) -> torch.Tensor:
        for i, block in enumerate(self.blocks):
            x = block(x, rope, mask, cache)  # Eq. 1: the text layer, self-attention then its MLP
            key = str(i)
            if key in self.cross:  # Eq. 3: cross-attention to the NAR, then a feed-forward network
                x = self.cross[key](x, context.kv[key], context.masks)
        return self.norm_f(x)

    # --- public API: the text model's, plus the NAR embeddings ------------------------------------

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, pad_mask: torch.Tensor | None,
                nodes: torch.Tensor, edges: torch.Tensor | None = None, node_mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        """Logits (B, L, V); nodes (B, N, Dn), edges (B, N, N, De) or None (nodes_only), node_mask (B, N)."""
        return super().forward(tokens, positions, pad_mask, nodes=nodes, edges=edges, node_mask=node_mask)

    def loss(self, tokens: torch.Tensor, positions: torch.Tensor, target_mask: torch.Tensor,
             pad_mask: torch.Tensor | None, nodes: torch.Tensor, edges: torch.Tensor | None = None,
             node_mask: torch.Tensor | None = None) -> torch.Tensor:
        return super().loss(tokens, positions, target_mask, pad_mask, nodes=nodes, edges=edges, node_mask=node_mask)

    @torch.no_grad()
    def generate(self, prompts: torch.Tensor, prompt_mask: torch.Tensor | None, max_new_tokens: int,
                 nodes: torch.Tensor, edges: torch.Tensor | None = None, node_mask: torch.Tensor | None = None,
                 generator: torch.Generator | None = None, use_cache: bool = True) -> torch.Tensor:
        """As TextTransformer.generate; the cross keys/values are computed once for the whole decode."""
        return super().generate(prompts, prompt_mask, max_new_tokens, generator=generator, use_cache=use_cache,
                                nodes=nodes, edges=edges, node_mask=node_mask)

    def gates(self) -> dict[str, float]:
        """tanh of every gate, as "<layer>.attn" / "<layer>.ffn" (0 = closed): how much of the blocks gets through."""
        return {f"{layer}.{name}": float(torch.tanh(g.detach())) for layer, x in self.cross.items()
                for name, g in x.gates().items()}
