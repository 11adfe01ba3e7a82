"""GCN processor (Kipf & Welling, ICLR 2017), the RT paper's weakest lobster baseline.

    z   = [node_in, hidden]                                   (B, N, 2H)
    h   = relu(D^-1/2 Â D^-1/2 (z W) + b),  Â = adj with self loops, restricted to real nodes
    h   = LayerNorm(h)                                        (as the other CLRS baselines)

Â is the adjacency the network passes in (input `adj`, encoded pointers and self loops); padded
nodes have no edges, so they neither send nor receive. Edge features other than the adjacency are
not read: a GCN has no edge channel, which is the point of comparing it with the RT and GAT.

Sparse form (`forward_sparse`, relreason.models.sparse): Â is the edge list itself (its entries are
that adjacency, self-loops included), the degrees its row counts and the product a segment sum over
each node's entries: the dense numbers without the (B, N, N) matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from relreason.models.encoders import linear
from relreason.models.processors.base import Processor, State, register_processor
from relreason.models.sparse import SparseForm, SparseGraph, segment_sum


@dataclass
class GCNConfig:
    use_ln: bool = True  # LayerNorm on the new hidden state, as every CLRS baseline (run.py --use_ln True)


@register_processor("gcn", GCNConfig, "Graph convolutional network, symmetric-normalized adjacency",
                    paper="Kipf & Welling 2017", recipes={"lobster": "lobster_gcn"})
class GCN(Processor):
    sparse_form = SparseForm.EXACT

    def __init__(self, cfg: GCNConfig, hidden: int):
        super().__init__(cfg, hidden)
        self.w = linear(2 * hidden, hidden)
        self.ln = nn.LayerNorm(hidden) if cfg.use_ln else None

    def forward(self, node_in, edge_in, graph_in, state: State, adj: torch.Tensor, node_mask: torch.Tensor) -> State:
        z = torch.cat([node_in, state.node], -1)  # (B, N, 2H)
        real = node_mask[:, :, None] & node_mask[:, None, :]  # (B, N, N)
        eye = torch.eye(adj.shape[-1], dtype=torch.bool, device=adj.device)
        a = ((adj | eye) & real).to(z.dtype)  # (B, N, N) Â, no edge touches a padded node
        deg = a.sum(-1).clamp(min=1.0)  # (B, N)
        norm = deg.rsqrt()
        a = norm[:, :, None] * a * norm[:, None, :]  # D^-1/2 Â D^-1/2
        h = torch.relu(torch.einsum("bij,bjh->bih", a, self.w(z)))  # (B, N, H)
        if self.ln is not None:
            h = self.ln(h)
        return State(h * node_mask[..., None].to(h.dtype), None, state.graph)

    def forward_sparse(self, node_in, edge_in, graph_in, state: State, graph: SparseGraph,
                       node_mask: torch.Tensor) -> State:
        z = torch.cat([node_in, state.node], -1)  # (B, N, 2H)
        b, n, _ = z.shape
        norm = torch.bincount(graph.row, minlength=graph.nodes).clamp(min=1).to(z.dtype).rsqrt()  # (B * N,) D^-1/2
        coef = (norm[graph.row] * norm[graph.col])[:, None]  # (E, 1)
        wz = self.w(z).reshape(b * n, -1)  # (B * N, H)
        h = torch.relu(segment_sum(coef * wz[graph.col], graph.row, graph.nodes)).view(b, n, -1)  # (B, N, H)
        if self.ln is not None:
            h = self.ln(h)
        return State(h * node_mask[..., None].to(h.dtype), None, state.graph)
