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

    @staticmethod
    def whole(seed: int, size: int) -> "Noise":
        """The noise of a batch that is the whole global batch (one process)."""
        return Noise(seed, torch.arange(size), size, whole_batch=True)

    def at(self, site: Site, *keys: int) -> "Noise":
        """The independent stream of one draw site (and step)."""
        return Noise(derive_seed(self.seed, int(site), *keys), self.rows, self.size, whole_batch=self.whole_batch)

    def select(self, index: torch.Tensor | None) -> "Noise":
        """The same stream for the samples `index` of this batch (None: all of them)."""
        if index is None:
            return self
        return Noise(self.seed, self.rows[index.cpu()], self.size, self._stream)

    def uniform(self, shape, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """U[0, 1) of `shape` (its first axis: this batch's samples), drawn for the global batch."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if shape[0] != len(self.rows):
            raise ValueError(f"a draw for {shape[0]} samples from noise over {len(self.rows)} rows")
        if not self._stream:
            self._stream.append(torch.Generator().manual_seed(self.seed))
        full = torch.rand((self.size,) + shape[1:], generator=self._stream[0], dtype=dtype)  # (G, ...)
        whole = self.whole_batch or (len(self.rows) == self.size and _is_range(self.rows))
        mine = full if whole else full.index_select(0, self.rows)
        return mine.to(device)


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
