"""Shared by the processor tests: fit a per-node target through a linear readout."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def fit_node_target(p, node_in, edge_in, graph_in, adj, mask, target, steps: int, rounds: int = 2,
                    lr: float = 3e-3) -> tuple[float, float]:
    """Trains processor `p` (state carried over `rounds` calls) plus a linear readout to predict
    `target` (B, N) from the node state; returns (first loss, last loss)."""
    readout = torch.nn.Linear(p.node_dim, 1)
    opt = torch.optim.Adam([*p.parameters(), *readout.parameters()], lr=lr)
    losses = []
    for _ in range(steps):
        state = p.initial_state(node_in.shape[0], node_in.shape[1], node_in.device)
        for _ in range(rounds):
            state = p(node_in, edge_in, graph_in, state, adj, mask)
        loss = F.mse_loss(readout(state.node).squeeze(-1), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses[0], losses[-1]
