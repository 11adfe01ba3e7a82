"""Seed-batched training against single-seed runs: aggregate training examples/s of K seeds (a benchmark,
not a test). Every figure comes from pairs run in this one invocation, interleaved, so a loaded machine
slows both sides of a ratio alike.

    PYTHONPATH=. .venv/bin/python scripts/bench_seeds.py --model rt --recipe rt --seeds 4 --steps 6
    PYTHONPATH=. .venv/bin/python scripts/bench_seeds.py --model mpnn --recipe default --batch-size 32 --seeds 4
    PYTHONPATH=. .venv/bin/python scripts/bench_seeds.py --tables rt-table19 --steps 3 --record

With --tables, every column of those published tables (its model, protocol recipe and delta) is measured at
the group sizes a sweep at the paper's seed count forms (`relreason reproduce --seed-batch 4`: 20 seeds are
five groups of 4, 10 are 4+4+2, 3 one group of 3; --group-sizes replaces them); --record writes the ratios
into relreason/studies/costs.json ("seed_groups": {"hardware", "date", "commands", "ratios": {"COLUMN K=k":
{"group_vmap", "group_loop", "jobs2"}}}), which `relreason reproduce --list` reads with the cell costs.

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


def configs(args, model=None, recipe=None, seeds=None, ablation=None):
    from relreason.config import build_config
    from relreason.train.seed_group import seed_configs

    sets = [f"train.batch_size={args.batch_size}"] if args.batch_size else []
    sets += [f"data.data_dir={args.data_dir}"] + list(args.set)
    cfg = build_config(model or args.model, args.task, recipe if model else args.recipe, sets, ablation=ablation)
    return seed_configs(cfg, list(range(seeds or args.seeds)))


class Single:
    """One seed's single-run step (its own workload, Adam, clipping)."""

    def __init__(self, cfg):
        from relreason.train.optimizer import adam
        from relreason.train.workloads import build_workload

        self.cfg, self.wl = cfg, build_workload(cfg, torch.device("cpu"))
        self.opt = adam(self.wl.model.parameters(), cfg.train.lr)

    def step(self, k: int) -> None:
        from relreason.train.optimizer import clip_grad_norm

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
        from relreason.train.optimizer import clip_grad_norm

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


def measure(cfgs, args) -> dict:
    """Examples/s of each way to train the seeds of `cfgs` (the best of --rounds interleaved rounds)."""
    B, K, N = cfgs[0].train.batch_size, len(cfgs), args.steps
    best: dict[str, float] = {}
    ways = (("sequential", lambda: sequential_steps(cfgs, N)), ("group_vmap", lambda: group_steps(cfgs, N, True)),
            ("group_loop", lambda: group_steps(cfgs, N, False)), ("jobs2", lambda: jobs2_steps(cfgs, N, args.threads)))
    for _ in range(args.rounds):
        for name, fn in ways:
            if name == "jobs2" and args.no_jobs2:
                continue
            best[name] = min(best.get(name, float("inf")), fn())
    return {k: K * N * B / v for k, v in best.items()}


def report(cfgs, rate: dict, args, label: str) -> dict:
    """Prints one configuration's figures; returns its ratios to `sequential`."""
    B, K, N = cfgs[0].train.batch_size, len(cfgs), args.steps
    flops = flops_per_step(cfgs[0]) / B
    peak = peak_gflops()
    print(f"{label}model={cfgs[0].model_name} task={args.task} recipe={cfgs[0].recipe} batch={B} seeds={K} steps={N} "
          f"threads={args.threads} flops_per_example={flops:.3g} peak_gflops={peak:.1f}")
    for k, v in rate.items():
        print(f"{k}_examples_per_s={v:.2f} {k}_mfu={flops * v / (peak * 1e9):.4f}")
    jobs2 = f"ratio_group_vmap_vs_jobs2={rate['group_vmap'] / rate['jobs2']:.2f} " if "jobs2" in rate else ""
    print(f"ratio_group_vmap_vs_sequential={rate['group_vmap'] / rate['sequential']:.2f} {jobs2}"
          f"ratio_group_loop_vs_sequential={rate['group_loop'] / rate['sequential']:.2f}", flush=True)
    return {k: round(rate[k] / rate["sequential"], 3) for k in ("group_vmap", "group_loop", "jobs2") if k in rate}


