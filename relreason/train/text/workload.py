"""`TextWorkload`: one text model on one or several `text:` tasks (the package docstring shows its use).

It draws its examples (relreason.train.text.examples), cuts each step's batch into chunks
(relreason.train.text.batches) and scores the model by greedy decoding (relreason.train.text.evaluation).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn

from relreason.config import Config
from relreason.data.algorithms import SPECS
from relreason.data.specs import spec_hash
from relreason.data.text import TextScore, score_answer
from relreason.errors import RelreasonError
from relreason.eval.text_score import AnsweredExample, summarize_text_scores
from relreason.models.build import check_model_memory
from relreason.models.text import TextTransformer
from relreason.seeds import Purpose, derive_seed
from relreason.tasks import task_entries, text_pieces
from relreason.train.text.batches import TextChunk, TextPart, length_chunks, text_generator
from relreason.train.text.evaluation import SPLIT_KEYS, decode, eval_generator, eval_rows
from relreason.train.text.examples import ExamplePool, Rendered
from relreason.train.workloads import Workload


class TextWorkload(Workload):
    """A text model on one or several `text:` tasks (see the module docstring)."""

    metric = "text_clrs"
    lower_is_better = False

    def __init__(self, cfg: Config, device: torch.device):
        self.cfg, self.device = cfg, device
        self.tasks = task_entries(cfg.task)
        self.algorithms = [t.algorithm for t in self.tasks]
        self.tokenizer = cfg.model.tokenizer_object()
        self.spec_hash = spec_hash({f"{a}/{k}": f for a in self.algorithms for k, f in SPECS[a].items()})
        self._prepare()
        check_model_memory(cfg, self._build_model, device)  # sizes read from a config are untrusted
        torch.manual_seed(cfg.train.seed)  # after the NAR is built: the text model's init depends on the seed alone
        self.model = self._build_model().to(device)
        self._train: ExamplePool | None = None  # drawn at the first training step (evaluation never needs it)
        self._perms: dict[int, np.ndarray] = {}
        self._eval: dict[tuple, ExamplePool] = {}

    # hooks for TransNAR ----------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Whatever the model needs before it is built (TransNAR: the NAR)."""

    def _build_model(self) -> nn.Module:
        return TextTransformer(self.cfg.model.text_config())

    def _inputs(self, batch: Rendered) -> dict:
        """Extra model inputs of a batch (TransNAR: the NAR's embeddings of its graph form)."""
        return {}

    # training --------------------------------------------------------------------------------------

    def _pool(self, split: str, sizes=None, num: int | None = None, seed: int | None = None) -> ExamplePool:
        key = (split, None if sizes is None else tuple(sizes), num, seed)
        if split == "train" and key == ("train", None, None, None):
            if self._train is None:
                self._train = ExamplePool(self.algorithms, [text_pieces(a, "train", self.cfg.data)
                                                            for a in self.algorithms], self.cfg.data.hints)
            return self._train
        if key not in self._eval:
            self._eval[key] = ExamplePool(self.algorithms, [text_pieces(a, split, self.cfg.data, sizes, num, seed)
                                                            for a in self.algorithms], self.cfg.data.hints)
        return self._eval[key]

    def step_indices(self, step: int) -> np.ndarray:
        """The pool indices of step `step`: positions step*B .. step*B + B - 1 of the epochs' permutations."""
        pool, b = self._pool("train"), self.cfg.train.batch_size
        at = step * b + np.arange(b)
        epochs, offsets = at // len(pool), at % len(pool)
        out = np.empty(b, dtype=np.int64)
        for e in np.unique(epochs):
            if e not in self._perms:
                if len(self._perms) > 2:
                    self._perms.pop(min(self._perms))
                rng = np.random.default_rng(derive_seed(self.cfg.train.seed, Purpose.BATCH, int(e)))
                self._perms[int(e)] = rng.permutation(len(pool))
            out[epochs == e] = self._perms[int(e)][offsets[epochs == e]]
        return out

    def step_batches(self, step: int, rank: int = 0, world: int = 1) -> list[TextPart]:
        if world > 1:
            raise RelreasonError("text workloads train in one process", "run them without torchrun")
        batch = self._pool("train").render(self.step_indices(step))
        t = self.tokenizer.batch_examples(zip(batch.questions, batch.answers))
        positions = self.model.positions(t.pad_mask, train=True, generator=text_generator(self.cfg.train.seed, step))
        inputs = self._inputs(batch)
        lengths = t.pad_mask.sum(1).numpy()
        chunks = []
        for rows in length_chunks(lengths):
            cut = int(lengths[rows].max())
            pick = lambda x: x[torch.as_tensor(rows)][:, :cut].to(self.device)  # noqa: E731
            at = torch.as_tensor(rows, device=self.device)
            chunks.append(TextChunk(pick(t.tokens), pick(t.target_mask), pick(t.pad_mask), pick(positions),
                                    {k: None if v is None else v[at] for k, v in inputs.items()}))
        return [TextPart(chunks)]

    def loss(self, module: nn.Module, part: TextPart, step: int) -> tuple[torch.Tensor, dict[str, float]]:
        """The mean cross-entropy over the batch's answer tokens (and EOS), summed chunk by chunk."""
        total = part.targets
        loss = sum(module.loss(c.tokens, c.positions, c.target_mask, c.pad_mask, **c.inputs) * (c.targets / total)
                   for c in part.chunks)
        return loss, {"answer": float(loss.detach())}

    # evaluation ------------------------------------------------------------------------------------

    def eval_total(self, split: str) -> int:
        return len(self._pool(split))

    def evaluate(self, split: str, on_examples: Callable[[int], None] | None = None, *, size: int | None = None,
                 num: int | None = None, seed: int | None = None, batch_size: int | None = None,
                 sizes: list[int] | None = None,
                 on_answers: Callable[[list[AnsweredExample]], None] | None = None, draw: int | None = None) -> dict:
        """Scores `split`; `on_answers(examples)` receives each decoded batch's answers (`eval --dump`).
        Text validation reads its fixed pool every time, so `draw` changes nothing."""
        if size is not None:
            raise RelreasonError("--ood sets the node count of a graph test; text tasks test at sizes",
                                 "use --sizes, e.g. --sizes 10,12,14")
        if split not in SPLIT_KEYS:
            raise RelreasonError(f"unknown split {split!r}", "use val or test")
        pool = self._pool(split, sizes, num, seed)
        was_training = self.model.training
        self.model.eval()
        try:
            cells = {(g.task_index, g.length): self._evaluate_group(split, pool, i, batch_size, on_examples,
                                                                    on_answers)
                     for i, g in enumerate(pool.groups)}
        finally:
            self.model.train(was_training)
        return summarize_text_scores(split, [(self.algorithms[i], n, s) for (i, n), s in sorted(cells.items())])

    def _evaluate_group(self, split: str, pool: ExamplePool, g: int, batch_size: int | None, on_examples,
                        on_answers=None) -> list[TextScore]:
        group = pool.groups[g]
        batch = pool.render(pool.group_indices(g))
        rows = batch_size if batch_size is not None else self.cfg.train.eval_batch_size
        if rows is None:
            rows = eval_rows(batch)
        gen = eval_generator(self.cfg.train.seed, split, group.task_index, group.length, self.device)
        scores = []
        for start in range(0, len(batch), rows):
            part = batch.take(np.arange(start, min(start + rows, len(batch))))
            texts = decode(self.model, self.tokenizer, part, self.cfg.model.context, self.device, gen, self._inputs)
            scores += [score_answer(text, truth) for text, truth in zip(texts, part.answers)]
            if on_answers is not None:
                on_answers([AnsweredExample(i, q, t, a) for i, q, t, a in
                            zip(group.ids[start: start + len(part)], part.questions, texts, part.answers)])
            if on_examples is not None:
                on_examples(len(part))
        return scores
