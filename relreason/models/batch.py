"""Model-side data: the spec transforms of the reference pipeline and a `Batch` of torch tensors.

The reference trains on transformed data (google-deepmind/clrs `examples/run.py` + `samplers.py`):
- `pred_as_input`: for the algorithms whose `pred_h` hint never changes (PRED_AS_INPUT: those registered
  with `StreamForm(pred_as_input=True)`), the hint is moved to a node-pointer input `pred`;
- `enforce_permutations`: a `should_be_permutation` pointer (sorting's `pred`) becomes a
  `permutation_pointer` (the first node points to the last, closing the cycle) plus a mask_one
  `<name>_mask` marking the first node; without it, a plain pointer;
- `random_pos`: in training, `pos` is replaced by sorted uniform draws (per segment: string tasks
  restart `pos` at 0 at the needle).

`prepare_spec` applies the first two to a spec; `Batch.from_dataset` applies all three to data and
moves it to a device:

    spec = prepare_spec(ds.spec, cfg, algorithm=ds.algorithm)
    batch = Batch.from_dataset(ds.take(idx), cfg, spec, device, generator=np.random.default_rng(0))

Tensor conventions in a Batch: pointers (all pointer types) are int64 node indices (-1 = masked);
everything else is float32 (categoricals one-hot, masks 0/1, -1 where masked). Hints are
[B, T, ...] with T = the batch's own longest trajectory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping

import numpy as np
import torch

from relreason.data.algorithms import SPECS, live_names
from relreason.data.specs import POINTER_TYPES, Feature, Location, Spec, Stage, Type
from relreason.data.trajectory import Dataset
from relreason.models.config import ModelConfig
from relreason.models.noise import Noise, Site

# Algorithms whose `pred_h` hint is constant and moved to an input (reference run.py PRED_AS_INPUT_ALGOS):
# a live set of those registered with StreamForm(pred_as_input=True).
PRED_AS_INPUT = live_names(lambda a: a.stream.pred_as_input)

Generator = np.random.Generator | np.random.RandomState | torch.Generator | Noise


def infer_algorithm(spec: Spec) -> str | None:
    """The benchmark algorithm whose original spec equals `spec` (None if none or ambiguous in effect)."""
    target = dict(spec)
    names = [name for name, s in SPECS.items() if dict(s) == target]
    if not names:
        return None
    if len({name in PRED_AS_INPUT for name in names}) > 1:  # equal specs that the transform treats differently
        return None
    return names[0]


def prepare_spec(spec: Spec, cfg: ModelConfig, algorithm: str | None = None) -> Spec:
    """The spec the model trains on: `pred_as_input`, `enforce_permutations` and `drop_hints` applied.

    Idempotent (a prepared spec passes through unchanged). `algorithm` decides `pred_as_input`; when
    omitted it is inferred by matching `spec` against the benchmark's specs."""
    if algorithm is None:
        algorithm = infer_algorithm(spec)
    move_pred = cfg.pred_as_input and algorithm in PRED_AS_INPUT and "pred_h" in spec
    dropped = set(getattr(cfg, "drop_hints", ()))
    out: dict[str, Feature] = {}
    for name, f in spec.items():
        if f.stage is Stage.HINT and name in dropped:
            continue
        if move_pred and name == "pred_h":
            out["pred"] = Feature("pred", Stage.INPUT, f.location, f.type)
        elif f.type is Type.SHOULD_BE_PERMUTATION:
            if f.location is not Location.NODE:
                raise ValueError(f"{name}: should_be_permutation must live on nodes")
            if cfg.enforce_permutations:
                out[name] = Feature(name, f.stage, f.location, Type.PERMUTATION_POINTER)
                out[name + "_mask"] = Feature(name + "_mask", f.stage, f.location, Type.MASK_ONE)
            else:
                out[name] = Feature(name, f.stage, f.location, Type.POINTER)
        else:
            out[name] = f
    return MappingProxyType(out)


def permutation_mask_of(spec: Spec, name: str) -> bool:
    """True if `name` is the mask_one that goes with a permutation pointer (`pred_mask` of `pred`)."""
    base = name[:-5] if name.endswith("_mask") else None
    return base is not None and base in spec and spec[base].type is Type.PERMUTATION_POINTER


