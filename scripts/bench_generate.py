#!/usr/bin/env python
"""Data generation speed: samples/s per algorithm and size (all hints included), and peak memory.

    .venv/bin/python scripts/bench_generate.py --all                                # every algorithm, n=16 and n=64
    .venv/bin/python scripts/bench_generate.py --all --reference /work/refenv/bin/python --cpu 0
    .venv/bin/python scripts/bench_generate.py --algorithms bfs,dfs --sizes 64 --budget 1 --repeat 5
    .venv/bin/python scripts/bench_generate.py --memory bubble_sort                 # peak traced memory, test split

One line per (algorithm, size): `name n=.. ours=<samples/s>`, and with `--reference PYTHON` (a Python
with google-deepmind/clrs installed) also `ref=<samples/s> ratio=<ours/ref>x (K=...)`. The reference is
timed in one long-lived subprocess, cell by cell, right before ours, so both see the same machine
load; `--cpu K` pins this process and that subprocess to core K (as `taskset -c K` would).

How one side is timed (`timed_rate`, the same code on both sides): runs of K samples with K growing
until a run takes at least `--budget` seconds (warm-up runs, untimed), then at least `--repeat` runs
of that K (more until they took `--budget` seconds in all), of which the fastest counts. With
`--reference`, the reference finds K and ours generates the same split (K samples, same seed), or a
canonical test split's 32 samples when K is smaller (MIN_SPLIT): the reference's cost per sample
hardly depends on K, ours does (lockstep batches share each step's work among a split's samples,
and beyond ~1 GB an array is always fresh memory). Seconds are the process's CPU time (user +
system, so page faults count) unless `--clock wall`: on a machine shared with other jobs, CPU time
is what stays comparable. Warm runs measure steady generation, as in a process that generates split
after split or batch after batch. Both processes keep freed memory for reuse (glibc `mallopt`, as
relreason's training and evaluation processes do, `relreason.runtime.keep_freed_memory`): otherwise
every large array is fresh memory, whose first touch costs as much as writing it (several times
more in a VM) and varies with the machine's load; `--default-malloc` leaves glibc's defaults on both
sides. Ours is `relreason.data.generate(name, num=K, size=n, seed)` (sample, run, pad); the
reference's is `clrs.build_sampler(name, num_samples=K, length=n, seed=seed)`, which generates and
pads all K samples in its constructor.

The project never needs the reference: without `--reference` nothing of it is imported. The
subprocess imports only `clrs._src.samplers` (not the package `__init__`, which pulls in the models,
TensorFlow datasets and text tools); when TensorFlow is missing it gets a stub module, which the
samplers only use for an `isinstance` check. A benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import inspect
import os
import subprocess
import sys
import time
import tracemalloc

from relreason.data import ALGORITHMS, generate
from relreason.runtime import keep_freed_memory

MAX_NUM = 20_000  # samples per run at most (bubble_sort at n=16 keeps ~23 KB of hints per sample)
START_NUM = 2  # the first run's sample count; the reference makes ~0.5 matrix_chain_order samples/s at n=64
# With --reference, ours generates the reference's K samples but at least this many: a canonical test
# split (32 x the eval multiplier). Our lockstep batches share each step's work among a split's samples.
MIN_SPLIT = 32


def timed_rate(run, budget: float, repeat: int, clock: str, num: int = 0) -> tuple[float, int]:
    """Samples/s of `run(num)` and the num timed. Without `num`, num grows until a run takes `budget`
    seconds (warm-up runs); then at least `repeat` runs of num, and more until they took `budget`
    seconds in all, of which the fastest counts.

    Runs on both sides: the reference subprocess gets this function's source."""
    now = time.process_time if clock == "cpu" else time.perf_counter
    if num:
        run(num)  # warm-up
    else:
        num = START_NUM
        while True:
            start = now()
            run(num)
            took = now() - start
            if took >= budget or num >= MAX_NUM:
                break
            num = min(MAX_NUM, int(num * max(2.0, 1.2 * budget / max(took, 1e-3))))
    rate, spent, runs = 0.0, 0.0, 0
    while runs < repeat or spent < budget:
        start = now()
        run(num)
        took = max(now() - start, 1e-9)
        rate, spent, runs = max(rate, num / took), spent + took, runs + 1
    return rate, num


