"""The encode-process-decode network: shapes for every algorithm, padding and batch invariance,
the carried hidden state, gradients, hint modes, what the encoders receive (teacher forcing, hard or
soft fed-back hints) and the decoders read (the RT authors' inputs, no edges for the transformer),
and (slow) that MPNN learns a task."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relreason.data import ALGORITHMS, generate
from relreason.data.specs import POINTER_TYPES, Location, Stage, Type
from relreason.errors import RelreasonError
from relreason.eval import Scorer
from relreason.models import Batch, HintMode, ModelConfig, PointerDecoding, RepredMode, build_model, prepare_spec
from relreason.models.decoders import feedback
from relreason.models.encoders import model_form
from relreason.models.net import Net
from relreason.models.processors.mpnn import MPNNConfig
from relreason.models.processors.rt import RTConfig
from relreason.models.processors.transformer import TransformerConfig
from relreason.train.optimizer import clip_grad_norm

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


def longer(batch: Batch, extra: int) -> Batch:
    """The batch with `extra` hint steps of zeros past every sample's length (steps no sample runs)."""
    hints = {k: torch.cat([v, v.new_zeros((v.shape[0], extra) + v.shape[2:])], 1) for k, v in batch.hints.items()}
    return Batch(batch.spec, batch.inputs, hints, batch.outputs, batch.lengths, batch.node_mask)


@pytest.mark.parametrize("name", NAMES)
def test_hard_hints_predict_bit_for_bit_what_raw_hints_do(name):
    """Evaluation keeps each step's hint predictions hard (`hard_hints`): `predict` gives exactly the
    tensors it gives from the raw predictions, at the steps some samples run and at steps none runs."""
    cfg = ModelConfig(hidden=8)
    ds, spec, net = setup(name, cfg, size=6, num=4, seed=5)
    batch = longer(Batch.from_dataset(ds, cfg, spec), 2)
    with torch.no_grad():
        raw, hard = net(batch, train=False), net(batch, train=False, hard_hints=True)
    want, got = net.predict(raw), net.predict(hard)
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v), k
    for k, f in spec.items():  # kept hard: a pointer's index, not its logits over the nodes
        if f.stage is Stage.HINT:
            assert hard.hints[k].shape == (batch.size, batch.max_length - 1) + f.shape(batch.n), k
    with pytest.raises(ValueError, match="raw hint predictions"):
        net.loss(batch, hard)
    with pytest.raises(ValueError, match="for evaluation"):
        net(batch, train=True, hard_hints=True)


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


# -- what the encoders and decoders receive -------------------------------------------------------

def equal_length_batch(name: str, cfg: ModelConfig, spec, size: int = 5, num: int = 16) -> Batch:
    """A batch whose trajectories all have the same length, so every step runs every sample."""
    ds = generate(name, num=8 * num, size=size, seed=11)
    counts = np.bincount(ds.lengths)
    counts[:4] = 0  # at least three steps
    idx = np.flatnonzero(ds.lengths == counts.argmax())[:num]
    assert len(idx) >= 8
    return Batch.from_dataset(ds.take(idx), cfg, spec)


def spy_encoded_hints(net: Net, monkeypatch) -> list[dict[str, torch.Tensor]]:
    """Records the hint values (model form) the encoders receive at every step."""
    seen: list[dict[str, torch.Tensor]] = []
    encode_step = net.encoders.encode_step

    def spy(base, hints):
        seen.append(dict(hints))
        return encode_step(base, hints)

    monkeypatch.setattr(net.encoders, "encode_step", spy)
    return seen


