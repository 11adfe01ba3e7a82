"""train.tf32 (relreason.models.precision.set_tf32): the declared precision option of float32 matrix products on
CUDA. A run sets torch's backend flags from its config (off by default: full float32, as on the CPU); a pack or
seed group, whose runs share the process-wide flags, refuses runs that disagree."""

from __future__ import annotations

import pytest
import torch

from relreason.config import build_config
from relreason.errors import RelreasonError
from relreason.models.precision import set_tf32
from relreason.train import loop, run
from relreason.train.pack import train_pack

TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=4", "train.eval_every_examples=4",
        "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=5"]


@pytest.fixture
def flags():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


@pytest.mark.parametrize("tf32", [True, False])
def test_tf32_sets_the_backend_flags_on_cuda(flags, tf32):
    set_tf32(not tf32, torch.device("cuda"))  # the flags alone: no GPU needed
    set_tf32(tf32, torch.device("cuda"))
    assert torch.backends.cuda.matmul.allow_tf32 is tf32 and torch.backends.cudnn.allow_tf32 is tf32


def test_a_run_sets_the_flags_its_config_declares_on_its_device(tmp_path, monkeypatch, flags):
    seen = []
    monkeypatch.setattr(loop, "set_tf32", lambda v, device: (seen.append((v, device.type)), set_tf32(v, device)))
    set_tf32(True, torch.device("cuda"))
    run(build_config("mpnn", "bfs", None, TINY + [f"data.data_dir={tmp_path / 'd'}", "train.device=cpu"]),
        out=tmp_path, name="r", show_progress=False)
    assert seen == [(False, "cpu")] and torch.backends.cuda.matmul.allow_tf32 is False


def test_tf32_off_cuda_is_refused_before_training(tmp_path, flags):
    """On the CPU there are no TF32 products: the run would compute in float32 and be recorded as TF32."""
    cfg = build_config("mpnn", "bfs", None, TINY + [f"data.data_dir={tmp_path / 'd'}", "train.tf32=true",
                                                     "train.device=cpu"])
    with pytest.raises(RelreasonError, match=r"^train.tf32 rounds CUDA matrix products through TF32, but this run "
                                             r"trains on cpu"):
        run(cfg, out=tmp_path, name="r", show_progress=False)
    assert not (tmp_path / "r").exists()  # refused before its run directory was claimed
    with pytest.raises(RelreasonError, match="but this run trains on cpu"):  # a pack's (or seed group's) cells too
        train_pack([cfg, cfg], [tmp_path / "a", tmp_path / "b"], [False, False], show_progress=False)
    assert not (tmp_path / "a").exists()


def test_tf32_is_off_by_default():
    assert build_config("mpnn", "bfs", None, []).train.tf32 is False


def test_a_pack_refuses_runs_that_disagree_on_tf32(tmp_path, flags):
    cfgs = [build_config("mpnn", "bfs", None, TINY + [f"data.data_dir={tmp_path / 'd'}", f"train.tf32={v}"])
            for v in (True, False)]
    with pytest.raises(RelreasonError, match="must agree on train.tf32"):
        train_pack(cfgs, [tmp_path / "a", tmp_path / "b"], [False, False], show_progress=False)
