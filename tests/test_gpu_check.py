"""scripts/gpu_check.sh, the GPU path's one command, run on the CPU (`--device cpu --quick`): a smoke test of
the script itself, so it is ready the day a GPU is lent (the CUDA-only capture is reported as skipped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_runs_on_cpu_and_writes_its_report(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}
    res = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path), "--device", "cpu", "--quick",
                          "--steps", "1"], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    from relreason.models.processors import PROCESSORS

    assert [r["processor"] for r in report["agreement"]] == PROCESSORS.names()
    assert all(r["ok"] and r["grad_max_rel_diff"] == 0.0 for r in report["agreement"])  # CPU against CPU: equal
    assert {(r["model"], r["seeds"]) for r in report["throughput"]} == {(m, k) for m in ("rt", "mpnn") for k in (1, 2)}
    assert all(r["examples_per_s"] > 0 and r["tflops_per_s"] > 0 for r in report["throughput"])
    assert report["bf16"]["ok"] and report["cuda_graph"]["ok"] is None
    assert "| rt |" in (tmp_path / "gpu_check.md").read_text()


def test_gpu_check_refuses_cuda_without_a_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        return
    res = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path)], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": sys.executable}, timeout=120)
    assert res.returncode == 1 and "torch sees no CUDA device" in res.stderr
