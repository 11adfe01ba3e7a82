"""Recording an algorithm's probes as it runs.

An algorithm creates a `Recorder`, calls `input(...)` once, `hint(...)` at each of its natural
probe points, `output(...)` once, and returns `finish()`. The recorder checks every call against
the algorithm's spec: a missing or undeclared probe is an error (ProbeError).

Two modes share the same code:
- single sample (`batch=None`): values have no batch axis; `finish()` returns a `Trajectory`;
- lockstep batch (`batch=B`): values carry a leading axis B and `hint(active=...)` says which samples
  are still running; a sample that stops never restarts. `finish()` returns a `Dataset` whose
  lengths count each sample's active steps and whose hints are zero past them.

Values are copied when recorded, so an algorithm may keep mutating its state. For speed and
readability, a mask_one may be given as its index (one axis fewer), a categorical as its class
index, and pointers as any integer-valued array; `finish()` converts everything to the storage
conventions of `relreason.data.trajectory`.

An algorithm that builds whole trajectories in bulk records them with one `hint_sequence` call
instead of `hint` calls (batch mode; unlike `hint`, it keeps the arrays it is given).
"""

from __future__ import annotations

from typing import Collection

import numpy as np

from relreason.data.catalog import ALGORITHMS
from relreason.data.specs import POINTER_TYPES, Feature, Spec, Stage, Type
from relreason.data.trajectory import Dataset, Trajectory, storage_dtype


class ProbeError(Exception):
    """An algorithm recorded probes that do not match its spec (a bug in the algorithm)."""