# The reference side, run as `PYTHON -c REFERENCE_WORKER`: reads `name size budget repeat seed clock`
# lines, answers each with one line: samples/s and the number of samples per timed run.
REFERENCE_WORKER = f"import time\nMAX_NUM, START_NUM = {MAX_NUM}, {START_NUM}\n" + inspect.getsource(timed_rate) + r'''
import ctypes, ctypes.util, importlib.util, sys, types
if sys.argv[1] == "keep":  # the same mallopt settings as relreason.runtime.keep_freed_memory
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 1 << 31)  # M_TRIM_THRESHOLD
spec = importlib.util.find_spec("clrs")
package = types.ModuleType("clrs")  # skip clrs/__init__.py: it imports models and TF datasets
package.__path__ = list(spec.submodule_search_locations)
sys.modules["clrs"] = package
try:
    import tensorflow  # noqa: F401
except ImportError:  # the samplers only use tf.Tensor in an isinstance check
    tf = types.ModuleType("tensorflow")
    tf.Tensor = type("Tensor", (), {})
    sys.modules["tensorflow"] = tf
from clrs._src import samplers

print("ready", flush=True)
for line in sys.stdin:
    name, size, budget, repeat, seed, clock = line.split()
    run = lambda num: samplers.build_sampler(name, num_samples=num, length=int(size), seed=int(seed))
    print(*timed_rate(run, float(budget), int(repeat), clock), flush=True)
'''


def measure(name: str, size: int, budget: float, repeat: int, seed: int, clock: str, num: int = 0) -> float:
    """Our samples/s (see `timed_rate`), generating `num` samples per run if given."""
    return timed_rate(lambda k: generate(name, num=k, size=size, seed=seed), budget, repeat, clock, num)[0]


class Reference:
    """The reference sampler in a subprocess (started once, asked cell by cell)."""

    def __init__(self, python: str, keep_freed_memory: bool):
        self.proc = subprocess.Popen([python, "-c", REFERENCE_WORKER, "keep" if keep_freed_memory else "default"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"the reference sampler did not start under {python}")

    def measure(self, name: str, size: int, budget: float, repeat: int, seed: int, clock: str) -> tuple[float, int]:
        """The reference's samples/s and the number of samples per timed run."""
        self.proc.stdin.write(f"{name} {size} {budget} {repeat} {seed} {clock}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().split()
        if not answer:
            raise SystemExit(f"the reference sampler failed on {name} n={size}")
        return float(answer[0]), int(answer[1])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def peak_memory(name: str) -> None:
    tracemalloc.start()
    start = time.perf_counter()
    ds = generate(name, split="test")
    took = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    print(f"{name} test split: {len(ds)} samples, n={ds.n}, T max={ds.max_length}, {took:.2f} s, "
          f"peak_traced_mb={peak / 2**20:.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--all", action="store_true", help="every registered algorithm")
    what.add_argument("--algorithms", help="comma-separated algorithm names")
    what.add_argument("--memory", metavar="ALGORITHM", help="peak traced memory of this algorithm's test split")
    p.add_argument("--sizes", default="16,64")
    p.add_argument("--budget", type=float, default=0.2, help="seconds a timed run takes at least (per side)")
    p.add_argument("--repeat", type=int, default=2, help="timed runs per side and cell; the fastest counts")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="what a timed run's seconds are")
    p.add_argument("--reference", metavar="PYTHON", help="a Python with google-deepmind/clrs installed")
    p.add_argument("--cpu", type=int, default=None, help="pin both sides to this core")
    p.add_argument("--default-malloc", action="store_true", help="leave glibc's allocator settings alone (both sides)")
    a = p.parse_args()
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})  # inherited by the reference subprocess
    if not a.default_malloc and not keep_freed_memory():
        raise SystemExit("cannot tune glibc's allocator here: pass --default-malloc")
    if a.memory:
        peak_memory(a.memory)
        return
    names = ALGORITHMS.names() if a.all else a.algorithms.split(",")
    sizes = [int(s) for s in a.sizes.split(",")]
    ref = Reference(a.reference, not a.default_malloc) if a.reference else None
    try:
        for name in names:
            for size in sizes:
                if ref is None:
                    print(f"{name:30s} n={size:<3d} ours={measure(name, size, a.budget, a.repeat, a.seed, a.clock):9.1f}",
                          flush=True)
                    continue
                theirs, num = ref.measure(name, size, a.budget, a.repeat, a.seed, a.clock)
                num = max(num, MIN_SPLIT)
                ours = measure(name, size, a.budget, a.repeat, a.seed, a.clock, num)
                print(f"{name:30s} n={size:<3d} ours={ours:9.1f} ref={theirs:8.1f} ratio={ours / theirs:6.1f}x "
                      f"(K={num})", flush=True)
    finally:
        if ref is not None:
            ref.close()


if __name__ == "__main__":
    sys.exit(main())
