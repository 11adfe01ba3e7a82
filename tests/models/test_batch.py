"""prepare_spec and Batch: the reference's data transforms (permutations, pred as input, random pos)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relreason.data import ALGORITHMS, SPECS
from relreason.data.specs import POINTER_TYPES, Stage, Type
from relreason.models import Batch, ModelConfig, prepare_spec
from relreason.models.batch import PRED_AS_INPUT, cyclic_predecessor, infer_algorithm, random_positions
from relreason.models.decoders import fuse_permutation

NAMES = ALGORITHMS.names()


def test_cyclic_predecessor_matches_the_reference_example():
    # reference docstring: pointers [2, 1, 1] -> P rows point to [2, 0, 1], first-node mask [0, 1, 0]
    cyc, mask = cyclic_predecessor(np.array([2, 1, 1]))
    assert cyc.tolist() == [2, 0, 1]
    assert mask.tolist() == [0, 1, 0]


def test_cyclic_predecessor_is_a_permutation_and_fuses_back():
    rng = np.random.default_rng(0)
    order = np.stack([rng.permutation(7) for _ in range(20)])  # order[b, r] = node of rank r
    pred = np.empty_like(order)
    rows = np.arange(20)[:, None]
    pred[rows, order] = np.concatenate([order[:, :1], order[:, :-1]], 1)  # predecessor in the order
    cyc, mask = cyclic_predecessor(pred)
    assert all(sorted(c) == list(range(7)) for c in cyc)  # a permutation: every node has one successor
    assert np.all(cyc != np.arange(7))  # nobody points to itself any more
    back = fuse_permutation(torch.as_tensor(cyc), torch.as_tensor(mask))
    assert np.array_equal(back.numpy(), pred)


@pytest.mark.parametrize("name", NAMES)
def test_prepare_spec_transforms(name):
    cfg = ModelConfig()
    spec = prepare_spec(SPECS[name], cfg, name)
    assert prepare_spec(spec, cfg) == spec  # idempotent
    assert not any(f.type is Type.SHOULD_BE_PERMUTATION for f in spec.values())
    for k, f in SPECS[name].items():
        if f.type is Type.SHOULD_BE_PERMUTATION:
            assert spec[k].type is Type.PERMUTATION_POINTER and spec[k + "_mask"].type is Type.MASK_ONE
    if name in PRED_AS_INPUT:
        assert "pred_h" not in spec and spec["pred"].stage is Stage.INPUT
    plain = prepare_spec(SPECS[name], ModelConfig(enforce_permutations=False, pred_as_input=False), name)
    assert set(plain) == set(SPECS[name])
    assert all(f.type is not Type.SHOULD_BE_PERMUTATION for f in plain.values())


def test_infer_algorithm_finds_pred_as_input_tasks():
    assert infer_algorithm(SPECS["minimum"]) == "minimum"
    assert "pred" in prepare_spec(SPECS["minimum"], ModelConfig())  # inferred without the name
    assert infer_algorithm(prepare_spec(SPECS["minimum"], ModelConfig())) is None


def test_random_positions_sorted_per_segment_and_deterministic():
    pos = np.array([[0, 0.25, 0.5, 0.75, 0, 0.5]] * 3)  # a string task: haystack of 4, needle of 2
    a = random_positions(pos, np.random.default_rng(5))
    b = random_positions(pos, np.random.default_rng(5))
    c = random_positions(pos, torch.Generator().manual_seed(5))
    assert np.array_equal(a, b) and a.shape == pos.shape and c.shape == pos.shape
    for x in (a, c):
        assert np.all(np.diff(x[:, :4], axis=1) > 0) and np.all(np.diff(x[:, 4:], axis=1) > 0)
        assert np.all((x >= 0) & (x < 1))
    assert not np.array_equal(a[0], a[1])  # each sample draws its own


@pytest.mark.parametrize("name", NAMES)
def test_batch_from_dataset(name, make_small):
    ds = make_small(name)
    cfg = ModelConfig()
    spec = prepare_spec(ds.spec, cfg, name)
    batch = Batch.from_dataset(ds.take(np.arange(5)), cfg, spec, "cpu", generator=np.random.default_rng(0))
    assert batch.max_length == int(ds.lengths[:5].max())  # trimmed to the batch's own longest trajectory
    assert batch.node_mask.all() and batch.node_mask.shape == (5, ds.n)
    for stage, store in ((Stage.INPUT, batch.inputs), (Stage.HINT, batch.hints), (Stage.OUTPUT, batch.outputs)):
        assert set(store) == {k for k, f in spec.items() if f.stage is stage}
        for k, v in store.items():
            assert v.dtype == (torch.int64 if spec[k].type in POINTER_TYPES else torch.float32), k
    fixed = Batch.from_dataset(ds.take(np.arange(5)), cfg, spec)
    assert torch.equal(fixed.inputs["pos"], torch.as_tensor(ds.inputs["pos"][:5], dtype=torch.float32))
    if name in PRED_AS_INPUT:
        assert torch.equal(batch.inputs["pred"], torch.as_tensor(ds.hints["pred_h"][:5, 0]).long())
    for k, f in spec.items():
        if f.type is Type.PERMUTATION_POINTER:
            store = batch.outputs if f.stage is Stage.OUTPUT else batch.hints
            fused = fuse_permutation(store[k], store[k + "_mask"])
            assert np.array_equal(fused.numpy(), ds.outputs[k][:5])


def test_pad_nodes_appends_masked_nodes(make_small):
    ds = make_small("bellman_ford")
    cfg = ModelConfig()
    batch = Batch.from_dataset(ds, cfg)
    padded = batch.pad_nodes(ds.n + 3)
    assert padded.n == ds.n + 3 and not padded.node_mask[:, ds.n:].any() and padded.node_mask[:, :ds.n].all()
    assert torch.equal(padded.inputs["A"][:, :ds.n, :ds.n], batch.inputs["A"])
    assert not padded.inputs["A"][:, ds.n:].any()
    assert torch.equal(padded.outputs["pi"][:, ds.n:], torch.arange(ds.n, ds.n + 3).expand(len(ds), 3))
    assert torch.equal(padded.hints["pi_h"][:, :, :ds.n], batch.hints["pi_h"])


@pytest.mark.filterwarnings("error")  # torch warns when it wraps a read-only array (and shares it)
def test_a_read_only_array_becomes_a_tensor_of_its_own():
    from relreason.models.batch import _to_tensor

    f = SPECS["bfs"]["pos"]
    x = np.arange(6, dtype=np.float32)
    x.setflags(write=False)  # as a memory-mapped split's rows
    t = _to_tensor(f, x, torch.device("cpu"))
    t += 1  # a batch's tensors may be written in place
    assert x.tolist() == list(range(6)) and t.tolist() == [float(v + 1) for v in range(6)]
