"""Distributed data parallel training through torch.distributed, with processes started by torchrun.

    torchrun --nproc-per-node 2 -m relreason train mpnn bellman_ford --recipe quick

torchrun (PyTorch's own launcher) starts the processes with RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in their environment. `Distributed.start` reads them,
joins the process group (gloo on the CPU; nccl on CUDA, each process on the GPU of its local rank)
and gives the training loop the few collective operations it needs. Without torchrun (WORLD_SIZE
unset or 1) it is a one-process group whose operations do nothing, so the loop has one code path.

N processes train exactly as one process with the same global batch (to float rounding):
- every rank takes its contiguous rows of the step's global batch (`workloads.shard_rows`); the
  shares may be uneven (batch 3 over 2 ranks: 2 and 1 rows), and a rank left without a row (batch 4
  over 8 ranks) runs its update on a stand-in row whose loss and counts weigh 0;
- every random draw is made for the global batch and the rank keeps its rows
  (relreason.models.noise), so no number depends on the world size;
- each loss term is the rank's summed loss over the global batch's count divided by the world size
  (`count_normalizer`): DDP averages the ranks' gradients, and that average is the gradient of the
  one-process loss, however many rows each rank holds;
- validation and the test are scored in shards whose statistics are merged exactly
  (relreason.eval.metrics `Scorer.state` / `merge`);
- rank 0 alone holds the run lock and writes checkpoints, metrics, results and console output; it
  reads a checkpoint on resume and broadcasts it, so resuming works with any world size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from relreason.errors import RelreasonError
from relreason.models.build import resolve_device

# torchrun's environment: present in every process it starts
ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


@dataclass
class Distributed:
    """This process's place in the process group (one-process defaults), and the group's operations."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1
    device: torch.device = torch.device("cpu")
    owns_group: bool = False  # this object created the process group (and destroys it on close)
    _shared_error: BaseException | None = None  # raised on every rank by `on_main`

    @property
    def main(self) -> bool:
        """Rank 0: the process that writes."""
        return self.rank == 0

    @staticmethod
    def start(device: str) -> "Distributed":
        """Joins the process group torchrun's environment describes (none without torchrun) and picks
        this process's device from `device` (train.device: auto, cpu, cuda, cuda:N)."""
        world = _env_int("WORLD_SIZE", 1)
        if world <= 1:
            return Distributed(device=resolve_device(device))
        missing = [k for k in ENV_KEYS if k not in os.environ]
        if missing:
            raise RelreasonError(f"WORLD_SIZE={world} but {', '.join(missing)} not set",
                                 "start distributed runs with torchrun: torchrun --nproc-per-node N -m relreason "
                                 "train ...")
        rank, local_rank, local_world = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0), _env_int("LOCAL_WORLD_SIZE", 1)
        dev = _device_of(device, local_rank)

        owns = not dist.is_initialized()
        if owns:
            if dev.type == "cuda":
                torch.cuda.set_device(dev)
            dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        return Distributed(rank, world, local_rank, local_world, dev, owns)

    def close(self, clean: bool = True) -> None:
        """Leaves the process group this object joined. `clean`: every rank is closing too, so they
        first meet at a barrier (gloo aborts when one rank tears down while another still talks)."""
        if self.owns_group:
            if clean:
                dist.barrier()
            dist.destroy_process_group()
            self.owns_group = False

    def __enter__(self) -> "Distributed":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(clean=exc is None or exc is self._shared_error)

    # -- threads and the model -------------------------------------------------------------------

    def set_threads(self, threads: int) -> None:
        """`threads` torch threads when set (train.threads > 0); else, with several processes on this
        machine, its cores divided between them (torchrun would otherwise leave one thread each)."""
        if threads:
            torch.set_num_threads(threads)
        elif self.local_world > 1:
            torch.set_num_threads(max(1, available_cores() // self.local_world))

    def wrap(self, model: nn.Module) -> nn.Module:
        """The module the training step runs: DistributedDataParallel with several processes, the model
        itself alone. DDP looks for the parameters an update did not use (a graph traversal per update):
        a multi-task update uses one task's net, and on a task without graph outputs nothing reads the
        graph state, so the ET's and the DAT's graph readouts get no gradient."""
        if self.world == 1:
            return model

        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=True)

    # -- collective operations (all ranks call them in the same order) -----------------------------

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank (picklable; tensors should be on the CPU)."""
        if self.world == 1:
            return obj

        box = [obj if self.main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        if self.world == 1:
            return [obj]

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sums of `values` over the ranks."""
        if self.world == 1:
            return list(values)

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def on_main(self, fn: Callable[[], Any]) -> Any:
        """Runs `fn` on rank 0 only and returns its result on every rank; a RelreasonError it raises is
        raised on every rank (the others would otherwise wait for rank 0 forever)."""
        result, error = None, None
        if self.main:
            try:
                result = fn()
            except RelreasonError as e:
                error = e
        if self.world > 1:
            error, result = self.broadcast((error, result))
        if error is not None:
            self._shared_error = error
            raise error
        return result


def count_normalizer(world: int, contributes: bool = True) -> Callable[[torch.Tensor], torch.Tensor]:
    """counts (K,) -> the counts summed over all ranks (at least 1: an empty term is 0, not NaN),
    divided by `world` because DDP averages the ranks' gradients. `contributes=False`: the rank holds
    no row of the global batch (its batch is a stand-in), so it adds 0 to the sums."""
    def normalize(counts: torch.Tensor) -> torch.Tensor:
        total = counts.detach().to(torch.float64).clone()
        if not contributes:
            total.zero_()
        dist.all_reduce(total)
        return (total.clamp(min=1) / world).to(torch.float32)

    return normalize


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def is_worker() -> bool:
    """True in a process torchrun started with a rank other than 0 (it trains but stays silent)."""
    return _env_int("WORLD_SIZE", 1) > 1 and _env_int("RANK", 0) != 0


def _env_int(key: str, default: int) -> int:
    raw = os.environ.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise RelreasonError(f"environment variable {key}={raw!r} is not an integer",
                             "start distributed runs with torchrun, which sets it") from None


def _device_of(name: str, local_rank: int) -> torch.device:
    """A rank's device: auto / cuda -> the GPU of its local rank (when CUDA is there), cpu -> cpu."""
    if name.startswith("cuda:"):
        raise RelreasonError(f"train.device={name} names one GPU, but torchrun started several processes",
                             "use --device cuda (each process takes the GPU of its local rank) or auto")
    dev = resolve_device(name)
    if dev.type != "cuda":
        return dev
    if local_rank >= torch.cuda.device_count():
        raise RelreasonError(f"local rank {local_rank} has no GPU ({torch.cuda.device_count()} on this machine)",
                             "start at most one process per GPU (torchrun --nproc-per-node <= the GPU count)")
    return torch.device("cuda", local_rank)
