"""Benchmark of the Edge Transformer processor: peak memory of an evaluation forward and the time of a
training step. Prints figures; it is not a test.

    .venv/bin/python scripts/bench_et_memory.py                 # n=64 eval, n=16 train, batch 32, width 64
    .venv/bin/python scripts/bench_et_memory.py --layers 8 --chunk-mb 512 --eager

The evaluation figure is the process's peak resident set (resource.getrusage ru_maxrss), measured
first in a fresh process, so it includes the Python + torch baseline (printed separately). The
training step unrolls `--hint-steps` processor calls carrying the pair state (as the network does
over a trajectory), then backward and an Adam step. The compiled kernels (the default; --eager: the
chunked eager ones) are compiled first, at both sizes with batch 1, so neither figure includes it.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import torch

from relreason.models.processors.et import EdgeTransformer, ETConfig
from relreason.train.optimizer import adam


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 1024


def inputs(batch: int, n: int, hidden: int, generator: torch.Generator):
    node_in = torch.randn(batch, n, hidden, generator=generator)  # (B, N, H)
    edge_in = torch.randn(batch, n, n, hidden, generator=generator)  # (B, N, N, H)
    graph_in = torch.randn(batch, hidden, generator=generator)  # (B, H)
    adj = torch.ones(batch, n, n, dtype=torch.bool)  # (B, N, N)
    node_mask = torch.ones(batch, n, dtype=torch.bool)  # (B, N)
    return node_in, edge_in, graph_in, adj, node_mask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--eval-n", type=int, default=64)
    parser.add_argument("--train-n", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=128, help="the network's H (encoder width)")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--chunk-mb", type=int, default=ETConfig.chunk_mb)
    parser.add_argument("--hint-steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--eager", action="store_true", help="processor.compiled_kernels=false")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    cfg = ETConfig(width=args.width, heads=args.heads, layers=args.layers, chunk_mb=args.chunk_mb,
                   compiled_kernels=not args.eager)
    model = EdgeTransformer(cfg, args.hidden)
    print(f"Edge Transformer: width {args.width}, heads {args.heads}, layers {args.layers} (tied), "
          f"{sum(p.numel() for p in model.parameters())} parameters, {torch.get_num_threads()} threads, "
          f"{'eager' if args.eager else 'compiled'} kernels")
    if not args.eager:  # compile at both sizes on one sample (training and evaluation use different kernels)
        for n, train in ((args.train_n, True), (args.eval_n, False)):
            x = inputs(1, n, args.hidden, gen)
            with torch.set_grad_enabled(train):
                out = model(*x[:3], model.initial_state(1, n, x[0].device), *x[3:])
                if train:
                    out.edge.sum().backward()
        model.zero_grad(set_to_none=True)

    baseline = peak_rss_mb()
    node_in, edge_in, graph_in, adj, mask = inputs(args.batch, args.eval_n, args.hidden, gen)
    model.eval()
    with torch.no_grad():
        state = model.initial_state(args.batch, args.eval_n, node_in.device)
        start = time.perf_counter()
        state = model(node_in, edge_in, graph_in, state, adj, mask)
        elapsed = time.perf_counter() - start
    print(f"eval forward n={args.eval_n} batch={args.batch}: peak RSS {peak_rss_mb():.0f} MB "
          f"(baseline before inputs {baseline:.0f} MB), {elapsed:.2f} s")

    model.train()
    node_in, edge_in, graph_in, adj, mask = inputs(args.batch, args.train_n, args.hidden, gen)
    opt = adam(model.parameters(), 1e-3)
    times = []
    for _ in range(3):  # the first step warms up the allocator; report the later ones
        start = time.perf_counter()
        state = model.initial_state(args.batch, args.train_n, node_in.device)
        loss = torch.zeros(())
        for _ in range(args.hint_steps):
            state = model(node_in, edge_in, graph_in, state, adj, mask)
            loss = loss + state.node.square().mean() + state.edge.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    print(f"train step n={args.train_n} batch={args.batch}, {args.hint_steps} hint steps unrolled: "
          f"{min(times[1:]):.2f} s ({min(times[1:]) / args.hint_steps * 1000:.0f} ms per processor call, "
          f"forward + backward); peak RSS so far {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
