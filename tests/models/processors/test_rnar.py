"""RNAR (relreason/models/processors/rnar.py): its aggregate on a 3-node graph at width 2 with weights set by
hand, against the MPNN messages and the LSTM written out in plain Python loops; a padded sender is skipped.
(Shapes, padding, fitting and its order dependence are the registry-wide tests of test_processors.py.)"""

from __future__ import annotations

import math

import pytest
import torch

from hand_arithmetic import add, mv, pattern
from relreason.models.processors.rnar import RNAR, RNARConfig

N, H = 3, 2


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def reference(z, edge, graph, w, senders, forget_bias):
    """agg_j: the MPNN message m_ij (two-layer message MLP), then the LSTM over i = 0, 1, ... (senders only), the
    forget gate sigmoid(f + forget_bias)."""
    aggs = []
    for j in range(N):
        a, c = [0.0] * H, [0.0] * H
        for i in range(N):
            if not senders[i]:
                continue
            pre = add(mv(w["m1"], z[j]), mv(w["m2"], z[i]), mv(w["me"], edge[i][j]), mv(w["mg"], graph), w["me_b"])
            hidden = add(mv(w["mlp0"], [max(0.0, v) for v in pre]), w["mlp0_b"])
            message = add(mv(w["mlp1"], [max(0.0, v) for v in hidden]), w["mlp1_b"])
            gates = add(mv(w["wx"], message), w["wx_b"], mv(w["wa"], a))
            g_in, g_forget, g_cell, g_out = (gates[p * H:(p + 1) * H] for p in range(4))
            c = [sigmoid(f + forget_bias) * cv + sigmoid(i_) * math.tanh(g) for f, cv, i_, g in zip(g_forget, c, g_in, g_cell)]
            a = [sigmoid(o) * math.tanh(cv) for o, cv in zip(g_out, c)]
        aggs.append(a)
    return aggs


@pytest.mark.parametrize("forget_bias", [0.0, 1.0], ids=["pytorch-lstm", "haiku-lstm"])
@pytest.mark.parametrize("senders", [[True, True, True], [True, True, False]], ids=["all", "last-padded"])
def test_the_lstm_aggregate_matches_the_equations_written_out(senders, forget_bias):
    w = {"m1": pattern(H, 2 * H, 0), "m2": pattern(H, 2 * H, 1), "me": pattern(H, H, 2), "me_b": [0.1, -0.1],
         "mg": pattern(H, H, 3), "mlp0": pattern(H, H, 4), "mlp0_b": [0.2, 0.0], "mlp1": pattern(H, H, 5),
         "mlp1_b": [-0.1, 0.3], "wx": pattern(4 * H, H, 6), "wx_b": [0.05 * k for k in range(4 * H)],
         "wa": pattern(4 * H, H, 2)}
    proc = RNAR(RNARConfig(forget_bias=forget_bias), H).double()
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    with torch.no_grad():
        for layer, key in ((proc.m1, "m1"), (proc.m2, "m2"), (proc.me, "me"), (proc.mg, "mg"), (proc.mlp[0], "mlp0"),
                           (proc.mlp[1], "mlp1"), (proc.lstm.inputs, "wx"), (proc.lstm.recurrent, "wa")):
            layer.weight.copy_(t(w[key]))
        for layer, key in ((proc.me, "me_b"), (proc.mlp[0], "mlp0_b"), (proc.mlp[1], "mlp1_b"), (proc.lstm.inputs, "wx_b")):
            layer.bias.copy_(t(w[key]))
        proc.m1.bias.zero_(), proc.m2.bias.zero_(), proc.mg.bias.zero_()
    z = [[math.sin(i + 2 * c) for c in range(2 * H)] for i in range(N)]
    edge = [[[math.cos(i - k + c) / 2 for c in range(H)] for k in range(N)] for i in range(N)]
    graph = [0.3, -0.6]
    mask = t([senders]).bool()
    got = proc.aggregate(t([z]), t([edge]), t([graph]), mask[:, :, None] & mask[:, None, :], mask)
    torch.testing.assert_close(got[0], t(reference(z, edge, graph, w, senders, forget_bias)))
