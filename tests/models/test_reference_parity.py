"""Whole networks against the reference's own (google-deepmind/clrs 2.0.3, run.py's model at hidden 8):
Triplet-GMPNN on every algorithm, MPNN, PGN, masked PGN and Deep Sets on a few. With the reference's weights
loaded and the reference's batch (its random `pos`), our training loss, every gradient, the weights after one
training step (clipping, Adam), the evaluation forward's output logits and the scores of its hard predictions
(the metric of every validation and test) equal the reference's. The reference's numbers were computed once by
running its code (scripts/reference_parity.py); nothing here imports it. Training's Gumbel noise on
permutation-pointer logits is a draw, not a computation to compare: both sides take it out."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from relreason.config import build_config
from relreason.data import ALGORITHMS
from relreason.data.algorithms import SPECS
from relreason.data.trajectory import Dataset
from relreason.eval import Scorer
from relreason.models import Batch, build_model, prepare_spec
from relreason.train.optimizer import adam, clip_grad_norm

FILES = Path(__file__).resolve().parents[1] / "data" / "reference_parity"
CASES = sorted((p.parent.name, p.stem) for p in FILES.glob("*/*.npz"))  # (the reference's processor, algorithm)
OURS = {"triplet_gmpnn": "triplet_gmpnn", "mpnn": "mpnn", "pgn": "pgn", "pgn_mask": "pgn_masked",
        "deepsets": "deepsets"}  # the reference's processor names -> ours
ENCODING = "param/net/~_construct_encoders_decoders/algo_0_"
# Haiku's Linear modules of the reference's triplet_gmpnn processor in the order its __call__ creates them
# (processors.py PGN.__call__ and get_triplet_msgs): m_1 m_2 m_e m_g o1 o2, t_1 t_2 t_3 t_e_1 t_e_2 t_e_3 t_g, o3,
# gate1 gate2 gate3; the message MLP and the LayerNorm are named.
LINEARS = ["m1", "m2", "me", "mg", "o1", "o2", ("triplets.node", 0), ("triplets.node", 1), ("triplets.node", 2),
           ("triplets.edge", 0), ("triplets.edge", 1), ("triplets.edge", 2), "triplets.graph", "triplets.out",
           "gate_z", "gate_agg", "gate_out"]


def reference(processor: str, algorithm: str) -> dict[str, np.ndarray]:
    with np.load(FILES / processor / f"{algorithm}.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def haiku_keys(ours: str, processor: str) -> list[str]:
    """The reference's parameters (`net/<module>/<name>`) that one of ours holds, stacked on its rows in this
    order: the triplets' three node and three edge maps, an edge pointer's two encoders; else one. `processor`:
    the processor's Haiku module (`param/net/<name>/`)."""
    module, kind = ours.rsplit(".", 1)
    if m := re.fullmatch(r"encoders\.(weight|bias)\.(.+)", ours):
        return [f"{ENCODING}{m[2]}_enc_linear/{'w' if m[1] == 'weight' else 'b'}"]  # `_1` added by from_reference
    w = {"weight": "w", "bias": "b"}[kind]
    if m := re.fullmatch(r"(output|hint)_decoders\.decoders\.(.+)\.d\.(\d+)", module):
        k = int(m[3])
        return [f"{ENCODING}{m[2]}_dec_linear" + (f"_{k}" if k else "") + f"/{w}"]
    module = module[len("processor."):]
    if module == "ln":
        return [f"{processor}layer_norm/{'scale' if kind == 'weight' else 'offset'}"]
    if m := re.fullmatch(r"mlp\.(\d+)", module):
        return [f"{processor}mlp/~/linear_{m[1]}/{w}"]
    found = [i for i, t in enumerate(LINEARS) if (t[0] if isinstance(t, tuple) else t) == module]
    if not found:
        raise KeyError(ours)
    return [f"{processor}linear" + (f"_{i}" if i else "") + f"/{w}" for i in found]


def from_reference(net: torch.nn.Module, arrays: dict[str, np.ndarray], prefix: str = "param/") -> dict:
    """Our state dict (or gradients: `prefix` grad/, or weights after a step: after/) from the reference's
    arrays, every one of them used exactly once. Haiku's matrices are [in, out], ours [out, in]; an encoder's
    [columns, H] as ours."""
    processor, = {k[:k.index("_processor/") + len("_processor/")] for k in arrays if k.startswith("param/net/")
                  and "_processor/" in k}
    used, out = set(), {}
    for ours, like in net.state_dict().items():
        keys = haiku_keys(ours, processor)
        if ours.startswith("encoders."):
            second = keys[0].replace("_enc_linear/", "_enc_linear_1/")
            if prefix + second[len("param/"):] in arrays:  # an edge pointer's second map: our second row
                keys.append(second)
        parts = [arrays[prefix + k[len("param/"):]] for k in keys]
        used.update(keys)
        if ours.startswith("encoders."):
            value = np.concatenate([v.reshape(-1, like.shape[-1]) for v in parts], 0)
        elif parts[0].ndim == 2:
            value = np.concatenate([v.T for v in parts], 0)
        else:
            value = np.concatenate(parts, 0)
        out[ours] = torch.as_tensor(np.ascontiguousarray(value), dtype=like.dtype).reshape(like.shape)
    every = {"param/" + k[len(prefix):] for k in arrays if k.startswith(prefix)}
    assert every == used, (sorted(every - used), sorted(used - every))
    return out


