"""Benchmark of processors side by side: peak memory and time of one evaluation call at n = 64 and of one
training step at n = 16, with the matmul FLOPs counted and the FLOP utilisation they give. Prints figures;
it is not a test.

    .venv/bin/python scripts/bench_processors.py                          # the six below, CPU
    .venv/bin/python scripts/bench_processors.py --models floydnet rnar --device cuda --batch 32

Each processor runs in a fresh process (peak memory is per process: CPU figures are the peak resident set,
ru_maxrss, over the baseline taken before the inputs exist; CUDA figures torch.cuda.max_memory_allocated).
Every processor has its registered defaults at the network's hidden size (`--hidden`), except the Edge
Transformer, which runs at quick.yaml's CLRS settings (width 64, 4 heads, 3 layers per step), its paper
defaults (8 layers at width H) being no processor a CLRS recipe uses.

evaluation: one processor call (one algorithm step) on `--batch` graphs of `--eval-n` nodes, no gradients,
  from a random state (what a step deep in a trajectory sees);
training: `--hint-steps` processor calls carrying the state (as the network does over a trajectory) on
  `--batch` graphs of `--train-n` nodes, a loss on every step's states, backward and an Adam step.
Times are the best of `--repeats` after one warm-up (which also compiles the ET's kernels). FLOPs are
matmul FLOPs (scripts/bench_train.py `count_flops`, eager kernels); MFU = FLOPs / time / the measured
fp32 matmul peak of this device (CPU: the best 2048^2 matmul; CUDA: the same at 8192^2).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

from bench_train import count_flops, matmul_peak
from relreason.models.processors import PROCESSORS, State
from relreason.train.optimizer import adam

MODELS = ("mpnn", "triplet_gmpnn", "et", "floydnet", "rnar", "g_forgetnet")
OVERRIDES = {"et": {"width": 64, "heads": 4, "layers": 3}}  # quick.yaml's ET on CLRS tasks


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def inputs(proc, batch: int, n: int, hidden: int, device: torch.device, g: torch.Generator):
    r = lambda *s: torch.randn(*s, generator=g).to(device)  # noqa: E731
    state = proc.initial_state(batch, n, device)
    state = State(r(batch, n, proc.node_dim), r(batch, n, n, proc.edge_dim) if proc.edge_dim else None,
                  r(batch, proc.node_dim))
    adj = torch.ones(batch, n, n, dtype=torch.bool, device=device)
    mask = torch.ones(batch, n, dtype=torch.bool, device=device)
    return r(batch, n, hidden), r(batch, n, n, hidden), r(batch, hidden), state, adj, mask


def best_time(fn, repeats: int, device: torch.device) -> float:
    fn()  # warm-up (allocator, compiled kernels)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def measure(name: str, args) -> dict:
    """The figures of one processor, in this process."""
    device = torch.device(args.device)
    torch.manual_seed(0)
    entry = PROCESSORS.get(name)
    proc = entry.build(entry.config(**OVERRIDES.get(name, {})), args.hidden).to(device)
    g = torch.Generator().manual_seed(0)
    out = {"model": name, "parameters": sum(p.numel() for p in proc.parameters())}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    base = peak_memory_mb(device)

    proc.eval()
    x = inputs(proc, args.batch, args.eval_n, args.hidden, device, g)

    def evaluate():
        with torch.no_grad():
            proc(*x)

    out["eval_s"] = best_time(evaluate, args.repeats, device)
    out["eval_peak_mb"] = peak_memory_mb(device) - base
    out["eval_flops"] = count_flops(evaluate)

    proc.train()
    y = inputs(proc, args.batch, args.train_n, args.hidden, device, g)
    opt = adam(proc.parameters(), 1e-3)

    def train_step():
        state, loss = y[3], 0.0
        for _ in range(args.hint_steps):
            state = proc(y[0], y[1], y[2], state, y[4], y[5])
            loss = loss + state.node.square().mean() + (state.edge.square().mean() if state.edge is not None else 0.0)
            if not proc.carry_edge:  # the network feeds non-carried edge states afresh each step
                state = State(state.node, y[3].edge, state.graph)
        opt.zero_grad()
        loss.backward()
        opt.step()

    out["train_s"] = best_time(train_step, args.repeats, device)
    out["train_peak_mb"] = peak_memory_mb(device) - base
    out["train_flops"] = count_flops(train_step)
    return out


def device_peak(device: torch.device) -> float:
    """Measured fp32 matmul FLOP/s of the device."""
    if device.type != "cuda":
        return matmul_peak()[0]
    a, b = torch.randn(8192, 8192, device=device), torch.randn(8192, 8192, device=device)
    torch.mm(a, b)
    torch.cuda.synchronize(device)
    best = 0.0
    for _ in range(5):
        start = time.perf_counter()
        torch.mm(a, b)
        torch.cuda.synchronize(device)
        best = max(best, 2 * 8192**3 / (time.perf_counter() - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=PROCESSORS.names())
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128, help="the network's H (the CLRS recipes' 128)")
    parser.add_argument("--eval-n", type=int, default=64)
    parser.add_argument("--train-n", type=int, default=16)
    parser.add_argument("--hint-steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure this model and print JSON
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.one:
        print(json.dumps(measure(args.one, args)))
        return
    peak = device_peak(torch.device(args.device))
    print(f"{args.device}, {torch.get_num_threads()} threads, fp32 matmul peak {peak / 1e9:.0f} GFLOP/s; "
          f"batch {args.batch}, hidden {args.hidden}; eval: one step at n={args.eval_n}; "
          f"train: {args.hint_steps} steps at n={args.train_n}, backward, Adam")
    print(f"{'model':14} {'params':>8} {'eval s':>8} {'eval MB':>8} {'eval MFU':>8} "
          f"{'train s':>8} {'train MB':>8} {'train MFU':>9}")
    flags = [a for a in sys.argv[1:] if a != "--models" and a not in args.models]
    for name in args.models:
        done = subprocess.run([sys.executable, __file__, *flags, "--one", name], capture_output=True, text=True)
        if done.returncode:
            print(f"{name:14} failed: {done.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{name:14} {r['parameters']:>8} {r['eval_s']:>8.3f} {r['eval_peak_mb']:>8.0f} "
              f"{r['eval_flops'] / r['eval_s'] / peak:>8.2f} {r['train_s']:>8.3f} {r['train_peak_mb']:>8.0f} "
              f"{r['train_flops'] / r['train_s'] / peak:>9.2f}")


if __name__ == "__main__":
    main()
