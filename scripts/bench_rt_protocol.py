"""Predicts the wall time of the RT paper protocol from a short run of the real thing (a benchmark, not a test).

    .venv/bin/python scripts/bench_rt_protocol.py --steps 300 --validations 3

The protocol (`relreason train rt bellman_ford`, relreason/recipes/rt.yaml): 80,000 steps of batch 4 at n = 16,
a validation on the 32-sample validation split every 320 examples (1,001 validations with the one
before the first step, each followed by the `last/` checkpoint and, when it improved, `best/`), then
the test at n = 64 on the best checkpoint. This script runs `relreason.train.run` itself with the
same configuration, cut to --steps steps with a validation every steps/validations steps (so the run
holds the same kinds of work), times every phase, and extrapolates:

    predicted = 80,000 x (time per training step) + 1,001 x (time per validation + checkpoints) + test

It prints the measured phases, `predicted_minutes=...` (wall clock, as measured now) and
`predicted_cpu_minutes=...` (process CPU seconds / threads: what the run would take on an otherwise
idle machine, when the machine is shared). Data splits are generated once into --data-dir.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from relreason.config import build_config
from relreason.train import loop, session

PROTOCOL_STEPS = 80_000  # relreason/recipes/rt.yaml: 320,000 examples at batch 4
PROTOCOL_VALIDATIONS = 1_001  # every 320 examples, plus the one before the first step


class _Clock:
    """Wall and process-CPU seconds spent inside the wrapped calls."""

    def __init__(self):
        self.wall, self.cpu, self.calls = [], [], 0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall.append(time.perf_counter() - w)
                self.cpu.append(time.process_time() - c)
        return timed


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="training steps to run (the protocol has 80,000)")
    p.add_argument("--validations", type=int, default=3, help="validations after the first one, spread evenly")
    p.add_argument("--task", default="bellman_ford")
    p.add_argument("--data-dir", default="data", help="where the splits are generated once (cached)")
    p.add_argument("--threads", type=int, default=0, help="train.threads (0: torch's default)")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="extra --set items (A/B runs)")
    args = p.parse_args(argv)

    cfg0 = build_config("rt", args.task, "rt", [f"data.data_dir={args.data_dir}"])
    bs = cfg0.train.batch_size
    every = max(1, args.steps // max(1, args.validations)) * bs
    cfg = build_config("rt", args.task, "rt", [f"data.data_dir={args.data_dir}", f"train.threads={args.threads}",
                                               f"train.train_examples={args.steps * bs}",
                                               f"train.eval_every_examples={every}", *args.overrides])
    # the splits, generated (once) outside the timed run
    from relreason.tasks import TASKS
    for split in ("train", "val", "test"):
        TASKS.get(args.task).load(split, cfg.data)

    val, test = _Clock(), _Clock()
    session.Session.validate = val.wrap(session.Session.validate)
    session.Session.final_test = test.wrap(session.Session.final_test)
    with tempfile.TemporaryDirectory() as out:
        w0, c0 = time.perf_counter(), time.process_time()
        res = loop.run(cfg, out=Path(out), name="bench", show_progress=False, log=lambda m: None)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    threads = torch.get_num_threads()
    train_wall, train_cpu = wall - sum(val.wall) - sum(test.wall), cpu - sum(val.cpu) - sum(test.cpu)
    # the first validation runs on a cold model (allocator warm-up): the mean of the others
    later = slice(1, None) if len(val.wall) > 1 else slice(None)
    val_wall = sum(val.wall[later]) / len(val.wall[later])
    val_cpu = sum(val.cpu[later]) / len(val.cpu[later])
    step_wall, step_cpu = train_wall / res.steps, train_cpu / res.steps
    pred = PROTOCOL_STEPS * step_wall + PROTOCOL_VALIDATIONS * val_wall + sum(test.wall)
    pred_cpu = (PROTOCOL_STEPS * step_cpu + PROTOCOL_VALIDATIONS * val_cpu + sum(test.cpu)) / threads
    print(f"task={args.task} batch={bs} steps={res.steps} validations={len(val.wall)} threads={threads} "
          f"test_size={res.test_size}", file=sys.stderr)
    print(f"train_step_ms={1e3 * step_wall:.1f} (cpu {1e3 * step_cpu:.1f})")
    print(f"validation_ms={1e3 * val_wall:.0f} (cpu {1e3 * val_cpu:.0f}; first {1e3 * val.wall[0]:.0f})")
    print(f"test_s={sum(test.wall):.1f} (cpu {sum(test.cpu):.1f})")
    print(f"protocol: {PROTOCOL_STEPS} steps -> {PROTOCOL_STEPS * step_wall / 60:.1f} min, "
          f"{PROTOCOL_VALIDATIONS} validations -> {PROTOCOL_VALIDATIONS * val_wall / 60:.1f} min")
    print(f"predicted_cpu_minutes={pred_cpu / 60:.1f}")
    print(f"predicted_minutes={pred / 60:.1f}")


if __name__ == "__main__":
    main()
