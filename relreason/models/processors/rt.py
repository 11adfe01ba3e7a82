"""The Relational Transformer (Diao & Loynd, ICLR 2023): a transformer whose attention reads and
whose layers update edge vectors, dense over all node pairs.

Per algorithm step the processor projects [node_in, previous node state (, graph_in)] to the node
width D = heads x head_dim and [edge_in, previous edge state (, graph_in)] to the edge width E,
then runs `layers` untied `RelationalLayer`s. Each layer:

    q_ij = n_i Wq_n + e_ij Wq_e,  k_ij = n_j Wk_n + e_ij Wk_e,  v_ij = n_j Wv_n + e_ij Wv_e  (biases)
    a_ij = softmax_j(q_ij . k_ij / sqrt(head_dim)) per head, over the real nodes j (no adjacency)
    n_i  = LN(n_i + W1 sum_j a_ij v_ij);  n_i = LN(n_i + W3 relu(W2 n_i))
    m_ij = relu(W4 [e_ij, e_ji, n_j, n_i]);  u_ij = LN(e_ij + W5 m_ij);  e_ij = LN(u_ij + W7 relu(W6 u_ij))

The edge state is carried to the next step (`carry_edge`). The graph vector is either tiled onto
every node and edge input (`cat`) or becomes an extra "core" node that attends and is attended
(`core`), whose state is the returned graph state.

The decoders read what the authors' decoders read (`decoder_inputs`; authors' `nets.py`
`_one_step_pred`): every edge-reading decoder (edge features, node pointers from edges or from node
pairs) gets [encoded edges, previous edge state, new edge state], and in `core` mode the graph
decoders get [encoded graph features, previous core state, new core state].

Facts from the paper and the authors' code (github CameronDiao/relational-transformer,
`Basic_Transformer_jax.py`, `processors.py`, `run.py`); every formula above is computed exactly, but
not always in the order written: W4 is split by input block, and the value's edge part is applied
after the attention-weighted sum (sum_j a_ij e_ij Wv_e = (sum_j a_ij e_ij) Wv_e), which removes
one (B, N, N, E) x (E, D) projection per layer.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.decoders import DecoderInputs
from relreason.models.encoders import EdgeInput, linear
from relreason.models.processors.base import Processor, State, check_config, masked_fill_value, register_processor
from relreason.models.processors.gnn import edge_linear


class GlobalVector(str, enum.Enum):
    """How the graph vector enters a transformer processor (authors' `graph_vec`)."""

    CAT = "cat"  # concatenated to every node and edge input
    CORE = "core"  # an extra node attending and attended by all nodes


@dataclass
class RTConfig:
    """Relational Transformer options; defaults are the paper's tuned values."""

    heads: int = 12  # tuned (paper; authors' run.py nb_heads=12)
    head_dim: int = 16  # tuned (authors' run.py head_size=16): node width D = 12 x 16 = 192
    edge_dim: int = 192  # d_e = d_n (authors' run.py: "d_n = d_e = d_g in the paper"; one vec_size)
    node_hidden: int = 32  # d_nh, node feed-forward hidden size (tuned; run.py node_hid_size)
    edge_hidden_1: int = 16  # d_eh1, hidden size of W4/W5 (tuned; run.py edge_hid_size_1)
    edge_hidden_2: int = 8  # d_eh2, hidden size of W6/W7 (tuned; run.py edge_hid_size_2)
    layers: int = 3  # untied layers per algorithm step (tuned; run.py num_layers=3)
    edge_updates: bool = True  # run.py --disable_edge_updates False; off in the paper's "without edge updates" ablation
    global_vector: GlobalVector = GlobalVector.CAT  # authors' run.py graph_vec default

    def __post_init__(self) -> None:
        check_config(self, dict.fromkeys(("heads", "head_dim", "edge_dim", "node_hidden", "edge_hidden_1",
                                          "edge_hidden_2", "layers"), 1))
        self.global_vector = parse_global_vector(self.global_vector)


def parse_global_vector(value: GlobalVector | str) -> GlobalVector:
    """A GlobalVector from itself or its YAML string."""
    try:
        return GlobalVector(value)
    except ValueError:
        raise RelreasonError(f"processor.global_vector: unknown value {value!r}",
                             f"use one of: {', '.join(m.value for m in GlobalVector)}") from None


def init_weight(weight: torch.Tensor, fan_in: int) -> torch.Tensor:
    """Haiku's default Linear init (the authors' framework): truncated normal, std 1/sqrt(fan_in)."""
    std = 1.0 / math.sqrt(fan_in)
    with torch.no_grad():
        return nn.init.trunc_normal_(weight, std=std, a=-2 * std, b=2 * std)


class NodeBlock(nn.Module):
    """Post-LN residual blocks after attention: n = LN(n + W1 attn); n = LN(n + W3 relu(W2 n))."""

    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.attn_out = linear(width, width)  # W1
        self.norm1 = nn.LayerNorm(width)
        self.ffn_in = linear(width, hidden)  # W2
        self.ffn_out = linear(hidden, width)  # W3
        self.norm2 = nn.LayerNorm(width)

    def forward(self, n: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        n = self.norm1(n + self.attn_out(attn))
        return self.norm2(n + self.ffn_out(F.relu(self.ffn_in(n))))


class RelationalLayer(nn.Module):
    """One RT layer: relational attention, node update, then (optionally) edge update."""

    def __init__(self, cfg: RTConfig):
        super().__init__()
        d, e = cfg.heads * cfg.head_dim, cfg.edge_dim
        self.heads, self.head_dim = cfg.heads, cfg.head_dim
        self.edge_updates = cfg.edge_updates
        self.eh1 = cfg.edge_hidden_1
        self.node_qkv = linear(d, 3 * d)  # Wq_n | Wk_n | Wv_n, with biases
        # One matmul for everything read from e_ij: Wq_e | Wk_e | W4's e_ij block | W4's e_ji block.
        # (Wv_e is applied after aggregation, see edge_v.)
        msg_width = 2 * self.eh1 if self.edge_updates else 0
        self.edge_proj = nn.Linear(e, 2 * d + msg_width, bias=False)
        init_weight(self.edge_proj.weight[:2 * d], e)
        # Wv_e per head, (heads, E, head_dim): applied to the attention-weighted sum of edges
        self.edge_v = nn.Parameter(init_weight(torch.empty(cfg.heads, e, cfg.head_dim), e))
        # biases of Wq_e | Wk_e | Wv_e, added on the node side: exact, as they do not depend on j (and the
        # attention weights of Wv_e's sum to 1)
        self.edge_bias = nn.Parameter(torch.zeros(3 * d))
        self.node_block = NodeBlock(d, cfg.node_hidden)
        if self.edge_updates:
            w4_fan_in = 2 * e + 2 * d  # W4 reads [e_ij, e_ji, n_j, n_i]
            init_weight(self.edge_proj.weight[2 * d:], w4_fan_in)
            self.msg_nodes = nn.Linear(d, 2 * self.eh1, bias=False)  # W4's n_j | n_i blocks
            init_weight(self.msg_nodes.weight, w4_fan_in)
            self.msg_bias = nn.Parameter(torch.zeros(self.eh1))  # W4's bias
            self.msg_out = linear(self.eh1, e)  # W5
            self.edge_norm1 = nn.LayerNorm(e)
            self.edge_ffn_in = linear(e, cfg.edge_hidden_2)  # W6
            self.edge_ffn_out = linear(cfg.edge_hidden_2, e)  # W7
            self.edge_norm2 = nn.LayerNorm(e)

    def forward(self, n: torch.Tensor, e: torch.Tensor, key_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """n (B, N, D), e (B, N, N, E), key_mask (B, 1, N, 1) bool (False: padded sender)."""
        b, nn_, d = n.shape
        h, f = self.heads, self.head_dim
        nq, nk, nv = self.node_qkv(n).split(d, dim=-1)  # 3 x (B, N, D)
        bq, bk, bv = self.edge_bias.split(d)
        # split (not slicing) so the backward pass concatenates the gradients instead of
        # zero-filling a full-size buffer per slice
        eq, ek, *msgs = self.edge_proj(e).split([d, d] + ([self.eh1] * 2 if self.edge_updates else []), dim=-1)
        q = eq + (nq + bq)[:, :, None, :]  # (B, I, J, D): receiver i
        k = ek + (nk + bk)[:, None, :, :]  # (B, I, J, D): sender j
        logits = (q * k).view(b, nn_, nn_, h, f).sum(-1) / math.sqrt(f)  # (B, I, J, heads)
        del q, k, eq, ek  # four (B, N, N, D) tensors: without autograd (testing at n = 64) free them now
        att = torch.softmax(logits.masked_fill(~key_mask, masked_fill_value(logits)), dim=2)
        out = torch.einsum("bijh,bjhf->bihf", att, nv.view(b, nn_, h, f))  # (B, I, heads, F)
        e_mix = torch.einsum("bijh,bije->bihe", att, e)  # (B, I, heads, E): sum_j a_ij e_ij
        out = out + torch.einsum("bihe,hef->bihf", e_mix, self.edge_v)
        n = self.node_block(n, out.reshape(b, nn_, d) + bv)  # (B, N, D)
        if not self.edge_updates:
            return n, e
        m_fwd, m_rev = msgs  # (B, I, J, eh1) each: W4's e_ij block and its e_ji block applied to e_ij
        m_j, m_i = self.msg_nodes(n).split(self.eh1, dim=-1)  # (B, N, eh1) each
        m = F.relu(m_fwd + m_rev.transpose(1, 2) + m_j[:, None, :, :] + (m_i + self.msg_bias)[:, :, None, :])
        u = self.edge_norm1(e + self.msg_out(m))  # (B, I, J, E)
        return n, self.edge_norm2(u + self.edge_ffn_out(F.relu(self.edge_ffn_in(u))))


class InputProjection(nn.Module):
    """Projects [x, previous state (, graph vector tiled)] to `out` with one Linear (the authors'
    concatenation), applied block by block: the graph block once per graph and broadcast (never
    tiled), the x block through `edge_linear` so factored edge features stay cheap."""

    def __init__(self, x_dim: int, state_dim: int, graph_dim: int, out: int):
        super().__init__()
        self.x_dim, self.state_dim = x_dim, state_dim
        self.proj = linear(x_dim + state_dim + graph_dim, out)

    def forward(self, x: torch.Tensor | EdgeInput, state: torch.Tensor, graph: torch.Tensor | None) -> torch.Tensor:
        w = self.proj.weight
        rest = F.linear(state, w[:, self.x_dim:self.x_dim + self.state_dim])  # (B, N(, N), out)
        if graph is not None:
            g = F.linear(graph, w[:, self.x_dim + self.state_dim:])  # (B, out)
            rest = rest + g.view(g.shape[0], *([1] * (rest.dim() - 2)), g.shape[-1])
        return edge_linear(x, w[:, :self.x_dim], self.proj.bias, add=rest)


@register_processor("rt", RTConfig, "Relational Transformer: attention over nodes and edges",
                    paper="Diao & Loynd 2023", recipes={"clrs": "rt", "lobster": "lobster_rt"},
                    # authors' run.py: hidden_size = nb_heads x head_size, ptr_from_edges=True
                    model_defaults={"hidden": 192, "pointer_decoding": "edge"})
class RelationalTransformer(Processor):
    carry_edge = True  # edge vectors are first-class state, carried between algorithm steps
    factored_edges = True  # edge_in may be an EdgeInput: only a linear map of it is taken

    def __init__(self, cfg: RTConfig, hidden: int):
        super().__init__(cfg, hidden)
        self.global_vector = parse_global_vector(cfg.global_vector)
        self.node_dim = d = cfg.heads * cfg.head_dim
        self.edge_dim = cfg.edge_dim
        cat = self.global_vector is GlobalVector.CAT
        self.decoder_inputs = DecoderInputs(edge_history=True, graph_history=not cat)
        self.node_in = InputProjection(hidden, d, hidden if cat else 0, d)
        self.edge_in = InputProjection(hidden, cfg.edge_dim, hidden if cat else 0, cfg.edge_dim)
        if not cat:
            self.graph_in = linear(hidden + d, d)  # [graph_in, previous core state] -> core node
        self.layers = nn.ModuleList(RelationalLayer(cfg) for _ in range(cfg.layers))

    def project_inputs(self, node_in: torch.Tensor, edge_in: torch.Tensor | EdgeInput, graph_in: torch.Tensor,
                       state: State) -> tuple[torch.Tensor, torch.Tensor]:
        """The per-step input projection: nodes (B, N(+1), D) and edges (B, N(+1), N(+1), E),
        with the core node first (and zero core edges) in `core` mode."""
        cat = self.global_vector is GlobalVector.CAT
        g = graph_in if cat else None
        n = self.node_in(node_in, state.node, g)  # (B, N, D)
        e = self.edge_in(edge_in, state.edge, g)  # (B, N, N, E)
        if not cat:
            core = self.graph_in(torch.cat([graph_in, state.graph], dim=-1))  # (B, D)
            n = torch.cat([core[:, None, :], n], dim=1)  # (B, N+1, D)
            e = F.pad(e, (0, 0, 1, 0, 1, 0))  # (B, N+1, N+1, E): the authors start core edges at 0
        return n, e

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        # adj is not used: relational attention is dense over all pairs of real nodes
        n, e = self.project_inputs(node_in, edge_in, graph_in, state)
        if self.global_vector is GlobalVector.CORE:
            node_mask = F.pad(node_mask, (1, 0), value=True)  # the core node is always real
        key_mask = node_mask[:, None, :, None]  # (B, 1, J, 1)
        for layer in self.layers:
            n, e = layer(n, e, key_mask)
        if self.global_vector is GlobalVector.CORE:
            return State(n[:, 1:], e[:, 1:, 1:], n[:, 0])
        return State(n, e)
