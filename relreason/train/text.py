"""CLRS-Text workloads: the text transformer and TransNAR through the generic training loop.

    wl = build_workload(build_config("text_transformer", "text:insertion_sort"), device)
    part, = wl.step_batches(step)                      # one optimizer update per step
    loss, terms = wl.loss(wl.model, part, step)
    res = wl.evaluate("test")                          # per_task["insertion_sort@10"]["outputs"]: shape, parse, clrs

One model per run, whatever the number of algorithms: a task string naming several text tasks (a group
such as text:clrs30 or text:core8, or a comma list text:insertion_sort,text:bfs) trains one text
transformer or one TransNAR on all of them at once, as the TransNAR paper trains its models (one
dataset of every algorithm and size, seven epochs of it), and scores it per algorithm and size.
`train.train_examples` counts examples of the whole mix (one batch per step, unlike multi-task NAR runs,
which take one batch per algorithm per step): seven epochs of text:clrs30's `paper` preset are
7 x 30 x 42,000 examples.

Data. A split is a list of pieces of the reference's text streams (`relreason.tasks.text_pieces`).
The samples (truncated inputs) of a split are drawn once, in stream order, and kept; a batch is run
and rendered when it is used, question/answer text and graph form (a CLRS `Dataset`) from the same
arrays (relreason.data.text), so the two views of an example cannot disagree and memory holds only
the inputs. Training visits the examples of all the run's algorithms and sizes as one pool, epoch by
epoch (the paper counts epochs), each epoch a permutation drawn from derive_seed(seed, BATCH, epoch):
step k's batch is a function of (seed, k) alone, mixes algorithms and sizes, and a resumed run sees
the batches of an uninterrupted one. Sequences are BOS + question + answer + EOS; the loss is the mean
cross-entropy over the batch's answer tokens and EOS, computed on chunks of rows of similar lengths
(`length_chunks`: a 100-token example is not padded to its batch's 1,000); randomized positions of
step k come from derive_seed(seed, TEXT, k), drawn for the whole batch before it is cut.

Evaluation is greedy decoding with the KV cache, capped at the longest true answer of the batch +
DECODE_MARGIN tokens, scored with TransNAR's shape / parse / CLRS (relreason.data.text.score_answer,
on the final answer); positions (randomized under PositionMode.RANDOM, as in Ruoss et al.'s code) come
from a generator fixed per (split, algorithm, size), so every validation sees the same draw.
Validation: the preset's validation split, `data.val_num` per (algorithm, size); its score, which
picks the best checkpoint, is the CLRS score averaged over each algorithm's examples, then over the
algorithms. Test: at `data.test_sizes`; `per_task` holds every (algorithm, size) cell under
"insertion_sort@10" and the run's score is the mean CLRS score.

TransNAR (`TransNARWorkload`): the NAR recorded in `model.nar_config` is rebuilt from its config
(`build_nar`), loaded from its checkpoint, frozen (requires_grad False, eval mode, run under no_grad)
and attached to the model as `nar` (`FrozenNar`: its weights are saved under `nar.` with every
checkpoint, so evaluation needs no NAR run). For each batch it runs on the graph form of the same
examples, graphs of different sizes padded to the largest (`Batch.pad_nodes`, a node mask), one call
per algorithm; its final node and edge states are what every Eq. 3 block reads. The NAR must know every
algorithm of the run (a group needs a multi-task NAR run, e.g. `relreason train triplet_gmpnn clrs30`):
otherwise building the workload fails naming the algorithms it lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from relreason.config import Config
from relreason.data.text import ExampleId, TextScore, check_stream, draw_sample, render_dataset, score_answer
from relreason.errors import RelreasonError
from relreason.eval.text_score import AnsweredExample, summarize_text_scores
from relreason.seeds import Purpose, derive_seed
from relreason.tasks import task_entries, text_pieces
from relreason.train.workloads import WORKLOADS, Workload

DECODE_MARGIN = 16  # tokens a generation may run past its batch's longest true answer (a right answer never needs them)
EVAL_TOKENS = 1 << 16  # an evaluation batch holds at most this many prompt + answer-cap tokens (KV cache, activations)
EVAL_MAX_ROWS = 256
SPLIT_KEYS = {"val": 0, "test": 1}  # part of the evaluation generators' seeds


# -- examples -----------------------------------------------------------------------------------

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
    from relreason.data.text import DECIMALS

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
        from relreason.data.algorithms import ALGORITHMS
        from relreason.data.generate import run_samples

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


# -- the workloads -------------------------------------------------------------------------------

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


def eval_generator(seed: int, split: str, task_index: int, length: int, device: torch.device) -> torch.Generator:
    """Positions of the evaluation of one (algorithm, size): the same draw at every validation."""
    key = derive_seed(seed, Purpose.VALIDATION, SPLIT_KEYS[split], task_index, length)
    return torch.Generator(device).manual_seed(key)


class TextWorkload(Workload):
    """A text model on one or several `text:` tasks (see the module docstring)."""

    metric = "text_clrs"
    lower_is_better = False

    def __init__(self, cfg: Config, device: torch.device):
        from relreason.data.algorithms import SPECS
        from relreason.data.specs import spec_hash

        self.cfg, self.device = cfg, device
        self.tasks = task_entries(cfg.task)
        self.algorithms = [t.algorithm for t in self.tasks]
        self.tokenizer = cfg.model.tokenizer_object()
        self.spec_hash = spec_hash({f"{a}/{k}": f for a in self.algorithms for k, f in SPECS[a].items()})
        self._prepare()
        torch.manual_seed(cfg.train.seed)  # after the NAR is built: the text model's init depends on the seed alone
        self.model = self._build_model().to(device)
        self._train: ExamplePool | None = None  # drawn at the first training step (evaluation never needs it)
        self._perms: dict[int, np.ndarray] = {}
        self._eval: dict[tuple, ExamplePool] = {}

    # hooks for TransNAR ----------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Whatever the model needs before it is built (TransNAR: the NAR)."""

    def _build_model(self) -> nn.Module:
        from relreason.models.text import TextTransformer

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
                 on_answers: Callable[[list[AnsweredExample]], None] | None = None) -> dict:
        """Scores `split`; `on_answers(examples)` receives each decoded batch's answers (`eval --dump`)."""
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
        return self._summary(split, cells)

    def _evaluate_group(self, split: str, pool: ExamplePool, g: int, batch_size: int | None, on_examples,
                        on_answers=None) -> list[TextScore]:
        group = pool.groups[g]
        batch = pool.render(pool.group_indices(g))
        prompt = max(len(q) for q in batch.questions) + 1  # + BOS
        answer = max(len(a) for a in batch.answers) + 1  # + EOS
        rows = batch_size if batch_size is not None else self.cfg.train.eval_batch_size
        if rows is None:
            rows = max(1, min(EVAL_MAX_ROWS, EVAL_TOKENS // (prompt + answer + DECODE_MARGIN)))
        gen = eval_generator(self.cfg.train.seed, split, group.task_index, group.length, self.device)
        scores = []
        for start in range(0, len(batch), rows):
            part = batch.take(np.arange(start, min(start + rows, len(batch))))
            texts = self.decode(part, gen)
            for text, truth in zip(texts, part.answers):
                scores.append(score_answer(text, truth))
            if on_answers is not None:
                on_answers([AnsweredExample(i, q, t, a) for i, q, t, a in
                            zip(group.ids[start: start + len(part)], part.questions, texts, part.answers)])
            if on_examples is not None:
                on_examples(len(part))
        return scores

    @torch.no_grad()
    def decode(self, batch: Rendered, generator: torch.Generator) -> list[str]:
        """Greedy continuations of the batch's questions (text up to EOS), capped at the longest true
        answer + DECODE_MARGIN tokens and at the model's context."""
        prompts, mask = self.tokenizer.batch_prompts(batch.questions)
        cap = max(len(a) for a in batch.answers) + 1 + DECODE_MARGIN
        cap = min(cap, self.cfg.model.context - int(mask.sum(1).max()))
        if cap < 1:
            raise RelreasonError(f"a {batch.graphs[0].dataset.algorithm} question fills the model's context "
                                 f"({self.cfg.model.context} tokens)", "raise model.context")
        out = self.model.generate(prompts.to(self.device), mask.to(self.device), cap, generator=generator,
                                  **self._inputs(batch))
        return self.tokenizer.decode_batch(out.cpu())

    def _summary(self, split: str, cells: dict[tuple[int, int], list[TextScore]]) -> dict:
        return summarize_text_scores(split, [(self.algorithms[i], n, s) for (i, n), s in sorted(cells.items())])


class FrozenNar(nn.Module):
    """A trained NAR (Net or MultiNet), frozen: no gradients, always in eval mode. Its submodules are
    registered under their own names, so `nar.<key>` in a TransNAR checkpoint is the NAR's `<key>`."""

    def __init__(self, net: nn.Module):
        super().__init__()
        for name, child in net.named_children():
            self.add_module(name, child)
        self.__dict__["net"] = net  # called through; its modules are registered above, not twice
        for p in self.parameters():
            p.requires_grad_(False)
        self.train(False)

    def train(self, mode: bool = True) -> "FrozenNar":
        return super().train(False)


def concat_batches(batches: list) -> object:
    """Batches of one spec and node count, concatenated; hints zero-padded in time to the longest."""
    from dataclasses import replace

    if len(batches) == 1:
        return batches[0]
    t = max(b.max_length for b in batches)

    def pad_time(x: torch.Tensor) -> torch.Tensor:
        extra = t - x.shape[1]
        return x if extra == 0 else torch.cat([x, x.new_zeros((x.shape[0], extra) + tuple(x.shape[2:]))], 1)

    def cat(name: str, pad=lambda x: x) -> dict[str, torch.Tensor]:
        return {k: torch.cat([pad(getattr(b, name)[k]) for b in batches]) for k in getattr(batches[0], name)}

    return replace(batches[0], inputs=cat("inputs"), hints=cat("hints", pad_time), outputs=cat("outputs"),
                   lengths=torch.cat([b.lengths for b in batches]), node_mask=torch.cat([b.node_mask for b in batches]))


class TransNARWorkload(TextWorkload):
    """TransNAR: the text transformer reading a frozen NAR run on the graph form of the same examples."""

    def _prepare(self) -> None:
        from relreason.config import config_from_dict
        from relreason.models.build import build_nar
        from relreason.train import checkpoint as ckpt

        m = self.cfg.model
        self.nar_built = None
        if not m.use_nar:
            return
        if m.nar_config is None:
            raise RelreasonError("transnar needs a trained NAR: model.nar is not set",
                                 "e.g. --set model.nar=runs/NAME (a triplet_gmpnn run on the same algorithms)")
        nar_cfg = config_from_dict(m.nar_config["config"])
        built = build_nar(nar_cfg, task_entries(nar_cfg.task), self.device)
        by_algorithm = {t.algorithm: t.name for t in built.tasks if t.kind == "clrs"}
        missing = [a for a in self.algorithms if a not in by_algorithm]
        if missing:
            raise RelreasonError(f"the NAR {m.nar} was trained on {nar_cfg.task}, not on {', '.join(missing)} "
                                 f"({len(missing)} of the {len(self.algorithms)} algorithms of {self.cfg.task})",
                                 "one TransNAR reads one NAR for all its algorithms: train it on all of them, e.g. "
                                 "relreason train triplet_gmpnn clrs30 --name nar")
        processor = built.model.processor
        if processor.edge_dim == 0 and not m.nodes_only:
            raise RelreasonError(f"the NAR {m.nar} ({nar_cfg.model_name}) has no edge state to cross-attend to",
                                 "set model.nodes_only=true, or use a NAR with edge embeddings (triplet_gmpnn, rt, et)")
        # The NAR's own checkpoint, when it is still the one recorded (training); evaluation and resuming
        # load the copy under `nar.` in this run's checkpoints over whatever is loaded here.
        source = Path(m.nar_config["checkpoint"])
        if (source / "config.json").is_file() and ckpt.read_checkpoint_meta(source)["config"] == m.nar_config["config"]:
            ckpt.load_weights(source, built.model)
        self.nar_built = built
        self.nar_model_cfg = nar_cfg.model
        self.nar_tasks = by_algorithm
        self.node_dim, self.edge_dim = processor.node_dim, processor.edge_dim

    def _build_model(self) -> nn.Module:
        from relreason.models.text import TextTransformer, TransNAR

        m = self.cfg.model
        if self.nar_built is None:  # use_nar false: the text transformer alone, initialised identically
            return TextTransformer(m.text_config())
        model = TransNAR(m.text_config(), m.cross_config(self.node_dim, max(self.edge_dim, 1)))
        model.add_module("nar", FrozenNar(self.nar_built.model))
        return model

    @torch.no_grad()
    def _inputs(self, batch: Rendered) -> dict:
        if self.nar_built is None:
            return {}
        return self.nar_embeddings(batch)

    @torch.no_grad()
    def nar_embeddings(self, batch: Rendered, pad_to: int | None = None) -> dict:
        """The frozen NAR's final node (B, N, Dn) and edge (B, N, N, De) states on the batch's graph form,
        graphs padded to the largest (or `pad_to`) nodes, and the node mask (B, N)."""
        from relreason.models.batch import Batch

        b = len(batch)
        n = max(max(p.dataset.n for p in batch.graphs), pad_to or 0)
        nodes = torch.zeros(b, n, self.node_dim, device=self.device)
        edges = None if self.cfg.model.nodes_only else torch.zeros(b, n, n, self.edge_dim, device=self.device)
        node_mask = torch.zeros(b, n, dtype=torch.bool, device=self.device)
        for i in sorted({p.task_index for p in batch.graphs}):
            task = self.nar_tasks[self.algorithms[i]]
            spec = self.nar_built.specs[task]
            parts = [p for p in batch.graphs if p.task_index == i]
            graphs = concat_batches([Batch.from_dataset(p.dataset, self.nar_model_cfg, spec, self.device).pad_nodes(n)
                                     for p in parts])
            rows = torch.as_tensor(np.concatenate([p.rows for p in parts]), device=self.device)
            state = self.nar_built.net(task)(graphs, train=False, return_state=True).state
            nodes[rows] = state.node
            node_mask[rows] = graphs.node_mask
            if edges is not None:
                edges[rows] = state.edge
        return {"nodes": nodes, "edges": edges, "node_mask": node_mask}


def build_text_workload(cfg: Config, device: torch.device) -> TextWorkload:
    from relreason.models.text import TransNARModelConfig

    cls = TransNARWorkload if isinstance(cfg.model, TransNARModelConfig) else TextWorkload
    return cls(cfg, device)


WORKLOADS.register("text", build_text_workload)
