"""Why a pack of captured cells stalls on the H200 (docs/gpu.md, "Packed cells"): the pack's step in a handful of
variants, each in its own process with a time limit, so that one GPU command bisects the stall.

    PYTHONPATH=. python scripts/gpu_pack_probe.py --out /tmp/probe                       # on a CUDA machine
    PYTHONPATH=. python scripts/gpu_pack_probe.py --out /tmp/probe --device cpu --quick  # the CPU smoke test

The stalled run (results/gpu/gpu_cells_third_try.log): three Triplet-GMPNN insertion_sort cells, each captured
and replayed on its own side stream (relreason.train.seed_group.SeedGroup.step), their step-0 validations side by
side in threads first; after them the main thread waited in a step's read-back (`.tolist()`) for 94 s, at some
step before the 50th (the first that writes anything). The leading suspect (a reading of the code and of torch's,
/work/notes of 2026-11-28, not yet a measurement): every graph was captured on torch's one default capture stream,
and torch keys the cuBLAS workspaces by stream, so the three cells' graphs baked in one workspace and, replayed at
once on their side streams from the second step on, used it together. Each CapturedStep now captures on its own
stream (relreason.train.cuda_graphs). Each variant runs `--steps` steps of the pack's loop (batches, step,
read-back; every step logged), changing one thing:

- pack: the pack as scripts/gpu_cells.sh runs it today (each cell's graphs captured on its own stream);
- shared-capture: the stalled run's pack (every graph captured on torch's default capture stream);
- shared-no-workspace: the same with cuBLAS's workspace off (CUBLAS_WORKSPACE_CONFIG=:0:0,
  CUBLASLT_WORKSPACE_SIZE=0): passes if a shared workspace is the cause;
- blocking: shared-capture under CUDA_LAUNCH_BLOCKING=1 (every launch waits for its work: no two cells' graphs
  run at once, and a stall's stack names the launch that never ends);
- no-validation, one-stream (every cell on the main stream), uncaptured, single (one captured cell): today's pack
  less one thing each.

A variant that does not finish within --limit seconds is stopped with SIGABRT (faulthandler writes its stacks to
the log) and marked "stalled". Writes gpu_pack_probe.json (each variant: finished or stalled, the steps it made,
its seconds per step) and gpu_pack_probe.log under --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_WORKSPACE = {"CUBLAS_WORKSPACE_CONFIG": ":0:0", "CUBLASLT_WORKSPACE_SIZE": "0"}
BLOCKING = {"CUDA_LAUNCH_BLOCKING": "1"}


@dataclasses.dataclass(frozen=True)
class Variant:
    cells: int = 3
    captured: bool = True
    side_streams: bool = True
    validations: bool = True  # the step-0 validations side by side first
    shared_capture: bool = False  # every graph on torch's default capture stream (the stalled run's capture)
    env: tuple = ()  # (name, value) pairs for the variant's process


VARIANTS = {
    "pack": Variant(),
    "shared-capture": Variant(shared_capture=True),
    "shared-no-workspace": Variant(shared_capture=True, env=tuple(NO_WORKSPACE.items())),
    "blocking": Variant(shared_capture=True, env=tuple(BLOCKING.items())),
    "no-validation": Variant(validations=False),
    "one-stream": Variant(side_streams=False),
    "uncaptured": Variant(captured=False),
    "single": Variant(cells=1),
}
LOG, REPORT = "gpu_pack_probe.log", "gpu_pack_probe.json"


def variant(name: str, device: str, quick: bool, steps: int, data_dir: str, log) -> list[float]:
    """Runs variant `name` in this process; returns each step's seconds (batches, step and read-back)."""
    import torch

    from relreason.train.cuda_graphs import CapturedStep
    from relreason.train.seed_group import SeedGroup, claimed_sessions, seed_configs

    from gpu_cells import protocol_config  # scripts/ is on the path (main)

    v = VARIANTS[name]
    cells, captured = v.cells, v.captured
    if v.env:
        log(f"{name}: its environment in effect: {all(os.environ.get(k) == x for k, x in v.env)}")
    sets = [f"data.data_dir={data_dir}", f"train.device={device}"]
    base = protocol_config("clrs30", "mpnn", "bfs", [*sets, "model.hidden=8"]) if quick else \
        protocol_config("ibarz2022", "triplet_gmpnn", "insertion_sort", sets)
    base = dataclasses.replace(base, train=dataclasses.replace(base.train, static_step=captured, cuda_graph=captured))
    if device != "cuda":
        SeedGroup.REPLAY = "eager"  # the recorded step re-run in place of the CUDA replay (the CPU suite's stand-in)
    CapturedStep.SHARED_CAPTURE_STREAM = v.shared_capture
    times = []
    with tempfile.TemporaryDirectory() as d, \
            claimed_sessions(seed_configs(base, list(range(cells))), [Path(d) / f"c{i}" for i in range(cells)],
                             [False] * cells, None, log, None, None, "a probed pack") as (sessions, dd):
        group = SeedGroup(sessions, use_vmap=False, label=f"probe {name}", eval_threads=cells)
        if not v.side_streams:
            group.streams, group.eval_streams = {}, {}
        for s in sessions:
            s.wl.stream_workers = 1
        if v.validations:
            group.side_by_side(sessions, lambda s: s.evaluate("val", "validation", draw=0))
            log(f"{name}: validations done")
        for s in sessions:
            s.wl.model.train()
        for i in range(steps):
            for s in sessions:
                s.set_rate()
            t0 = time.perf_counter()
            group.step(sessions, group.batches(sessions)).tolist()
            times.append(time.perf_counter() - t0)
            for s in sessions:
                s.state["step"] += 1
            log(f"{name}: step {i} {times[-1]:.4f} s ({group.graphs} graphs)")
        if dd.device.type == "cuda":
            torch.cuda.synchronize(dd.device)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true", help="a tiny MPNN pack (the CPU smoke test)")
    p.add_argument("--steps", type=int, default=30, help="steps per variant (the stall came at the first)")
    p.add_argument("--limit", type=float, default=45.0, help="seconds a variant may take before it is stopped")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list of {', '.join(VARIANTS)}")
    p.add_argument("--variant", default=None, help=argparse.SUPPRESS)  # the child's
    p.add_argument("--data-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or args.steps < 1 or args.limit <= 0:
        print(f"Error: unknown variants {unknown} (known: {', '.join(VARIANTS)}), or --steps < 1 or --limit <= 0",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "scripts"))
    from gpu_cells import Log, abort, checkout_env

    log = Log(out / LOG)
    if args.variant:  # the child: one variant, its stacks to the log on the parent's SIGABRT
        faulthandler.enable(log.file, all_threads=True)
        times = variant(args.variant, args.device, args.quick, args.steps, args.data_dir, log)
        (out / f".{args.variant}.json").write_text(json.dumps(times))
        return 0
    results = {}
    with tempfile.TemporaryDirectory() as data:
        for name in names:
            env = {**checkout_env(), **dict(VARIANTS[name].env)}
            cmd = [sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--device", args.device,
                   "--steps", str(args.steps), "--variant", name, "--data-dir", data,
                   *(["--quick"] if args.quick else [])]
            log(f"{name}: {VARIANTS[name]}")
            t0 = time.time()
            proc = subprocess.Popen(cmd, env=env)
            try:
                code = proc.wait(timeout=args.limit)
            except subprocess.TimeoutExpired:
                log(f"{name}: stalled after {args.limit:g} s; stopping it with SIGABRT (its stacks follow)")
                abort(proc)
                code = None
            done = out / f".{name}.json"
            times = json.loads(done.read_text()) if done.is_file() else []
            done.unlink(missing_ok=True)
            results[name] = {"outcome": "finished" if code == 0 else "stalled" if code is None else f"exit {code}",
                             "seconds": round(time.time() - t0, 1), "steps": len(times),
                             "first_step_s": times[0] if times else None,
                             "median_step_s": sorted(times)[len(times) // 2] if times else None}
            log(f"{name}: {results[name]}")
    (out / REPORT).write_text(json.dumps({"device": args.device, "variants": results}, indent=1))
    return 0 if all(r["outcome"] == "finished" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
