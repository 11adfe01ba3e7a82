"""scripts/gpu_pack_probe.py, the bisection of the H200 pack stall (docs/gpu.md), on the CPU: each variant of the
pack's loop runs in its own process; one that outlives --limit is stopped and marked stalled, the others still
run and are reported."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def script():
    spec = importlib.util.spec_from_file_location("gpu_pack_probe", ROOT / "scripts" / "gpu_pack_probe.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_a_variant_runs_in_its_own_process_with_its_environment_and_reports(tmp_path):
    probe = script()
    assert probe.main(["--out", str(tmp_path), "--device", "cpu", "--quick", "--steps", "2", "--limit", "300",
                       "--variants", "shared-no-workspace"]) == 0
    report = json.loads((tmp_path / "gpu_pack_probe.json").read_text())["variants"]
    assert list(report) == ["shared-no-workspace"]
    assert all(r["outcome"] == "finished" and r["steps"] == 2 and r["first_step_s"] > 0 for r in report.values())
    log = (tmp_path / "gpu_pack_probe.log").read_text()
    assert "shared-no-workspace: validations done" in log and "shared-no-workspace: step 1" in log
    assert "shared-no-workspace: its environment in effect: True" in log  # CUBLAS_WORKSPACE_CONFIG=:0:0 reached it


def test_a_variant_past_its_limit_is_stopped_and_the_next_still_runs(tmp_path):
    probe = script()
    assert probe.main(["--out", str(tmp_path), "--device", "cpu", "--quick", "--steps", "1", "--limit", "0.5",
                       "--variants", "single,uncaptured"]) == 1
    report = json.loads((tmp_path / "gpu_pack_probe.json").read_text())["variants"]
    assert [r["outcome"] for r in report.values()] == ["stalled", "stalled"] and report["single"]["steps"] == 0
    assert "single: stalled after 0.5 s; stopping it with SIGABRT" in (tmp_path / "gpu_pack_probe.log").read_text()


def test_unknown_variants_are_refused(tmp_path, capfd):
    assert script().main(["--out", str(tmp_path), "--variants", "pack,fast"]) == 2
    assert "unknown variants ['fast']" in capfd.readouterr().err
