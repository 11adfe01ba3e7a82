"""Training and evaluation throughput, FLOPs and model FLOP utilisation of one model on one task
(a benchmark, not a test).

    .venv/bin/python scripts/bench_train.py --model mpnn --task bellman_ford --batch-size 32 --steps 20 --threads 1

Generates a training set at --size nodes and an evaluation set at --eval-size nodes, warms up, then
times full training steps (forward with hints, loss, backward, global-norm clipping, Adam) and
evaluation forward passes (+ predictions, at the automatic evaluation batch size unless
--eval-batch-size is given). The model and processor sections come from the model's own recipe
when it has one (`rt`: hidden 192, pointers from edges, 12 heads x 16; `et`: width 64, 3 layers),
otherwise from the defaults; --hidden overrides the width.

FLOPs are counted by `torch.utils.flop_counter.FlopCounterMode` on the very batches that are timed
(matmul-like operations only, forward + backward for training; elementwise work is not counted, as
usual for MFU; the ET's triangular products, contractions with no matmul form, count as their eager
batched-matmul form: 2 FLOPs per multiply-add term). The peak is the machine's fp32 matmul rate
measured on the spot: the best of a few 2048 x 2048 matmuls at the thread count used. MFU = counted FLOPs / time / peak. Two clocks: wall
time, and process CPU time / threads (`*_cpu`), which is what to read on a shared machine: it does
not count the time the process waits for a core (both the workload and the peak are measured so).

The matmul ceiling (`train_matmul_ceiling=`, `eval_matmul_ceiling=`) tells how much of the gap to the
peak is the matmuls' own shapes and how much the rest of the step: every matmul-like call of the
counted work (mm, bmm, addmm, baddbmm, with its argument shapes and strides) is recorded, then
replayed alone on random operands of those shapes, best of 5. Counted FLOPs / replay time / peak is
the MFU the model would reach if everything else in its step (LayerNorm, softmax, elementwise ops,
the framework) took no time; the replay's share of the measured time is printed beside it. It is a
ceiling (the replay's operands stay in cache), for this decomposition of the maths into matmuls. For
the ET the triangular products replay in their batched-matmul form, slower than the compiled
kernels that actually run, so its ceiling can fall below its MFU.

Prints `peak_gflops=`, `flops_per_example=` (training) and `eval_flops_per_example=`,
`eval_examples_per_s=`, `eval_mfu=`, `eval_matmul_ceiling=`, `train_mfu=`, `train_matmul_ceiling=`
and, as its last line, `train_examples_per_s=...`.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from relreason.config import build_config, recipe_names
from relreason.data import generate
from relreason.models import PROCESSORS, Batch, build_model, prepare_spec
from relreason.models import kernels
from relreason.models.processors import et
from relreason.models.precision import autocast
from relreason.runtime import keep_freed_memory
from relreason.train.optimizer import adam, clip_grad_norm

PEAK_SIZE = 2048  # square fp32 matmul of the peak measurement (large enough for MKL's best kernel)
PEAK_TRIES = 5


@dataclass
class Timing:
    wall: float  # seconds
    cpu: float  # process CPU seconds / threads: the time on cores actually held

    def rate(self, work: float) -> tuple[float, float]:
        return work / self.wall, work / self.cpu


def timed(fn: Callable[[], object]) -> Timing:
    threads = torch.get_num_threads()
    w, c = time.perf_counter(), time.process_time()
    fn()
    return Timing(time.perf_counter() - w, (time.process_time() - c) / threads)


def matmul_peak(size: int = PEAK_SIZE, tries: int = PEAK_TRIES) -> tuple[float, float]:
    """(wall, cpu) fp32 matmul FLOP/s at the current thread count: the best of `tries` square matmuls."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = [0.0, 0.0]
    for _ in range(tries):
        rates = timed(lambda: torch.mm(a, b)).rate(2.0 * size ** 3)
        best = [max(x, y) for x, y in zip(best, rates)]
    return best[0], best[1]


class _Operand(NamedTuple):
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype


