"""Training and evaluation throughput of one model on one task (a benchmark, not a test).

    .venv/bin/python scripts/bench_train.py --model mpnn --task bellman_ford --batch-size 32 --steps 20

Generates a training set at --size nodes and an evaluation set at --eval-size nodes, warms up, then
times full training steps (forward with hints, loss, backward, global-norm clipping, Adam) and
evaluation forward passes (+ predictions). Prints `eval_examples_per_s=...` and, as its last line,
`train_examples_per_s=...`, after `peak_rss_mb=...`. The model and processor sections come from the
model's own recipe when it has one (`rt`: hidden 192, pointers from edges, 12 heads x 16; `et`: width
64, 3 layers), otherwise from the defaults; --hidden overrides the width.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np
import torch

from relreason.data import generate
from relreason.config import build_config, recipe_names
from relreason.models import PROCESSORS, Batch, build_model, prepare_spec
from relreason.runtime import keep_freed_memory


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mpnn", choices=PROCESSORS.names())
    p.add_argument("--task", default="bellman_ford")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=None, help="model.hidden (default: the model's recipe / defaults)")
    p.add_argument("--recipe", default=None,
                   help="recipe whose model/processor sections to use (default: the model's own recipe, if any)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--eval-size", type=int, default=64)
    p.add_argument("--eval-batches", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--default-malloc", action="store_true", help="leave glibc's allocator settings alone")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    tuned = False if args.default_malloc else keep_freed_memory()

    torch.manual_seed(args.seed)
    recipe = args.recipe or (args.model if args.model in recipe_names() else None)
    full = build_config(args.model, args.task, recipe, [f"model.hidden={args.hidden}"] if args.hidden else [])
    cfg = full.model
    bs = args.batch_size
    train_ds = generate(args.task, num=bs * (args.steps + args.warmup), size=args.size, seed=1)
    eval_ds = generate(args.task, num=bs * args.eval_batches, size=args.eval_size, seed=3)
    spec = prepare_spec(train_ds.spec, cfg, args.task)
    net = build_model(spec, cfg, args.model, full.processor)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, foreach=True)
    rng = np.random.default_rng(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    batches = [Batch.from_dataset(train_ds.take(np.arange(i * bs, (i + 1) * bs)), cfg, spec, "cpu", generator=rng)
               for i in range(args.steps + args.warmup)]
    eval_batches = [Batch.from_dataset(eval_ds.take(np.arange(i * bs, (i + 1) * bs)), cfg, spec, "cpu")
                    for i in range(args.eval_batches)]

    def train_step(batch: Batch) -> None:
        out = net(batch, train=True, generator=gen)
        loss, _ = net.loss(batch, out)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0, foreach=True)
        opt.step()

    net.train()
    for b in batches[: args.warmup]:
        train_step(b)
    t0 = time.perf_counter()
    for b in batches[args.warmup:]:
        train_step(b)
    train_time = time.perf_counter() - t0

    net.eval()
    with torch.no_grad():
        net.predict(net(eval_batches[0], train=False))  # warm-up at the evaluation size
        t0 = time.perf_counter()
        for b in eval_batches:
            net.predict(net(b, train=False))
        eval_time = time.perf_counter() - t0

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"model={args.model} recipe={recipe} task={args.task} hidden={cfg.hidden} batch={bs} n={args.size} "
          f"threads={torch.get_num_threads()} malloc_tuned={tuned} mean_T={np.mean([b.max_length for b in batches]):.1f}", file=sys.stderr)
    print(f"peak_rss_mb={peak:.0f}")
    print(f"eval_examples_per_s={bs * args.eval_batches / eval_time:.1f}")
    print(f"train_examples_per_s={bs * args.steps / train_time:.1f}")


if __name__ == "__main__":
    main()