def fed_ground_truth(net: Net, batch: Batch, out, seen, s: int) -> torch.Tensor:
    """(B,) bool: at step s >= 1, which samples were fed the ground-truth hints (else, all features
    together, the fed-back soft predictions of step s - 1; anything else fails)."""
    node_mask = batch.node_mask
    gt = torch.ones(batch.size, dtype=torch.bool)
    pred = torch.ones(batch.size, dtype=torch.bool)
    for f in net.hint_features:
        got = seen[s][f.name].detach()
        truth = model_form(f, batch.hints[f.name][:, s], batch.n)
        fed = feedback(f, out.hints[f.name][:, s - 1].detach(), False, node_mask)
        gt &= (got == truth).flatten(1).all(1)
        pred &= torch.isclose(got, fed, rtol=0, atol=1e-6).flatten(1).all(1)
    assert not (gt & pred).any() and (gt | pred).all(), "a sample got neither (or both) kinds of hints"
    return gt


@pytest.mark.parametrize("p", [0.05, 0.5, 0.95])
def test_teacher_forcing_is_the_probability_of_ground_truth_per_sample_and_step(p, monkeypatch):
    """`teacher_forcing` p: in training, each sample at each step s >= 1 gets the ground-truth hints
    with probability p, else its own predictions (the authors' hint_teacher_forcing_noise = 1 - p).
    Step 0 always encodes the ground truth; evaluation never does after it."""
    cfg = ModelConfig(hidden=8, teacher_forcing=p, hint_repred=RepredMode.SOFT)
    ds, spec, net = setup("insertion_sort", cfg)
    batch = equal_length_batch("insertion_sort", cfg, spec, num=32)
    seen = spy_encoded_hints(net, monkeypatch)
    out = net(batch, train=True, generator=torch.Generator().manual_seed(0))
    for f in net.hint_features:
        assert torch.equal(seen[0][f.name], model_form(f, batch.hints[f.name][:, 0], batch.n))
    forced = torch.stack([fed_ground_truth(net, batch, out, seen, s) for s in range(1, len(seen))])  # (S - 1, B)
    share = forced.float().mean().item()
    assert forced.numel() >= 64
    if p < 0.5:
        assert share < 0.2, share
    elif p > 0.5:
        assert share > 0.8, share
    else:  # drawn per sample (mixed within a step) and anew at every step (mixed along a sample)
        assert 0.3 < share < 0.7, share
        assert (forced.any(1) & ~forced.all(1)).any() and (forced.any(0) & ~forced.all(0)).any()
    seen.clear()
    with torch.no_grad():
        out = net(batch, train=False)
    assert not any(fed_ground_truth(net, batch, out, seen, s).any() for s in range(1, len(seen)))


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("repred", list(RepredMode))
@pytest.mark.parametrize("name", ["bellman_ford", "dfs"])
def test_fed_back_hints_are_hard_or_soft(name, repred, train, monkeypatch):
    """Hard: exact one-hots of the argmax, 0/1 masks, scalars as predicted but detached (CLRS 2.0)
    or not (`hard_scalar_grad`, the RT authors' CLRS v1); soft: softmax / sigmoid probabilities with
    gradients. Checked on what the encoders receive, with predictions fed at every step."""
    cfg = ModelConfig(hidden=8, teacher_forcing=0.0, hint_repred=repred)
    ds, spec, net = setup(name, cfg)
    batch = equal_length_batch(name, cfg, spec)
    seen = spy_encoded_hints(net, monkeypatch)
    out = net(batch, train=train, generator=torch.Generator().manual_seed(0))
    hard = repred in (RepredMode.HARD, RepredMode.HARD_SCALAR_GRAD) or (repred is RepredMode.HARD_ON_EVAL and not train)
    kinds = set()
    for s in range(1, len(seen)):
        for f in net.hint_features:
            got, raw = seen[s][f.name], out.hints[f.name][:, s - 1]
            kinds.add(f.type)
            if f.type is Type.SCALAR:
                assert torch.equal(got.detach(), raw.detach()), f.name
                assert got.requires_grad == (not hard or repred is RepredMode.HARD_SCALAR_GRAD), f.name
                continue
            if f.type is Type.MASK:
                want = (raw > 0).float() if hard else torch.sigmoid(raw)
            else:  # pointers, mask_one, categorical: a distribution over the last axis
                one_hot = torch.nn.functional.one_hot(raw.argmax(-1), raw.shape[-1]).float()
                want = one_hot if hard else torch.softmax(raw, -1)
            torch.testing.assert_close(got.detach(), want.detach(), msg=f.name)
            assert got.requires_grad == (not hard), f.name
            is_binary = ((got == 0) | (got == 1)).all().item()
            assert is_binary == hard, f.name
    assert {Type.SCALAR, Type.MASK, Type.POINTER} <= kinds or {Type.CATEGORICAL, Type.MASK_ONE} <= kinds


