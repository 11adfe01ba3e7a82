"""Per-cell GPU predictions from the committed GPU check figures (results/gpu/*.json, written by
scripts/gpu_check.sh): the training time of one full-protocol cell (320,000 examples) at K = 1 (the
uncaptured static step, and train.cuda_graph) and in a vmapped seed group of K = 16. Training steps only:
validation and the final test were not timed on the GPU, so they are not in these figures.

    python scripts/gpu_predictions.py            # prints the markdown table README.md holds
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = 320_000  # every protocol below: rt.yaml, triplet_gmpnn.yaml, clrs30.yaml train.train_examples


def _rows(name: str, key: str) -> list[dict]:
    report = json.loads((ROOT / "results" / "gpu" / name).read_text())
    value = report.get(key)
    return value if isinstance(value, list) else []


def _device() -> str:
    report = json.loads((ROOT / "results" / "gpu" / "gpu_check.json").read_text())
    return f"{report['device_name']}, torch {report['torch']}"


def _hours(rate: float | None) -> str:
    if not rate:
        return "not measured"
    h = EXAMPLES / rate / 3600
    return f"{h * 60:.0f} min" if h < 1 else f"{h:.1f} h"


def main() -> int:
    files = ["gpu_check.json", "gpu_check_triplet_gmpnn.json", "gpu_check_triplet_gmpnn_captured.json"]
    captured = [r for f in files for r in _rows(f, "captured")]
    groups = [r for f in files for r in _rows(f, "throughput")]
    protocols = [("RT protocol (rt, batch 4)", "rt", "rt", "rt"),
                 ("Triplet-GMPNN protocol (triplet_gmpnn, batch 32)", "triplet_gmpnn", "triplet_gmpnn", "triplet_gmpnn"),
                 ("MPNN, CLRS-30 protocol (clrs30, batch 32)", "mpnn", "clrs30", "default")]
    print(f"Predicted training time of one cell of 320,000 examples on one {_device()} (scripts/gpu_check.sh "
          "figures in results/gpu/; validation and test not included):\n")
    print("| protocol | K = 1, static step | K = 1, train.cuda_graph | K = 16 seed group, per cell (group wall time) |")
    print("|---|---|---|---|")
    for label, model, recipe, group_recipe in protocols:
        c = next((r for r in captured if r["model"] == model and r["recipe"] == recipe), None)
        g = next((r for r in groups if r["model"] == model and r["recipe"] == group_recipe and r["seeds"] == 16), None)
        eager, graph = (c["eager_examples_per_s"], c["graph_examples_per_s"]) if c else (None, None)
        per_cell = _hours(g["examples_per_s"]) if g else "not measured"
        wall = f" ({_hours(g['examples_per_s'] / 16)})" if g else ""
        note = "" if group_recipe == recipe else f" ({group_recipe} recipe)"
        print(f"| {label} | {_hours(eager)} | {_hours(graph)} | {per_cell}{wall}{note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
