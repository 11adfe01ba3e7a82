"""Encoders against a literal transcription of the reference's per-feature formulas, for every (location, type)."""

from __future__ import annotations

import math

import pytest
import torch

from relreason.data.specs import Feature, Location, Stage, Type
from relreason.models.config import EncoderInit
from relreason.models.encoders import SUPPORTED, EdgeInput, Encoders, model_form

B, N, H, C = 3, 5, 8, 3


def synthetic_spec() -> dict[str, Feature]:
    """Every supported (location, type) once as an input and once as a hint."""
    spec = {}
    for stage in (Stage.INPUT, Stage.HINT):
        for loc, typ in sorted(SUPPORTED, key=lambda p: (p[0].value, p[1].value)):
            name = f"{stage.value[0]}_{loc.value}_{typ.value}"
            spec[name] = Feature(name, stage, loc, typ, C if typ is Type.CATEGORICAL else 0)
    spec["pos"] = Feature("pos", Stage.INPUT, Location.NODE, Type.SCALAR)
    return spec


def random_value(f: Feature, g: torch.Generator) -> torch.Tensor:
    """A value in Batch form (pointers as indices), without time axis."""
    shape = (B,) + f.shape(N)
    if f.type in (Type.POINTER, Type.PERMUTATION_POINTER):
        return torch.randint(0, N, (B,) + f.shape(N), generator=g)
    if f.type is Type.CATEGORICAL:
        return torch.nn.functional.one_hot(torch.randint(0, C, shape[:-1], generator=g), C).float()
    if f.type is Type.MASK_ONE:
        return torch.nn.functional.one_hot(torch.randint(0, N, shape[:-1], generator=g), N).float()
    if f.type is Type.MASK:
        return (torch.rand(shape, generator=g) > 0.5).float()
    return torch.randn(shape, generator=g)


def perturb(f: Feature, v: torch.Tensor) -> torch.Tensor:
    """A different value of the same feature (every element changes)."""
    if f.type in (Type.POINTER, Type.PERMUTATION_POINTER):
        return (v + 1) % N
    if f.type in (Type.CATEGORICAL, Type.MASK_ONE):
        return v.roll(1, -1)
    return 1 - v if f.type is Type.MASK else v + 1


def reference_encoding(enc: Encoders, spec, values):
    """The reference's accumulation, feature by feature (edge pointers through the full (B,N,N,N,H) tensor)."""
    node, edge, graph = torch.zeros(B, N, H), torch.zeros(B, N, N, H), torch.zeros(B, H)
    adj = torch.eye(N, dtype=torch.bool).expand(B, N, N)
    for name, f in spec.items():
        w, b = enc.weight[name], enc.bias[name]
        v = model_form(f, values[name], N)
        ptr = f.type in (Type.POINTER, Type.PERMUTATION_POINTER)
        if f.location is Location.NODE and ptr:
            edge = edge + v[..., None] * w[0] + b[0]
            adj = adj | ((v + v.transpose(1, 2)) > 0.5)
        elif f.location is Location.NODE:
            node = node + (v @ w if f.type is Type.CATEGORICAL else v[..., None] * w[0]) + b[0]
        elif f.location is Location.EDGE and ptr:
            enc0 = v[..., None] * w[0] + b[0]  # (B, N, N, N, H)
            enc1 = v[..., None] * w[1] + b[1]
            edge = edge + enc0.mean(1) + enc1.mean(2)
        elif f.location is Location.EDGE:
            edge = edge + (v @ w if f.type is Type.CATEGORICAL else v[..., None] * w[0]) + b[0]
            if f.type is Type.MASK:
                adj = adj | ((v + v.transpose(1, 2)) > 0)
        elif ptr:  # graph pointer -> node features
            node = node + v[..., None] * w[0] + b[0]
        else:
            graph = graph + (v @ w if f.type is Type.CATEGORICAL else v[..., None] * w[0]) + b[0]
    return node, edge, graph, adj


@pytest.mark.parametrize("encode_hints", [True, False])
def test_encoders_equal_the_per_feature_sum(encode_hints):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    spec = synthetic_spec()
    enc = Encoders(spec, H, encode_hints, EncoderInit.XAVIER_ON_SCALARS)
    with torch.no_grad():
        for b in enc.bias.values():
            b.normal_()  # zero-initialised: make the bias bookkeeping visible
    values = {k: random_value(f, g) for k, f in spec.items()}
    node_mask = torch.ones(B, N, dtype=torch.bool)
    inputs = {k: v for k, v in values.items() if spec[k].stage is Stage.INPUT}
    hints = {k: model_form(spec[k], v, N) for k, v in values.items() if spec[k].stage is Stage.HINT}
    base = enc.encode_inputs(inputs, node_mask)
    step = enc.encode_step(base, hints if encode_hints else {})
    used = spec if encode_hints else {k: f for k, f in spec.items() if f.stage is Stage.INPUT}
    node, edge, graph, adj = reference_encoding(enc, used, values)
    torch.testing.assert_close(step.node, node)
    torch.testing.assert_close(step.edge.dense(), edge)
    torch.testing.assert_close(step.graph, graph)
    assert torch.equal(step.adj, adj)