def spy_decoder_contexts(net: Net, monkeypatch) -> tuple[list, list]:
    """Records every processor output State and every DecodeContext the hint decoders receive."""
    states, contexts = [], []
    proc_forward, dec_forward = net.processor.forward, net.hint_decoders.forward

    def proc_spy(*args):
        states.append(proc_forward(*args))
        return states[-1]

    def dec_spy(ctx, *args):
        contexts.append(ctx)
        return dec_forward(ctx, *args)

    monkeypatch.setattr(net.processor, "forward", proc_spy)
    monkeypatch.setattr(net.hint_decoders, "forward", dec_spy)
    return states, contexts


@pytest.mark.parametrize("global_vector", ["cat", "core"])
def test_rt_decoders_read_the_previous_and_new_states(global_vector, monkeypatch):
    """The RT authors' decoders: edge state [previous, new] at every step (zeros before the first),
    and in `core` mode the previous and new core-node states; the CLRS decoders (MPNN) neither."""
    cfg = ModelConfig(hidden=8, pointer_decoding="node", teacher_forcing=1.0)
    spec = prepare_spec(generate("bellman_ford", num=1, size=4, seed=0).spec, cfg, "bellman_ford")
    torch.manual_seed(0)
    net = build_model(spec, cfg, "rt", RTConfig(heads=2, head_dim=4, edge_dim=6, layers=1,
                                                 global_vector=global_vector))
    batch = equal_length_batch("bellman_ford", cfg, spec)
    states, contexts = spy_decoder_contexts(net, monkeypatch)
    net(batch, train=True, generator=torch.Generator().manual_seed(0))
    assert len(states) == len(contexts) == batch.max_length - 1
    for s, (state, ctx) in enumerate(zip(states, contexts)):
        assert ctx.edge is not None and torch.equal(ctx.edge_state, state.edge)
        prev_edge = states[s - 1].edge if s else torch.zeros_like(state.edge)
        torch.testing.assert_close(ctx.prev_edge, prev_edge, rtol=0, atol=0)
        if global_vector == "core":
            assert torch.equal(ctx.graph_state, state.graph)
            torch.testing.assert_close(ctx.prev_graph, states[s - 1].graph if s else torch.zeros_like(state.graph),
                                       rtol=0, atol=0)
        else:
            assert ctx.prev_graph is None and ctx.graph_state is None
    mpnn = build_model(spec, cfg, "mpnn")
    _, contexts = spy_decoder_contexts(mpnn, monkeypatch)
    mpnn(batch, train=True, generator=torch.Generator().manual_seed(0))
    assert all(c.prev_edge is None and c.prev_graph is None and c.edge is not None for c in contexts)


def with_edges_changed(batch: Batch, seed: int) -> Batch:
    """The batch with every edge input and edge hint redrawn, and every node pointer (encoded as an
    edge by CLRS) pointed elsewhere."""
    g = torch.Generator().manual_seed(seed)

    def change(f, v):
        if f.type in POINTER_TYPES and f.location is not Location.GRAPH:
            return (v + torch.randint(1, batch.n, v.shape, generator=g)) % batch.n  # another node
        if f.location is not Location.EDGE:
            return v
        if f.type in (Type.MASK, Type.CATEGORICAL):
            return (torch.rand(v.shape, generator=g) > 0.5).float()
        return torch.randn(v.shape, generator=g)

    inputs = {k: change(batch.spec[k], v) for k, v in batch.inputs.items()}
    hints = {k: change(batch.spec[k], v) for k, v in batch.hints.items()}
    return Batch(batch.spec, inputs, hints, batch.outputs, batch.lengths, batch.node_mask)


