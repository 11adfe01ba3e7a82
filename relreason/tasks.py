"""Tasks a model can be trained on, their kinds, and named groups of them.

Every registered CLRS algorithm is a task of the same name (kind `clrs`, data from `relreason.data`),
and one with a text form is also a text task `text:ALG` (kind `text`, CLRS-Text); `lobster` and
`lobster_weighted` are end-to-end tasks (kind `lobster`). A task kind decides the `data:` config
section, the metric and the model family that can train on it. The algorithms' tasks follow the
algorithm registry live: an algorithm registered later (a plugin's) is a task at the next lookup.

Groups name lists of tasks wherever a task list is accepted (`--tasks core8`, `train mpnn core8`): the
algorithms' groups (`relreason.data.algorithms.algorithm_groups`: `core8`, the RT paper's eight core
tasks, and any group an algorithm names; `clrs30`, the benchmark; one per algorithm class, `sorting`,
`graphs`, ...), and the same with a `text:` prefix for text tasks (`text:core8`). Groups only ever
list registered tasks. A task string that names several tasks (a group or `bfs,dfs`) trains one
multi-task model; all its tasks must be of one kind.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

from relreason.data.algorithms import ALGORITHMS, algorithm_groups
from relreason.data.config import ClrsDataConfig, LobsterDataConfig, TextDataConfig
from relreason.data.generate import cached_split, dataset_path, write_split
from relreason.data.lobster import LOBSTER_SPEC, SPLITS, lobster_split
from relreason.data.specs import Spec, Type, spec_hash
from relreason.data.store import load_dataset, read_meta, save_dataset, write_dataset
from relreason.data.text import (
    REFERENCE_VAL_EXAMPLES,
    REFERENCE_VAL_SEEDS,
    TextPiece,
    check_stream,
    resolve_text_split,
    text_batch,
    text_split,
    write_text_split,
)
from relreason.data.trajectory import Dataset
from relreason.errors import RelreasonError
from relreason.runtime import terminate_as_interrupt
from relreason.eval.metric_kinds import METRICS
from relreason.registry import Registry


@dataclass(frozen=True)
class Task:
    name: str
    kind: str  # "clrs" (hints, CLRS metric), "lobster" (end-to-end, relative loss) or "text"
    spec: Spec | None  # the graph spec (None for text tasks)
    # load(split, data_config, size=None, num=None, seed=None) -> Dataset from the on-disk cache; split in
    # train|val|test; size/num/seed override the split's (size: nodes, or the backbone length for lobsters)
    load: Callable[..., Dataset]
    # write(split, size, num, seed, out_dir, force, on_chunk) -> Path: `relreason generate`
    write: Callable[..., Path]
    data_config: type = ClrsDataConfig  # the `data:` section of this task kind
    lower_is_better: bool = False  # the task's headline score direction (relative loss: lower)
    metric: str = "clrs"  # "clrs" / "clrs_mse" (relreason.eval.metrics), "relative_loss" (relreason.eval.relative), "text_clrs"
    # config the task needs unlike the CLRS defaults (e.g. lobsters: many processor iterations, no
    # hints to set the step count); applied after the model's defaults, before any recipe
    defaults: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    algorithm: str | None = None  # the CLRS algorithm behind a clrs or text task

    def scorer(self, spec: Spec):
        """A fresh accumulator of this task's metric over the (prepared) spec."""
        if self.metric == "relative_loss":
            from relreason.eval.relative import RelativeLossScorer  # CLI start-up: the metric's module loads torch

            return RelativeLossScorer(spec)
        from relreason.eval.metrics import Scorer  # CLI start-up: the metric's module loads torch

        return Scorer(spec, self.metric)


class TaskRegistry(Registry[Task]):
    """The task registry: the tasks registered here, plus a clrs task (and, with a text form, a text task)
    for every registered algorithm, added whenever the registry is read, so that an algorithm registered
    after this module was imported (a plugin's) is a task too. Tasks are never removed."""

    def _sync(self) -> None:
        for name in ALGORITHMS.names():
            if not super().__contains__(name):
                super().register(name, _clrs_task(name))
            elif super().get(name).algorithm != name:
                raise RelreasonError(f"algorithm {name!r} has the name of a task of another kind",
                                     f"register the algorithm under another name (see `{self.list_command}`)")
            if ALGORITHMS.get(name).text is not None and not super().__contains__(TEXT_PREFIX + name):
                super().register(TEXT_PREFIX + name, _text_task(name))

    def get(self, name: str) -> Task:
        self._sync()
        return super().get(name)

    def suggest(self, name: str) -> str:
        self._sync()
        return super().suggest(name)

    def names(self) -> list[str]:
        self._sync()
        return super().names()

    def items(self) -> list[tuple[str, Task]]:
        self._sync()
        return super().items()

    def __contains__(self, name: object) -> bool:
        self._sync()
        return super().__contains__(name)

    def __iter__(self) -> Iterator[str]:
        self._sync()
        return super().__iter__()

    def __len__(self) -> int:
        self._sync()
        return super().__len__()