class MatmulRecorder(TorchDispatchMode):
    """Records every matmul-like call (operator, argument shapes and strides) that passes through it.
    These four are all the operators the FLOP counter counts that our models run (no convolutions,
    no fused attention), so the replay holds all of the counted FLOPs."""

    OPS = (torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default,
           torch.ops.aten.baddbmm.default)

    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.OPS:
            self.calls.append((func, [_Operand(tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor)
                                      else a for a in args], kwargs))
        return func(*args, **kwargs)

    def replay_time(self, tries: int = 5) -> Timing:
        """The best of `tries` replays of the recorded calls alone, on random operands of the recorded
        shapes and strides (kept resident, so this is a ceiling: the real step also moves its operands)."""
        operands = {}

        def operand(op: _Operand) -> torch.Tensor:
            if op not in operands:
                extent = 1 + sum((size - 1) * step for size, step in zip(op.shape, op.stride)) if all(op.shape) else 0
                operands[op] = torch.randn(extent).to(op.dtype).as_strided(op.shape, op.stride)
            return operands[op]

        calls = [(func, [operand(a) if isinstance(a, _Operand) else a for a in args], kwargs)
                 for func, args, kwargs in self.calls]

        def run():
            for func, args, kwargs in calls:
                func(*args, **kwargs)

        run()
        best = None
        for _ in range(tries):
            t = timed(run)
            best = t if best is None or t.wall < best.wall else best
        return best


def ceiling(flops: float, matmuls: Timing, measured: Timing, peak: float, what: str) -> str:
    """"<ceiling MFU> (matmuls alone <s> = <share> of <what>" (the caller closes the parenthesis)."""
    return (f"{flops / matmuls.wall / peak:.2f} (matmuls alone {matmuls.wall:.3f} s = "
            f"{matmuls.wall / measured.wall:.0%} of {what}")


