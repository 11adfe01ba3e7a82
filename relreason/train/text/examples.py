"""The examples of a text run: pools of the reference's text streams, run and rendered when used.

A split is a list of pieces of the reference's text streams (`relreason.tasks.text_pieces`). The
samples (truncated inputs) of a split are drawn once, in stream order, and kept (`ExamplePool`, one
group per algorithm and size); a batch is run and rendered when it is used (`ExamplePool.render`),
question/answer text and graph form (a CLRS `Dataset`) from the same arrays (relreason.data.text),
so the two views of an example cannot disagree and memory holds only the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relreason.data.algorithms import ALGORITHMS
from relreason.data.generate import run_samples
from relreason.data.text import DECIMALS, ExampleId, check_stream, draw_sample, render_dataset


@dataclass
class Group:
    """The examples of one (algorithm, size) of a split: their truncated inputs, in stream order, and ids."""

    task_index: int
    algorithm: str
    length: int
    samples: list[tuple]
    ids: list[ExampleId]


@dataclass
class GraphPart:
    """The graph form of the rows `rows` of a rendered batch: one algorithm at one size."""

    task_index: int
    rows: np.ndarray  # positions in the batch
    dataset: object  # relreason.data.trajectory.Dataset


@dataclass
class Rendered:
    """A batch in both views: texts in batch order and the graph form, grouped by (algorithm, size)."""

    questions: list[str]
    answers: list[str]
    graphs: list[GraphPart]

    def __len__(self) -> int:
        return len(self.questions)

    def take(self, rows: np.ndarray) -> "Rendered":
        """Rows `rows` of a batch of one (algorithm, size) (evaluation batches)."""
        (part,) = self.graphs
        return Rendered([self.questions[i] for i in rows], [self.answers[i] for i in rows],
                        [GraphPart(part.task_index, np.arange(len(rows)), part.dataset.take(rows))])


def draw_piece(algorithm: str, piece) -> list[tuple]:
    """The truncated inputs of examples skip+1 .. skip+num of the stream (length, seed), as text_batches draws them."""
    alg = check_stream(algorithm, piece.length, piece.seed, piece.num, skip=piece.skip)
    rng = np.random.RandomState(piece.seed)
    for _ in range(piece.skip):
        draw_sample(alg, rng, piece.length, DECIMALS)
    return [draw_sample(alg, rng, piece.length, DECIMALS) for _ in range(piece.num)]


class ExamplePool:
    """The examples of one split of several algorithms, as (algorithm, size) groups, addressable by a
    flat index (group by group, in order)."""

    def __init__(self, algorithms: list[str], pieces: list[tuple], hints: bool):
        self.hints = hints
        self.groups: list[Group] = []
        for i, (alg, alg_pieces) in enumerate(zip(algorithms, pieces)):
            by_length: dict[int, list[tuple]] = {}
            ids: dict[int, list[ExampleId]] = {}
            for p in alg_pieces:
                by_length.setdefault(p.length, []).extend(draw_piece(alg, p))
                ids.setdefault(p.length, []).extend(ExampleId(alg, p.length, p.seed, k, hints)
                                                    for k in range(p.skip, p.skip + p.num))
            self.groups += [Group(i, alg, n, samples, ids[n]) for n, samples in by_length.items()]
        self.offsets = np.cumsum([0] + [len(g.samples) for g in self.groups])  # (G + 1,)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def group_indices(self, g: int) -> np.ndarray:
        return np.arange(self.offsets[g], self.offsets[g + 1])

    def render(self, indices: np.ndarray) -> Rendered:
        """Runs and renders the examples `indices` (flat), keeping their order."""
        indices = np.asarray(indices)
        which = np.searchsorted(self.offsets, indices, side="right") - 1  # group of each row
        questions: list[str] = [""] * len(indices)
        answers: list[str] = [""] * len(indices)
        parts = []
        for g in np.unique(which):
            group = self.groups[g]
            rows = np.flatnonzero(which == g)
            ds = run_samples(ALGORITHMS.get(group.algorithm),
                             [group.samples[k] for k in (indices[rows] - self.offsets[g])])
            # read-only broadcast views (every `pos`, naive_string_matcher's `pred_h` hint): torch would warn
            # when the NAR's batch wraps them
            for part in ("inputs", "hints", "outputs"):
                setattr(ds, part, {k: v if v.flags.writeable else np.array(v) for k, v in getattr(ds, part).items()})
            qs, ans = render_dataset(ds, self.hints)
            for r, q, a in zip(rows, qs, ans):
                questions[r], answers[r] = q, a
            parts.append(GraphPart(group.task_index, rows, ds))
        return Rendered(questions, answers, parts)
