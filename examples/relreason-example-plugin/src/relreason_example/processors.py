"""`max_gnn`: a tiny message-passing processor with max aggregation over the adjacency.

One update per algorithm step (shapes for a batch of B graphs of N nodes, width H):

    z_i   = W_in [node_in_i, state_i]                          (B, N, H)
    m_ij  = relu(W_s z_i + W_r z_j + W_e e_ij + W_g g)         message from sender i to receiver j, (B, N, N, H)
    agg_j = max over senders i with adj[i, j] of m_ij          0 for a node with no sender
    h_j   = relu(W_o [z_j, agg_j])                             the new node state, carried to the next step

The processor contract (relreason.models.processors.base) asks three things, all kept here: return a
State, carry `state.node` (it enters z), and never let a padded node (node_mask False) reach a real one
(padded senders are masked out of the max).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from relreason.errors import RelreasonError
from relreason.models.processors import Processor, State, register_processor


@dataclass
class MaxGNNConfig:
    """The `processor:` section of max_gnn (`--set processor.layers=2`)."""

    layers: int = 1  # message-passing updates per algorithm step, each with its own weights

    def __post_init__(self) -> None:
        if self.layers < 1:
            raise RelreasonError(f"processor.layers must be >= 1, got {self.layers}", "use 1 or more")


class _Layer(nn.Module):
    def __init__(self, width: int, z_in: int):
        super().__init__()
        self.inp = nn.Linear(z_in, width)
        self.sender, self.receiver = nn.Linear(width, width), nn.Linear(width, width)
        self.edge, self.graph = nn.Linear(width, width), nn.Linear(width, width)
        self.out = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor, edge_in: torch.Tensor, graph_in: torch.Tensor,
                allowed: torch.Tensor) -> torch.Tensor:
        z = self.inp(x)  # (B, N, H)
        msg = (self.sender(z)[:, :, None] + self.receiver(z)[:, None] + self.edge(edge_in)
               + self.graph(graph_in)[:, None, None]).relu()  # (B, N, N, H): [b, sender, receiver]
        low = torch.finfo(msg.dtype).min
        agg = msg.masked_fill(~allowed[..., None], low).amax(dim=1)  # (B, N, H) over senders
        agg = torch.where(allowed.any(dim=1)[..., None], agg, torch.zeros_like(agg))  # no sender: 0
        return self.out(torch.cat([z, agg], -1)).relu()


@register_processor("max_gnn", MaxGNNConfig, "Tiny max-aggregation GNN over the adjacency (the example plugin)",
                    recipes={"clrs": "max_gnn"})
class MaxGNN(Processor):
    def __init__(self, cfg: MaxGNNConfig, hidden: int):
        super().__init__(cfg, hidden)
        self.layers = nn.ModuleList(_Layer(hidden, 2 * hidden if k == 0 else hidden) for k in range(cfg.layers))

    def forward(self, node_in: torch.Tensor, edge_in: torch.Tensor, graph_in: torch.Tensor, state: State,
                adj: torch.Tensor, node_mask: torch.Tensor) -> State:
        allowed = adj & node_mask[:, :, None]  # (B, N, N): real senders along the adjacency
        x = torch.cat([node_in, state.node], -1)  # (B, N, 2H): this step's inputs and the carried state
        for layer in self.layers:
            x = layer(x, edge_in, graph_in, allowed)
        return State(x, None, state.graph)
