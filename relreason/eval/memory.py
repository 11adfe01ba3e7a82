"""Evaluation memory: how much evaluating a sample at a given size takes for one model, so that
`relreason eval --ood` refuses sizes that cannot fit before anything runs, and sizes its batches to the
memory there is.

    fp = Footprint.measure(net, [(32, small), (64, large)], device)   # two small real splits ("probes")
    est = fp.estimate(size=1024, num=32, device=device)   # available memory read now
    est.fits, est.batch(), est.describe()                  # "n=1024 needs ~9.1 GiB for one sample ..."

Nothing here knows a processor: the model's own memory is measured, on the model itself, at two small
sizes, and extrapolated. What one sample of n nodes with T hint steps (S = T - 1 model steps) needs:

- activations: the peak of one model step (forward and predictions), measured exactly on one sample
  of each probe (`PeakTracker` counts every tensor allocated, on any device), and scaled from the
  larger probe as n^k. k is measured between the probes and held in [2, 3]: a dense processor keeps
  (N, N, width) pair tensors (k = 2); triplet messages and triangular attention grow as N^3. A sparse
  processor is overestimated (k = 2 where its memory grows as the edges).
- workspace: the probes run the eager form of the fused kernels (`eager_kernels`: a dispatch mode must
  see every op) in their smallest chunks (relreason.models.kernels.smallest_chunks), so what they
  measure grows with the graphs alone; a kernel's chunk buffer is a constant bounded by its budget,
  held once per batch and added as such (`Net.eval_workspace`, times ALLOCATOR_OVERHEAD: it is freed
  and allocated again like any tensor): the Edge Transformer's processor.chunk_mb where evaluation runs
  the eager kernels (none where it runs the compiled ones), and the decoders' slab of edge-pointer
  logits (64 MiB; Floyd-Warshall). (Extrapolated with the growing buffer, the ET's estimate was 4.9x
  its real peak at n = 128, about 10x at n = 256.)
- predictions: in evaluation the network keeps every step's hint predictions hard, as scoring reads
  them (`Net.forward(hard_hints=True)`: a pointer's int64 index, its stored shape; the rest float32;
  S x that, exact from the spec), each written into one buffer; the raw ones of a step (a pointer's
  logits over the n nodes) are part of its activations. Scoring then spans every step of a hint at
  once (SCORING_BYTES per element of the largest hint: float64 statistics). The peak is the larger of
  the last step's activations and scoring, plus the kept predictions. (Kept raw, as training keeps
  them, Floyd-Warshall's edge pointers took n^4 logits, and dfs at n = 1,600 on edge lists peaked at
  3.0 GB where it now peaks at 1.9 GB.)
- data: the sample's arrays in storage form (the batch is a copy of its rows of the split) and as
  model tensors (4 bytes, pointers 8).
Besides, the split itself is loaded: `num` samples in storage form (the resident bytes).

T at n is the probes' longest trajectory, extrapolated as n^p (p measured between the probes, held in
[0, 3]); the node count of a size is the probes' largest ratio of nodes to size (lobsters: the backbone
length is the size, the padded graph has more nodes).

Tensors take more than their bytes once freed buffers are kept for reuse: the device part is
multiplied by ALLOCATOR_OVERHEAD. So made, the estimate of one sample is within a factor of 2 of the
peak resident set of real evaluations (tests/eval/test_memory.py measures it in child processes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import weakref
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from relreason.data.specs import POINTER_TYPES, Spec, Stage
from relreason.data.trajectory import Dataset, storage_dtype

EVAL_MEMORY_FRACTION = 0.25  # of the available memory, for one evaluation batch (the rest: allocator, split, OS)
EVAL_MAX_BATCH = 64  # beyond this a larger batch is no faster on CPU
# Tensors' bytes -> the memory they take: freed buffers are kept for reuse (relreason.runtime.keep_freed_memory,
# CUDA's caching allocator) and fragment. Peak RSS growth / tracked tensor bytes of CPU evaluations, measured:
# 1.1 to 1.7 (mpnn, rt, triplet_gmpnn on bfs and floyd_warshall, n = 128 and 256); 2 errs on the safe side.
ALLOCATOR_OVERHEAD = 2.0
ACTIVATION_EXPONENT = (2.0, 3.0)  # n^k of a step's peak: pair tensors (2) up to triplets / triangles (3)
LENGTH_EXPONENT = (0.0, 3.0)  # n^p of the trajectory length: constant (bfs on dense graphs) to n^2 (bubble sort)
PROBE_MAX = 64  # largest probe size: a step there takes well under a second (the ET's eager kernels: ~2 s)
PROBE_MIN = 8  # smallest probe size where the algorithm allows it: below, fixed costs hide how memory grows
PROBE_NUM = 4  # samples per probe (their longest trajectory counts)
PROBE_SEED = 7  # any fixed seed: the probes only measure
FLOAT_BYTES = 4  # activations and predictions are float32 (evaluation never autocasts)
# Bytes per element of a hint feature while relreason.eval.metrics.Scorer scores it, all steps at once: its
# statistics are summed in float64, and a scalar's squared error holds three (B, S, ...) float64 temporaries.
SCORING_BYTES = 24
GIB = 2**30


class PeakTracker(TorchDispatchMode):
    """Within the block, the peak of the bytes held by tensors allocated inside it (`peak`, and `live`
    now), on any device, exactly: a tensor is counted once per storage, from the op that created it
    until its storage is freed. Views and in-place results share a storage with an input: not counted.
    Tensors that existed before the block (weights, the batch) are not counted."""

    def __init__(self):
        super().__init__()
        self.live = 0
        self.peak = 0
        self._held: dict[int, int] = {}  # storage address (its C++ object) -> bytes

    def _release(self, key: int) -> None:
        self.live -= self._held.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        inputs = {t.untyped_storage()._cdata for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(result):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key = storage._cdata
            if key in inputs or key in self._held:
                continue
            self._held[key] = storage.nbytes()
            self.live += storage.nbytes()
            weakref.finalize(storage, self._release, key)
        self.peak = max(self.peak, self.live)
        return result


@contextlib.contextmanager
def eager_kernels():
    """The eager form of the fused kernels (relreason.models.kernels) while probing, in their smallest
    chunks: a dispatch mode must see every op, and compiling under it could mark the compiled path broken
    for the process; a chunk buffer is no part of what grows with the graphs (`Footprint.workspace`)."""
    from relreason.models import kernels

    with kernels.enabled(False), kernels.smallest_chunks():
        yield


def one_step(ds: Dataset) -> Dataset:
    """The longest sample of `ds`, cut to its first two hint steps: evaluating it runs one model step."""
    longest = int(np.argmax(ds.lengths))
    one = ds.take(np.array([longest]))
    return dataclasses.replace(one, hints={k: v[:, :2] for k, v in one.hints.items()},
                               lengths=np.minimum(one.lengths, 2))


def step_peak(net, ds: Dataset, device: torch.device) -> int:
    """Bytes at the peak of one model step (forward and hard predictions) on the longest sample of `ds`."""
    from relreason.models.batch import Batch

    batch = Batch.from_dataset(one_step(ds), net.cfg, net.spec, device)
    was_training = net.training
    net.eval()
    try:
        with torch.no_grad(), eager_kernels(), PeakTracker() as tracker:
            net.predict(net(batch, train=False, hard_hints=True))
    finally:
        net.train(was_training)
    return tracker.peak


def _elements(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def sample_bytes(spec: Spec, n: int, steps: int, stored: bool) -> int:
    """Bytes of one sample of n nodes with `steps` hint steps: in storage form (`stored`: numpy dtypes
    of relreason.data.trajectory) or as model tensors (float32; pointers int64)."""
    total = 0
    for f in spec.values():
        size = storage_dtype(f).itemsize if stored else (8 if f.type in POINTER_TYPES else FLOAT_BYTES)
        total += _elements(f.shape(n)) * size * (steps if f.stage is Stage.HINT else 1)
    return total


def hard_bytes(spec: Spec, n: int, stage: Stage) -> int:
    """Bytes of one sample's hard predictions of one step for the features of `stage`, in the storage
    convention `Net.predict` returns (a pointer: int64 indices, its stored shape; the rest float32)."""
    return sum(_elements(f.shape(n)) * (8 if f.type in POINTER_TYPES else FLOAT_BYTES)
               for f in spec.values() if f.stage is stage)


def scored_elements(spec: Spec, n: int) -> int:
    """Elements of one step of the largest hint feature of one sample: what a scoring statistic spans."""
    return max((_elements(f.shape(n)) for f in spec.values() if f.stage is Stage.HINT), default=0)


def prediction_bytes(spec: Spec, n: int, stage: Stage) -> int:
    """Bytes of one sample's raw predictions of one step for the features of `stage` (a pointer: logits
    over the n nodes)."""
    return sum(_elements(f.shape(n)) * (n if f.type in POINTER_TYPES else 1) * FLOAT_BYTES
               for f in spec.values() if f.stage is stage)


def _exponent(lo: float, hi: float, n_lo: int, n_hi: int, bounds: tuple[float, float]) -> float:
    if n_hi <= n_lo or lo <= 0 or hi <= 0:
        return bounds[0]
    return min(bounds[1], max(bounds[0], math.log(hi / lo) / math.log(n_hi / n_lo)))


def free_memory(device: torch.device) -> tuple[int, int]:
    """(bytes free on the device, bytes available on the host): CUDA's free memory, or the host's twice."""
    from relreason.runtime import available_memory

    host = available_memory()
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free), host
    return host, host


@dataclass(frozen=True)
class Probe:
    """What one small real split showed: its size and padded node count, its longest trajectory, and the
    peak bytes of one model step on one sample."""

    size: int
    nodes: int
    length: int
    step: int


@dataclass(frozen=True)
class Footprint:
    """How a model's evaluation memory grows with the size of a task's graphs (module docstring)."""

    model: str  # how messages name the model: "rt at width 192"
    data_spec: Spec  # the dataset's spec (storage)
    model_spec: Spec  # the prepared spec the net reads and predicts
    decodes_hints: bool
    small: Probe
    large: Probe
    workspace: int = 0  # bytes the kernels hold once per evaluation batch, whatever its size (Net.eval_workspace)

    @classmethod
    def measure(cls, net, probes: list[tuple[int, Dataset]], device: torch.device, model: str = "the model"
                ) -> "Footprint":
        """Measures `net` on one sample of each of two probe splits, (size, split) from small to large
        (the same split twice when only one size is probed)."""
        (s_size, small), (b_size, large) = probes
        measured = [Probe(size, ds.n, int(ds.lengths.max()), step_peak(net, ds, device))
                    for size, ds in ((s_size, small), (b_size, large))]
        return cls(model, large.spec, net.spec, net.cfg.hint_mode.decode, *measured, net.eval_workspace())

    def nodes(self, size: int) -> int:
        """Node slots of a split of this size (the probes' largest ratio of nodes to size)."""
        ratio = max(p.nodes / p.size for p in (self.small, self.large))
        return max(size, math.ceil(size * ratio))

    def length(self, size: int) -> int:
        """The longest trajectory expected at this size (hint steps T)."""
        s, b = self.small, self.large
        p = _exponent(s.length, b.length, s.size, b.size, LENGTH_EXPONENT)
        return max(1, math.ceil(b.length * (size / b.size) ** p))

    def activations(self, size: int) -> int:
        """Bytes at the peak of one model step on one sample of this size."""
        s, b = self.small, self.large
        if size <= b.size:  # between or below the probes: as measured, at the rate measured
            k = _exponent(s.step, b.step, s.size, b.size, (0.0, ACTIVATION_EXPONENT[1]))
        else:
            k = _exponent(s.step, b.step, s.size, b.size, ACTIVATION_EXPONENT)
        return math.ceil(b.step * (size / b.size) ** k)

    def estimate(self, size: int, num: int, device: torch.device, free: tuple[int, int] | None = None
                 ) -> "MemoryEstimate":
        """What evaluating `num` samples of this size needs and what there is (`free`: (device, host)
        bytes, default: read now)."""
        n, steps = self.nodes(size), self.length(size)
        model_steps = max(1, steps - 1)
        decoded = self.decodes_hints
        kept = model_steps * hard_bytes(self.model_spec, n, Stage.HINT) if decoded else 0  # every step's, hard
        scoring = model_steps * SCORING_BYTES * scored_elements(self.model_spec, n) if decoded else 0
        outputs = prediction_bytes(self.model_spec, n, Stage.OUTPUT)
        batch = sample_bytes(self.model_spec, n, steps, stored=False)
        # the peak: during the last step, or while the kept predictions are scored (activations freed)
        tensors = max(self.activations(size), scoring) + kept + outputs + batch
        device_bytes = math.ceil(ALLOCATOR_OVERHEAD * tensors)
        stored = sample_bytes(self.data_spec, n, steps, stored=True)
        device_free, host_free = free if free is not None else free_memory(device)
        workspace = math.ceil(ALLOCATOR_OVERHEAD * self.workspace)  # freed and allocated again, as tensors are
        return MemoryEstimate(size, n, steps, self.model, device_bytes, stored, num * stored, device_free, host_free,
                              device.type != "cuda", workspace)


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory of evaluating one size: per sample evaluated at once, on the device (`device_bytes`) and
    on the host (`host_bytes`: the batch's copy of its rows), the loaded split (`resident`, host), and the
    kernels' workspace, once per batch on the device (`workspace`)."""

    size: int
    nodes: int
    steps: int  # longest trajectory expected (hint steps)
    model: str
    device_bytes: int
    host_bytes: int
    resident: int
    device_free: int
    host_free: int
    shared: bool  # device and host are one memory (CPU)
    workspace: int = 0  # device bytes held once per batch, whatever its size (Net.eval_workspace)

    @property
    def per_sample(self) -> int:
        return self.device_bytes + (self.host_bytes if self.shared else 0)

    @property
    def fits(self) -> bool:
        """One sample at a time fits in what is available."""
        if self.shared:
            return self.resident + self.workspace + self.per_sample <= self.host_free
        return self.workspace + self.device_bytes <= self.device_free and \
            self.resident + self.host_bytes <= self.host_free

    def batch(self, cap: int = EVAL_MAX_BATCH) -> int:
        """Samples evaluated at once: as many as fit in EVAL_MEMORY_FRACTION of the free memory, from 1 to cap."""
        room = self.device_free * EVAL_MEMORY_FRACTION - self.workspace
        if self.shared:
            room = max(0.0, min(room, self.host_free - self.resident - self.workspace))
        return max(1, min(cap, int(room // max(1, self.per_sample))))

    @property
    def what(self) -> str:
        """The size in words: "n=64", or "size 100 (~137 nodes)" when a size is not a node count."""
        return f"n={self.size}" if self.nodes == self.size else f"size {self.size} (~{self.nodes} nodes)"

    def describe(self) -> str:
        """Why a size does not fit, in one line: "n=4096 needs ~38 GiB for one sample of rt at width 192;
        22 GiB available" (with the loaded split's part when it counts)."""
        split = f" and {gib(self.resident)} for its split" if self.resident >= GIB // 10 else ""
        if self.shared:
            need = self.workspace + self.per_sample
            return f"{self.what} needs ~{gib(need)} for one sample of {self.model}{split}; " \
                   f"{gib(self.host_free)} available"
        if self.workspace + self.device_bytes > self.device_free:
            need = self.workspace + self.device_bytes
            return f"{self.what} needs ~{gib(need)} of device memory for one sample of {self.model}; " \
                   f"{gib(self.device_free)} free"
        return f"{self.what} needs ~{gib(self.resident + self.host_bytes)} of host memory for its split and one " \
               f"sample; {gib(self.host_free)} available"


def gib(nbytes: float) -> str:
    """Bytes in GiB for messages: "38 GiB", "1.5 GiB", "0.02 GiB"."""
    x = nbytes / GIB
    return f"{x:.0f} GiB" if x >= 10 else f"{x:.1f} GiB" if x >= 0.1 else f"{x:.2f} GiB"


def largest_fitting(estimate, lo: int, hi: int) -> int | None:
    """The largest size in [lo, hi] whose estimate fits (`estimate(size) -> MemoryEstimate`, growing
    with size), by bisection; None when not even `lo` fits."""
    if not estimate(lo).fits:
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if estimate(mid).fits else (lo, mid - 1)
    return lo
