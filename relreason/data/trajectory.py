"""Trajectories (one run of an algorithm) and Datasets (many runs, padded to a common length).

Storage conventions (the same in memory and on disk):
- inputs / outputs: one array per feature, shape `feature.shape(n)` (a leading batch axis B in a Dataset);
- hints: time-major per sample, [T, ...] in a Trajectory and [B, T, ...] in a Dataset, zero-padded
  past `lengths[b]` (the true number of hint steps);
- pointers (and should_be_permutation) are integer node indices (int32); categoricals are one-hot
  over the last axis (float32, so that masked entries can be -1 as in the reference); masks and
  mask_one are float32 0/1 (-1 where masked); scalars are float64, exactly as the reference computes
  them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from relreason.data.specs import POINTER_TYPES, Feature, Location, Spec, Stage, Type

Arrays = dict[str, np.ndarray]


def storage_dtype(feature: Feature) -> np.dtype:
    """The dtype a feature is stored with (see the module docstring)."""
    if feature.type in POINTER_TYPES:
        return np.dtype(np.int32)
    if feature.type is Type.SCALAR:
        return np.dtype(np.float64)
    return np.dtype(np.float32)


@dataclass
class Trajectory:
    """One algorithm run: inputs, hints [T, ...], outputs, for a graph of `n` nodes."""

    algorithm: str
    spec: Spec
    inputs: Arrays
    hints: Arrays
    outputs: Arrays

    @property
    def length(self) -> int:
        """Number of hint steps T."""
        return next(iter(self.hints.values())).shape[0] if self.hints else 1

    @property
    def n(self) -> int:
        return self.inputs["pos"].shape[0]


@dataclass
class Dataset:
    """A batch of trajectories of one algorithm at one size: inputs [B, ...], hints [B, T, ...]."""

    algorithm: str
    spec: Spec
    inputs: Arrays
    hints: Arrays
    outputs: Arrays
    lengths: np.ndarray  # [B] int64, true number of hint steps per sample
    meta: dict = field(default_factory=dict)  # split, size, seed, num ... (as stored)
    # [B] int64 real node count per graph when graphs of different sizes share the batch (nodes
    # >= sizes[b] are padding); None when every graph has all n nodes (every CLRS split).
    sizes: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def n(self) -> int:
        """Number of node slots (the padded size when `sizes` is set)."""
        node = next(k for k, f in self.spec.items() if f.stage is Stage.INPUT and f.location is Location.NODE)
        return int(self.inputs[node].shape[1])

    @property
    def max_length(self) -> int:
        return next(iter(self.hints.values())).shape[1] if self.hints else 1

    def arrays(self) -> dict[str, np.ndarray]:
        """All tensors by their storage names: `input.x`, `hint.x`, `output.x`, `lengths`."""
        out = {f"input.{k}": v for k, v in self.inputs.items()}
        out.update({f"hint.{k}": v for k, v in self.hints.items()})
        out.update({f"output.{k}": v for k, v in self.outputs.items()})
        out["lengths"] = self.lengths
        if self.sizes is not None:
            out["sizes"] = self.sizes
        return out

    def trajectory(self, i: int) -> Trajectory:
        """Sample i as a Trajectory, hints cut to its true length."""
        t = int(self.lengths[i])
        return Trajectory(
            self.algorithm, self.spec,
            {k: v[i] for k, v in self.inputs.items()},
            {k: v[i, :t] for k, v in self.hints.items()},
            {k: v[i] for k, v in self.outputs.items()},
        )

    def take(self, index: np.ndarray | slice) -> "Dataset":
        """A sub-dataset (hints keep this dataset's padded length)."""
        pick = lambda d: {k: v[index] for k, v in d.items()}  # noqa: E731
        return Dataset(self.algorithm, self.spec, pick(self.inputs), pick(self.hints), pick(self.outputs),
                       self.lengths[index], dict(self.meta), None if self.sizes is None else self.sizes[index])

    @staticmethod
    def from_trajectories(trajs: list[Trajectory]) -> "Dataset":
        """Stacks trajectories of equal size, zero-padding hints to the longest."""
        first = trajs[0]
        lengths = np.array([t.length for t in trajs], dtype=np.int64)
        tmax = int(lengths.max())
        hints = {}
        for k, v0 in first.hints.items():
            buf = np.zeros((len(trajs), tmax) + v0.shape[1:], dtype=v0.dtype)
            for b, t in enumerate(trajs):
                h = t.hints[k]
                buf[b, : h.shape[0]] = h
            hints[k] = buf
        stack = lambda name: {k: np.stack([getattr(t, name)[k] for t in trajs]) for k in getattr(first, name)}  # noqa: E731
        return Dataset(first.algorithm, first.spec, stack("inputs"), hints, stack("outputs"), lengths)

    @staticmethod
    def concat(parts: Iterable["Dataset"]) -> "Dataset":
        """Concatenates datasets of one algorithm and size, padding hints to the longest."""
        parts = list(parts)
        first = parts[0]
        if len(parts) == 1:  # nothing to join: copy only arrays that are views or read-only
            own = lambda d: {k: np.require(v, requirements="CWO") for k, v in d.items()}  # noqa: E731
            return Dataset(first.algorithm, first.spec, own(first.inputs), own(first.hints), own(first.outputs),
                           np.require(first.lengths, requirements="CWO"), dict(first.meta),
                           None if first.sizes is None else np.require(first.sizes, requirements="CWO"))
        tmax = max(p.max_length for p in parts)
        hints = {k: _concat_padded([p.hints[k] for p in parts], tmax) for k in first.hints}
        cat = lambda name: {k: np.concatenate([getattr(p, name)[k] for p in parts]) for k in getattr(first, name)}  # noqa: E731
        sizes = None if first.sizes is None else np.concatenate([p.sizes for p in parts])
        return Dataset(first.algorithm, first.spec, cat("inputs"), hints, cat("outputs"),
                       np.concatenate([p.lengths for p in parts]), dict(first.meta), sizes)


def _concat_padded(parts: list[np.ndarray], length: int) -> np.ndarray:
    """Concatenates hint arrays [B_i, T_i, ...] along B, zero-padded along T to `length`, in one copy."""
    out = np.zeros((sum(x.shape[0] for x in parts), length) + parts[0].shape[2:], parts[0].dtype)
    start = 0
    for x in parts:
        out[start: start + x.shape[0], : x.shape[1]] = x
        start += x.shape[0]
    return out


def pad_time(x: np.ndarray, length: int) -> np.ndarray:
    """Zero-pads a hint array [B, T, ...] along T to `length`."""
    if x.shape[1] == length:
        return x
    pad = [(0, 0)] * x.ndim
    pad[1] = (0, length - x.shape[1])
    return np.pad(x, pad)
