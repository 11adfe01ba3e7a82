"""A cell's start, checked on each device: its validation data, initial weights and step-0 validation.

A diagnostic behind cross-device `reproduce --verify`, never a protocol. A cell re-trained on another device
starts, by construction, from the same validation samples (drawn on the CPU), the same initial weights (built on
the CPU from the seed, then moved) and, before any update, should give the same answers up to float rounding.
This prints, for a cell's result file (results/cells/.../seedK.json, its stored config):

- `data`: a digest of the samples its step-0 validation scores, and `weights`: a digest of its initial weights
  (each as it is on the device, brought back to the CPU);
- each device's step-0 validation score (`--devices`, default the CPU and CUDA where there is one), all of one
  batch (the whole validation set) so that every device sees the same batch;
- with two devices, the modules whose outputs part most on that batch (largest relative difference, in the
  order they first ran): where a device computes something else than rounding, the first of them says where;
- `--eps`: how far the CPU's step-0 validation moves when every weight is multiplied by (1 + eps N(0, 1)),
  `--draws` times per eps: what a change of that size does to the untrained model's answers (a float32
  rounding step is 6e-8).

    PYTHONPATH=. python3 scripts/step0_check.py results/cells/triplet_gmpnn/triplet_gmpnn/insertion_sort/seed0.json \\
        --data-dir /tmp/data --json /tmp/step0.json

Measured here (2026-11-28, CPU, `--eps 1e-6,1e-5,1e-4,1e-3,1e-2 --draws 4`) on that cell, the H200's first:
step-0 validation 0.0703125 on the CPU, where the H200's run recorded 0.078125 (+0.78 points: 8 of its 1,024
answers). Weights changed by 1e-6 and 1e-5 moved no draw's score; 1e-4 one draw of 4 (+0.20); 1e-3 three
(+0.10 each); 1e-2 all four (-0.10 to +0.78). A weight change stands in for rounding, it is not the same
thing; but one a hundred times float32's rounding step moved nothing, so the H200's step-0 difference is
unlikely to be rounding alone. Run under torch 2.11.0 (the GPU image's release; a scratch virtualenv on this
CPU) it printed the H200's 0.078125 exactly, data cada720dbb71886d as under 2.13.0 and weights dbbb896516bbda59
where 2.13.0 gives 4731761cfdd15eab: the two releases draw other initial weights from one seed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from relreason.train.checkpoint import tensors_digest

TOP = 12  # modules listed where two devices part


def validation_set(wl):
    """The samples the step-0 validation scores (the resampled draw 0 where the protocol resamples)."""
    from relreason.data.config import ValidationDraw
    from relreason.train.workloads import validation_resample

    ds = wl.dataset(0, "val")
    if wl.cfg.data.validation is ValidationDraw.RESAMPLED:
        ds = ds.take(validation_resample(wl.cfg.train.seed, 0, 0, len(ds)))
    return ds


def dataset_digest(ds) -> str:
    return tensors_digest({**{f"inputs.{k}": v for k, v in ds.inputs.items()},
                          **{f"hints.{k}": v for k, v in ds.hints.items()},
                          **{f"outputs.{k}": v for k, v in ds.outputs.items()}, "lengths": ds.lengths})


def tensors(x) -> list[torch.Tensor]:
    """The floating-point tensors in a module's output (a tensor, or tuples, lists, dicts and dataclasses of them)."""
    if isinstance(x, torch.Tensor):
        return [x] if x.is_floating_point() else []
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors(v)]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in tensors(v)]
    if hasattr(x, "__dataclass_fields__"):
        return [t for k in x.__dataclass_fields__ for t in tensors(getattr(x, k))]
    return []


