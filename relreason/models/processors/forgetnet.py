"""G-ForgetNet: a learned gate on the previous step's processor state (Bohde, Liu, Saxton & Ji, ICLR 2024,
"On the Markov Property of Neural Algorithmic Reasoning: Analyses and Methods", arXiv 2403.04929).

CLRS algorithms are Markov: the hints of step t determine step t + 1. ForgetNet drops the historical
embedding h^(t-1) from the processor's input; G-ForgetNet lets a gate decide, per node and channel, how
much of it the processor still reads (the paper's Fig. 1c: the gate sits on the history's way into the
processor P; its base is Triplet-GMPNN, the reviewers' "established architecture" with its own update gate):

    g_i   = sigmoid(Wg [node_in_i, h_i^(t-1)] + bg)                  (B, N, H), bg starting at 0
    h~_i  = g_i * h_i^(t-1)
    h^(t) = Triplet-GMPNN step (relreason.models.processors.gnn) run on h~ in place of h^(t-1):
            z = [node_in, h~], and its update gate mixes the new state with h~

The gate's inputs and form are ours (one linear map of [node_in, h^(t-1)]; the paper's equation for it
could not be read here), and so is reading the gated state in Triplet-GMPNN's update gate as well as in z
(everywhere the processor reads its history). The published method regularises the gate so that the
history's influence shrinks as training goes on; its form and weight were not found (relreason/recipes/g_forgetnet.yaml
lists where we looked): it is not implemented, the gate learns from the task loss alone. The network's decoders still read the ungated previous state (net.py), as they
do for every processor. Plain PyTorch on top of Triplet-GMPNN's step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from relreason.models.encoders import linear
from relreason.models.processors.base import Processor, State, register_processor
from relreason.models.processors.gnn import TripletGMPNN, TripletGMPNNConfig
from relreason.models.sparse import SparseForm, SparseGraph


@dataclass
class GForgetNetConfig(TripletGMPNNConfig):
    """G-ForgetNet's options: its base Triplet-GMPNN's (the forget gate has none)."""


@register_processor("g_forgetnet", GForgetNetConfig, "Triplet-GMPNN reading its previous state through a learned gate",
                    paper="Bohde et al. 2024", recipes={"clrs": "g_forgetnet"})
class GForgetNet(TripletGMPNN):
    """See the module docstring."""

    sparse_form = SparseForm.NONE  # the dense form only

    def __init__(self, cfg: GForgetNetConfig, hidden: int):
        super().__init__(cfg, hidden)
        self.forget_node = linear(hidden, hidden)  # Wg's node_in block (with bg)
        self.forget_state = linear(hidden, hidden, bias=False)  # Wg's h^(t-1) block

    def forget_gate(self, node_in: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """g = sigmoid(Wg [node_in, h^(t-1)] + bg): (B, N, H)."""
        return torch.sigmoid(self.forget_node(node_in) + self.forget_state(previous))

    def forward(self, node_in, edge_in, graph_in, state: State, adj, node_mask) -> State:
        kept = self.forget_gate(node_in, state.node) * state.node  # h~ (B, N, H)
        return super().forward(node_in, edge_in, graph_in, State(kept, state.edge, state.graph), adj, node_mask)

    def forward_sparse(self, node_in, edge_in, graph_in, state: State, graph: SparseGraph, node_mask) -> State:
        return Processor.forward_sparse(self, node_in, edge_in, graph_in, state, graph, node_mask)
