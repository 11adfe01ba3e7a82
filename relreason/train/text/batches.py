"""Training batches of a text run: the step's examples as token chunks of similar lengths.

Training visits the examples of all the run's algorithms and sizes as one pool, epoch by epoch (the
paper counts epochs), each epoch a permutation drawn from derive_seed(seed, BATCH, epoch): step k's
batch is a function of (seed, k) alone, mixes algorithms and sizes, and a resumed run sees the batches
of an uninterrupted one (`TextWorkload.step_indices`). Sequences are BOS + question + answer + EOS; the
loss is the mean cross-entropy over the batch's answer tokens and EOS, computed on chunks of rows of
similar lengths (`length_chunks`: a 100-token example is not padded to its batch's 1,000); randomized
positions of step k come from `text_generator`, derive_seed(seed, TEXT, k), drawn for the whole batch
before it is cut.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from relreason.seeds import Purpose, derive_seed


@dataclass
class TextChunk:
    """Rows of a training batch of similar lengths, padded only to their own longest."""

    tokens: torch.Tensor  # (b, L) int64, right-padded
    target_mask: torch.Tensor  # (b, L) bool: answer tokens and EOS
    pad_mask: torch.Tensor  # (b, L) bool
    positions: torch.Tensor  # (b, L) int64
    inputs: dict  # extra model inputs of these rows (TransNAR: nodes, edges, node_mask)

    @property
    def targets(self) -> int:
        return int(self.target_mask.sum())


@dataclass
class TextPart:
    """One training update: the step's batch as chunks of similar lengths (`length_chunks`)."""

    chunks: list[TextChunk]

    @property
    def targets(self) -> int:
        return sum(c.targets for c in self.chunks)


CHUNK_RATIO = 1.5  # a chunk's longest row is at most this times its shortest ...
CHUNK_MIN_ROWS = 4  # ... unless it holds fewer rows than this (tiny chunks cost more in overhead than padding)


def length_chunks(lengths: np.ndarray) -> list[np.ndarray]:
    """Rows grouped by length (sorted, cut where a row is CHUNK_RATIO x longer than its chunk's first),
    so that a batch mixing 100- and 1,000-token examples is not all padded to 1,000."""
    order = np.argsort(lengths, kind="stable")
    chunks, start = [], 0
    for i in range(1, len(order) + 1):
        if i == len(order) or (i - start >= CHUNK_MIN_ROWS and lengths[order[i]] > CHUNK_RATIO * lengths[order[start]]):
            chunks.append(order[start:i])
            start = i
    return chunks


def text_generator(seed: int, step: int) -> torch.Generator:
    """Randomized positions of training step `step`."""
    return torch.Generator().manual_seed(derive_seed(seed, Purpose.TEXT, step))
