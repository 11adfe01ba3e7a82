"""A standard transformer over the nodes: the Relational Transformer with edge vectors and edge
features removed (the RT paper's "no edges" ablation, Diao & Loynd 2023).

Same widths, input projection, post-LN node block and global-vector options as `rt`; attention is
ordinary multi-head self-attention over the real nodes. No edge features are read anywhere
(`decoder_inputs.edge_features` False): nothing is encoded into edges (edge inputs and hints, and node
pointers, which CLRS encodes as edges, reach the model only as prediction targets), and the decoders
read node pairs only: node pointers w . max(W1 h_i, W2 h_j), edge features d0(h_i) + d1(h_j). In
`core` mode the graph decoders read the core state as the RT's do.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from relreason.models.decoders import DecoderInputs
from relreason.models.encoders import linear
from relreason.models.processors.base import Processor, State, check_config, register_processor
from relreason.models.processors.rt import (GlobalVector, InputProjection, NodeBlock, parse_global_vector)


@dataclass
class TransformerConfig:
    """Set-transformer options; defaults are the RT's, so the ablation changes only the edges."""

    heads: int = 12  # as RT (tuned): node width D = 12 x 16 = 192
    head_dim: int = 16  # as RT (tuned)
    node_hidden: int = 32  # d_nh, as RT (tuned)
    layers: int = 3  # untied layers per algorithm step, as RT (tuned)
    global_vector: GlobalVector = GlobalVector.CAT  # as RT (authors' run.py default)

    def __post_init__(self) -> None:
        check_config(self, dict.fromkeys(("heads", "head_dim", "node_hidden", "layers"), 1))
        self.global_vector = parse_global_vector(self.global_vector)


class TransformerLayer(nn.Module):
    """Multi-head self-attention over nodes (padded keys masked), then the RT's node block."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.heads, self.head_dim = cfg.heads, cfg.head_dim
        d = cfg.heads * cfg.head_dim
        self.qkv = linear(d, 3 * d, bias=False)  # Wq | Wk | Wv
        # biases of Wq and Wv; Wk's is left out: q_i . b_k is constant over j and cancels in the
        # softmax, so it would never get a gradient
        self.qv_bias = nn.Parameter(torch.zeros(2 * d))
        self.node_block = NodeBlock(d, cfg.node_hidden)

    def forward(self, n: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """n (B, N, D), key_mask (B, 1, 1, N) bool (False: padded key)."""
        b, nn_, d = n.shape
        bq, bv = self.qv_bias.split(d)
        q, k, v = self.qkv(n).split(d, dim=-1)  # 3 x (B, N, D)
        # (B, h, N, F) each
        q, k, v = (x.view(b, nn_, self.heads, self.head_dim).transpose(1, 2) for x in (q + bq, k, v + bv))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask)  # (B, h, N, F), scale 1/sqrt(F)
        return self.node_block(n, out.transpose(1, 2).reshape(b, nn_, d))


@register_processor("transformer", TransformerConfig,
                    "Transformer over nodes: RT without edge vectors, the RT paper's ablation",
                    paper="Diao & Loynd 2023", recipes={"clrs": "transformer"},
                    model_defaults={"hidden": 192})  # as the RT: hidden_size = nb_heads x head_size
class Transformer(Processor):
    factored_edges = True  # edge_in (width-0 columns) is never read: the net need not build the dense tensor

    def __init__(self, cfg: TransformerConfig, hidden: int):
        super().__init__(cfg, hidden)
        self.global_vector = parse_global_vector(cfg.global_vector)
        self.node_dim = d = cfg.heads * cfg.head_dim
        cat = self.global_vector is GlobalVector.CAT
        self.decoder_inputs = DecoderInputs(edge_features=False, graph_history=not cat)
        self.node_in = InputProjection(hidden, d, hidden if cat else 0, d)
        if not cat:
            self.graph_in = linear(hidden + d, d)  # [graph_in, previous core state] -> core node
        self.layers = nn.ModuleList(TransformerLayer(cfg) for _ in range(cfg.layers))

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        # edge_in and adj are not used: this is the processor without edges
        cat = self.global_vector is GlobalVector.CAT
        n = self.node_in(node_in, state.node, graph_in if cat else None)  # (B, N, D)
        if not cat:
            core = self.graph_in(torch.cat([graph_in, state.graph], dim=-1))  # (B, D)
            n = torch.cat([core[:, None, :], n], dim=1)  # (B, N+1, D)
            node_mask = F.pad(node_mask, (1, 0), value=True)
        key_mask = node_mask[:, None, None, :]  # (B, 1, 1, N)
        for layer in self.layers:
            n = layer(n, key_mask)
        if not cat:
            return State(n[:, 1:], None, n[:, 0])
        return State(n)