TASKS: Registry[Task] = TaskRegistry("task", "relreason list tasks")

METRIC_LABELS = {  # how a score is named beside its number
    "clrs": "CLRS score (mean of output accuracies / F1), higher is better",
    "clrs_mse": "mean squared error of the scalar outputs, lower is better",
    "relative_loss": "relative loss |y - ŷ| / |y|, lower is better",
    "text_clrs": "CLRS-Text score (fraction of output elements right), higher is better",
}


def feature_measure(task: str | None, feature: str | None = None) -> str:
    """How a score of `task`, as stored, is measured and which way is better: of one feature ("MSE ↓" for a
    scalar, "F1 ↑" for a mask, "accuracy ↑" otherwise: fractions, squared errors) or, with no feature, of the
    task's headline score ("acc/F1 ↑", a fraction); "" when the task is not registered here (a plugin's that
    is not installed)."""
    if task is None or task not in TASKS:
        return ""
    t = TASKS.get(task)
    if feature is None or t.metric == "relative_loss":
        return METRICS.get(t.metric).score_short if t.metric in METRICS else ""
    f = t.spec.get(feature) if t.spec is not None else None
    if f is None:
        return ""
    return {Type.SCALAR: "MSE ↓", Type.MASK: "F1 ↑"}.get(f.type, "accuracy ↑")


def _pick(value, default):
    """`value` unless it is None (0 and other falsy values are kept: they are the user's)."""
    return default if value is None else value


def _clrs_loader(name: str) -> Callable[..., Dataset]:
    def load(split: str, data: ClrsDataConfig, size: int | None = None, num: int | None = None,
             seed: int | None = None) -> Dataset:
        default_size = {"train": data.train_size, "val": data.val_size, "test": data.test_size}[split]
        default_num = {"train": data.train_num, "val": data.val_num, "test": data.test_num}[split]
        return cached_split(name, split, data.data_dir, size=_pick(size, default_size), num=_pick(num, default_num),
                            seed=seed, graph=data.graph_of(split), v1=data.matcher_v1(split, name))

    return load


def _clrs_writer(name: str) -> Callable[..., Path]:
    return functools.partial(write_split, name)


def _clrs_task(name: str) -> Task:
    """A CLRS algorithm as a task: its canonical splits, hints and the CLRS metric."""
    entry = ALGORITHMS.get(name)
    return Task(name, "clrs", entry.spec, _clrs_loader(name), _clrs_writer(name), algorithm=name,
                metric=entry.metric, lower_is_better=entry.metric == "clrs_mse")


# Listed in this order: the algorithms, the lobsters, then the text tasks (which the first read adds).
for _name in ALGORITHMS.names():
    TASKS.register(_name, _clrs_task(_name))


def _lobster_task(name: str, weighted: bool) -> Task:
    def write(split, size=None, num=None, seed=None, out_dir="data", force=False, on_chunk=None) -> Path:
        ds = lobster_split(name, weighted, split, size, num, seed)
        path = dataset_path(out_dir, name, ds.meta["split"])
        if path.exists() and not force:
            raise RelreasonError(f"{path} already exists", "pass --force to overwrite it")

        def chunks(step: int = 64):  # written chunk by chunk, so that a progress bar moves
            for start in range(0, len(ds), step):
                yield ds.take(slice(start, start + step))
                if on_chunk is not None:
                    on_chunk(min(step, len(ds) - start))

        with terminate_as_interrupt():
            write_dataset(path, chunks(), ds.meta)
        return path

    def load(split, data: LobsterDataConfig, size=None, num=None, seed=None) -> Dataset:
        default_seed, _ = SPLITS[split]
        num = _pick(num, {"train": data.train_num, "val": data.val_num, "test": data.test_num}[split])
        size = _pick(size, data.test_backbone if split == "test" else None)
        seed = _pick(seed, default_seed)
        path = dataset_path(data.data_dir, name, f"{split}_b{_pick(size, 'default')}_s{seed}_k{num}")
        if path.exists() and read_meta(path).get("spec_hash") == spec_hash(LOBSTER_SPEC):
            return load_dataset(path)
        ds = lobster_split(name, weighted, split, size, num, seed)
        save_dataset(path, ds)
        return ds

    defaults = {
        # no hints: one algorithm step of 10 processor iterations; trained on the metric itself
        "model": {"processor_steps": 10, "scalar_loss": "relative", "hint_mode": "none"},
    }
    return Task(name, "lobster", LOBSTER_SPEC, load, write, data_config=LobsterDataConfig, lower_is_better=True,
                metric="relative_loss", defaults=defaults)


TASKS.register("lobster", _lobster_task("lobster", weighted=False))
TASKS.register("lobster_weighted", _lobster_task("lobster_weighted", weighted=True))


TEXT_PREFIX = "text:"


