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
    # the script's mechanics on two processors and one protocol (every processor's step is tested on the CPU
    # by tests/models; on the CPU the agreement is CPU against CPU)
    res = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path), "--device", "cpu", "--quick",
                          "--steps", "1", "--processors", "mpnn,rt", "--protocols", "mpnn:default:8"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [r["processor"] for r in report["agreement"]] == ["mpnn", "rt"]
    assert all(r["ok"] and r["grad_max_diff_vs_largest"] == 0.0 for r in report["agreement"])  # CPU vs CPU: equal
    assert {(r["model"], r["batch"], r["seeds"]) for r in report["throughput"]} == {("mpnn", 8, 1), ("mpnn", 8, 2)}
    assert all(r["examples_per_s"] > 0 and r["tflops_per_s"] > 0 for r in report["throughput"])
    assert report["bf16"]["ok"] and report["cuda_graph"]["ok"] is None
    # train.cuda_graph's staging with the recorded step re-run (CPU): the uncaptured weights exactly
    assert [r["model"] for r in report["captured"]] == ["mpnn"]
    assert all(r["ok"] and r["weights_max_abs_diff"] == 0.0 and r["graphs"] >= 1 for r in report["captured"])
    assert report["end_to_end"]["ok"] and report["end_to_end"]["examples"] == 128
    assert report["eval_batch"]["ok"] and report["eval_batch"]["free_memory_read"] == report["eval_batch"]["host_memory"]
    text = (tmp_path / "gpu_check.md").read_text()
    assert "| mpnn |" in text and "FAILED" not in text and "not run" not in text


def test_gpu_check_runs_the_sections_asked_and_refuses_unknown_ones(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}
    res = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path), "--device", "cpu", "--quick",
                          "--sections", "eval_batch,bogus"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 2 and "Error: unknown section bogus" in res.stderr, res.stderr[-2000:]
    res = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path), "--device", "cpu", "--quick",
                          "--processors", "mpnn,nope"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 2 and "Error: unknown processor nope" in res.stderr, res.stderr[-2000:]
    res = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path), "--device", "cpu", "--quick",
                          "--sections", "eval_batch"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["eval_batch"]["ok"] and "agreement" not in report and "captured" not in report


def test_gpu_check_refuses_cuda_without_a_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        return
    res = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path)], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": sys.executable}, timeout=120)
    assert res.returncode == 1 and "torch sees no CUDA device" in res.stderr
