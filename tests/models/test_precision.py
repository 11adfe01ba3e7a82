"""train.precision: bf16 autocast of the training forward works for every processor (the custom
autograd Functions run in float32 inside it), keeps the weights and gradients float32, and gives
the fp32 loss to bf16 rounding."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
import torch

from relreason.config import build_config
from relreason.data import generate
from relreason.errors import RelreasonError
from relreason.models import PROCESSORS, Batch, ModelConfig, build_model, prepare_spec
from relreason.models.precision import autocast, float32_apply
from relreason.train import run


@contextlib.contextmanager
def module_output_dtypes():
    """Yields the set of dtypes that every nn.Module's tensor outputs had within the block (all modules:
    a global forward hook), which shows whether bf16 autocast really ran."""
    seen: set[torch.dtype] = set()

    def hook(module, args, out):
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(t, torch.Tensor):
                seen.add(t.dtype)

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


@pytest.mark.parametrize("processor", PROCESSORS.names())
def test_bf16_forward_trains_every_processor_in_float32_weights(processor):
    cfg = ModelConfig(hidden=16)
    ds = generate("floyd_warshall", num=4, size=5, seed=3)  # edge pointers: every custom Function path
    spec = prepare_spec(ds.spec, cfg, "floyd_warshall")
    torch.manual_seed(0)
    net = build_model(spec, cfg, processor)
    batch = Batch.from_dataset(ds, cfg, spec, generator=np.random.default_rng(0))
    losses, dtypes = [], []
    for precision in ("fp32", "bf16"):
        net.zero_grad(set_to_none=True)
        with module_output_dtypes() as seen, autocast(precision, torch.device("cpu")):
            loss, _ = net.loss(batch, net(batch, train=True, generator=torch.Generator().manual_seed(0)))
        loss.float().backward()
        losses.append(float(loss.detach()))
        dtypes.append(seen)
        grads = [p.grad for p in net.parameters() if p.grad is not None]
        assert grads and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    assert all(p.dtype == torch.float32 for p in net.parameters())
    # bf16 really ran (a no-op autocast would give the fp32 pass again, to the bit)
    assert torch.bfloat16 not in dtypes[0] and torch.bfloat16 in dtypes[1], dtypes
    assert losses[1] != losses[0]
    assert losses[1] == pytest.approx(losses[0], rel=0.05)


TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=8", "train.eval_every_examples=4",
        "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=6", "data.val_num=4",
        "data.test_num=4"]  # a run of a few seconds (tests/cli/cli_run.py)


def test_a_bf16_run_trains_its_forward_in_bf16(tmp_path):
    cfg = build_config("mpnn", "bellman_ford",
                       overrides=[*TINY, f"data.data_dir={tmp_path / 'data'}", "train.precision=bf16"])
    with module_output_dtypes() as seen:
        res = run(cfg, out=tmp_path / "runs", name="bf16", show_progress=False)
    assert torch.bfloat16 in seen, seen
    stored = json.loads((res.run_dir / "results.json").read_text())
    assert stored["config"]["train"]["precision"] == "bf16"
    assert np.isfinite(res.test["score"])


def test_float32_apply_casts_up_only_under_autocast():
    seen = []

    def apply(a, b, k):
        seen.append((a.dtype, b.dtype, torch.is_autocast_enabled("cpu"), k))
        return a @ b

    a, b = torch.ones(2, 2, dtype=torch.bfloat16), torch.ones(2, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        float32_apply(apply, a, b, 3)
    float32_apply(apply, b, b, 4)
    assert seen == [(torch.float32, torch.float32, False, 3), (torch.float32, torch.float32, False, 4)]


def test_precision_is_validated():
    assert build_config("rt", "bellman_ford", overrides=["train.precision=bf16"]).train.precision == "bf16"
    with pytest.raises(RelreasonError, match="train.precision must be fp32 or bf16"):
        build_config("rt", "bellman_ford", overrides=["train.precision=fp16"])
