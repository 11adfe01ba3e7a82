"""Tasks a model can be trained on, and named groups of them.

Every registered CLRS algorithm is a task of the same name (its data comes from
`relreason.data`). Groups name lists of tasks wherever a task list is accepted (`--tasks core8`):
`core8` (the RT paper's eight core tasks), `clrs30`, and one per algorithm class (`sorting`,
`graphs`, ...). Groups only ever list tasks that are registered.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from relreason.data.algorithms import ALGORITHMS
from relreason.data.specs import ALGORITHM_INFO, CORE8, Spec
from relreason.data.trajectory import Dataset
from relreason.errors import RelreasonError
from relreason.registry import Registry


@dataclass(frozen=True)
class Task:
    name: str
    kind: str  # "clrs" (hints, CLRS metric) or an end-to-end task kind
    spec: Spec
    # load(split, data_config, size, num, seed) -> Dataset from the on-disk cache; split in train|val|test,
    # size/num/seed override the split's (size: nodes, or the backbone length for lobsters)
    load: Callable[..., Dataset]
    # write(split, size, num, seed, out_dir, force) -> Path: `relreason generate`
    write: Callable[..., Path]
    lower_is_better: bool = False  # the task's headline score direction (relative loss: lower)
    metric: str = "clrs"  # "clrs" (relreason.eval.metrics) or "relative_loss" (relreason.eval.relative)
    # config the task needs unlike the CLRS defaults (e.g. lobsters: many processor iterations, no
    # hints to set the step count); applied after the processor's defaults, before any recipe
    defaults: Mapping[str, Mapping[str, object]] = field(default_factory=dict)

    def scorer(self, spec: Spec):
        """A fresh accumulator of this task's metric over the (prepared) spec."""
        if self.metric == "relative_loss":
            from relreason.eval.relative import RelativeLossScorer

            return RelativeLossScorer(spec)
        from relreason.eval.metrics import Scorer

        return Scorer(spec)


TASKS: Registry[Task] = Registry("task", "relreason list tasks")


def _clrs_loader(name: str) -> Callable[..., Dataset]:
    def load(split: str, data, size: int | None = None, num: int | None = None, seed: int | None = None) -> Dataset:
        from relreason.data.generate import cached_split

        default_size = {"train": data.train_size, "val": data.val_size, "test": data.test_size}[split]
        default_num = data.train_num if split == "train" else None
        return cached_split(name, split, data.data_dir, size=size or default_size, num=num or default_num,
                            seed=seed)

    return load


def _clrs_writer(name: str) -> Callable[..., Path]:
    from relreason.data.generate import write_split

    return functools.partial(write_split, name)


for _name in ALGORITHMS.names():
    TASKS.register(_name, Task(_name, "clrs", ALGORITHM_INFO[_name].spec, _clrs_loader(_name), _clrs_writer(_name)))


def _lobster_task(name: str, weighted: bool) -> Task:
    from relreason.data.generate import dataset_path
    from relreason.data.lobster import LOBSTER_SPEC, SPLITS, lobster_split
    from relreason.data.specs import spec_hash
    from relreason.data.store import load_dataset, read_meta, save_dataset

    def write(split, size=None, num=None, seed=None, out_dir="data", force=False, on_chunk=None) -> Path:
        ds = lobster_split(name, weighted, split, size, num, seed)
        path = dataset_path(out_dir, name, ds.meta["split"])
        if path.exists() and not force:
            raise RelreasonError(f"{path} already exists", "pass --force to overwrite it")
        save_dataset(path, ds)
        if on_chunk is not None:
            on_chunk(len(ds))
        return path

    def load(split, data, size=None, num=None, seed=None) -> Dataset:
        default_seed, default_num = SPLITS[split]
        num = num or (data.train_num if split == "train" else default_num)
        seed = default_seed if seed is None else seed
        path = dataset_path(data.data_dir, name, f"{split}_b{size or 'default'}_s{seed}_k{num}")
        if path.exists() and read_meta(path).get("spec_hash") == spec_hash(LOBSTER_SPEC):
            return load_dataset(path)
        ds = lobster_split(name, weighted, split, size, num, seed)
        save_dataset(path, ds)
        return ds

    defaults = {
        "data": {"train_num": 2000},  # lobster training graphs (backbones 4..33)
        # no hints: one algorithm step of 10 processor iterations; trained on the metric itself
        "model": {"processor_steps": 10, "scalar_loss": "relative"},
    }
    return Task(name, "lobster", LOBSTER_SPEC, load, write, lower_is_better=True, metric="relative_loss",
                defaults=defaults)


TASKS.register("lobster", _lobster_task("lobster", weighted=False))
TASKS.register("lobster_weighted", _lobster_task("lobster_weighted", weighted=True))


def task_groups() -> dict[str, list[str]]:
    """Named groups of registered tasks."""
    groups = {"core8": [t for t in CORE8 if t in TASKS], "clrs30": [t for t in ALGORITHM_INFO if t in TASKS]}
    for name in ALGORITHM_INFO:
        if name in TASKS:
            groups.setdefault(ALGORITHM_INFO[name].klass, []).append(name)
    return groups


def expand_tasks(text: str) -> list[str]:
    """`"core8,bfs"` -> the task names, groups expanded, duplicates dropped, order kept."""
    groups = task_groups()
    names: list[str] = []
    for item in (x.strip() for x in text.split(",")):
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