class Recorder:
    """Collects one run's probes (or a lockstep batch of runs) and checks them against the spec."""

    def __init__(self, algorithm: str, n: int, batch: int | None = None, spec: Spec | None = None):
        self.algorithm = algorithm
        self.spec = spec if spec is not None else ALGORITHMS.get(algorithm).spec
        self.n = n
        self.batch = batch
        self._names = {s: frozenset(k for k, f in self.spec.items() if f.stage is s) for s in Stage}
        self._inputs: dict[str, np.ndarray] | None = None
        self._outputs: dict[str, np.ndarray] | None = None
        self._hints: dict[str, list] = {k: [] for k in self._names[Stage.HINT]}
        self._active: list[np.ndarray] = []
        self._bulk_lengths: np.ndarray | None = None  # set by hint_sequence (whole trajectories at once)
        self._zero_padded: frozenset[str] = frozenset()  # hint_sequence values whose padding is zero already

    def _check(self, stage: Stage, values: dict) -> None:
        if values.keys() != self._names[stage]:
            missing = sorted(self._names[stage] - values.keys())
            extra = sorted(values.keys() - self._names[stage])
            raise ProbeError(f"{self.algorithm}: {stage.value} probe mismatch: missing {missing}, undeclared {extra}")

    def input(self, **values) -> None:
        self._check(Stage.INPUT, values)
        self._inputs = {k: self._convert(self.spec[k], v) for k, v in values.items()}

    def output(self, **values) -> None:
        self._check(Stage.OUTPUT, values)
        self._outputs = {k: self._convert(self.spec[k], v) for k, v in values.items()}

    def hint(self, active: np.ndarray | None = None, **values) -> None:
        """Records one hint step. `active` ([B] bool, batch mode only): samples this step belongs to."""
        self._check(Stage.HINT, values)
        if self._bulk_lengths is not None:
            raise ProbeError(f"{self.algorithm}: hint after hint_sequence")
        for k, v in values.items():
            self._hints[k].append(np.array(v))
        if self.batch is not None:
            act = np.ones(self.batch, bool) if active is None else np.asarray(active, bool).copy()
            if self._active and np.any(act & ~self._active[-1]):
                raise ProbeError(f"{self.algorithm}: a sample became active again after it stopped")
            self._active.append(act)

    def hint_sequence(self, lengths: np.ndarray, *, zero_padded: Collection[str] = (), **values) -> None:
        """Records a lockstep batch's hints all at once (batch mode, instead of `hint`).

        Each value is [B, T, ...] (time second, storage form or an index form) and `lengths[b]` is the
        number of steps sample b ran; steps past it are stored as zeros. For algorithms that build
        whole trajectories in bulk: the arrays are kept without a copy, so the caller hands them over.
        `zero_padded` names the values that already hold zeros past every length: the recorder leaves
        their padding alone (writing it would touch every page of a large edge hint again).
        """
        self._check(Stage.HINT, values)
        if self.batch is None or self._active or self._bulk_lengths is not None:
            raise ProbeError(f"{self.algorithm}: hint_sequence needs batch mode and is the only hint call")
        if not set(zero_padded) <= values.keys():
            raise ProbeError(f"{self.algorithm}: zero_padded names unknown hints {sorted(set(zero_padded) - values.keys())}")
        self._bulk_lengths = np.asarray(lengths, dtype=np.int64)
        self._hints = dict(values)
        self._zero_padded = frozenset(zero_padded)

    def _convert(self, f: Feature, value, time_axis: bool = False) -> np.ndarray:
        """Converts one recorded value to storage form (index forms expanded to one-hot)."""
        x = np.asarray(value)
        lead = (1 if time_axis else 0) + (1 if self.batch is not None else 0)
        full = lead + len(f.shape(self.n))
        if f.type in (Type.MASK_ONE, Type.CATEGORICAL) and x.ndim == full - 1:
            depth = self.n if f.type is Type.MASK_ONE else f.num_classes
            self._check_range(f, x, depth)  # an index out of range would become an all-zero row
            x = (x.astype(np.int64)[..., None] == np.arange(depth)).astype(np.float32)
        if x.ndim != full:
            raise ProbeError(f"{self.algorithm}: probe {f.name} has {x.ndim} axes, expected {full}")
        expected = tuple(f.shape(self.n))  # the feature's own axes, after the time and batch axes
        batch_ok = self.batch is None or time_axis or x.shape[0] == self.batch  # hints: [T, B] or [B, T] first
        if x.shape[lead:] != expected or not batch_ok:
            lead_axes = ("T/B, B/T, " if self.batch is not None else "T, ") if time_axis else \
                (f"{self.batch}, " if self.batch is not None else "")
            raise ProbeError(f"{self.algorithm}: probe {f.name} has shape {list(x.shape)}, expected "
                             f"[{lead_axes}{', '.join(map(str, expected))}] (n = {self.n})")
        if f.type in POINTER_TYPES:
            self._check_range(f, x, self.n)
        return x.astype(storage_dtype(f), copy=False)

    def _check_range(self, f: Feature, x: np.ndarray, depth: int) -> None:
        """Index values (pointers, and mask_one / categorical given as indices) must be integers in 0..depth-1."""
        integral = np.issubdtype(x.dtype, np.integer) or np.array_equal(x, np.round(x))
        if x.size and (not integral or x.min() < 0 or x.max() > depth - 1):
            bad = x[(x != np.round(x)) | (x < 0) | (x > depth - 1)].flat[0].item()
            raise ProbeError(f"{self.algorithm}: probe {f.name} ({f.type.value}) holds {bad:g}, outside the "
                             f"indices 0..{depth - 1}")

    def finish(self) -> Trajectory | Dataset:
        if self._inputs is None or self._outputs is None:
            raise ProbeError(f"{self.algorithm}: inputs and outputs must both be recorded")
        if self._bulk_lengths is not None:
            return self._finish_sequence()
        steps = len(next(iter(self._hints.values()))) if self._hints else 0
        if self._hints and steps == 0:
            raise ProbeError(f"{self.algorithm}: no hint was recorded")
        hints = {k: self._convert(self.spec[k], np.stack(v), time_axis=True) for k, v in self._hints.items()}
        if self.batch is None:
            return Trajectory(self.algorithm, self.spec, self._inputs, hints, self._outputs)
        active = np.stack(self._active, axis=1) if self._active else np.ones((self.batch, 1), bool)  # [B, T]
        for k, v in hints.items():
            v = np.moveaxis(v, 0, 1)  # [T, B, ...] -> [B, T, ...]
            v[~active] = 0
            hints[k] = np.ascontiguousarray(v)
        lengths = active.sum(axis=1).astype(np.int64)
        return Dataset(self.algorithm, self.spec, self._inputs, hints, self._outputs, lengths)

    def _finish_sequence(self) -> Dataset:
        lengths = self._bulk_lengths
        hints = {k: self._convert(self.spec[k], v, time_axis=True) for k, v in self._hints.items()}
        steps = next(iter(hints.values())).shape[1]
        if lengths.shape != (self.batch,) or lengths.min() < 1 or lengths.max() != steps:
            raise ProbeError(f"{self.algorithm}: lengths must be in 1..T and reach T = {steps}")
        padding = np.flatnonzero(np.arange(steps)[None, :] >= lengths[:, None])  # rows of [B * T]
        for k, v in hints.items():
            if v.shape[:2] != (self.batch, steps):
                raise ProbeError(f"{self.algorithm}: probe {k} is not [B, T, ...] = [{self.batch}, {steps}, ...]")
            if len(padding) and k not in self._zero_padded:
                v = hints[k] = np.ascontiguousarray(v)  # so that the reshape below is a view
                v.reshape(self.batch * steps, -1)[padding] = 0
        return Dataset(self.algorithm, self.spec, self._inputs, hints, self._outputs, lengths)


