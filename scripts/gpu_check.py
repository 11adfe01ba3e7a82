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
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def agree(device: torch.device, hidden: int, names: list[str] | None = None) -> list[dict]:
    """Per processor: loss and gradients of one static training forward+backward on `device` vs CPU."""
    from relreason.data import generate
    from relreason.models.processors import PROCESSORS

    ds = generate("bellman_ford", num=4, size=8, seed=3)
    rows = []
    for name in names or PROCESSORS.names():
        try:
            rows.append(_agree_one(name, ds, device, hidden))
        except Exception as exc:  # one processor's failure is its row's, the others still run
            rows.append({"processor": name, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    return rows


def _agree_one(name: str, ds, device: torch.device, hidden: int) -> dict:
    from relreason.models import Batch, ModelConfig, build_model, prepare_spec
    from relreason.models.noise import Noise

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
    names = [k for k, p in net.named_parameters() if p.grad is not None]
    per_tensor = [float((a - b).abs().max() / (a.abs().max() + 1e-12)) for a, b in zip(ga, gb)]
    largest = max(float(a.abs().max()) for a in ga)
    # a tensor whose gradients are all tiny (a bias that the loss barely moves) has a large *relative* rounding
    # difference; what training feels is the difference against the gradients' scale, as allclose's atol does
    vs_largest = max(float((a - b).abs().max()) for a, b in zip(ga, gb)) / largest
    k = max(range(len(per_tensor)), key=per_tensor.__getitem__)
    return {"processor": name, "loss_cpu": float(la), "loss_device": float(lb), "grad_max_rel_diff": per_tensor[k],
            "worst_tensor": names[k], "worst_tensor_max_grad": float(ga[k].abs().max()), "largest_grad": largest,
            "grad_max_diff_vs_largest": vs_largest,
            "ok": abs(float(la - lb)) <= 1e-3 * max(1.0, abs(float(la))) and vs_largest <= 1e-3}


def agree_quick(device: torch.device, names: list[str] | None = None) -> list[dict]:
    """`agree` at width 8 with the eager kernels (the smoke test skips the ET's ~25 s kernel compilation)."""
    from relreason.models import kernels

    with kernels.enabled(False):
        return agree(device, 8, names)


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
    # the train split cut to 256 samples: throughput does not depend on how many the data order walks
    sets += ["model.hidden=16", "data.train_num=32"] if quick else ["data.train_num=256"]
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
    return {"bf16_loss": float(loss.detach()), "ok": bool(torch.isfinite(loss))}


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
    """The automatic evaluation batch (relreason.train.workloads._pick_batch) and the memory it read: on CUDA
    the device's free memory (relreason.eval.memory.free_memory), beside the host's."""
    from relreason.data import generate
    from relreason.eval.memory import free_memory
    from relreason.models import ModelConfig, build_model, prepare_spec
    from relreason.runtime import available_memory
    from relreason.train.workloads import _pick_batch

    ds = generate("bellman_ford", num=4, size=64, seed=3)
    cfg = ModelConfig(hidden=128)
    net = build_model(prepare_spec(ds.spec, cfg, "bellman_ford"), cfg, "mpnn").to(device)
    free, host = free_memory(device)
    cuda_free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    return {"batch_n64_hidden128": _pick_batch(None, None, net, ds), "free_memory_read": free, "host_memory": host,
            "cuda_free": cuda_free, "host_available": available_memory(),
            "ok": free == host if device.type != "cuda" else abs(free - cuda_free) <= 0.05 * cuda_free}


def captured_training(device: torch.device, model: str, recipe: str, steps: int, data_dir: str, quick: bool) -> dict:
    """train.cuda_graph against the uncaptured static step: `steps` optimizer updates of one run each way
    from the same initialisation (the loop's own pieces: the workload's batches and noise, clipping, Adam),
    the weights compared and the steady-state steps timed (graphs captured in the first steps, not timed)."""
    import copy

    from relreason.config import build_config
    from relreason.train.cuda_graphs import CapturedStep, captured_loss
    from relreason.train.optimizer import adam, clip_grad_norm
    from relreason.train.workloads import build_workload

    sets = [f"data.data_dir={data_dir}", f"train.device={device.type}", "train.static_step=true"]
    sets += ["model.hidden=16", "data.train_num=32"] if quick else ["data.train_num=256"]
    cfg = build_config(model, "bellman_ford", recipe, sets)
    init = None
    result = {"model": model, "recipe": cfg.recipe, "batch": cfg.train.batch_size, "steps": steps}
    final, timed, captures = {}, {}, set()
    for mode in ("eager", "graph"):
        wl = build_workload(cfg, device)  # afresh: a streamed protocol's data (Ibarz et al.) runs forward only
        init = init or copy.deepcopy(wl.model.state_dict())
        wl.model.load_state_dict(init)
        wl.model.train()
        opt = adam(wl.model.parameters(), cfg.train.lr)
        cap = None
        if mode == "graph":
            cap = CapturedStep(captured_loss(wl, wl.model, cfg.train.precision, device), list(wl.model.parameters()),
                               device, "cuda" if device.type == "cuda" else "eager")
        times = []
        for step in range(steps):
            if device.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            graphs = len(cap.graphs) if cap is not None else 0
            for part in wl.step_batches(step):
                if cap is not None:
                    loss = cap(part.batch, part.noise)
                else:
                    opt.zero_grad(set_to_none=True)
                    loss, _ = wl.loss(wl.model, part, step)
                    loss.backward()
                float(loss.detach())  # the loop reads each step's loss
                del loss  # as the loop's next step does: no autograd graph outlives its step
                if cfg.train.grad_clip is not None:
                    clip_grad_norm(wl.model, cfg.train.grad_clip)
                opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
            if cap is not None and len(cap.graphs) > graphs:
                captures.add(step)  # this step captured a graph: not a steady-state step
        timed[mode] = times
        final[mode] = {k: v.detach().float().cpu() for k, v in wl.model.state_dict().items()}
        if cap is not None:
            result["graphs"] = len(cap.graphs)
    # steady state: the steps where no graph was captured, skipping the first (lazy initialisation), both ways
    steady = [i for i in range(1, steps) if i not in captures] or [steps - 1]
    for mode in ("eager", "graph"):
        result[f"{mode}_examples_per_s"] = len(steady) * cfg.train.batch_size / sum(timed[mode][i] for i in steady)
    result["steady_steps"] = len(steady)
    worst = max(float((final["eager"][k] - final["graph"][k]).abs().max() / (final["eager"][k].abs().max() + 1e-6))
                for k in final["eager"])
    worst_abs = max(float((final["eager"][k] - final["graph"][k]).abs().max()) for k in final["eager"])
    result["weights_max_rel_diff"], result["weights_max_abs_diff"] = worst, worst_abs
    # CPU: the same kernels in the same order, equal bit for bit. CUDA: atomics (scatter sums) may round in
    # another order; Adam normalises each update to about lr, so a rounding difference moves a weight by at
    # most about 2 x lr per step
    result["ok"] = worst_abs <= 2 * cfg.train.lr * steps if device.type == "cuda" else worst_abs == 0.0
    result["speedup"] = result["graph_examples_per_s"] / result["eager_examples_per_s"]
    return result


def end_to_end(device: torch.device, data_dir: str, out: Path, quick: bool) -> dict:
    """`relreason.train.run` (what `relreason train` calls) with train.cuda_graph on the device: a tiny run
    through the loop, validation and the final test."""
    from relreason.config import build_config
    from relreason.train import run

    sets = [f"data.data_dir={data_dir}", f"train.device={device.type}", "train.static_step=true",
            f"train.cuda_graph={'true' if device.type == 'cuda' else 'false'}", "train.train_examples=128",
            "train.eval_every_examples=64", "data.train_num=64", "data.val_num=32", "data.test_num=32"]
    sets += ["model.hidden=16", "data.train_size=5", "data.val_size=5", "data.test_size=5"] if quick else []
    t = time.perf_counter()
    res = run(build_config("mpnn", "bellman_ford", "default", sets), out=out, name="e2e", show_progress=False,
              log=lambda m: None)
    return {"examples": res.examples, "test_score": res.test["score"], "seconds": time.perf_counter() - t,
            "ok": res.examples == 128 and 0.0 <= res.test["score"] <= 1.0}


def markdown(report: dict) -> str:
    lines = [f"# GPU check: {report['device_name']}", "",
             f"torch {report['torch']}, {report.get('seconds', 0):.0f} s, `{report['command']}`", ""]

    def section(key: str, render) -> None:
        value = report.get(key)
        if value is None:
            lines.extend([f"{key}: not run (time ran out or an earlier section stopped the script)", ""])
        elif isinstance(value, dict) and "error" in value:
            lines.extend([f"{key}: FAILED: {value['error']}", ""])
        else:
            lines.extend(render(value) + [""])

    section("agreement", lambda rows: [
        "CUDA against CPU, one static training forward+backward per processor (bellman_ford, n = 8):", "",
        "| processor | loss cpu | loss device | max grad diff / largest grad | worst tensor: rel. diff (its largest "
        "grad) | ok |", "|---|---|---|---|---|---|"] + [
        f"| {r['processor']} | {r['loss_cpu']:.5f} | {r['loss_device']:.5f} | {r['grad_max_diff_vs_largest']:.2e} | "
        f"{r['worst_tensor']}: {r['grad_max_rel_diff']:.2e} ({r['worst_tensor_max_grad']:.1e} of {r['largest_grad']:.1e}) | "
        f"{r['ok']} |" if "error" not in r else f"| {r['processor']} | | | | | FAILED: {r['error']} |" for r in rows])
    section("captured", lambda rows: [
        "train.cuda_graph against the uncaptured static step (same initialisation, same batches; steady-state "
        "steps timed, those that captured a graph left out):", "",
        "| model | recipe | batch | steps | graphs | eager ex/s | captured ex/s | speedup | max abs. weight diff | ok |",
        "|---|---|---|---|---|---|---|---|---|---|"] + [
        f"| {r['model']} | {r['recipe']} | {r['batch']} | {r['steps']} | {r.get('graphs')} | "
        f"{r['eager_examples_per_s']:.1f} | {r['graph_examples_per_s']:.1f} | {r['speedup']:.2f} | "
        f"{r['weights_max_abs_diff']:.2e} | {r['ok']} |" for r in rows])
    section("throughput", lambda rows: [
        "Seed groups (vmapped shape-static step, no validation):", "",
        "| model | recipe | batch | seeds K | examples/s | TFLOP/s |", "|---|---|---|---|---|---|"] + [
        f"| {r['model']} | {r['recipe']} | {r['batch']} | {r['seeds']} | {r['examples_per_s']:.1f} | "
        f"{r['tflops_per_s']:.4f} |" for r in rows])
    for key, label in (("bf16", "bf16 autocast"), ("cuda_graph", "CUDA graph capture (one step)"),
                       ("end_to_end", "a run through relreason.train.run with train.cuda_graph"),
                       ("eval_batch", "evaluation batch memory")):
        section(key, lambda v, label=label: [f"{label}: {v}"])
    return "\n".join(lines)


def _ok(value) -> bool:
    if value is None or (isinstance(value, dict) and "error" in value):
        return False
    if isinstance(value, list):
        return all(_ok(v) for v in value)
    return value.get("ok") is not False


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="tiny models and K = 1, 2 (the CPU smoke test)")
    p.add_argument("--data-dir", default="data")
    p.add_argument("--sections", default=None,
                   help="comma-separated sections to run (default: all): agreement, captured, end_to_end, eval_batch, "
                        "bf16, cuda_graph, throughput")
    p.add_argument("--processors", default=None,
                   help="comma-separated processors for the CUDA-vs-CPU agreement (default: every registered one)")
    p.add_argument("--protocols", default=None,
                   help="MODEL:RECIPE[:BATCH],... for captured and throughput (default: rt:rt:4,mpnn:clrs30 and "
                        "mpnn:default:32)")
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("Error: --device cuda but torch sees no CUDA device\nHint: --device cpu runs the smoke test", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products in float32 (CPU's), not TF32
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.time()
    ks = [1, 2] if args.quick else [1, 4, 16]
    rt_recipe = "default" if args.quick else "rt"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"device": str(device), "torch": torch.__version__, "command": " ".join(sys.argv),
              "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}
    # the most telling first; each section's failure is recorded and the next one runs; the report is
    # rewritten after each, so a run stopped at its time limit still leaves what it measured
    processors = args.processors.split(",") if args.processors else None
    if processors:
        from relreason.models.processors import PROCESSORS

        unknown = [n for n in processors if n not in PROCESSORS.names()]
        if unknown:
            print(f"Error: unknown processor {', '.join(unknown)}\nHint: one of {', '.join(PROCESSORS.names())}",
                  file=sys.stderr)
            return 2
    if args.protocols:
        protocols = [(m, r, int(b[0]) if b else None) for m, r, *b in (x.split(":") for x in args.protocols.split(","))]
        captured, timed = protocols, protocols
    else:
        captured = [("rt", rt_recipe, None), ("mpnn", "default" if args.quick else "clrs30", None)]
        timed = [("rt", rt_recipe, 4), ("mpnn", "default", 32)]
    sections = [
        ("agreement", lambda: agree_quick(device, processors) if args.quick else agree(device, 32, processors)),
        ("captured", lambda: [captured_training(device, m, r, args.steps * 2, args.data_dir, args.quick)
                              for m, r, _ in captured]),
        ("end_to_end", lambda: end_to_end(device, args.data_dir, Path(args.data_dir) / "runs", args.quick)),
        ("eval_batch", lambda: eval_batch(device)),
        ("bf16", lambda: bf16_step(device)),
        ("cuda_graph", lambda: graph_capture(device)),
        ("throughput", lambda: [row for m, r, b in timed
                                for row in throughput(device, m, r, b, ks, args.steps, args.data_dir, args.quick)]),
    ]
    if args.sections:
        names = args.sections.split(",")
        unknown = sorted(set(names) - {k for k, _ in sections})
        if unknown:
            print(f"Error: unknown section {', '.join(unknown)}\nHint: one of {', '.join(k for k, _ in sections)}",
                  file=sys.stderr)
            return 2
        sections = [(k, fn) for k, fn in sections if k in names]
    from relreason.data.store import atomic_path

    for key, fn in sections:
        started = time.time()
        try:
            report[key] = fn()
        except Exception as exc:  # recorded, not hidden: the report says what failed
            traceback.print_exc()
            report[key] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
        print(f"[{time.time() - t0:.0f} s] {key}: {time.time() - started:.1f} s", file=sys.stderr, flush=True)
        report["seconds"] = time.time() - t0
        with atomic_path(out / "gpu_check.json") as tmp:
            tmp.write_text(json.dumps(report, indent=1, default=str))
        with atomic_path(out / "gpu_check.md") as tmp:
            tmp.write_text(markdown(report))
    print(markdown(report))
    failed = [key for key, _ in sections if not _ok(report.get(key))]
    if failed:
        print(f"Error: the device disagrees with the CPU or a check failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