@pytest.mark.parametrize("name", ["floyd_warshall", "bellman_ford", "insertion_sort"])
@pytest.mark.parametrize("global_vector", ["cat", "core"])
def test_the_transformer_reads_no_edge_features(name, global_vector):
    """The RT paper's standard transformer (no-edges ablation): changing every edge feature of a
    batch (edge inputs and hints, node pointers) changes none of its predictions, with ground-truth
    hints fed at every step in training and in evaluation; the RT's do change."""
    cfg = ModelConfig(hidden=8, teacher_forcing=1.0, pointer_decoding="node")
    ds = generate(name, num=6, size=5, seed=2)
    spec = prepare_spec(ds.spec, cfg, name)
    batch = Batch.from_dataset(ds, cfg, spec)
    changed = with_edges_changed(batch, seed=1)
    small = dict(heads=2, head_dim=4, layers=1, global_vector=global_vector)
    for model, pcfg, invariant in (("transformer", TransformerConfig(**small), True),
                                   ("rt", RTConfig(edge_dim=6, **small), False)):
        torch.manual_seed(0)
        net = build_model(spec, cfg, model, pcfg)
        for train in (True, False):
            with torch.no_grad():
                a = net(batch, train=train, generator=torch.Generator().manual_seed(0))
                b = net(changed, train=train, generator=torch.Generator().manual_seed(0))
            same = all(torch.equal(a.outputs[k], b.outputs[k]) for k in a.outputs) and \
                all(torch.equal(a.hints[k], b.hints[k]) for k in a.hints)
            assert same == invariant, (model, train)
        if invariant:  # nothing is encoded into edges, and no decoder owns an edge map
            encoded = [spec[k] for k in net.encoders.weight]
            assert not any(f.location is Location.EDGE or (f.location is Location.NODE and f.type in POINTER_TYPES)
                           for f in encoded)
            assert all(isinstance(dec.d[2], torch.nn.Identity) for decs in (net.output_decoders, net.hint_decoders)
                       for dec in decs.decoders.values()
                       if dec.feature.location is Location.EDGE or dec.feature.type in POINTER_TYPES)


def best_within(name: str, steps: int, size: int = 16, hidden: int = 128, lr: float = 1e-3,
                batch_size: int = 32) -> float:
    """A tiny training loop of `steps` steps (a count, not a time: a loaded machine is slower, not
    worse); returns the best validation score, validating every 25 steps."""
    torch.manual_seed(0)
    cfg = ModelConfig(hidden=hidden)
    train = generate(name, num=1000, size=size, seed=1)
    val = generate(name, num=64, size=size, seed=2)
    spec = prepare_spec(train.spec, cfg, name)
    net = build_model(spec, cfg, "mpnn")
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    val_batches = [Batch.from_dataset(val.take(np.arange(i, i + 32)), cfg, spec) for i in range(0, 64, 32)]
    best = 0.0
    for step in range(1, steps + 1):
        idx = rng.choice(len(train), batch_size, replace=False)
        batch = Batch.from_dataset(train.take(idx), cfg, spec, generator=rng)
        net.train()
        loss, _ = net.loss(batch, net(batch, train=True, generator=gen))
        opt.zero_grad()
        loss.backward()
        clip_grad_norm(net, 1.0)
        opt.step()
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
    """Reference width and learning rate, 75 steps (~11 s of one core): validation 0.76, 0.91, 0.94 at
    steps 25-75 with these seeds (0.92 at 100: the best is already reached), so the 0.9 bound holds with a
    margin for float differences between machines, and no load on the machine can change the outcome (the
    bound is steps, not time)."""
    assert best_within("bellman_ford", steps=75, hidden=128, lr=1e-3) >= 0.9