def setup(processor: str, algorithm: str, arrays: dict[str, np.ndarray]):
    """run.py's model settings (the Triplet-GMPNN recipe's: Ibarz et al. train with run.py) with the processor's
    defaults."""
    cfg = build_config("triplet_gmpnn", algorithm, None, ["model.hidden=8"])
    stages = {"input": {}, "hint": {}, "output": {}}
    for key, value in arrays.items():
        stage, _, name = key.partition(".")
        if stage in stages and name:
            stages[stage][name] = value
    ds = Dataset(algorithm, SPECS[algorithm], stages["input"], stages["hint"], stages["output"],
                 arrays["lengths"].astype(np.int64))
    spec = prepare_spec(ds.spec, cfg.model, algorithm)
    batch = Batch.from_dataset(ds, cfg.model, spec)  # pos as stored, then the reference's draw
    batch.inputs["pos"] = torch.as_tensor(arrays["pos"], dtype=torch.float32)
    net = build_model(spec, cfg.model, OURS[processor], cfg.processor if processor == "triplet_gmpnn" else None)
    net.load_state_dict(from_reference(net, arrays))
    return cfg, batch, net


def close(ours: torch.Tensor, theirs: torch.Tensor, name: str) -> None:
    """Equal to float32 rounding, measured against the tensor's own scale: a gradient summed over a long trajectory
    in another order differs by up to 1.2e-4 of its largest entry (Deep Sets on insertion_sort, whose gradients
    reach 12: ours in float64 differ from the reference's float32 by 8e-5 there, so the rounding is the
    reference's as much as ours), and an entry that should be 0 (a bias that a softmax cancels) is rounding noise
    around 0 on both sides. A wrong computation parts by far more: the triplet messages without their ReLU, or
    the loss's normaliser off by one, fail this test."""
    torch.testing.assert_close(ours, theirs, rtol=0, atol=3e-4 * float(theirs.abs().max()) + 1e-6,
                               msg=lambda m: f"{name}: {m}")


@pytest.fixture
def no_gumbel_noise(monkeypatch):
    from relreason.models import decoders

    monkeypatch.setattr(decoders, "gumbel", lambda shape, device, generator: torch.zeros(shape, device=device))


def test_triplet_gmpnn_is_checked_on_every_algorithm():
    assert [a for p, a in CASES if p == "triplet_gmpnn"] == sorted(ALGORITHMS.names())


@pytest.mark.parametrize("processor, algorithm", CASES)
def test_the_network_computes_the_references_loss_gradients_step_and_outputs(processor, algorithm, no_gumbel_noise):
    arrays = reference(processor, algorithm)
    cfg, batch, net = setup(processor, algorithm, arrays)
    net.train()
    loss, _ = net.loss(batch, net(batch, train=True))
    torch.testing.assert_close(loss.detach(), torch.as_tensor(arrays["loss"]).float(), rtol=1e-5, atol=1e-5)
    loss.backward()
    grads = from_reference(net, arrays, prefix="grad/")
    for name, p in net.named_parameters():  # no gradient: a map no decoder reads (the reference's are 0)
        got = torch.zeros_like(p) if p.grad is None else p.grad
        close(got, grads[name], name)
    start = from_reference(net, arrays)
    opt = adam(net.parameters(), cfg.train.lr)  # the recipe's learning rate and clipping: run.py's, if this holds
    clip_grad_norm(net, cfg.train.grad_clip)
    opt.step()
    # Adam's first step moves each weight by lr * g / (|g| + 1e-8): where a gradient is float noise around 0 (a
    # bias that a softmax cancels) that ratio is the noise's, so those weights are held to moving at most lr
    after, compared, total = from_reference(net, arrays, prefix="after/"), 0, 0
    for name, p in net.named_parameters():
        clear = grads[name].abs() > 1e-5
        torch.testing.assert_close(p.detach()[clear], after[name][clear], rtol=1e-5, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")
        assert float((p.detach() - start[name]).abs().max()) <= cfg.train.lr * 1.001
        compared, total = compared + int(clear.sum()), total + clear.numel()
    assert compared > total / 3  # not a vacuous check (the rest: maps this algorithm's decoders hardly read)
    net.load_state_dict(start)
    net.eval()
    with torch.no_grad():
        out = net(batch, train=False)
    for name, value in out.outputs.items():
        close(value, torch.as_tensor(arrays[f"eval/{name}"]), name)
    scorer = Scorer(batch.spec)  # the metric of every validation and test, on the same hard predictions
    scorer.update(net.predict(out), batch)
    scores = scorer.result()
    want = {k[len("score/"):]: float(v) for k, v in arrays.items() if k.startswith("score/")}
    assert {**scores.outputs, "score": scores.score} == pytest.approx(want, abs=1e-6)