def table_columns(names: str, sizes: str | None):
    """(key, model, recipe, ablation, group sizes) of every distinct column of the tables `names`."""
    from relreason.studies.sweep import column_key, group_sizes
    from relreason.studies.tables import TABLES

    seen = {}
    for name in names.split(","):
        study = TABLES.get(name)
        for v in study.variants:
            ks = [int(k) for k in sizes.split(",")] if sizes else group_sizes(study.column_seeds(v.label) or 0, 4)
            key = column_key(v)
            prev = seen.get(key)
            seen[key] = (key, v.model, v.recipe, (study.name, v.delta), sorted(set(ks) | set(prev[4] if prev else ())))
    return list(seen.values())


def record(ratios: dict, argv: list[str]) -> None:
    """Writes `ratios` ({"COLUMN K=k": {...}}) into the shipped costs file's "seed_groups" (atomically)."""
    import json
    import sys
    from pathlib import Path

    from relreason.runtime import hardware
    from relreason.studies.sweep import costs_file

    out = costs_file()
    costs = json.loads(out.read_text()) if out.is_file() else {}
    entry = costs.setdefault("seed_groups", {})
    entry.update({"hardware": hardware("cpu"), "date": time.strftime("%Y-%m-%d")})
    command = "python scripts/bench_seeds.py " + " ".join(argv)
    entry["commands"] = sorted(set(entry.get("commands", [])) | {command})
    entry.setdefault("ratios", {}).update(ratios)
    tmp = Path(str(out) + ".tmp")
    tmp.write_text(json.dumps(costs, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)
    print(f"recorded {len(ratios)} ratio(s) in {out}", file=sys.stderr)


def profile(cfgs, steps: int) -> None:
    """Where the time of each way goes: the operators by self CPU time, group (vmap) then sequential."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    for label, run in (("group_vmap", lambda: group_steps(cfgs, steps, True)),
                       ("sequential", lambda: sequential_steps(cfgs, steps))):
        run()  # warm: data cached, kernels chosen
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            seconds = run()
        print(f"\n{label}: {seconds:.3f} (as the timed function returns it)")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))


def main() -> None:
    import sys

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="rt")
    p.add_argument("--task", default="bellman_ford")
    p.add_argument("--recipe", default=None, help="recipe (default: the model's paper recipe)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--seeds", type=int, default=4, help="K")
    p.add_argument("--tables", default=None, help="comma list: measure every column of these published tables")
    p.add_argument("--group-sizes", default=None, help="with --tables: comma list of K (default: the group sizes "
                                                       "of each column's paper seed count, groups of up to 4)")
    p.add_argument("--no-jobs2", action="store_true", help="skip the 2-process way (it starts processes: slow)")
    p.add_argument("--record", action="store_true", help="write the ratios into relreason/studies/costs.json")
    p.add_argument("--steps", type=int, default=6, help="timed steps per seed")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best of each is kept")
    p.add_argument("--data-dir", default="data")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--profile", action="store_true", help="instead: torch.profiler's top operators (self CPU time) of "
                                                          "the vmapped group's steps and of the sequential runs'")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.profile:
        profile(configs(args), args.steps)
        return
    ratios = {}
    if args.tables:
        for key, model, recipe, ablation, sizes in table_columns(args.tables, args.group_sizes):
            for k in sizes:
                cfgs = configs(args, model, recipe, k, ablation)
                ratios[f"{key} K={k}"] = report(cfgs, measure(cfgs, args), args, f"{key} K={k}: ")
    else:
        cfgs = configs(args)
        from relreason.studies.sweep import column_key
        from relreason.studies.variants import Variant

        key = column_key(Variant(args.model, args.model, {}, args.recipe)) if not args.set and not args.batch_size \
            else None
        ratio = report(cfgs, measure(cfgs, args), args, "")
        if key is not None:
            ratios[f"{key} K={args.seeds}"] = ratio
    if args.record:
        if not ratios:
            raise SystemExit("--record keeps the ratios of protocol configurations only: no --set or --batch-size")
        record(ratios, sys.argv[1:])


if __name__ == "__main__":
    main()