def fill_steps(init: np.ndarray, lengths: np.ndarray, steps: int, sample: np.ndarray, step: np.ndarray,
               node: np.ndarray, value: np.ndarray) -> np.ndarray:
    """A hint [B, T, N, ...] from its first step and its changes, for algorithms that log changes
    rather than states (a sample's state changes at a few nodes per step).

    init: [B, N, ...] step 0; a change (sample[e], step[e], node[e], value[e]) sets the node's value
    from that step on (at most one change per sample, step and node). Steps are filled a run of
    unchanged steps at a time over the whole batch; a sample's first step past lengths[b] is zeroed
    and carried on like any value, so the result is zero past every length (hint_sequence's
    `zero_padded`), with each byte written once."""
    B, N = init.shape[:2]
    out = np.empty((B, steps) + init.shape[1:], init.dtype)
    out[:, 0] = init
    cells = out.reshape((B * steps * N,) + init.shape[2:])  # [B * T * N, ...] a view: one index per change
    order = np.argsort(step, kind="stable")
    step, value = step[order], np.asarray(value)[order]
    cell = (sample[order] * steps + step) * N + node[order]
    changes = _runs(step)
    by_end = np.argsort(lengths, kind="stable")
    ends = _runs(np.asarray(lengths)[by_end])
    done = 0  # steps 0..done are filled
    for t in sorted(changes.keys() | ends.keys()):
        if t >= steps:
            break
        if t > done:
            out[:, done + 1:t + 1] = out[:, done, None]
            done = t
        if t in ends:
            lo, hi = ends[t]
            out[by_end[lo:hi], t] = 0
        if t in changes:
            lo, hi = changes[t]
            cells[cell[lo:hi]] = value[lo:hi]
    if done < steps - 1:
        out[:, done + 1:] = out[:, done, None]
    return out


def _runs(keys: np.ndarray) -> dict[int, tuple[int, int]]:
    """The runs of equal values in sorted `keys`: value -> (start, end) of its run."""
    values, starts = np.unique(keys, return_index=True)
    ends = np.append(starts[1:], len(keys))
    return dict(zip(values.tolist(), zip(starts.tolist(), ends.tolist())))


def positions(n: int, batch: int | None = None) -> np.ndarray:
    """The `pos` input: i / n for i = 0..n-1 (tiled over the batch in lockstep mode)."""
    pos = np.arange(n) * 1.0 / n
    return pos if batch is None else np.broadcast_to(pos, (batch, n))


def graph_adjacency(A: np.ndarray) -> np.ndarray:
    """The `adj` input: (A + I) != 0, for one graph [N, N] or a batch [B, N, N]."""
    eye = np.eye(A.shape[-1], dtype=bool)
    return ((A != 0) | eye).astype(np.float32)
