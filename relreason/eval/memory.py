"""Evaluation memory: how much evaluating a sample at a given size takes for one model, so that
`relreason eval --ood` refuses sizes that cannot fit before anything runs, and sizes its batches to the
memory there is.

    fp = Footprint.measure(net, [(32, small), (64, large)], device)   # two small real splits ("probes")
    fp = Footprint.measure(net, probes, device, degree=parse_graph("er:c=2").mean_degree)  # graphs' degree
    est = fp.estimate(size=1024, num=32, device=device)   # available memory read now
    est.fits, est.batch(), est.describe()                  # "n=1024 needs ~9.1 GiB for one sample ..."

Nothing here knows a processor: the model's own memory is measured, on the model itself, at two small
sizes, and extrapolated. What one sample of n nodes with T hint steps (S = T - 1 model steps) needs:

- activations: the peak of one model step (forward and predictions), measured exactly on one sample
  of each probe (`PeakTracker` counts every tensor allocated, on any device), and scaled from the
  larger probe as n^k. k is measured between the probes and held in [2, 3]: a dense processor keeps
  (N, N, width) pair tensors (k = 2); triplet messages and triangular attention grow as N^3.
- on edge lists (`model.sparse`, relreason.models.sparse) a step's memory grows with the graph's
  entries (a self-loop per node, each edge both ways), not n^2: where some sizes run sparse
  (`Net.sparse_at`: `always`, or `auto` on >= 256 nodes and <= 5% of the pairs), the probes are also
  measured there (`EdgeLists`), with the entries of their graphs, and scaled to the entries expected
  at n, n (1 + d(n)), d the family's mean degree at its densest parameters
  (relreason.data.families.GraphSpec.mean_degree; without a family, the benchmark's ER graphs keep
  the probes' density), as entries^k, k measured and held in [1, 2] (wedges of triplets: entries x
  degree). The auto decision reads the same expected density. Building the edge list reads dense
  (N, N) masks, SPARSE_CONVERTER_BYTES a node pair. (Extrapolated as n^2, a pgn bfs evaluation at
  n = 1,600 on ER graphs was estimated at 10x its real peak, 30x under `auto` from dense probes.)
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
  once (SCORING_BYTES per element of its costliest hint: float64 statistics). The peak is the larger of
  the last step's activations and scoring, plus the kept predictions. (Kept raw, as training keeps
  them, Floyd-Warshall's edge pointers took n^4 logits, and dfs at n = 1,600 on edge lists peaked at
  3.0 GB where it now peaks at 1.9 GB.)
- data: the sample's arrays in storage form (the batch is a copy of its rows of the split) and as
  model tensors (4 bytes, pointers 8).
Besides, the split itself is loaded: `num` samples in storage form (the resident bytes).

T at n is the probes' longest trajectory, extrapolated as n^p (p measured between the probes, held in
[0, 3]); the node count of a size is the probes' largest ratio of nodes to size (lobsters: the backbone
length is the size, the padded graph has more nodes).

Tensors freed and allocated again take more than their bytes once freed buffers are kept for reuse
(they fragment): a step's activations, the scorer's temporaries and the workspace are multiplied by
ALLOCATOR_OVERHEAD; what is allocated once and kept (the kept predictions, the outputs, the batch) counts
its bytes. So made, the estimate of one sample is within a factor of 2 of the peak resident set of real
evaluations (tests/eval/test_memory.py measures it in child processes), down to evaluations of a few
hundred MiB: below, fixed costs it does not count (the probes' own splits, first allocations: ~100 MiB on
CPU) dominate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import weakref
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from relreason.data.specs import POINTER_TYPES, Spec, Stage, Type
from relreason.data.trajectory import Dataset, storage_dtype
from relreason.errors import RelreasonError
from relreason.models import kernels
from relreason.models.batch import Batch
from relreason.models.config import SparseMode
from relreason import runtime  # runtime.available_memory read on use: the seam tests replace

EVAL_MEMORY_FRACTION = 0.25  # of the available memory, for one evaluation batch (the rest: allocator, split, OS)
EVAL_MAX_BATCH = 64  # beyond this a larger batch is no faster on CPU
# Tensors' bytes -> the memory they take: freed buffers are kept for reuse (relreason.runtime.keep_freed_memory,
# CUDA's caching allocator) and fragment. Peak RSS growth / tracked tensor bytes of CPU evaluations, measured:
# 1.1 to 1.7 (mpnn, rt, triplet_gmpnn on bfs and floyd_warshall, n = 128 and 256); 2 errs on the safe side.
ALLOCATOR_OVERHEAD = 2.0
ACTIVATION_EXPONENT = (2.0, 3.0)  # n^k of a step's peak: pair tensors (2) up to triplets / triangles (3)
# entries^k of a step's peak on edge lists: per-entry tensors (1) up to wedges (triplets over common neighbours)
EDGE_EXPONENT = (1.0, 2.0)
# Bytes per node pair of the dense (B, N, N) masks an edge list is built and checked from (relreason.models.sparse:
# `adjacency`, `data_problems`; measured with PeakTracker at n = 1,600): too small at the probes to be seen there
SPARSE_CONVERTER_BYTES = 6
LENGTH_EXPONENT = (0.0, 3.0)  # n^p of the trajectory length: constant (bfs on dense graphs) to n^2 (bubble sort)
PROBE_MAX = 64  # largest probe size: a step there takes well under a second (the ET's eager kernels: ~2 s)
PROBE_MIN = 8  # smallest probe size where the algorithm allows it: below, fixed costs hide how memory grows
PROBE_NUM = 4  # samples per probe (their longest trajectory counts)
PROBE_SEED = 7  # any fixed seed: the probes only measure
FLOAT_BYTES = 4  # activations and predictions are float32 (evaluation never autocasts)
# Bytes per element of a hint feature while relreason.eval.metrics.Scorer scores it, every step at once
# (measured with PeakTracker): a scalar's squared error holds three float64 temporaries, the others a float64
# sum of booleans; a categorical's and a mask_one's comparisons run on the argmax over their last axis.
SCORING_BYTES = {Type.SCALAR: 24, Type.MASK: 13, Type.POINTER: 10, Type.SHOULD_BE_PERMUTATION: 10,
                 Type.PERMUTATION_POINTER: 10, Type.CATEGORICAL: 6, Type.MASK_ONE: 2}
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
    with kernels.enabled(False), kernels.smallest_chunks():
        yield


def one_step(ds: Dataset) -> Dataset:
    """The longest sample of `ds`, cut to its first two hint steps: evaluating it runs one model step."""
    longest = int(np.argmax(ds.lengths))
    one = ds.take(np.array([longest]))
    return dataclasses.replace(one, hints={k: v[:, :2] for k, v in one.hints.items()},
                               lengths=np.minimum(one.lengths, 2))


def step_entries(net, ds: Dataset, device: torch.device) -> int:
    """Entries of the edge list the step of `step_peak` runs on (0: it runs dense)."""
    graph = net.sparse_graph(Batch.from_dataset(one_step(ds), net.cfg, net.spec, device))
    return 0 if graph is None else graph.entries


@contextlib.contextmanager
def sparse_mode(net, mode):
    """Within the block, `net` runs under `model.sparse: mode` (relreason.models.config.SparseMode): its
    config is replaced, never changed (a multi-task model's nets share one)."""
    cfg = net.cfg
    net.cfg = dataclasses.replace(cfg, sparse=mode)
    try:
        yield
    finally:
        net.cfg = cfg


def step_peak(net, ds: Dataset, device: torch.device) -> int:
    """Bytes at the peak of one model step (forward and hard predictions) on the longest sample of `ds`."""
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


def _tensor_itemsize(f) -> int:
    """Bytes per element of a feature as a model tensor, batch or hard prediction: pointers int64, the rest float32."""
    return 8 if f.type in POINTER_TYPES else FLOAT_BYTES


def sample_bytes(spec: Spec, n: int, steps: int, stored: bool) -> int:
    """Bytes of one sample of n nodes with `steps` hint steps: in storage form (`stored`: numpy dtypes
    of relreason.data.trajectory) or as model tensors (float32; pointers int64)."""
    total = 0
    for f in spec.values():
        size = storage_dtype(f).itemsize if stored else _tensor_itemsize(f)
        total += _elements(f.shape(n)) * size * (steps if f.stage is Stage.HINT else 1)
    return total


def hard_bytes(spec: Spec, n: int, stage: Stage) -> int:
    """Bytes of one sample's hard predictions of one step for the features of `stage`, in the storage
    convention `Net.predict` returns (a pointer: int64 indices, its stored shape; the rest float32)."""
    return sum(_elements(f.shape(n)) * _tensor_itemsize(f) for f in spec.values() if f.stage is stage)


def scoring_bytes(spec: Spec, n: int) -> int:
    """Bytes of the scorer's temporaries per step of one sample: its costliest hint feature (SCORING_BYTES;
    the features are scored one at a time)."""
    return max((_elements(f.shape(n)) * SCORING_BYTES[f.type] for f in spec.values() if f.stage is Stage.HINT),
               default=0)


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
    host = runtime.available_memory()
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free), host
    return host, host


