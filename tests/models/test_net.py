"""The encode-process-decode network: shapes for every algorithm, padding and batch invariance,
the carried hidden state, gradients, hint modes, and (slow) that MPNN learns a task."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from relreason.data import ALGORITHMS, generate
from relreason.data.specs import POINTER_TYPES, Location, Stage, Type
from relreason.errors import RelreasonError
from relreason.eval import Scorer
from relreason.models import Batch, HintMode, ModelConfig, PointerDecoding, RepredMode, build_model, prepare_spec
from relreason.models.net import Net
from relreason.models.processors.mpnn import MPNNConfig

NAMES = ALGORITHMS.names()


def setup(name: str, cfg: ModelConfig, size: int = 5, num: int = 4, seed: int = 3, dtype=torch.float32):
    ds = generate(name, num=num, size=size, seed=seed)
    spec = prepare_spec(ds.spec, cfg, name)
    torch.manual_seed(0)
    net = build_model(spec, cfg, "mpnn").to(dtype)
    return ds, spec, net


def node_axes(f) -> int:
    return {Location.NODE: 1, Location.EDGE: 2, Location.GRAPH: 0}[f.location] + (f.type in POINTER_TYPES)


@pytest.mark.parametrize("name", NAMES)
def test_every_algorithm_runs_and_predicts_in_storage_form(name):
    cfg = ModelConfig(hidden=8)
    ds, spec, net = setup(name, cfg)
    batch = Batch.from_dataset(ds, cfg, spec, generator=np.random.default_rng(0))
    out = net(batch, train=True, generator=torch.Generator().manual_seed(0))
    S = max(1, batch.max_length - 1)
    for k, v in out.hints.items():
        assert v.shape[:2] == (batch.size, S), k
    loss, terms = net.loss(batch, out)
    assert torch.isfinite(loss) and set(terms) == {f"{f.stage.value}.{k}" for k, f in spec.items() if f.stage is not Stage.INPUT}
    preds = net.predict(out)
    for k, f in ds.spec.items():  # the *original* spec: permutations come back fused
        if f.stage is Stage.OUTPUT:
            want = (batch.size,) + f.shape(batch.n)
            assert preds[k].shape == want, k
            assert (preds[k].dtype == torch.int64) == (f.type in POINTER_TYPES), k


@pytest.mark.parametrize("name", ["bellman_ford", "insertion_sort", "floyd_warshall", "lcs_length", "dfs",
                                  "graham_scan"])
def test_padding_does_not_change_predictions(name):
    cfg = ModelConfig(hidden=16)
    ds, spec, net = setup(name, cfg, size=6, dtype=torch.float64)
    batch = Batch.from_dataset(ds, cfg, spec)
    batch = Batch(batch.spec, *({k: v.double() if v.is_floating_point() else v for k, v in d.items()}
                                for d in (batch.inputs, batch.hints, batch.outputs)), batch.lengths, batch.node_mask)
    n = batch.n
    padded = batch.pad_nodes(n + 3)
    with torch.no_grad():
        a, b = net(batch, train=False), net(padded, train=False)
    for store_a, store_b, lead in ((a.outputs, b.outputs, 1), (a.hints, b.hints, 2)):
        for k, v in store_a.items():
            cut = store_b[k][(slice(None),) * lead + (slice(0, n),) * node_axes(spec[k])]
            torch.testing.assert_close(cut, v, msg=k)
    pa, pb = net.predict(a), net.predict(b)
    for k, v in pa.items():  # hard predictions: pointers are indices, one axis fewer than their logits
        lead = 2 if k in a.hints else 1
        axes = {Location.NODE: 1, Location.EDGE: 2, Location.GRAPH: 0}[spec[k].location]
        torch.testing.assert_close(pb[k][(slice(None),) * lead + (slice(0, n),) * axes], v, msg=k)
    loss_a, _ = net.loss(batch, a)
    loss_b, _ = net.loss(padded, b)
    torch.testing.assert_close(loss_a, loss_b)


@pytest.mark.parametrize("name", ["bellman_ford", "quicksort"])
def test_each_sample_is_decoded_at_its_own_last_step(name):
    """A sample's predictions do not depend on the other samples' lengths in its batch."""
    cfg = ModelConfig(hidden=16)
    ds, spec, net = setup(name, cfg, size=6, num=6, seed=5, dtype=torch.float64)
    assert len(set(ds.lengths.tolist())) > 1
    to64 = lambda b: Batch(b.spec, *({k: v.double() if v.is_floating_point() else v for k, v in d.items()}  # noqa: E731
                                     for d in (b.inputs, b.hints, b.outputs)), b.lengths, b.node_mask)
    with torch.no_grad():
        together = net(to64(Batch.from_dataset(ds, cfg, spec)), train=False)
        for i in range(len(ds)):
            alone = net(to64(Batch.from_dataset(ds.take(np.array([i])), cfg, spec)), train=False)
            for k, v in alone.outputs.items():
                torch.testing.assert_close(together.outputs[k][i], v[0], msg=k)
            steps = next(iter(alone.hints.values())).shape[1]
            for k, v in alone.hints.items():
                torch.testing.assert_close(together.hints[k][i, :steps], v[0], msg=k)


def test_hidden_state_is_carried():
    """With ground-truth hints fed at every step, changing only hints[0] must still change the
    predictions of later steps: the only path is the processor's carried state."""
    cfg = ModelConfig(hidden=16, teacher_forcing=1.0)
    ds, spec, net = setup("bellman_ford", cfg, size=6, num=4, seed=1)
    batch = Batch.from_dataset(ds, cfg, spec)
    assert batch.max_length >= 3
    changed = Batch(batch.spec, batch.inputs, {k: v.clone() for k, v in batch.hints.items()}, batch.outputs,
                    batch.lengths, batch.node_mask)
    changed.hints["d"][:, 0] += 1.0
    with torch.no_grad():
        a = net(batch, train=True, generator=torch.Generator().manual_seed(0))
        b = net(changed, train=True, generator=torch.Generator().manual_seed(0))
    for k in a.hints:
        assert not torch.allclose(a.hints[k][:, 1], b.hints[k][:, 1]), k


