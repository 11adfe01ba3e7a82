"""What the training loop trains and how it scores it: one Workload per kind of experiment.

The loop (`relreason.train.loop`) is generic: per step it asks the workload for the step's batches
(one optimizer update each), their losses, and now and then a validation score. A workload owns
the model, the data and the metric:

    wl = build_workload(cfg, device)
    for part in wl.step_batches(step):            # one part per optimizer update
        loss, terms = wl.loss(wl.model, part, step)
    result = wl.evaluate("val")                   # {"score", "outputs", "hints", "per_task", ...}

- `NarWorkload`: NAR models on graph tasks (CLRS algorithms, lobsters), one task or several. Multi-task
  steps follow Ibarz et al.'s run.py: one batch of every algorithm per step, each its own optimizer
  update; validation per algorithm; the run's score is their mean.
- Text workloads (CLRS-Text, TransNAR) register in `WORKLOADS` from their own modules.

Distributed training (relreason.train.distributed): `step_batches(step, rank, world)` gives this
rank's rows of the global batch, `loss(..., counts)` normalizes by the global batch's counts and
`evaluate(..., shard=Shard(...))` scores this rank's share of a split and merges the shards' scorer
statistics, so the scores equal a one-process evaluation exactly. A workload that does all three says
so with `supports_distributed = True`; the loop refuses to run others on several processes.

Determinism: the examples of step k and every noise draw come from generators seeded by
`relreason.seeds.derive_seed(seed, purpose, step, ...)`, so a resumed run sees exactly the data and
noise of an uninterrupted one. Noise is drawn for the global batch (relreason.models.noise), so it
does not depend on the number of processes either.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
from torch import nn

from relreason.config import Config, DataStream
from relreason.data.algorithms import ALGORITHMS, canonical_split
from relreason.data.config import DataOrder, ValidationDraw
from relreason.data.samplers import takes_option
from relreason.data.stream import MultiPrefetcher, TrainingStream
from relreason.errors import RelreasonError
from relreason.eval import evaluate as scoring  # called through the module: tests replace score_dataset there
from relreason.eval import memory  # called through the module: tests replace free_memory there
from relreason.models.batch import Batch
from relreason.models.build import build_nar
from relreason.models.catalog import find_model
from relreason.models.noise import Noise
from relreason.registry import Registry
from relreason.seeds import FIXED_ORDER_KEY, Purpose, derive_seed
from relreason.tasks import METRIC_LABELS, task_entries
from relreason.train.checkpoint import tensors_digest
from relreason.train.distributed import count_normalizer


class Workload(abc.ABC):
    """A model, its training data and its metric (see the module docstring)."""

    model: nn.Module
    lower_is_better: bool = False
    metric: str = "clrs"
    supports_distributed: bool = False  # exact on several processes (module docstring)

    @property
    def metric_label(self) -> str:
        return METRIC_LABELS.get(self.metric, self.metric)

    @abc.abstractmethod
    def step_batches(self, step: int, rank: int = 0, world: int = 1) -> list[Any]:
        """The batches of training step `step`, one per optimizer update (this rank's share)."""

    @abc.abstractmethod
    def loss(self, module: nn.Module, part: Any, step: int) -> tuple[torch.Tensor, dict[str, float]]:
        """The training loss of one part (forward through `module`, which may wrap `self.model`).
        Distributed workloads normalize it by the global batch's counts (module docstring)."""

    @abc.abstractmethod
    def evaluate(self, split: str, on_examples: Callable[[int], None] | None = None, *, draw: int | None = None) -> dict:
        """Scores the current model on `split` (val | test): {"score", "outputs", "hints", "per_task",
        "size", "num", "label"}. `on_examples(k)` is called as batches finish (progress). `draw`: which
        validation of a run this is (the examples trained), for validations that draw anew each time.
        Distributed workloads also take `shard=Shard(...)` (module docstring)."""

    def eval_total(self, split: str) -> int:
        """Number of examples `evaluate(split)` scores (for progress bars)."""
        return 0

    def fresh_start_problem(self) -> str | None:
        """Why the model as built cannot start a new training run (None: it can), e.g. a TransNAR whose frozen
        NAR's weights are not at hand: it would train on a random NAR. Resuming, fine-tuning (train.init) and
        evaluation load every weight from a checkpoint, so only a fresh run asks (relreason.train.session)."""
        return None

    def close(self) -> None:
        """Stops background workers."""


WORKLOADS: Registry[Callable[[Config, torch.device], Workload]] = Registry("workload family")


@dataclass(frozen=True)
class Shard:
    """This process's share of a distributed evaluation: the batches b with b % world == rank.
    `gather(obj)` returns every rank's obj in rank order (relreason.train.distributed)."""

    rank: int
    world: int
    gather: Callable[[Any], list[Any]]


def build_workload(cfg: Config, device: torch.device) -> Workload:
    family, _ = find_model(cfg.model_name)
    return WORKLOADS.get(family.value)(cfg, device)


def initial_weights_digest(cfg: Config) -> str:
    """The digest (checkpoint.tensors_digest) of the weights a fresh run of `cfg` starts from, as its session
    records it (`init_weights`): the model built from the run's seed on the CPU, where its weights are drawn
    whatever the device (a NAR workload reads no data for it). Another torch release may draw others from the
    same seed."""
    return tensors_digest(build_workload(cfg, torch.device("cpu")).model.state_dict())


# -- NAR models on graph tasks -------------------------------------------------------------------

def step_indices(seed: int, step: int, n: int, batch_size: int, task_index: int = 0,
                 order: DataOrder = DataOrder.SEEDED) -> np.ndarray:
    """The training examples of `step` (of task `task_index` in multi-task runs), by `data.order`:
    seeded: drawn with replacement from the train split, as the reference's sampler does, from a stream
    seeded by (seed, step); fixed: the same draw from a stream the run's seed does not change (FIXED_ORDER_KEY),
    so every seed of a protocol sees the same examples; sequential: the split in order, repeated, a batch
    running across its end into the next pass (the CLRS-30 release's tfds `repeat().batch()`, no shuffle).
    Each is a function of the step alone, so a resumed run sees exactly the batches an uninterrupted one would."""
    if order is DataOrder.SEQUENTIAL:
        return (step * batch_size + np.arange(batch_size)) % n
    key = (FIXED_ORDER_KEY, Purpose.FIXED_ORDER) if order is DataOrder.FIXED else (seed, Purpose.BATCH)
    rng = np.random.default_rng(derive_seed(*key, step, task_index))
    return rng.integers(0, n, size=batch_size)


def stream_seed(seed: int, task_index: int, order: DataOrder) -> int:
    """The seed of a task's Ibarz training stream: the run's, or under data.order fixed one it does not change."""
    if order is DataOrder.FIXED:
        return derive_seed(FIXED_ORDER_KEY, Purpose.FIXED_ORDER, task_index, 1)
    return derive_seed(seed, Purpose.STREAM, task_index)


def validation_generator(seed: int, task_index: int = 0, draw: int | None = None) -> torch.Generator:
    """Random positions of validation: the same draw at every validation (draw None), so checkpoints are
    compared on identical inputs; under data.validation resampled a new one per validation (`draw`: the
    examples trained when it runs, so a resumed run validates as the original)."""
    keys = (task_index,) if draw is None else (task_index, 2, draw)
    return torch.Generator().manual_seed(derive_seed(seed, Purpose.VALIDATION, *keys))


def validation_resample(seed: int, task_index: int, draw: int, n: int) -> np.ndarray:
    """The samples one validation of data.validation resampled scores: as many as the set holds, drawn with
    replacement (clrs run.py: the validation sampler's `next`, samplers.py `rng.choice(..., replace=True)`,
    read until the set's count, HEAD run.py L253-272)."""
    return np.random.default_rng(derive_seed(seed, Purpose.VALIDATION, task_index, 3, draw)).integers(0, n, size=n)


def step_noise(seed: int, step: int, task_index: int, rows: np.ndarray | None, batch_size: int):
    """The noise of one training update (random positions, teacher forcing, Gumbel noise, dropout),
    drawn for the global batch of `batch_size`; `rows` are this process's rows of it (None: all)."""
    base = derive_seed(seed, Purpose.NOISE, step, task_index)
    return Noise.whole(base, batch_size) if rows is None else Noise(base, torch.as_tensor(rows), batch_size)


def data_order(cfg: Config) -> DataOrder:
    """The run's data.order (data sections without the key, lobsters', take the seeded order)."""
    return getattr(cfg.data, "order", DataOrder.SEEDED)


class NarPart(NamedTuple):
    """One optimizer update of a NAR step: a task's batch (this rank's rows) and its noise."""

    task_index: int
    batch: Any  # relreason.models.batch.Batch
    noise: Any  # relreason.models.noise.Noise
    world: int  # processes sharing the global batch
    idle: bool = False  # the rank has no row of the global batch: `batch` is a stand-in weighted 0 (shard_rows)


class NarWorkload(Workload):
    supports_distributed = True

    def __init__(self, cfg: Config, device: torch.device):
        self.cfg, self.device = cfg, device
        self.built = build_nar(cfg, task_entries(cfg.task), device)
        self.model = self.built.model
        self.tasks = self.built.tasks
        first = self.tasks[0]
        metrics = {t.name: t.metric for t in self.tasks}
        if len(set(metrics.values())) > 1:
            raise RelreasonError(f"tasks scored by different metrics cannot share one score: "
                                 f"{', '.join(f'{k} ({v})' for k, v in metrics.items())}",
                                 "train tasks whose headline metrics agree together")
        self.lower_is_better, self.metric = first.lower_is_better, first.metric
        self._eval_cache: dict[tuple, Any] = {}
        self._train: dict[str, Any] | None = None  # loaded on the first training step (eval never needs it)
        self._streams = None
        # processes generating the Ibarz stream ahead (relreason.data.stream): 1 for a run alone; a pack of
        # cells (relreason.train.pack) shares the machine's cores between its cells' streams
        self.stream_workers = 1

    def _training_data(self) -> None:
        if getattr(self.cfg.data, "stream", DataStream.CANONICAL) is DataStream.IBARZ:
            self._streams = IbarzData(self.cfg, [t.name for t in self.tasks], self.stream_workers)
            self._train = {}
        else:
            self._train = {t.name: t.load("train", self.cfg.data) for t in self.tasks}

    # training ----------------------------------------------------------------------------------

    def step_batches(self, step: int, rank: int = 0, world: int = 1) -> list[NarPart]:
        t = self.cfg.train
        if self._train is None:
            self._training_data()
        parts = []
        rows = shard_rows(t.batch_size, rank, world) if world > 1 else None
        idle = rows is not None and len(rows) == 0
        if idle:  # a batch smaller than the world: this rank still runs an update (DDP's all-reduce needs it)
            rows = IDLE_STAND_IN
        streamed = self._streams.batches(step, rows) if self._streams is not None else None
        for i, task in enumerate(self.tasks):
            if streamed is not None:
                ds = streamed[i]  # already this rank's rows
            else:
                train = self._train[task.name]
                ds = train.take(step_indices(t.seed, step, len(train), t.batch_size, i, data_order(self.cfg)))
                if rows is not None:
                    ds = ds.take(rows)
            noise = step_noise(t.seed, step, i, rows, t.batch_size)
            batch = Batch.from_dataset(ds, self.cfg.model, self.built.specs[task.name], self.device, generator=noise)
            parts.append(NarPart(i, batch, noise, world, idle))
        return parts

    def loss(self, module: nn.Module, part: NarPart, step: int) -> tuple[torch.Tensor, dict[str, float]]:
        i, batch, noise, world, idle = part
        task = self.tasks[i].name
        static = self.cfg.train.static_step  # the shape-static step (relreason.models.net.Net._forward_static)
        if self.built.multi:
            out = module(task, batch, train=True, generator=noise)
        else:
            out = module(batch, train=True, generator=noise, static=static)
        counts = count_normalizer(world, contributes=not idle) if world > 1 else None
        loss, terms = self.built.net(task).loss(batch, out, counts=counts, read_terms=not static)
        if idle:  # the stand-in row is no row of the global batch: zero loss, zero gradient, zero counts
            loss, terms = loss * 0.0, {k: 0.0 for k in terms}
        return loss, ({f"{task}/{k}": v for k, v in terms.items()} if self.built.multi else terms)

    # evaluation --------------------------------------------------------------------------------

    def dataset(self, task_index: int, split: str, size: int | None = None, num: int | None = None,
                seed: int | None = None, graph: str | None = None):
        """A task's evaluation split; `graph` (a graph family, or "clrs" for the benchmark's sampler)
        replaces the one the run's config gives that split."""
        task = self.tasks[task_index]
        key = (task.name, split, size, num, seed, graph)
        if key not in self._eval_cache:
            ibarz = getattr(self.cfg.data, "stream", DataStream.CANONICAL) is DataStream.IBARZ
            data = self.cfg.data
            if graph is not None:
                data = dataclasses.replace(data, graph=graph, graph_splits=(split,))
            if ibarz and split == "val" and (size, num, seed, graph) == (None, None, None, None):
                self._eval_cache[key] = ibarz_validation(self.cfg, task.name, task_index)
            else:
                self._eval_cache[key] = task.load(split, data, size=size, num=num, seed=seed)
        return self._eval_cache[key]

    def eval_total(self, split: str) -> int:
        return sum(len(self.dataset(i, split)) for i in range(len(self.tasks)))

    def forget_evaluation_data(self) -> None:
        """Drops the evaluation splits loaded so far (a size sweep holds one size's splits at a time)."""
        self._eval_cache.clear()

    def evaluate(self, split: str, on_examples=None, *, size: int | None = None, num: int | None = None,
                 seed: int | None = None, batch_size: int | None = None, sizes: list[int] | None = None,
                 shard: Shard | None = None, graph: str | None = None, draw: int | None = None) -> dict:
        if sizes is not None:
            raise RelreasonError("--sizes applies to text tasks", "for graph tasks test at another size with --ood N")

        per_task = {}
        resample = split == "val" and draw is not None and \
            getattr(self.cfg.data, "validation", ValidationDraw.FIXED) is ValidationDraw.RESAMPLED
        for i, task in enumerate(self.tasks):
            ds = self.dataset(i, split, size, num, seed, graph)
            if resample:
                ds = ds.take(validation_resample(self.cfg.train.seed, i, draw, len(ds)))
            net = self.built.net(task.name)
            # validation randomizes `pos` as training does (the reference validates so); tests use the true positions
            gen = validation_generator(self.cfg.train.seed, i, draw if resample else None) \
                if split == "val" and self.cfg.model.random_pos else None
            spec = self.built.specs[task.name]
            size_of_batch = _pick_batch(batch_size, self.cfg.train.eval_batch_size, net, ds)
            if shard is not None:  # every rank must cut the split into the same batches
                size_of_batch = min(shard.gather(size_of_batch))
            scorer = scoring.score_dataset(net, ds, spec, self.cfg.model, self.device, size_of_batch, on_examples,
                                   task.scorer(spec), gen, (shard.rank, shard.world) if shard else (0, 1))
            if shard is not None:
                states = shard.gather(scorer.state())
                scorer = task.scorer(spec)
                for state in states:
                    scorer.merge(state)
            scores = scorer.result()
            per_task[task.name] = {**scores.to_dict(), "size": ds.n, "num": len(ds), "label": split_label(ds, split)}
        if not self.built.multi:
            return {**per_task[self.tasks[0].name], "per_task": {}}
        mean = float(np.mean([r["score"] for r in per_task.values()]))
        return {"score": mean, "outputs": {k: r["score"] for k, r in per_task.items()}, "hints": {},
                "per_task": per_task, "size": max(r["size"] for r in per_task.values()),
                "num": sum(r["num"] for r in per_task.values()), "label": f"{split}, mean over {len(per_task)} tasks"}

    def close(self) -> None:
        if self._streams is not None:
            self._streams.close()


WORKLOADS.register("nar", NarWorkload)


def shard_rows(n: int, rank: int, world: int) -> np.ndarray:
    """This rank's rows of a global batch of n: contiguous shares, the first n % world ranks one row
    more than the others (batch 3 over 2 ranks: rows 0-1 and 2; batch 2 over 3: rows 0, 1 and none).
    Uneven shares train as one process because the loss is divided by the global batch's counts."""
    per, extra = divmod(n, world)
    start = rank * per + min(rank, extra)
    return np.arange(start, start + per + (rank < extra))


# The batch of a rank that has no row (n < world): row 0 again, its loss and counts weighted 0. The rank
# must still run a forward and backward on every update, or DDP's gradient all-reduce waits for it.
IDLE_STAND_IN = np.arange(1)


def split_label(ds, split: str) -> str:
    """How a split is described beside its score: "test, n=64, 32 samples", "test, n=64, ws:k=4,p=0.1,
    32 samples" for a graph family, "test, n=80, clrs v1.0.0 sampler, 2048 samples" for CLRS v1.0.0's, or, for graphs of several sizes, "test, backbone 100 (padded to
    137 nodes), 200 samples"."""
    meta = ds.meta or {}
    if ds.sizes is not None:
        backbone = meta.get("size")
        what = f"backbone {backbone[0]}..{backbone[1] - 1}" if isinstance(backbone, list) else f"backbone {backbone}"
        return f"{split}, {what} (padded to {ds.n} nodes), {len(ds)} samples"
    graph = f"{meta['graph']}, " if meta.get("graph") is not None else ""
    sampler = f"{meta['sampler']} sampler, " if meta.get("sampler") is not None else ""
    return f"{split}, n={ds.n}, {graph}{sampler}{len(ds)} samples"


EVAL_LIVE_PAIR_TENSORS = 32  # (N, N, width) float buffers alive at once in a step, measured on RT/ET forwards


def _pick_batch(explicit: int | None, configured: int | None, net: nn.Module, ds) -> int:
    """The evaluation batch size: the explicit one, else the configured one, else as many samples as fit
    in a quarter of the memory free where the net computes (a CUDA device's free memory, not the host's RAM;
    pair tensors dominate: batch x N x N x width floats)."""
    if explicit is not None:
        return explicit
    if configured is not None:
        return configured

    proc = getattr(net, "processor", None)
    width = max(getattr(net.cfg, "hidden", 128), getattr(proc, "node_dim", 0), getattr(proc, "edge_dim", 0))
    per_sample = ds.n * ds.n * width * 4 * EVAL_LIVE_PAIR_TENSORS
    device = next((p.device for p in net.parameters()), torch.device("cpu"))
    free, _host = memory.free_memory(device)
    fits = int(free * memory.EVAL_MEMORY_FRACTION // max(per_sample, 1))
    return max(1, min(memory.EVAL_MAX_BATCH, fits))


IBARZ_VAL_MULTIPLIER = 2  # run.py validates on 32 x 2 x the benchmark multiplier samples


def ibarz_validation(cfg: Config, task: str, task_index: int):
    """The validation set of the Ibarz et al. protocol: drawn like training (random edge densities and
    needle lengths) at `data.val_size` nodes (string matchers: haystack + needle at the stream's
    string size, because run.py's 16 nodes cannot hold a needle of 8), 64 x multiplier samples."""
    num = cfg.data.val_num if cfg.data.val_num is not None else \
        IBARZ_VAL_MULTIPLIER * canonical_split(task, "val").num
    needle = takes_option(ALGORITHMS.get(task).sample, "length_needle")  # the string matchers
    sizes = tuple(cfg.data.stream_sizes) if needle else (cfg.data.val_size,)
    stream = TrainingStream(task, derive_seed(cfg.train.seed, Purpose.VALIDATION, task_index, 1), num, sizes)
    ds = stream.batch(0)
    ds.meta = {**ds.meta, "split": "val (ibarz stream)"}
    return ds


class IbarzData:
    """The Ibarz et al. training stream of every task, generated ahead in a worker process
    (relreason.data.stream), started at the first step asked for (the step a run resumes at)."""

    def __init__(self, cfg: Config, tasks: list[str], workers: int = 1):
        t = cfg.train
        self.streams = [TrainingStream(name, stream_seed(t.seed, i, data_order(cfg)), t.batch_size,
                                       tuple(cfg.data.stream_sizes)) for i, name in enumerate(tasks)]
        self.index = {name: i for i, name in enumerate(tasks)}
        self.stop_step = -(-t.train_examples // t.batch_size)
        self.workers = workers  # generating processes (each makes every workers-th step)
        self._prefetcher = None
        self._step, self._batches = None, ()

    def batches(self, step: int, rows=None) -> tuple:
        if self._step != step:
            if self._prefetcher is None:
                self._prefetcher = MultiPrefetcher(self.streams, start_step=step, rows=rows,
                                                   stop_step=max(self.stop_step, step + 1), workers=self.workers)
            got, self._batches = next(self._prefetcher)
            if got != step:
                raise RuntimeError(f"the data stream produced step {got}, the loop asked for step {step}")
            self._step = step
        return self._batches

    def close(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
