"""Training noise drawn for a whole (global) batch, so that what a sample sees never depends on which
other samples share its batch, or on which process trains it.

Distributed training splits each global batch over processes; for N processes to train exactly as
one, every random draw (random positions, teacher forcing, Gumbel noise, dropout) must give a sample
the number it would get in the one-process batch. A `Noise` is a seed plus this batch's rows of the
global batch: each draw site and step has its own stream (`at`), which draws values for every row of
the global batch and keeps this batch's rows. A sample's noise is then a function of (seed, site,
step, its global row) only: not of the local batch size, the hint steps the local batch runs, or the
draws made before.

    noise = Noise(seed, rows=torch.arange(16, 32), size=32)            # rank 1 of 2, global batch 32
    u = noise.at(Site.DROPOUT, s).select(running).uniform((b, N, D), device)

`Net.forward` and `Batch.from_dataset` take a `Noise` wherever they take a generator; a plain
`torch.Generator` becomes a one-batch `Noise` (`as_noise`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch

from relreason.seeds import derive_seed


class Site(enum.IntEnum):
    """Where a draw is made (part of the stream's key, so sites never share numbers)."""

    POSITIONS = 0  # random `pos` inputs (Batch.from_dataset)
    TEACHER_FORCING = 1  # per sample and step: ground-truth hints or the model's own
    DROPOUT = 2  # node-state dropout after the processor
    HINT_DECODERS = 3  # Gumbel noise of permutation decoders, hint predictions
    OUTPUT_DECODERS = 4  # Gumbel noise of permutation decoders, output predictions


@dataclass(frozen=True)
class Noise:
    seed: int
    rows: torch.Tensor  # (B,) int64 on the CPU: the global row of each sample of this batch
    size: int  # rows of the global batch
    # the stream's generator, made at the first draw and shared by `select`ed views, so successive
    # draws of one site (two permutation decoders) continue the stream instead of repeating it
    _stream: list = field(default_factory=list, compare=False, repr=False)
    whole_batch: bool = field(default=False, compare=False)  # rows are 0..size-1 (known without reading them)
    # the (site, *keys) of each `at` from the batch's noise to this stream, and the Tape that records or
    # serves the step's draws when the step is captured as a CUDA graph (relreason.train.cuda_graphs); () and None
    # otherwise
    path: tuple = field(default=(), compare=False, repr=False)
    tape: "Tape | None" = field(default=None, compare=False, repr=False)

    @staticmethod
    def whole(seed: int, size: int) -> "Noise":
        """The noise of a batch that is the whole global batch (one process)."""
        return Noise(seed, torch.arange(size), size, whole_batch=True)

    def at(self, site: Site, *keys: int) -> "Noise":
        """The independent stream of one draw site (and step)."""
        return Noise(derive_seed(self.seed, int(site), *keys), self.rows, self.size, whole_batch=self.whole_batch,
                     path=self.path + ((int(site), *map(int, keys)),), tape=self.tape)

    def taped(self, tape: "Tape") -> "Noise":
        """This batch's noise with its draws going through `tape` (relreason.train.cuda_graphs)."""
        return Noise(self.seed, self.rows, self.size, whole_batch=self.whole_batch, tape=tape)

    def select(self, index: torch.Tensor | None) -> "Noise":
        """The same stream for the samples `index` of this batch (None: all of them)."""
        if index is None:
            return self
        if self.tape is not None:  # a captured step runs every sample (the shape-static step selects none)
            raise ValueError("a taped step draws for the whole batch; it cannot select samples")
        return Noise(self.seed, self.rows[index.cpu()], self.size, self._stream)

    def uniform(self, shape, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """U[0, 1) of `shape` (its first axis: this batch's samples), drawn for the global batch."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if self.tape is not None:
            return self.tape.draw(self, shape, torch.device(device), dtype)
        return self._draw(shape, device, dtype)

    def _draw(self, shape: tuple, device, dtype: torch.dtype) -> torch.Tensor:
        if shape[0] != len(self.rows):
            raise ValueError(f"a draw for {shape[0]} samples from noise over {len(self.rows)} rows")
        if not self._stream:
            self._stream.append(torch.Generator().manual_seed(self.seed))
        full = torch.rand((self.size,) + shape[1:], generator=self._stream[0], dtype=dtype)  # (G, ...)
        whole = self.whole_batch or (len(self.rows) == self.size and _is_range(self.rows))
        mine = full if whole else full.index_select(0, self.rows)
        return mine.to(device)


class Tape:
    """The noise draws of one captured step (relreason.train.cuda_graphs). A CUDA graph replays kernels, not
    Python: the draws (made on the CPU from per-step seeds) cannot happen inside it. So the step runs once
    *recording* (each draw is made as usual, and its path from the batch's noise, stream and shape are
    noted; the values, on the device, become the step's fixed buffers), then *serving* (each draw returns
    the next buffer: what the graph captures). Before each replay `refill(noise)` makes the same draws
    from that step's noise, in the same order, and copies them into the buffers: every number a sample
    sees is the one the uncaptured step would draw.

    The draw sequence must depend on the batch's shapes only, which the shape-static step guarantees
    (a step's shapes are part of its graph's key)."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, tuple, tuple, torch.dtype]] = []  # (stream, path, shape, dtype)
        self.buffers: list[torch.Tensor] = []  # the recorded draws, on the device
        self._streams: list[list] = []  # the recorded streams' generator holders (identity: which draws share one)
        self.serving = False
        self._next = 0

    def draw(self, noise: Noise, shape: tuple, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        if self.serving:
            if self._next >= len(self.buffers) or tuple(self.buffers[self._next].shape) != shape:
                raise RuntimeError(f"the captured step drew {shape} as its draw {self._next}, where the recorded "
                                   f"step drew {self.entries[self._next][2] if self._next < len(self.entries) else 'nothing'}")
            out = self.buffers[self._next]
            self._next += 1
            return out
        k = next((i for i, s in enumerate(self._streams) if s is noise._stream), None)
        if k is None:
            self._streams.append(noise._stream)
            k = len(self._streams) - 1
        value = noise._draw(shape, device, dtype)
        self.entries.append((k, noise.path, shape, dtype))
        self.buffers.append(value)
        return value

    def serve(self) -> None:
        """From now on draws return the buffers, in the recorded order."""
        self.serving, self._next = True, 0

    def values(self, noise: Noise) -> list[torch.Tensor]:
        """The recorded draws made from `noise` (another step's), on the CPU, in the recorded order."""
        streams: dict[int, Noise] = {}
        out = []
        for k, path, shape, dtype in self.entries:
            if k not in streams:
                s = Noise(noise.seed, noise.rows, noise.size, whole_batch=noise.whole_batch)
                for site, *keys in path:
                    s = s.at(site, *keys)
                streams[k] = s
            out.append(streams[k]._draw(shape, torch.device("cpu"), dtype))
        return out

    def refill(self, noise: Noise) -> None:
        """Copies the draws of `noise` (the step about to replay) into the buffers."""
        for buf, value in zip(self.buffers, self.values(noise)):
            buf.copy_(value)
        self._next = 0


def _is_range(rows: torch.Tensor) -> bool:
    return bool(torch.equal(rows, torch.arange(len(rows))))


def as_noise(generator: torch.Generator | Noise | None, size: int) -> Noise | None:
    """A batch's noise: a `Noise` as given, a generator's as one seed drawn from it (the batch is
    the whole global batch), None as None (draws then use torch's global generator)."""
    if generator is None or isinstance(generator, Noise):
        return generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    return Noise.whole(seed, size)


def stream(noise: Noise | None, site: Site, *keys: int) -> Noise | None:
    """`noise.at(site, *keys)`, None for None."""
    return None if noise is None else noise.at(site, *keys)


def subset(noise: Noise | None, index: torch.Tensor | None) -> Noise | None:
    """`noise.select(index)`, None for None."""
    return None if noise is None else noise.select(index)
