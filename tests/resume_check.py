"""The exact-resume check every workload shares: a run trained in one go and the same run stopped
part-way and resumed must end with identical weights (CPU, deterministic)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file

from relreason.config import Config
from relreason.train import RunResult, run
from relreason.train.resume import resume_config


def assert_resume_is_exact(make: Callable[[int], Config], total: int, part: int, tmp_path: Path) -> RunResult:
    """Trains make(total) whole into tmp_path/a, make(part) into tmp_path/b then resumes it to
    `total`; asserts both `last/` weights are equal key by key. Returns the resumed run's result."""
    run(make(total), out=tmp_path / "a", name="r", show_progress=False)
    run(make(part), out=tmp_path / "b", name="r", show_progress=False)
    cfg = resume_config(tmp_path / "b" / "r", [f"train.train_examples={total}"])
    resumed = run(cfg, out=tmp_path / "b", name="r", resume=True, show_progress=False)
    a = load_file(str(tmp_path / "a" / "r" / "last" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "r" / "last" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    return resumed
