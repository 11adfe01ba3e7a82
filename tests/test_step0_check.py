"""scripts/step0_check.py, the cross-device diagnostic of a cell's start, on the CPU: two devices that compute
alike (the CPU twice) give one data digest, one weights digest, one step-0 score and no module that parts; a
module made to compute otherwise on the second is named; the weight-change calibration scores each draw."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

from relreason.config import build_config

ROOT = Path(__file__).resolve().parents[1]
TINY = ["model.hidden=8", "data.val_num=4", "data.val_size=5", "train.batch_size=2"]


def script():
    spec = importlib.util.spec_from_file_location("step0_check", ROOT / "scripts" / "step0_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cell(tmp_path) -> Path:
    cfg = build_config("triplet_gmpnn", "insertion_sort", "triplet_gmpnn", TINY + [f"data.data_dir={tmp_path}"])
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps({"config": cfg.to_dict()}))
    return path


def test_two_devices_that_compute_alike_agree_and_one_that_does_not_is_located(tmp_path, monkeypatch):
    gc = script()
    out = tmp_path / "step0.json"
    assert gc.main([str(cell(tmp_path)), "--data-dir", str(tmp_path / "data"), "--devices", "cpu,cpu",
                    "--eps", "1e-2", "--draws", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    a, b = report["devices"]
    assert a["step0_validation"] == b["step0_validation"] and a["data"] == b["data"] and a["weights"] == b["weights"]
    assert len(report["eps"]["0.01"]) == 2

    seen = []
    record = gc.Recorder._hook

    def hook(self, name):  # the second run's `processor.triplets` computes otherwise: its outputs doubled
        inner = record(self, name)

        def changed(module, args, out):
            if self.reference is not None and name == "processor.triplets":
                seen.append(name)
                out = [t * 2 for t in gc.tensors(out)]
            return inner(module, args, out)
        return changed

    monkeypatch.setattr(gc.Recorder, "_hook", hook)
    assert gc.main([str(cell(tmp_path)), "--data-dir", str(tmp_path / "data"), "--devices", "cpu,cpu",
                    "--eps", "", "--json", str(out)]) == 0
    parted = json.loads(out.read_text())["devices"][1]["parted"]
    assert seen and min(p["relative"] for p in parted) == 0  # the modules before it: equal
    worst = max(parted, key=lambda p: p["relative"])
    assert worst["module"] == "processor.triplets" and worst["relative"] == 1.0