@pytest.mark.parametrize("name", ["dfs", "insertion_sort", "lcs_length", "floyd_warshall"])
def test_gradients_reach_every_parameter(name):
    cfg = ModelConfig(hidden=8)
    ds, spec, net = setup(name, cfg, size=6, num=4)
    batch = Batch.from_dataset(ds, cfg, spec, generator=np.random.default_rng(0))
    loss, _ = net.loss(batch, net(batch, train=True, generator=torch.Generator().manual_seed(0)))
    loss.backward()
    # Mathematically idle: without graph features the encoded graph vector is 0, so the map reading it
    # gets no gradient; a bias added to every choice of a softmax (mask_one, node pointers) cancels.
    idle = set() if any(f.location is Location.GRAPH for f in spec.values()) else {"processor.mg.weight"}
    for stage, decs in (("output", net.output_decoders), ("hint", net.hint_decoders)):
        for k, dec in decs.decoders.items():
            f = dec.feature
            if f.location is Location.NODE and f.type is Type.MASK_ONE:
                idle.add(f"{stage}_decoders.decoders.{k}.d.0.bias")
            if f.location is Location.NODE and f.type in POINTER_TYPES:
                idle.add(f"{stage}_decoders.decoders.{k}.d.3.bias")
            if f.location is Location.EDGE and f.type is Type.POINTER:
                idle.add(f"{stage}_decoders.decoders.{k}.d.4.bias")
    for pname, p in net.named_parameters():
        assert p.grad is not None, pname
        if pname in idle:
            assert p.grad.abs().max() < 1e-4, pname
        else:
            assert p.grad.abs().sum() > 0, pname


