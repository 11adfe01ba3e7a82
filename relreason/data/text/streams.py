"""The reference's text streams: examples drawn as its generators draw them, rendered in batches
(`text_batches`, `text_examples`, `text_batch`), each example with its graph form.

    for ex in text_examples("insertion_sort", length=12, seed=0, num=3, hints=True):
        ex.question, ex.answer, ex.trajectory

A sampler built with `num_samples=-1` (one sample drawn per example, in order, from `RandomState(seed)`),
no padding, batch size 1, and every float input truncated toward zero to DECIMALS decimals *before* the
algorithm runs (`draw_sample`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from relreason.data import samplers
from relreason.data.algorithms import ALGORITHMS, Algorithm
from relreason.data.generate import MAX_NUM, MAX_SIZE, run_samples
from relreason.data.samplers import truncate
from relreason.data.text.rendering import render_dataset, text_form
from relreason.data.trajectory import Dataset, Trajectory
from relreason.errors import RelreasonError

# Floats are truncated to this many decimals: CLRS-Text's setting (huggingface_generators.clrs_generator's
# default, the examples of the CLRS-Text paper). generate_clrs_text.py's --num_decimals_in_float flag
# defaults to None (untruncated); pass decimals=None for that.
DECIMALS = 3
CHUNK = 256  # examples run as one lockstep batch: amortizes the per-call cost; the text does not depend on it


def draw_sample(alg: Algorithm, rng: samplers.RandomState, length: int, decimals: int | None) -> tuple:
    """One sample of the text stream: the algorithm's sampler, then the truncation, as the reference's
    `Sampler._make_batch` does (`_sample_data`, then `_trunc_array`)."""
    special = text_form(alg.name).truncated_sample if decimals is not None else None
    raw = special(rng, length, decimals) if special is not None else alg.sample(rng, length)
    return truncate(raw, decimals)


def check_stream(algorithm: str, length: int, seed: int, num: int | None = None, decimals: int | None = DECIMALS,
                 skip: int = 0) -> Algorithm:
    """Validates one stream's parameters (one-line errors); returns the algorithm."""
    alg = ALGORITHMS.get(algorithm)
    text_form(algorithm)
    if not alg.min_size <= length <= MAX_SIZE:
        raise RelreasonError(f"size {length} is out of range for {algorithm}",
                             f"use {alg.min_size} <= size <= {MAX_SIZE}")
    if num is not None and not 0 < num <= MAX_NUM:
        raise RelreasonError(f"num {num} must be a positive number of examples", f"use 1 <= num <= {MAX_NUM}")
    if not 0 <= seed < 2**32:
        raise RelreasonError(f"seed {seed} is out of range", "use 0 <= seed < 2**32")
    if decimals is not None and decimals < 1:  # the reference treats 0 as "no truncation": say so instead
        raise RelreasonError(f"decimals {decimals} must be at least 1", "pass decimals=None for untruncated floats")
    if skip < 0:
        raise RelreasonError(f"skip {skip} must not be negative", "use skip >= 0")
    return alg


@dataclass(frozen=True)
class TextExample:
    """One problem in both views: its text and its graph-form trajectory."""

    question: str
    answer: str
    algorithm: str
    length: int  # the requested size (segments_intersect always has 4 points, as in the reference)
    trajectory: Trajectory


@dataclass
class TextBatch:
    """K consecutive examples of one stream: their texts and their graph form as one Dataset."""

    algorithm: str
    length: int
    questions: list[str]
    answers: list[str]
    dataset: Dataset  # example i is dataset.trajectory(i)

    def __len__(self) -> int:
        return len(self.questions)

    def examples(self) -> Iterator[TextExample]:
        for i, (q, a) in enumerate(zip(self.questions, self.answers)):
            yield TextExample(q, a, self.algorithm, self.length, self.dataset.trajectory(i))


def text_batches(algorithm: str, length: int, seed: int, num: int | None = None, hints: bool = False, *,
                 decimals: int | None = DECIMALS, skip: int = 0, chunk: int = CHUNK) -> Iterator[TextBatch]:
    """The stream (algorithm, length, seed) in batches of `chunk`: examples skip+1 .. skip+num of it
    (`num=None`: without end). The examples never depend on `chunk`."""
    alg = check_stream(algorithm, length, seed, num, decimals, skip)
    rng = np.random.RandomState(seed)
    for _ in range(skip):  # the algorithm draws nothing, so passing over a sample is drawing it
        draw_sample(alg, rng, length, decimals)
    done = 0
    while num is None or done < num:
        k = chunk if num is None else min(chunk, num - done)
        ds = run_samples(alg, [draw_sample(alg, rng, length, decimals) for _ in range(k)])
        questions, answers = render_dataset(ds, hints)
        done += k
        yield TextBatch(algorithm, length, questions, answers, ds)


def text_examples(algorithm: str, length: int, seed: int, num: int | None = None, hints: bool = False, *,
                  decimals: int | None = DECIMALS, skip: int = 0) -> Iterator[TextExample]:
    """The reference's text stream for (algorithm, length, seed), one example at a time."""
    for batch in text_batches(algorithm, length, seed, num, hints=hints, decimals=decimals, skip=skip):
        yield from batch.examples()


def text_batch(algorithm: str, length: int, seed: int, num: int, hints: bool = False, *,
               decimals: int | None = DECIMALS, skip: int = 0) -> TextBatch:
    """The first `num` examples of a stream in one go (one Dataset)."""
    return next(text_batches(algorithm, length, seed, num, hints=hints, decimals=decimals, skip=skip, chunk=num))


__all__ = ["DECIMALS", "CHUNK", "draw_sample", "check_stream", "TextExample", "TextBatch", "text_batches",
           "text_examples", "text_batch"]