def count_flops(fn: Callable[[], object], recorder: MatmulRecorder | None = None) -> int:
    """Matmul-like FLOPs of everything `fn` runs (forward and, if it calls it, backward).

    Counted with the eager kernels: the ET's triangular products (contractions with no matrix-product
    form, compiled into fused loops when timed) then run as batched matmuls at every n, so they count
    as 2 FLOPs per multiply-add term, like any contraction (at n < 32 their eager kernel is otherwise a
    loop of elementwise multiply-adds, which the counter does not see)."""
    loop_max = et.LOOP_MAX_TERMS
    et.LOOP_MAX_TERMS = 0
    try:
        with kernels.enabled(False), FlopCounterMode(display=False) as counter:
            if recorder is None:
                fn()
            else:
                with recorder:
                    fn()
    finally:
        et.LOOP_MAX_TERMS = loop_max
    return counter.get_total_flops()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mpnn", choices=PROCESSORS.names())
    p.add_argument("--task", default="bellman_ford")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=None, help="model.hidden (default: the model's recipe / defaults)")
    p.add_argument("--recipe", default=None,
                   help="recipe whose model/processor sections to use (default: the model's own recipe, if any)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   help="extra config override, e.g. --set processor.layers=2 (repeatable)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--eval-size", type=int, default=64)
    p.add_argument("--eval-num", type=int, default=None,
                   help="evaluation samples (default: two evaluation batches)")
    p.add_argument("--eval-batch-size", type=int, default=None,
                   help="evaluation batch (default: the automatic size of relreason.train.workloads._pick_batch)")
    p.add_argument("--no-eval", action="store_true", help="time training only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--default-malloc", action="store_true", help="leave glibc's allocator settings alone")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    tuned = False if args.default_malloc else keep_freed_memory()

    torch.manual_seed(args.seed)
    recipe = args.recipe or (args.model if args.model in recipe_names() else None)
    sets = ([f"model.hidden={args.hidden}"] if args.hidden else []) + args.overrides
    full = build_config(args.model, args.task, recipe, sets)
    cfg = full.model
    bs = args.batch_size
    train_ds = generate(args.task, num=bs * (args.steps + args.warmup), size=args.size, seed=1)
    spec = prepare_spec(train_ds.spec, cfg, args.task)
    net = build_model(spec, cfg, args.model, full.processor)
    opt = adam(net.parameters(), 1e-3)
    rng = np.random.default_rng(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    batches = [Batch.from_dataset(train_ds.take(np.arange(i * bs, (i + 1) * bs)), cfg, spec, "cpu", generator=rng)
               for i in range(args.steps + args.warmup)]
    timed_batches = batches[args.warmup:]

    def forward_backward(batch: Batch) -> None:
        with autocast(full.train.precision, torch.device("cpu")):  # --set train.precision=bf16
            out = net(batch, train=True, generator=gen)
            loss, _ = net.loss(batch, out)
        opt.zero_grad(set_to_none=True)
        loss.backward()

    def train_step(batch: Batch) -> None:
        forward_backward(batch)
        clip_grad_norm(net, 1.0)
        opt.step()

    peak_wall, peak_cpu = matmul_peak()
    net.train()
    for b in batches[: args.warmup]:
        train_step(b)
    train_t = timed(lambda: [train_step(b) for b in timed_batches])
    train_mm = MatmulRecorder()
    train_flops = sum(count_flops(lambda: forward_backward(b), train_mm) for b in timed_batches)
    opt.zero_grad(set_to_none=True)
    train_examples = bs * args.steps

    threads = torch.get_num_threads()
    print(f"model={args.model} recipe={recipe} task={args.task} hidden={cfg.hidden} batch={bs} n={args.size} "
          f"threads={threads} malloc_tuned={tuned} mean_T={np.mean([b.max_length for b in timed_batches]):.1f}",
          file=sys.stderr)
    print(f"peak_gflops={peak_wall / 1e9:.1f} (cpu {peak_cpu / 1e9:.1f}; fp32 {PEAK_SIZE}^2 matmul, "
          f"{threads} threads)")
    print(f"flops_per_example={train_flops / train_examples / 1e9:.3f} GFLOP (training: forward + backward)")

    if not args.no_eval:
        from relreason.train.workloads import _pick_batch

        ebs = _pick_batch(args.eval_batch_size, None, net, SimpleNamespace(n=args.eval_size))
        eval_num = args.eval_num or 2 * ebs
        eval_ds = generate(args.task, num=eval_num, size=args.eval_size, seed=3)
        eval_batches = [Batch.from_dataset(eval_ds.take(slice(i, i + ebs)), cfg, spec, "cpu")
                        for i in range(0, eval_num, ebs)]

        def evaluate(batch: Batch) -> None:
            net.predict(net(batch, train=False))

        net.eval()
        with torch.no_grad():
            evaluate(eval_batches[0])  # warm-up at the evaluation size
            eval_t = timed(lambda: [evaluate(b) for b in eval_batches])
            eval_mm = MatmulRecorder()
            eval_flops = sum(count_flops(lambda: evaluate(b), eval_mm) for b in eval_batches)
            eval_mm_t = eval_mm.replay_time()
        ew, ec = eval_t.rate(eval_flops)
        print(f"eval_flops_per_example={eval_flops / eval_num / 1e9:.3f} GFLOP (n={args.eval_size}, "
              f"batch {ebs}, {eval_num} samples)")
        print(f"eval_gflops={ew / 1e9:.1f} (cpu {ec / 1e9:.1f})")
        print(f"eval_mfu={ew / peak_wall:.2f} (cpu {ec / peak_cpu:.2f})")
        print(f"eval_matmul_ceiling={ceiling(eval_flops, eval_mm_t, eval_t, peak_wall, 'the evaluation')})")
        print(f"eval_examples_per_s={eval_num / eval_t.wall:.1f} (cpu {eval_num / eval_t.cpu:.1f})")

    tw, tc = train_t.rate(train_flops)
    train_mm_t = train_mm.replay_time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak_rss_mb={peak:.0f}")
    print(f"train_gflops={tw / 1e9:.1f} (cpu {tc / 1e9:.1f})")
    print(f"train_mfu={tw / peak_wall:.2f} (cpu {tc / peak_cpu:.2f})")
    print(f"train_matmul_ceiling={ceiling(train_flops, train_mm_t, train_t, peak_wall, 'training')}, "
          f"{1e3 * train_mm_t.wall / train_examples:.2f} ms per example; {len(train_mm.calls)} calls)")
    print(f"train_examples_per_s={train_examples / train_t.wall:.1f} (cpu {train_examples / train_t.cpu:.1f})")


if __name__ == "__main__":
    main()