def test_each_feature_changes_its_own_location():
    """Perturbing one feature moves exactly the location(s) the reference routes it to."""
    g = torch.Generator().manual_seed(2)
    spec = synthetic_spec()
    enc = Encoders(spec, H, True, EncoderInit.DEFAULT)
    values = {k: random_value(f, g) for k, f in spec.items()}
    node_mask = torch.ones(B, N, dtype=torch.bool)

    def run(vals):
        inputs = {k: v for k, v in vals.items() if spec[k].stage is Stage.INPUT}
        hints = {k: model_form(spec[k], v, N) for k, v in vals.items() if spec[k].stage is Stage.HINT}
        s = enc.encode_step(enc.encode_inputs(inputs, node_mask), hints)
        return {Location.NODE: s.node, Location.EDGE: s.edge.dense(), Location.GRAPH: s.graph}

    before = run(values)
    for name, f in spec.items():
        changed = dict(values)
        changed[name] = perturb(f, values[name])
        after = run(changed)
        moved = {loc for loc in Location if not torch.allclose(before[loc], after[loc])}
        ptr = f.type in (Type.POINTER, Type.PERMUTATION_POINTER)
        expected = {Location.EDGE} if (f.location is Location.NODE and ptr) or f.location is Location.EDGE else (
            {Location.NODE} if f.location is Location.NODE or ptr else {Location.GRAPH})
        assert moved == expected, name


def test_initialisation_follows_the_reference():
    spec = synthetic_spec()
    big = 512
    enc = Encoders(spec, big, True, EncoderInit.XAVIER_ON_SCALARS)
    for name, f in spec.items():
        w = enc.weight[name]
        fan_in = C if f.type is Type.CATEGORICAL else 1
        std = 1 / math.sqrt(big) if (f.stage is Stage.HINT and f.type is Type.SCALAR) else 1 / math.sqrt(fan_in)
        assert w.abs().max() <= 2 * std + 1e-6, name  # truncated at two standard deviations
        assert 0.7 * std < w.std() < 1.0 * std, name  # a 2-sigma truncated normal has std 0.88 sigma
        assert not enc.bias[name].any()
    plain = Encoders(spec, big, True, EncoderInit.DEFAULT)
    assert plain.weight["h_node_scalar"].std() > 0.5  # default: std 1 for every scalar


@pytest.mark.parametrize("F", [3, 12])  # folded, and the dense fallback when F >= H
def test_edge_input_projection_equals_dense_then_linear(F):
    g = torch.Generator().manual_seed(3)
    e = EdgeInput(torch.randn(B, N, N, F, generator=g), torch.randn(F, H, generator=g), torch.randn(H, generator=g))
    W, b = torch.randn(6, H, generator=g), torch.randn(6, generator=g)
    add = torch.randn(B, 1, N, 6, generator=g)
    dense = e.dense()
    torch.testing.assert_close(dense, e.raw @ e.weight + e.bias)
    torch.testing.assert_close(e.project(W, b), dense @ W.t() + b)
    torch.testing.assert_close(e.project(W, b, add=add), dense @ W.t() + b + add)
    torch.testing.assert_close(e.project(W), dense @ W.t())


def test_edge_pointer_encoding_ignores_padded_nodes():
    spec = {"pos": Feature("pos", Stage.INPUT, Location.NODE, Type.SCALAR),
            "e": Feature("e", Stage.INPUT, Location.EDGE, Type.POINTER)}
    enc = Encoders(spec, H, True, EncoderInit.DEFAULT)
    g = torch.Generator().manual_seed(4)
    ptr = torch.randint(0, N, (B, N, N), generator=g)
    small = enc.encode_inputs({"pos": torch.zeros(B, N), "e": ptr}, torch.ones(B, N, dtype=torch.bool))
    padded_ptr = torch.zeros(B, N + 2, N + 2, dtype=torch.long)
    padded_ptr[:, :N, :N] = ptr
    mask = torch.zeros(B, N + 2, dtype=torch.bool)
    mask[:, :N] = True
    big = enc.encode_inputs({"pos": torch.zeros(B, N + 2), "e": padded_ptr}, mask)
    torch.testing.assert_close(big.edge_cols[:, :N, :N], small.edge_cols)
