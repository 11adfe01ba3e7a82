"""The processor contract, checked on a net's first step (relreason.models.processors.base.checked_step): what
a plugin author's processor returns is validated against what it declares, so a wrong shape or an undeclared
edge state fails at once, naming the processor, instead of training on a silently dropped state (issue 31)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from relreason.data import generate
from relreason.errors import RelreasonError
from relreason.models import Batch, ModelConfig, prepare_spec
from relreason.models.net import Net
from relreason.models.processors import PROCESSORS, Processor, State
from relreason.models.processors.mpnn import MPNNConfig

H = 8


class Pivotal(Processor):
    """A toy edge-state processor as the issue's researcher wrote it: edge state = previous edge state + 1
    (so each step's input says how many steps fed it back), node state from the edges' mean."""

    def __init__(self, edge_dim=H, carry_edge=True, edge_shape=None, node_width=None, fail=False):
        super().__init__(MPNNConfig(), H)
        self.edge_dim, self.carry_edge = edge_dim, carry_edge
        self.edge_shape, self.node_width, self.fail = edge_shape, node_width, fail
        self.lin = nn.Linear(H, H)
        self.seen: list[torch.Tensor] = []  # the edge state each step received

    def forward(self, node_in, edge_in, graph_in, state, adj, node_mask):
        if self.fail:
            node_in @ torch.zeros(3, 3)  # a plugin's bug: mat1 and mat2 shapes cannot be multiplied
        prev = state.edge if state.edge is not None else torch.zeros(*edge_in.shape[:3], H)
        self.seen.append(prev.detach().clone())
        edge = prev + 1.0  # (B, N, N, H)
        if self.edge_shape is not None:
            edge = edge[..., :1, :1] if self.edge_shape == "B,N,1,1" else edge
        node = self.lin(node_in + edge.mean(2) if self.edge_shape is None else node_in)
        if self.node_width is not None:
            node = node[..., : self.node_width]
        return State(node, edge, None)


def run(proc: Processor):
    cfg = ModelConfig(hidden=H, teacher_forcing=1.0)
    ds = generate("dfs", num=2, size=5, seed=1)  # long trajectories: many steps
    spec = prepare_spec(ds.spec, cfg, "dfs")
    net = Net(spec, cfg, proc)
    return net(Batch.from_dataset(ds, cfg, spec), train=True, generator=torch.Generator().manual_seed(0))


def test_a_declared_edge_state_comes_back_at_the_next_step():
    proc = Pivotal()
    run(proc)
    assert len(proc.seen) >= 3
    for step, seen in enumerate(proc.seen):  # zeros first, then what the previous step returned
        assert torch.equal(seen, torch.full_like(seen, float(step))), step


@pytest.mark.parametrize("kwargs, message", [
    ({"edge_dim": 0, "carry_edge": False}, "returned an edge state but declares edge_dim = 0, so no decoder and no "
                                           "later step would ever read it"),
    ({"edge_shape": "B,N,1,1"}, "state.edge has shape [2, 5, 1, 1], expected [2, 5, 5, 8] (B, N, N, edge_dim = 8)"),
    ({"node_width": 3}, "state.node has shape [2, 5, 3], expected [2, 5, 8] (B, N, node_dim = 8)"),
    ({"fail": True}, "failed at its first step (given node_in [2, 5, 8], edge_in [2, 5, 5, 8], graph_in [2, 8], "
                     "adj [2, 5, 5]): RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
])
def test_a_broken_processor_fails_at_its_first_step_naming_itself(kwargs, message):
    with pytest.raises(RelreasonError) as caught:
        run(Pivotal(**kwargs))
    assert caught.value.message.startswith("processor tests.models.processors.test_contract.Pivotal") or \
        "test_contract.Pivotal" in caught.value.message
    assert message in caught.value.message


def test_a_declared_edge_state_must_be_returned():
    class Forgetful(Pivotal):
        def forward(self, *args):
            return State(super().forward(*args).node, None, None)

    with pytest.raises(RelreasonError, match="declares edge_dim = 8 but returned no edge state"):
        run(Forgetful())


@pytest.mark.parametrize("name", PROCESSORS.names())
def test_every_registered_processor_keeps_the_contract(name):
    from relreason.models.processors.base import checked_step

    entry = PROCESSORS.get(name)
    proc = entry.build(entry.config(), H)
    B, N = 2, 4
    state = proc.initial_state(B, N, torch.device("cpu"))
    adj = torch.ones(B, N, N, dtype=torch.bool)
    got = checked_step(proc, torch.randn(B, N, H), torch.randn(B, N, N, H), torch.randn(B, H), state, adj,
                       torch.ones(B, N, dtype=torch.bool))
    assert got.node.shape == (B, N, proc.node_dim)