def cyclic_predecessor(pointers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear-order predecessor pointers [..., N] -> (cyclic pointers [..., N], first-node one-hot [..., N]).

    The first node (the one pointing to itself) is made to point to the last (the one no node
    points to), as the reference's `predecessor_to_cyclic_predecessor_and_first`."""
    n = pointers.shape[-1]
    onehot = pointers[..., :, None] == np.arange(n)  # [..., N, N]
    last = onehot.sum(-2).argmin(-1)  # [...]
    first = np.diagonal(onehot, axis1=-2, axis2=-1).argmax(-1)  # [...]
    cyc = pointers.astype(np.int64).copy()
    np.put_along_axis(cyc, first[..., None], last[..., None], axis=-1)
    mask = (np.arange(n) == first[..., None]).astype(np.float32)
    return cyc, mask


def random_positions(pos: np.ndarray, generator: Generator) -> np.ndarray:
    """Sorted uniform positions [B, N], one sorted run per segment of `pos` (a segment starts at each 0)."""
    B, n = pos.shape
    if isinstance(generator, Noise):  # drawn for the global batch: a sample's positions follow its global row
        u = generator.at(Site.POSITIONS).uniform((B, n), torch.device("cpu"), torch.float64).numpy()
    elif isinstance(generator, torch.Generator):
        u = torch.rand((B, n), generator=generator, dtype=torch.float64, device=generator.device).cpu().numpy()
    else:
        u = generator.uniform(size=(B, n))
    seg = np.cumsum(pos == 0, axis=1)  # [B, N] segment index (contiguous, non-decreasing)
    # Sorting seg + u orders by segment first, then by value inside it: a per-segment sort in one call.
    return np.sort(seg + u, axis=1) - seg


def _to_tensor(f: Feature, x: np.ndarray, device: torch.device) -> torch.Tensor:
    dtype = torch.int64 if f.type in POINTER_TYPES else torch.float32
    x = np.ascontiguousarray(x)
    if not x.flags.writeable:  # a read-only view (a memory-mapped or broadcast array): the tensor may share it
        x = x.copy()
    return torch.as_tensor(x).to(device=device, dtype=dtype)


@dataclass
class Batch:
    """Model-ready tensors of one batch (see the module docstring for conventions)."""

    spec: Spec  # the prepared spec these tensors follow
    inputs: dict[str, torch.Tensor]  # (B, ...)
    hints: dict[str, torch.Tensor]  # (B, T, ...)
    outputs: dict[str, torch.Tensor]  # (B, ...)
    lengths: torch.Tensor  # (B,) int64: true number of hint steps per sample
    node_mask: torch.Tensor  # (B, N) bool: False for padded nodes

    @property
    def size(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def n(self) -> int:
        return int(self.node_mask.shape[1])

    @property
    def max_length(self) -> int:
        return next(iter(self.hints.values())).shape[1] if self.hints else 1

    @property
    def device(self) -> torch.device:
        return self.node_mask.device

    @staticmethod
    def from_dataset(ds: Dataset, cfg: ModelConfig, spec: Spec | None = None, device: torch.device | str = "cpu",
                     generator: Generator | None = None) -> "Batch":
        """Transforms a dataset (usually `ds.take(idx)`) to model tensors on `device`.

        Args:
            spec: the prepared spec (default: `prepare_spec(ds.spec, cfg, ds.algorithm)`).
            generator: draws the random positions; pass one for training batches only (the reference
                keeps `pos` fixed at test time). Without it `pos` is left as is.
        """
        if spec is None:
            spec = prepare_spec(ds.spec, cfg, ds.algorithm)
        device = torch.device(device)
        inputs = dict(ds.inputs)
        outputs = dict(ds.outputs)
        T = max(int(ds.lengths.max()), 1) if len(ds) else 1
        dropped = set(getattr(cfg, "drop_hints", ()))  # model.drop_hints: as if the data had none of them
        hints = {k: v[:, :T] for k, v in ds.hints.items() if k not in dropped}  # the dataset may be padded longer

        if cfg.random_pos and generator is not None and "pos" in inputs:
            inputs["pos"] = random_positions(inputs["pos"], generator)
        if "pred" in spec and spec["pred"].stage is Stage.INPUT and "pred" not in inputs and "pred_h" in hints:
            pred_h = hints.pop("pred_h")
            valid = np.arange(T)[None, :] < ds.lengths[:, None]  # [B, T]
            if np.any((pred_h != pred_h[:, :1]) & valid[:, :, None]):
                raise ValueError(f"{ds.algorithm}: pred_h changes over time and cannot become an input")
            inputs["pred"] = pred_h[:, 0]
        for store in (inputs, hints, outputs):
            for name in list(store):
                f = spec.get(name)
                if f is not None and f.type is Type.PERMUTATION_POINTER and name + "_mask" not in store:
                    store[name], store[name + "_mask"] = cyclic_predecessor(store[name])

        tensors = {}
        for stage, store in ((Stage.INPUT, inputs), (Stage.HINT, hints), (Stage.OUTPUT, outputs)):
            expected = {k for k, f in spec.items() if f.stage is stage}
            if set(store) != expected:
                raise ValueError(f"{ds.algorithm}: {stage.value}s {sorted(store)} do not match the spec {sorted(expected)}")
            tensors[stage] = {k: _to_tensor(spec[k], v, device) for k, v in store.items()}
        lengths = torch.as_tensor(ds.lengths, dtype=torch.int64, device=device)
        if ds.sizes is None:
            node_mask = torch.ones(len(ds), ds.n, dtype=torch.bool, device=device)
        else:  # graphs of different sizes: nodes >= sizes[b] are padding
            node_mask = torch.as_tensor(np.arange(ds.n)[None, :] < ds.sizes[:, None], device=device)
        return Batch(spec, tensors[Stage.INPUT], tensors[Stage.HINT], tensors[Stage.OUTPUT], lengths, node_mask)

    def to(self, device: torch.device | str) -> "Batch":
        move = lambda d: {k: v.to(device) for k, v in d.items()}  # noqa: E731
        return replace(self, inputs=move(self.inputs), hints=move(self.hints), outputs=move(self.outputs),
                       lengths=self.lengths.to(device), node_mask=self.node_mask.to(device))

    def pad_nodes(self, n: int) -> "Batch":
        """The same batch with `n - self.n` padded (masked) nodes appended to every graph.

        Padded entries are zeros, except pointers of padded nodes, which point to themselves."""
        extra = n - self.n
        if extra < 0:
            raise ValueError(f"cannot pad {self.n} nodes down to {n}")

        def pad(f: Feature, x: torch.Tensor, time_axis: bool) -> torch.Tensor:
            lead = 2 if time_axis else 1
            node_axes = {Location.NODE: [lead], Location.EDGE: [lead, lead + 1], Location.GRAPH: []}[f.location]
            for axis in node_axes:
                shape = list(x.shape)
                shape[axis] = extra
                if f.type in POINTER_TYPES and axis == node_axes[0]:
                    # self-pointers for padded nodes: arange(self.n, n) along this axis
                    idx = torch.arange(self.n, n, device=x.device)
                    view = [1] * len(shape)
                    view[axis] = extra
                    fill = idx.view(view).expand(shape).to(x.dtype)
                else:
                    fill = torch.zeros(shape, dtype=x.dtype, device=x.device)
                x = torch.cat([x, fill], dim=axis)
            return x

        inputs = {k: pad(self.spec[k], v, False) for k, v in self.inputs.items()}
        hints = {k: pad(self.spec[k], v, True) for k, v in self.hints.items()}
        outputs = {k: pad(self.spec[k], v, False) for k, v in self.outputs.items()}
        mask = torch.cat([self.node_mask, torch.zeros(self.size, extra, dtype=torch.bool, device=self.device)], 1)
        return replace(self, inputs=inputs, hints=hints, outputs=outputs, node_mask=mask)


def features(spec: Spec, stage: Stage) -> Mapping[str, Feature]:
    return {k: f for k, f in spec.items() if f.stage is stage}
