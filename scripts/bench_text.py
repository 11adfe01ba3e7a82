"""Training and decoding throughput of the text models, with FLOPs and MFU (a benchmark, not a test).

    .venv/bin/python scripts/bench_text.py                       # text transformer, text_cpu shape
    .venv/bin/python scripts/bench_text.py --model transnar      # TransNAR, next to the text transformer
    .venv/bin/python scripts/bench_text.py --task text:bellman_ford --threads 1   # real CLRS-Text training steps

Training: full steps (forward, answer-only loss, backward, AdamW) on random character sequences of
--seq-len tokens whose second half is the answer, randomized positions drawn per step. Decoding:
greedy `generate` with the KV cache from --prompt-len prompts for --new-tokens tokens; the prompt's
prefill is timed apart (prefill_tokens_per_s) and decode_tokens_per_s counts the tokens generated
after the first over the time beyond the prefill (a row stops early only if it emits EOS).
TransNAR gets random NAR embeddings of a realistic shape (--nodes N, --node-dim, --edge-dim; the
last node of every other example padded).

FLOPs per token are counted with torch.utils.flop_counter.FlopCounterMode on one training step
(forward + backward), attention through SDPA's math backend so that it is counted (the CPU flash
kernel is invisible to the counter); the full L x L attention matrices count, as in nanoGPT's MFU.
The peak is measured on the spot: the best of several timed 2048^3 fp32 matmuls at the same thread
count. mfu = flops_per_token x train_tokens_per_s / peak.

--task TASK times instead the training steps of the text workload (relreason.train.text) on real
CLRS-Text batches of the text_transformer recipe (mixed sizes, rows cut into chunks of similar length):
data (drawing, running and rendering the examples) and the update, in CPU seconds of this process, and
prints task_ms_per_example (what the recipes' cost comments quote), data_ms_per_example, chunks and
padding (padded / real tokens).

Prints `key=value` lines: params, flops_per_token, train_tokens_per_s, prefill_tokens_per_s,
decode_tokens_per_s, mfu for the text transformer, the same keys prefixed `transnar_` with --model
transnar, then matmul_peak_gflops. Timings on a shared machine are noisy: the
models and the peak are timed interleaved, --rounds times; medians (peak: best) are reported.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from relreason.models.text import PAD, TEXT_SHAPES, TextTransformer, TextTransformerConfig, TransNAR, TransNARConfig
from relreason.runtime import keep_freed_memory
from relreason.train.optimizer import adam


def matmul_peak_flops(n: int = 2048, repeats: int = 5) -> float:
    """fp32 FLOP/s of the best of `repeats` timed n x n x n matmuls."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