class Recorder:
    """Forward hooks on every submodule: `reference` None records the outputs of each module's first CALLS calls
    (on the CPU); else compares those calls with the recorded ones and keeps the largest relative difference per
    (module, call)."""

    CALLS = 4  # the first processor steps: where a device computes otherwise, it shows from the first call

    def __init__(self, model: torch.nn.Module, reference: dict | None = None):
        self.outputs: dict = {}
        self.parted: dict = {}
        self.reference = reference
        self.calls: dict = {}
        self.handles = [m.register_forward_hook(self._hook(name)) for name, m in model.named_modules() if name]

    def _hook(self, name: str):
        def hook(module, args, out):
            k = self.calls[name] = self.calls.get(name, -1) + 1
            if k >= self.CALLS:
                return
            got = [t.detach().float().cpu() for t in tensors(out)]
            if self.reference is None:
                self.outputs[(name, k)] = got
                return
            ref = self.reference.get((name, k))
            if ref is None or [r.shape for r in ref] != [g.shape for g in got]:
                return
            worst = max((float((g - r).abs().max() / (r.abs().max() + 1e-30)) for g, r in zip(got, ref)
                         if r.numel()), default=0.0)
            self.parted[(name, k)] = (len(self.parted), worst)
        return hook

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def step0(cfg, device: torch.device, reference: dict | None):
    """(workload, score, weights digest, data digest, recorder) of the cell's initial model on `device`."""
    from relreason.train.workloads import build_workload

    wl = build_workload(cfg, device)
    ds = validation_set(wl)
    rec = Recorder(wl.model, reference)
    try:
        with torch.no_grad():
            score = float(wl.evaluate("val", draw=0, batch_size=len(ds))["score"])
    finally:
        rec.close()
    return wl, score, tensors_digest(wl.model.state_dict()), dataset_digest(ds), rec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="a cell's result file (results/cells/.../seedK.json)")
    parser.add_argument("--data-dir", type=Path, required=True, help="where the cell's splits are (or are made)")
    parser.add_argument("--devices", default=None, help="comma list (default: cpu, and cuda where there is one)")
    parser.add_argument("--eps", default="1e-6,1e-4,1e-2", help="comma list of relative weight changes ('' none)")
    parser.add_argument("--draws", type=int, default=3, help="changed copies of the weights per eps")
    parser.add_argument("--json", type=Path, default=None, help="also write what is printed, as JSON")
    args = parser.parse_args(argv)
    try:
        eps = [float(e) for e in args.eps.split(",") if e.strip()]
    except ValueError:
        parser.error(f"--eps {args.eps!r} is not a comma list of numbers")
    if args.draws < 1 or not all(e > 0 for e in eps):
        parser.error("--draws must be at least 1 and every --eps positive")
    devices = args.devices.split(",") if args.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if devices[0] != "cpu":
        parser.error("--devices must start with cpu (the reference the others are compared with)")

    from relreason.config import config_from_dict

    try:
        stored = json.loads(args.result.read_text())["config"]
        if not (isinstance(stored["data"], dict) and isinstance(stored["train"], dict)):
            raise TypeError("its config has no data and train sections")
    except (OSError, ValueError, KeyError, TypeError) as e:
        parser.error(f"{args.result} is not a cell's result file with its config ({type(e).__name__}: {e})")
    stored["data"]["data_dir"] = str(args.data_dir)
    torch.set_num_threads(1)
    report: dict = {"result": str(args.result), "torch": torch.__version__, "numpy": np.__version__, "devices": []}
    reference = None
    for name in devices:
        device = torch.device(name)
        on_cuda = device.type == "cuda"
        stored["train"]["device"], stored["train"]["cuda_graph"] = name, False  # the validation is never captured
        cfg = config_from_dict(stored)
        if on_cuda:
            from relreason.models.precision import set_tf32
            set_tf32(cfg.train.tf32, device)
        wl, score, weights, data, rec = step0(cfg, device, reference)
        entry = {"device": name, "name": torch.cuda.get_device_name(device) if on_cuda else "cpu",
                 "step0_validation": score, "weights": weights, "data": data}
        print(f"{name} ({entry['name']}): step-0 validation {score!r}, data {data}, weights {weights}")
        if reference is None:
            reference, base, cpu_wl = rec.outputs, score, wl
        else:
            worst = sorted(rec.parted.items(), key=lambda kv: -kv[1][1])[:TOP]
            entry["parted"] = [{"module": m, "call": k, "order": o, "relative": r}
                               for (m, k), (o, r) in sorted(worst, key=lambda kv: kv[1][0])]
            for p in entry["parted"]:
                print(f"  {p['module']} (call {p['call']}, {p['order']}th compared): largest relative difference "
                      f"{p['relative']:.3g}")
            wl.close()
        report["devices"].append(entry)
    report["eps"] = {}
    model = cpu_wl.model
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    noise = torch.Generator().manual_seed(0)
    for e in eps:
        scores = []
        for _ in range(args.draws):
            with torch.no_grad():
                for pname, p in model.named_parameters():
                    p.copy_(initial[pname] * (1 + e * torch.randn(p.shape, generator=noise, dtype=p.dtype)))
                scores.append(float(cpu_wl.evaluate("val", draw=0)["score"]))
        report["eps"][str(e)] = scores
        print(f"every weight x (1 + {e:g} N(0,1)), {args.draws} draws: step-0 validation "
              + ", ".join(f"{s!r} ({100 * (s - base):+.2f})" for s in scores))
    model.load_state_dict(initial)
    cpu_wl.close()
    if args.json is not None:
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(report, indent=1) + "\n")
        tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
