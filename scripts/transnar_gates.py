"""What a trained TransNAR takes from its NAR: its gates, its validation with the gates as trained and closed,
and its gradient at the final weights split between the text model and the cross-attention blocks.

A diagnostic for the transnar-ood study (docs/text.md), never a protocol: with every gate closed a TransNAR
computes exactly its own text transformer (relreason.models.text.transnar), so the two validations tell
whether the text part learned the task by itself and what the NAR path adds or takes away. The gradient is
the mean over `--steps` training batches of the run's own stream (the last steps it trained), at the last
checkpoint; `train.grad_clip` is global, so a large cross-attention share would shrink the text model's
updates in the steps it clips (Adam undoes a constant scale, not a changing one).

    cd /work/lanes && python /work/main/scripts/transnar_gates.py \\
        reproduce/cells/transnar/transnar_ood/text:insertion_sort/seed0/run --steps 4

Run it where the run's NAR checkpoint lies under the path its config names (the lanes' worktree). Prints one
JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a TransNAR run directory (its last/ checkpoint is read)")
    parser.add_argument("--steps", type=int, default=4, help="training batches the gradient is averaged over")
    args = parser.parse_args()

    from relreason.train.evaluation import open_checkpoint

    out: dict = {"run": str(args.run)}
    with open_checkpoint(args.run / "last", device="cpu", overrides=["train.threads=1"]) as (_, cfg, wl):
        model = wl.model
        cross = getattr(model, "cross", None) or {}  # the text transformer column (model.use_nar false) has none
        gates = [p for block in cross.values() for p in block.gates().values()]  # each block's gate parameters
        out["gates (tanh)"] = model.gates() if cross else {}
        out["validation, gates as trained"] = wl.evaluate("val")["outputs"]
        if cross:
            saved = [p.detach().clone() for p in gates]
            with torch.no_grad():
                for p in gates:
                    p.zero_()
            out["validation, gates closed (the text model inside)"] = wl.evaluate("val")["outputs"]
            with torch.no_grad():
                for p, value in zip(gates, saved):
                    p.copy_(value)
        model.train()
        last = cfg.train.train_examples // cfg.train.batch_size
        text_sq = cross_sq = 0.0
        norms = []
        for step in range(last - args.steps, last):
            model.zero_grad(set_to_none=True)
            for part in wl.step_batches(step):
                loss, _ = wl.loss(model, part, step)
                loss.backward()
            t = sum(float(p.grad.pow(2).sum()) for k, p in model.named_parameters()
                    if p.grad is not None and not k.startswith("cross."))
            c = sum(float(p.grad.pow(2).sum()) for k, p in model.named_parameters()
                    if p.grad is not None and k.startswith("cross."))
            text_sq, cross_sq = text_sq + t, cross_sq + c
            norms.append((t + c) ** 0.5)
        out["gradient at the last checkpoint"] = {
            "steps": args.steps, "global norm (mean)": sum(norms) / len(norms),
            "cross-attention share of the squared norm": cross_sq / (text_sq + cross_sq),
            "grad_clip": cfg.train.grad_clip}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