def text_pieces(algorithm: str, split: str, data: TextDataConfig, sizes=None, num: int | None = None,
                seed: int | None = None) -> tuple:
    """The pieces (length, seed, num, skip) of a text task's split under `data`, validated.

    train / val: the preset's split, cut to the first `num` (default `data.train_num` / `data.val_num`)
    examples of each size. test: at `sizes` (default `data.test_sizes`), the reference generator's
    evaluation streams (seeds 3, 14, 35, 81, 94, 125 examples each: the `paper` preset's test split at
    10/12/14) cut to `num` (default `data.test_num`) per size; with `seed`, that seed's stream alone."""
    if split in ("train", "val"):
        if sizes is not None or seed is not None:
            raise RelreasonError(f"sizes and seeds of a text task's {split} split come from its preset",
                                 "choose other sizes or seeds for the test split only")
        pieces = text_split(data.preset, split, algorithm)
        num = _pick(num, data.train_num if split == "train" else data.val_num)
    elif split == "test":
        sizes = tuple(data.test_sizes if sizes is None else sizes)
        num = _pick(num, data.test_num)
        if seed is not None:
            per = num if num is not None else len(REFERENCE_VAL_SEEDS) * REFERENCE_VAL_EXAMPLES
            pieces = tuple(TextPiece(n, seed, per) for n in sizes)
        else:
            pieces = tuple(TextPiece(n, s, REFERENCE_VAL_EXAMPLES) for n in sizes for s in REFERENCE_VAL_SEEDS)
    else:
        raise RelreasonError(f"unknown split {split!r}", "use train, val or test")
    if num is not None:
        left: dict[int, int] = {}
        cut = []
        for p in pieces:
            k = min(p.num, left.setdefault(p.length, num))
            if k > 0:
                cut.append(TextPiece(p.length, p.seed, k, p.skip))
                left[p.length] -= k
        pieces = tuple(cut)
    for p in pieces:
        check_stream(algorithm, p.length, p.seed, p.num, skip=p.skip)
    return pieces


def _text_task(algorithm: str) -> Task:
    """CLRS-Text: the algorithm's problems as question/answer text (relreason.data.text). `load` gives a
    split as TextBatches (text and graph form, one per piece of `text_pieces`), generated in memory."""

    def load(split: str, data: TextDataConfig, size=None, num=None, seed=None):
        pieces = text_pieces(algorithm, split, data, None if size is None else [size], num, seed)
        return [text_batch(algorithm, p.length, p.seed, p.num, data.hints, skip=p.skip) for p in pieces]

    def write(split, size=None, num=None, seed=None, out_dir="data", force=False, on_chunk=None) -> Path:
        request = resolve_text_split(algorithm, split=split, sizes=None if size is None else [size], num=num, seed=seed)
        return write_text_split(request, out_dir, force, on_chunk)

    return Task(TEXT_PREFIX + algorithm, "text", None, load, write, data_config=TextDataConfig, metric="text_clrs",
                algorithm=algorithm)


def task_groups() -> dict[str, list[str]]:
    """Named groups of registered tasks (text groups carry the `text:` prefix), computed now from the
    algorithms' groups (relreason.data.algorithms.algorithm_groups)."""
    groups = {g: [t for t in members if t in TASKS] for g, members in algorithm_groups().items()}
    text = {TEXT_PREFIX + g: [TEXT_PREFIX + t for t in members if TEXT_PREFIX + t in TASKS]
            for g, members in groups.items()}
    return {**{g: m for g, m in groups.items() if m}, **{g: m for g, m in text.items() if m}}


def expand_tasks(text: str) -> list[str]:
    """`"core8,bfs"` -> the task names, groups expanded, duplicates dropped, order kept."""
    groups = task_groups()
    names: list[str] = []
    for item in (x.strip() for x in str(text).split(",")):
        if not item:
            continue
        if item in groups:
            names.extend(groups[item])
        else:
            TASKS.get(item)
            names.append(item)
    if not names:
        raise RelreasonError(f"no tasks in {text!r}", "give task names or groups: " + ", ".join(groups))
    return list(dict.fromkeys(names))


def task_entries(text: str) -> list[Task]:
    """The Task of every name in a task string; all of one kind."""
    entries = [TASKS.get(n) for n in expand_tasks(text)]
    kinds = {t.kind for t in entries}
    if len(kinds) > 1:
        raise RelreasonError(f"tasks {text!r} mix kinds ({', '.join(sorted(kinds))})",
                             "train tasks of one kind together (graph algorithms, lobsters or text)")
    if len(entries) > 1 and entries[0].kind == "lobster":
        raise RelreasonError(f"{text!r}: lobster tasks train one at a time", "give a single lobster task")
    return entries


def task_kind(text: str) -> str:
    return task_entries(text)[0].kind


def task_defaults(text: str) -> dict:
    """The config defaults of a task string (a multi-task string takes its kind's common defaults)."""
    entries = task_entries(text)
    return {k: dict(v) for k, v in entries[0].defaults.items()} if len(entries) == 1 else {}


def data_config_class(text: str) -> type:
    return task_entries(text)[0].data_config