def test_hint_modes():
    ds = generate("bellman_ford", num=4, size=5, seed=3)
    for mode in HintMode:
        cfg = ModelConfig(hidden=8, hint_mode=mode)
        net = build_model(ds.spec, cfg, "mpnn")
        batch = Batch.from_dataset(ds, cfg)
        out = net(batch, train=True)
        _, terms = net.loss(batch, out)
        assert bool(out.hints) == mode.decode
        assert any(k.startswith("hint.") for k in terms) == mode.decode
        assert ("pi_h" in net.encoders.weight) == mode.encode


@pytest.mark.parametrize("repred", list(RepredMode))
@pytest.mark.parametrize("tf", [0.0, 0.5])
def test_training_is_deterministic_given_the_generator(repred, tf):
    cfg = ModelConfig(hidden=8, hint_repred=repred, teacher_forcing=tf, dropout=0.1)
    ds, spec, net = setup("insertion_sort", cfg, size=5)
    batch = Batch.from_dataset(ds, cfg, spec)
    a = net(batch, train=True, generator=torch.Generator().manual_seed(4))
    b = net(batch, train=True, generator=torch.Generator().manual_seed(4))
    c = net(batch, train=True, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(a.outputs["pred"], b.outputs["pred"])
    assert not torch.allclose(a.outputs["pred"], c.outputs["pred"])


def test_configuration_errors():
    ds = generate("bellman_ford", num=2, size=4, seed=0)
    assert ModelConfig(hint_mode="none", pointer_decoding="edge").hint_mode is HintMode.NONE
    with pytest.raises(RelreasonError):
        ModelConfig(hint_mode="sometimes")
    with pytest.raises(RelreasonError):
        ModelConfig(teacher_forcing=1.5)
    with pytest.raises(RelreasonError):  # MPNN has no edge state to decode pointers from
        build_model(ds.spec, ModelConfig(pointer_decoding=PointerDecoding.EDGE), "mpnn")
    with pytest.raises(RelreasonError):
        build_model(ds.spec, ModelConfig(), "mpnn", processor_cfg=object())
    with pytest.raises(RelreasonError):
        build_model(ds.spec, ModelConfig(), "mpnnn")
    assert isinstance(build_model(ds.spec, ModelConfig(hidden=8), "mpnn", MPNNConfig(use_ln=False)), Net)


def train_until(name: str, target: float, budget_s: float, size: int = 16, hidden: int = 128, lr: float = 1e-3,
                batch_size: int = 32) -> float:
    """A tiny training loop: returns the best validation score reached within the time budget."""
    torch.manual_seed(0)
    cfg = ModelConfig(hidden=hidden)
    train = generate(name, num=1000, size=size, seed=1)
    val = generate(name, num=64, size=size, seed=2)
    spec = prepare_spec(train.spec, cfg, name)
    net = build_model(spec, cfg, "mpnn")
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    val_batches = [Batch.from_dataset(val.take(np.arange(i, i + 32)), cfg, spec) for i in range(0, 64, 32)]
    best, start, step = 0.0, time.monotonic(), 0
    while time.monotonic() - start < budget_s and best < target:
        idx = rng.choice(len(train), batch_size, replace=False)
        batch = Batch.from_dataset(train.take(idx), cfg, spec, generator=rng)
        net.train()
        loss, _ = net.loss(batch, net(batch, train=True, generator=gen))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            net.eval()
            scorer = Scorer(spec)
            with torch.no_grad():
                for vb in val_batches:
                    scorer.update(net.predict(net(vb, train=False)), vb)
            best = max(best, scorer.result().score)
    return best


@pytest.mark.slow
def test_mpnn_learns_bellman_ford():
    """Reference width and learning rate; reaches 0.9 validation in ~20 s of one core (budget 120 s)."""
    assert train_until("bellman_ford", target=0.9, budget_s=120, hidden=128, lr=1e-3) >= 0.9