@dataclass(frozen=True)
class Probe:
    """What one small real split showed: its size and padded node count, its longest trajectory, the
    peak bytes of one model step on one sample, and the entries of the edge list that step ran on."""

    size: int
    nodes: int
    length: int
    step: int
    entries: int = 0  # 0: the step ran dense


@dataclass(frozen=True)
class EdgeLists:
    """How a model's step grows where evaluation runs on edge lists (relreason.models.sparse): two probes
    measured there, the graphs' expected mean degree at n nodes (`degree`: the graph family's,
    relreason.data.families.GraphSpec.mean_degree; None: unknown, the probes' density is held, as the
    benchmark's ER graphs keep theirs), and whether a batch of n node slots whose entries are a given
    share of its node pairs runs on edge lists (`runs_sparse`: relreason.models.net.Net.sparse_at)."""

    small: Probe
    large: Probe
    degree: Callable[[int], float | None] | None
    runs_sparse: Callable[[int, float], bool]

    def entries(self, nodes: int) -> float:
        """Entries expected in a graph of this many nodes: a self-loop per node and each edge both ways."""
        degree = None if self.degree is None else self.degree(nodes)
        if degree is None:
            b = self.large
            return b.entries * (nodes / b.nodes) ** 2
        return nodes * (1.0 + degree)

    def activations(self, nodes: int) -> int:
        """Bytes at the peak of one model step on one graph of this many nodes: scaled from the larger
        probe as entries^k, k measured between the probes' entries and held in EDGE_EXPONENT beyond them."""
        s, b = self.small, self.large
        entries = self.entries(nodes)
        bounds = (0.0, EDGE_EXPONENT[1]) if entries <= b.entries else EDGE_EXPONENT
        k = _exponent(s.step, b.step, s.entries, b.entries, bounds)
        return math.ceil(b.step * (entries / b.entries) ** k)


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
    edge_lists: EdgeLists | None = None  # where some sizes run on edge lists (model.sparse)

    @classmethod
    def measure(cls, net, probes: list[tuple[int, Dataset]], device: torch.device, model: str = "the model",
                degree: Callable[[int], float | None] | None = None) -> "Footprint":
        """Measures `net` on one sample of each of two probe splits, (size, split) from small to large
        (the same split twice when only one size is probed): dense, and on edge lists where some sizes
        run there (`model.sparse`), `degree` then giving the graphs' mean degree at n nodes (`EdgeLists`).

        Raises:
            RelreasonError: `model.sparse: always` where the network or the probes have no sparse form."""
        large = probes[1][1]

        def measured(mode: SparseMode) -> list[Probe]:
            with sparse_mode(net, mode):
                return [Probe(size, ds.n, int(ds.lengths.max()), step_peak(net, ds, device),
                              step_entries(net, ds, device)) for size, ds in probes]

        edge_lists = None
        if net.sparse_at(sys.maxsize, 0.0):  # some graphs run on edge lists
            try:
                edge_lists = EdgeLists(*measured(SparseMode.ALWAYS), degree, net.sparse_at)
            except RelreasonError:  # the probes' data has no sparse form: `auto` runs such graphs dense
                if net.cfg.sparse is SparseMode.ALWAYS:
                    raise
        always = edge_lists is not None and net.cfg.sparse is SparseMode.ALWAYS
        dense = [edge_lists.small, edge_lists.large] if always else measured(SparseMode.NEVER)
        return cls(model, large.spec, net.spec, net.cfg.hint_mode.decode, *dense, net.eval_workspace(), edge_lists)

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
        edges = self.edge_lists
        sparse = edges is not None and edges.runs_sparse(n, edges.entries(n) / (n * n))
        decoded = self.decodes_hints
        kept = model_steps * hard_bytes(self.model_spec, n, Stage.HINT) if decoded else 0  # every step's, hard
        scoring = model_steps * scoring_bytes(self.model_spec, n) if decoded else 0
        outputs = prediction_bytes(self.model_spec, n, Stage.OUTPUT)
        batch = sample_bytes(self.model_spec, n, steps, stored=False)
        activations = edges.activations(n) if sparse else self.activations(size)
        converter = SPARSE_CONVERTER_BYTES * n * n if sparse else 0  # before the first step
        # the peak: building the edge list, during the last step, or while the kept predictions are scored; what
        # is freed and allocated again takes ALLOCATOR_OVERHEAD times its bytes, what is allocated once its bytes
        churn = max(converter, activations, scoring)
        device_bytes = math.ceil(ALLOCATOR_OVERHEAD * churn) + kept + outputs + batch
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
