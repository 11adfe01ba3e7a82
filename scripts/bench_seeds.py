"""Seed-batched training against single-seed runs: aggregate training examples/s of K seeds (a benchmark,
not a test). Every figure comes from pairs run in this one invocation, interleaved, so a loaded machine
slows both sides of a ratio alike.

    PYTHONPATH=. .venv/bin/python scripts/bench_seeds.py --model rt --recipe rt --seeds 4 --steps 6
    PYTHONPATH=. .venv/bin/python scripts/bench_seeds.py --model mpnn --recipe default --batch-size 32 --seeds 4

Times the training step only (data, forward with hints, loss, backward, clipping, Adam; no validation) of
each way to train K seeds of one configuration on --task:
- `sequential`: K single runs one after the other (the single run's own dropping step and kernels);
- `jobs2`: the same K single runs split over 2 processes (what `reproduce --jobs 2` does with K cells);
- `group_vmap`: one seed group, vmapped (relreason.train.seed_group);
- `group_loop`: one seed group, its members' steps one after the other.
Prints examples/s of each, the ratios to `sequential` and `jobs2`, and the model FLOP utilisation
(matmul FLOPs of one single-run step counted by torch's FlopCounterMode, over a measured fp32 matmul peak).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import torch


def configs(args):
    from relreason.config import build_config
    from relreason.train.seed_group import seed_configs

    sets = [f"train.batch_size={args.batch_size}"] if args.batch_size else []
    sets += [f"data.data_dir={args.data_dir}"] + list(args.set)
    return seed_configs(build_config(args.model, args.task, args.recipe, sets), list(range(args.seeds)))


class Single:
    """One seed's single-run step (its own workload, Adam, clipping)."""

    def __init__(self, cfg):
        from relreason.train.loop import adam
        from relreason.train.workloads import build_workload

        self.cfg, self.wl = cfg, build_workload(cfg, torch.device("cpu"))
        self.opt = adam(self.wl.model.parameters(), cfg.train.lr)

    def step(self, k: int) -> None:
        from relreason.train.loop import clip_grad_norm

        for part in self.wl.step_batches(k):
            self.opt.zero_grad(set_to_none=True)
            loss, _ = self.wl.loss(self.wl.model, part, k)
            loss.backward()
            clip_grad_norm(self.wl.model, self.cfg.train.grad_clip or 1e9)
            self.opt.step()


class _Member:
    def __init__(self, single):
        self.wl, self.opt, self.cfg = single.wl, single.opt, single.cfg

    def update(self):
        from relreason.train.loop import clip_grad_norm

        clip_grad_norm(self.wl.model, self.cfg.train.grad_clip or 1e9)
        self.opt.step()


def group_steps(cfgs, steps: int, vmap: bool) -> float:
    import dataclasses

    from relreason.train.seed_group import SeedGroup

    cfgs = [dataclasses.replace(c, train=dataclasses.replace(c.train, static_step=vmap)) for c in cfgs]
    members = [_Member(Single(c)) for c in cfgs]
    group = SeedGroup(members, vmap)
    group.step(members, group.batches(members, 0), 0)  # warm-up
    t = time.perf_counter()
    for k in range(1, steps + 1):
        group.step(members, group.batches(members, k), k).tolist()
    return time.perf_counter() - t


def sequential_steps(cfgs, steps: int) -> float:
    runs = [Single(c) for c in cfgs]
    for r in runs:
        r.step(0)
    t = time.perf_counter()
    for r in runs:
        for k in range(1, steps + 1):
            r.step(k)
    return time.perf_counter() - t


def _job(cfgs, steps, threads, q):
    torch.set_num_threads(threads)
    q.put(sequential_steps(cfgs, steps))


def jobs2_steps(cfgs, steps: int, threads: int) -> float:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    half = (len(cfgs) + 1) // 2
    t = time.perf_counter()
    procs = [ctx.Process(target=_job, args=(part, steps, threads, q)) for part in (cfgs[:half], cfgs[half:]) if part]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return time.perf_counter() - t  # includes each process's warm-up step and model build (as a cell's would)


def flops_per_step(cfg) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    r = Single(cfg)
    r.step(0)
    with FlopCounterMode(display=False) as fc:
        r.step(1)
    return float(fc.get_total_flops())


def peak_gflops() -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * 1024 ** 3 / best / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="rt")
    p.add_argument("--task", default="bellman_ford")
    p.add_argument("--recipe", default=None, help="recipe (default: the model's paper recipe)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--seeds", type=int, default=4, help="K")
    p.add_argument("--steps", type=int, default=6, help="timed steps per seed")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best of each is kept")
    p.add_argument("--data-dir", default="data")
    p.add_argument("--set", action="append", default=[])
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cfgs = configs(args)
    B, K, N = cfgs[0].train.batch_size, args.seeds, args.steps
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, fn in (("sequential", lambda: sequential_steps(cfgs, N)), ("group_vmap", lambda: group_steps(cfgs, N, True)),
                         ("group_loop", lambda: group_steps(cfgs, N, False)),
                         ("jobs2", lambda: jobs2_steps(cfgs, N, args.threads))):
            best[name] = min(best.get(name, float("inf")), fn())
    rate = {k: K * N * B / v for k, v in best.items()}
    flops = flops_per_step(cfgs[0]) / B
    peak = peak_gflops()
    print(f"model={args.model} task={args.task} recipe={cfgs[0].recipe} batch={B} seeds={K} steps={N} "
          f"threads={args.threads} flops_per_example={flops:.3g} peak_gflops={peak:.1f}")
    for k, v in rate.items():
        print(f"{k}_examples_per_s={v:.2f} {k}_mfu={flops * v / (peak * 1e9):.4f}")
    print(f"ratio_group_vmap_vs_sequential={rate['group_vmap'] / rate['sequential']:.2f} "
          f"ratio_group_vmap_vs_jobs2={rate['group_vmap'] / rate['jobs2']:.2f} "
          f"ratio_group_loop_vs_sequential={rate['group_loop'] / rate['sequential']:.2f}")


if __name__ == "__main__":
    main()
