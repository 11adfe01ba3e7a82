"""Runs that tests/train/test_distributed.py starts under torchrun (one launch for all the runs of a
number of processes, to keep the tests short):
`torchrun --nproc-per-node N tests/train/distributed_runs.py OUT DATA_DIR STEPS [BATCH[,BATCH...]]`.

Per batch size B (default 4), under `OUT/bB`:
1. `fresh`: a new run of STEPS steps;
2. `resumed`: a run that one process left there at half the budget, continued to STEPS steps.

A batch need not be divisible by N, nor at least N (ranks then hold uneven shares, or none).
"""

from __future__ import annotations

import sys
from pathlib import Path

BATCH = 4
TASK = "insertion_sort,bfs"  # a sort (Gumbel noise) and trajectories of different lengths (hint counts differ per rank)


def noisy_config(data_dir: Path, steps: int, batch: int = BATCH) -> list[str]:
    """A tiny run of `steps` steps of `batch` examples with every kind of noise: random positions, Gumbel
    noise (permutation pointers), teacher forcing 0.5 and dropout; validation every 2 steps."""
    return ["model.hidden=16", f"train.batch_size={batch}", f"train.train_examples={batch * steps}",
            f"train.eval_every_examples={batch * 2}", "data.train_num=24", "data.train_size=5",
            "data.val_size=5", "data.test_size=6", "data.val_num=10", "data.test_num=10", "train.eval_batch_size=3",
            "model.teacher_forcing=0.5", "model.dropout=0.1", "model.random_pos=true", "train.threads=1",
            f"data.data_dir={data_dir}"]


if __name__ == "__main__":
    import torch.distributed as dist

    from relreason.config import build_config
    from relreason.train import run

    out, data_dir, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    batches = [int(b) for b in sys.argv[4].split(",")] if len(sys.argv) > 4 else [BATCH]
    dist.init_process_group("gloo")  # once for every run (`run` uses a group it finds and leaves it open)
    for batch in batches:
        cfg = build_config("mpnn", TASK, None, noisy_config(data_dir, steps, batch))
        run(cfg, out=out / f"b{batch}", name="fresh", show_progress=False)
        run(cfg, out=out / f"b{batch}", name="resumed", resume=True, show_progress=False)
        dist.barrier()
    dist.destroy_process_group()