class Case:
    """One model with its inputs, optimizer, generator and timings."""

    def __init__(self, name: str, model: TextTransformer, args, gen: torch.Generator):
        self.name, self.model, self.gen = name, model, gen
        b, length = args.batch_size, args.seq_len
        self.tokens = torch.randint(3, model.cfg.vocab_size, (b, length), generator=gen)
        self.tokens[:, 0] = 1  # BOS
        self.pad_mask = torch.ones(b, length, dtype=torch.bool)
        self.target = torch.zeros(b, length, dtype=torch.bool)
        self.target[:, length // 2:] = True
        self.prompts = self.tokens[:, :args.prompt_len]
        self.new_tokens = args.new_tokens
        self.nar = {}
        if isinstance(model, TransNAR):
            n = args.nodes
            node_mask = torch.ones(b, n, dtype=torch.bool)
            node_mask[::2, -1] = False
            self.nar = {"nodes": torch.randn(b, n, args.node_dim, generator=gen),
                        "edges": torch.randn(b, n, n, args.edge_dim, generator=gen), "node_mask": node_mask}
        self.opt = adam(model.parameters(), 1e-4)  # the training loop's optimizer
        self.train_times: list[float] = []
        self.prefill_times: list[float] = []
        self.decode_rates: list[float] = []

    def train_step(self) -> None:
        pos = self.model.positions(self.pad_mask, train=True, generator=self.gen)
        loss = self.model.loss(self.tokens, pos, self.target, self.pad_mask, **self.nar)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def flops_per_token(self) -> float:
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            pos = self.model.positions(self.pad_mask, train=True, generator=self.gen)
            self.model.loss(self.tokens, pos, self.target, self.pad_mask, **self.nar).backward()
        self.model.zero_grad(set_to_none=True)
        return counter.get_total_flops() / self.tokens.numel()

    def time_train(self, steps: int) -> None:
        t0 = time.perf_counter()
        for _ in range(steps):
            self.train_step()
        self.train_times.append((time.perf_counter() - t0) / steps)

    def time_decode(self) -> None:
        """Prefill alone (generate 1 token), then a full generate: decode rate = the tokens after the
        first over the time beyond the prefill."""
        t0 = time.perf_counter()
        self.model.generate(self.prompts, None, 1, generator=self.gen, **self.nar)
        t1 = time.perf_counter()
        out = self.model.generate(self.prompts, None, self.new_tokens, generator=self.gen, **self.nar)
        t2 = time.perf_counter()
        produced = int((out[:, 1:] != PAD).sum())  # PAD only follows a row's EOS
        self.prefill_times.append(t1 - t0)
        self.decode_rates.append(produced / max(t2 - t1 - (t1 - t0), 1e-9))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="text", choices=["text", "transnar"],
                   help="transnar also times the text transformer of the same shape, interleaved")
    p.add_argument("--shape", default="text_cpu", choices=list(TEXT_SHAPES))
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=512, help="training sequence length (CLRS-Text n=12: ~300-900)")
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--node-dim", type=int, default=128)
    p.add_argument("--edge-dim", type=int, default=128)
    p.add_argument("--steps", type=int, default=3, help="training steps per timed round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--task", default=None, help="time real training steps of the text workload on this text: task")
    p.add_argument("--hints", action="store_true", help="with --task: answers with the hint trace")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()
    if args.task is not None:
        bench_task(args)
        return
    torch.manual_seed(args.seed)

    text_cfg = TextTransformerConfig(**TEXT_SHAPES[args.shape])
    cases = [Case("text", TextTransformer(text_cfg), args, torch.Generator().manual_seed(args.seed))]
    if args.model == "transnar":
        nar_cfg = TransNARConfig(node_dim=args.node_dim, edge_dim=args.edge_dim)
        cases.append(Case("transnar", TransNAR(text_cfg, nar_cfg), args, torch.Generator().manual_seed(args.seed)))
    flops = {c.name: c.flops_per_token() for c in cases}
    for c in cases:  # warm-up
        c.train_step()
        c.model.generate(c.prompts[:, :8], None, 2, generator=c.gen, **c.nar)
    peaks = []
    for _ in range(args.rounds):  # interleaved, so load on the shared machine hits every model alike
        peaks.append(matmul_peak_flops())
        for c in cases:
            c.time_train(args.steps)
            c.time_decode()
    peak = max(peaks)
    print(f"shape={args.shape} batch={args.batch_size} seq_len={args.seq_len} prompt_len={args.prompt_len} "
          f"new_tokens={args.new_tokens} threads={torch.get_num_threads()} rounds={args.rounds}", file=sys.stderr)
    for c in cases:
        key = "" if c.name == "text" else f"{c.name}_"
        train_tps = args.batch_size * args.seq_len / statistics.median(c.train_times)
        prefill_tps = args.batch_size * args.prompt_len / statistics.median(c.prefill_times)
        print(f"{key}params={c.model.num_parameters()}")
        print(f"{key}flops_per_token={flops[c.name]:.4g}")
        print(f"{key}train_tokens_per_s={train_tps:.1f}")
        print(f"{key}prefill_tokens_per_s={prefill_tps:.1f}")
        print(f"{key}decode_tokens_per_s={statistics.median(c.decode_rates):.1f}")
        print(f"{key}mfu={flops[c.name] * train_tps / peak:.3f}")
    print(f"matmul_peak_gflops={peak / 1e9:.1f}")


def bench_task(args) -> None:
    """CPU time of the text workload's training steps on real batches (data and update apart)."""
    from relreason.config import build_config
    from relreason.train.text import TextWorkload

    cfg = build_config("text_transformer", args.task, None, [f"data.hints={str(args.hints).lower()}",
                                                             f"train.seed={args.seed}"])
    wl = TextWorkload(cfg, torch.device("cpu"))
    opt = adam(wl.model.parameters(), cfg.train.lr)
    wl.step_batches(0)  # draws the training pool
    data = update = 0.0
    chunks = padded = real = 0
    steps = args.steps * args.rounds
    for step in range(1, steps + 1):
        t0 = time.process_time()
        part = wl.step_batches(step)[0]
        t1 = time.process_time()
        loss, _ = wl.loss(wl.model, part, step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        data, update = data + t1 - t0, update + time.process_time() - t1
        chunks += len(part.chunks)
        padded += sum(c.pad_mask.numel() for c in part.chunks)
        real += sum(int(c.pad_mask.sum()) for c in part.chunks)
    examples = steps * cfg.train.batch_size
    print(f"task={args.task} hints={args.hints} batch={cfg.train.batch_size} steps={steps} "
          f"threads={torch.get_num_threads()}", file=sys.stderr)
    print(f"task_ms_per_example={(data + update) / examples * 1000:.1f}")
    print(f"data_ms_per_example={data / examples * 1000:.2f}")
    print(f"chunks_per_step={chunks / steps:.1f}")
    print(f"padding={padded / real:.2f}")


if __name__ == "__main__":
    main()
