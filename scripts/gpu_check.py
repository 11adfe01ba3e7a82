"""The GPU path checked in one command (scripts/gpu_check.sh runs it): CUDA against CPU for every processor,
seed-group throughput, bf16 autocast and CUDA-graph capture of the shape-static step. Needs only PyTorch and
the checkout (PYTHONPATH=.), no network. `--device cpu` runs the same code on the CPU (a smoke test of the
script: the CPU-vs-device comparison is then CPU against CPU, capture is skipped).

    PYTHONPATH=. python scripts/gpu_check.py --out results/gpu            # on a CUDA machine
    PYTHONPATH=. python scripts/gpu_check.py --device cpu --out /tmp/g --quick

Writes `gpu_check.json` and `gpu_check.md` (a table) to --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def agree(device: torch.device, hidden: int) -> list[dict]:
    """Per processor: loss and gradients of one static training forward+backward on `device` vs CPU."""
    from relreason.data import generate
    from relreason.models import Batch, ModelConfig, build_model, prepare_spec
    from relreason.models.noise import Noise
    from relreason.models.processors import PROCESSORS

    ds = generate("bellman_ford", num=4, size=8, seed=3)
    rows = []
    for name in PROCESSORS.names():
        cfg = ModelConfig(hidden=hidden)
        spec = prepare_spec(ds.spec, cfg, "bellman_ford")
        torch.manual_seed(0)
        net = build_model(spec, cfg, name)
        out = {}
        for where in (torch.device("cpu"), device):
            m = net.to(where)
            m.zero_grad()
            batch = Batch.from_dataset(ds, cfg, spec, where, generator=Noise.whole(5, 4))
            o = m(batch, train=True, generator=Noise.whole(7, 4), static=True)
            loss, _ = m.loss(batch, o, read_terms=False)
            loss.backward()
            out[where.type] = (loss.detach().cpu(), [p.grad.detach().cpu().clone() for p in m.parameters()
                                                     if p.grad is not None])
        (la, ga), (lb, gb) = out["cpu"], out[device.type]
        worst = max(float((a - b).abs().max() / (a.abs().max() + 1e-6)) for a, b in zip(ga, gb))
        rows.append({"processor": name, "loss_cpu": float(la), "loss_device": float(lb),
                     "grad_max_rel_diff": worst, "ok": abs(float(la - lb)) <= 1e-3 * max(1.0, abs(float(la)))
                     and worst <= 1e-2})
    return rows


def agree_quick(device: torch.device) -> list[dict]:
    """`agree` at width 8 with the eager kernels (the smoke test skips the ET's ~25 s kernel compilation)."""
    from relreason.models import kernels

    with kernels.enabled(False):
        return agree(device, 8)


def throughput(device: torch.device, model: str, recipe: str, batch: int | None, ks: list[int], steps: int,
               data_dir: str, quick: bool) -> list[dict]:
    """Seed groups of K = ks on `device`: examples/s and MFU of the vmapped step (no validation)."""
    import dataclasses

    from bench_seeds import Single, _Member
    from relreason.config import build_config
    from relreason.train.seed_group import SeedGroup, seed_configs
    from torch.utils.flop_counter import FlopCounterMode

    sets = [f"data.data_dir={data_dir}", f"train.device={device.type}", "train.static_step=true"]
    sets += [f"train.batch_size={batch}"] if batch else []
    sets += ["model.hidden=16", "data.train_num=32"] if quick else []
    base = build_config(model, "bellman_ford", recipe, sets)
    rows = []
    for k in ks:
        cfgs = seed_configs(base, list(range(k)))
        cfgs = [dataclasses.replace(c, train=dataclasses.replace(c.train, device=str(device))) for c in cfgs]
        members = [_Member(Single(c)) for c in cfgs]
        group = SeedGroup(members, True)
        group.step(members, group.batches(members, 0), 0)
        with FlopCounterMode(display=False) as fc:
            group.step(members, group.batches(members, 1), 1)
        flops = float(fc.get_total_flops())
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for s in range(2, steps + 2):
            group.step(members, group.batches(members, s), s)
        if device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
        B = base.train.batch_size
        rows.append({"model": model, "recipe": base.recipe, "batch": B, "seeds": k, "steps": steps,
                     "examples_per_s": k * B * steps / dt, "tflops_per_s": flops * steps / dt / 1e12})
    return rows


def bf16_step(device: torch.device) -> dict:
    """One static training step of MPNN under bf16 autocast: its loss is finite."""
    from relreason.data import generate
    from relreason.models import Batch, ModelConfig, build_model, prepare_spec
    from relreason.models.noise import Noise

    ds = generate("bellman_ford", num=4, size=8, seed=3)
    cfg = ModelConfig(hidden=16)
    spec = prepare_spec(ds.spec, cfg, "bellman_ford")
    net = build_model(spec, cfg, "mpnn").to(device)
    batch = Batch.from_dataset(ds, cfg, spec, device, generator=Noise.whole(5, 4))
    with torch.autocast(device.type, dtype=torch.bfloat16):
        out = net(batch, train=True, generator=Noise.whole(7, 4), static=True)
    loss, _ = net.loss(batch, out, read_terms=False)
    loss.backward()
    return {"bf16_loss": float(loss), "ok": bool(torch.isfinite(loss))}


def graph_capture(device: torch.device) -> dict:
    """CUDA-graph capture and replay of the shape-static forward+backward (no noise: teacher forcing 0)."""
    if device.type != "cuda":
        return {"ok": None, "note": "skipped: CUDA graphs need a CUDA device"}
    from relreason.data import generate
    from relreason.models import Batch, ModelConfig, build_model, prepare_spec

    ds = generate("bellman_ford", num=4, size=8, seed=3)
    cfg = ModelConfig(hidden=16, random_pos=False)
    spec = prepare_spec(ds.spec, cfg, "bellman_ford")
    net = build_model(spec, cfg, "mpnn").to(device)
    batch = Batch.from_dataset(ds, cfg, spec, device)

    def step():
        out = net(batch, train=True, static=True)
        loss, _ = net.loss(batch, out, read_terms=False)
        loss.backward()
        return loss

    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                net.zero_grad(set_to_none=False)
                eager = step().detach().clone()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        net.zero_grad(set_to_none=False)
        with torch.cuda.graph(g):
            loss = step()
        g.replay()
        return {"ok": bool(torch.allclose(loss, eager, rtol=1e-4)), "loss_graph": float(loss), "loss_eager": float(eager)}
    except Exception as exc:  # reported, not hidden: the table says what failed
        return {"ok": False, "note": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}


def eval_batch(device: torch.device) -> dict:
    """What the automatic evaluation batch reads (relreason.runtime.available_memory) beside the device's free memory."""
    from relreason.runtime import available_memory

    free = torch.cuda.mem_get_info()[0] if device.type == "cuda" else None
    return {"available_memory_read": available_memory(), "device_free_memory": free,
            "note": "evaluation batches are sized from available_memory(); on CUDA that should be the device's free "
                    "memory (not yet: see README)"}


def markdown(report: dict) -> str:
    lines = [f"# GPU check: {report['device_name']}", "", f"torch {report['torch']}, {report['seconds']:.0f} s", "",
             "| processor | loss cpu | loss device | max rel. grad diff | ok |", "|---|---|---|---|---|"]
    lines += [f"| {r['processor']} | {r['loss_cpu']:.5f} | {r['loss_device']:.5f} | {r['grad_max_rel_diff']:.2e} | "
              f"{r['ok']} |" for r in report["agreement"]]
    lines += ["", "| model | recipe | batch | seeds K | examples/s | TFLOP/s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['recipe']} | {r['batch']} | {r['seeds']} | {r['examples_per_s']:.1f} | "
              f"{r['tflops_per_s']:.4f} |" for r in report["throughput"]]
    lines += ["", f"bf16 autocast: {report['bf16']}", f"CUDA graph capture: {report['cuda_graph']}",
              f"evaluation batch memory: {report['eval_batch']}", ""]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="tiny models and K = 1, 2 (the CPU smoke test)")
    p.add_argument("--data-dir", default="data")
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("Error: --device cuda but torch sees no CUDA device\nHint: --device cpu runs the smoke test", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    t0 = time.time()
    ks = [1, 2] if args.quick else [1, 4, 16]
    report = {"device": str(device), "torch": torch.__version__,
              "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "agreement": agree_quick(device) if args.quick else agree(device, 32),
              "throughput": throughput(device, "rt", "rt" if not args.quick else "default", 4, ks, args.steps,
                                       args.data_dir, args.quick)
              + throughput(device, "mpnn", "default", 32, ks, args.steps, args.data_dir, args.quick),
              "bf16": bf16_step(device), "cuda_graph": graph_capture(device), "eval_batch": eval_batch(device)}
    report["seconds"] = time.time() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from relreason.data.store import atomic_path

    with atomic_path(out / "gpu_check.json") as tmp:
        tmp.write_text(json.dumps(report, indent=1, default=str))
    with atomic_path(out / "gpu_check.md") as tmp:
        tmp.write_text(markdown(report))
    print(markdown(report))
    bad = [r["processor"] for r in report["agreement"] if not r["ok"]]
    if bad or not report["bf16"]["ok"] or report["cuda_graph"]["ok"] is False:
        print(f"Error: the device disagrees with the CPU or a check failed: {bad or 'bf16 / CUDA graph'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
