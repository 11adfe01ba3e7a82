"""Which CPU kernel settings change a training trajectory: one cell's first updates trained under each.

A diagnostic behind `reproduce --verify`'s handling of CPU kernels (docs/reproducing.md), never a protocol.
Each setting trains the same config (a table's cell, its paper recipe, `--examples` training examples, one
torch thread) in a child process (`python -m relreason.studies.retrain`) with the environment the setting
names: this machine's own kernels, torch's ATen kernels lowered (ATEN_CPU_CAPABILITY), MKL's lowered
(MKL_ENABLE_INSTRUCTIONS), both. Prints, per setting, the kernels the run recorded, its first validation
(the initial model: where kernels part before any update, the answers of the untrained model differ), its last
training loss in full precision, its validation score and a digest of its final weights: equal digests, equal
trajectories.

    python scripts/cpu_kernels.py --model triplet_gmpnn --task binary_search --examples 640

Settings that name a level above this machine's are skipped (a process cannot raise its kernels).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def settings(here: str) -> dict[str, dict[str, str]]:
    """The environments compared, by name: this machine's kernels, and each lower level through ATen, MKL and both."""
    from relreason.runtime import KERNEL_LEVELS, kernels_environment

    out: dict[str, dict[str, str]] = {f"native ({here})": {}}
    for level in KERNEL_LEVELS:
        env = kernels_environment(level)
        if env is None or level == here:
            continue
        aten, mkl = env["ATEN_CPU_CAPABILITY"], env["MKL_ENABLE_INSTRUCTIONS"]
        out[f"ATEN_CPU_CAPABILITY={aten}"] = {"ATEN_CPU_CAPABILITY": aten}
        out[f"MKL_ENABLE_INSTRUCTIONS={mkl}"] = {"MKL_ENABLE_INSTRUCTIONS": mkl}
        out[f"both ({level})"] = env
    return out


def weights_digest(run: Path) -> str:
    """The final weights' digest (relreason.train.checkpoint.tensors_digest)."""
    from safetensors.torch import load_file

    from relreason.train.checkpoint import tensors_digest

    return tensors_digest(load_file(str(run / "last" / "model.safetensors")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="triplet_gmpnn")
    parser.add_argument("--task", default="binary_search")
    parser.add_argument("--recipe", default=None, help="recipe name (default: the model's paper recipe)")
    parser.add_argument("--examples", type=int, default=640, help="training examples (batch 32: 20 updates)")
    parser.add_argument("--data-dir", type=Path, default=None, help="where splits are generated (default: a temp dir)")
    args = parser.parse_args()

    from relreason.config import build_config
    from relreason.rundir import read_object
    from relreason.runtime import cpu_kernels

    here = cpu_kernels()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data_dir or Path(tmp) / "data"
        cfg = build_config(args.model, args.task, args.recipe,
                           [f"train.train_examples={args.examples}", f"train.eval_every_examples={args.examples}",
                            "train.threads=1", f"data.data_dir={data}"])
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(cfg.to_dict()))
        print(f"{args.model} on {args.task}, {args.examples} training examples, here {here} kernels")
        for name, env in settings(here).items():
            child = subprocess.run([sys.executable, "-m", "relreason.studies.retrain", str(config), tmp, name],
                                   env={**os.environ, **env}, capture_output=True, text=True)
            if child.returncode != 0:
                print(f"{name}: failed: {(child.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            run = Path(tmp) / name
            results = read_object(run / "results.json")
            losses = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
            vals = [r for r in losses if r.get("event") == "val"]
            first, last = vals[0], vals[-1]
            kernels = results["hardware"][0].split(", cpu, ")[1].split(" kernels")[0]
            print(f"{name:34s} kernels {kernels:8s} validation at {first['examples']:,} examples "
                  f"{first['score']!r:22s} loss {last['loss']!r:22s} validation {last['score']!r:22s} "
                  f"weights {weights_digest(run)}")


if __name__ == "__main__":
    main()
