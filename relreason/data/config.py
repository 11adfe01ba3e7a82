"""The `data:` section of a run's configuration, one dataclass per task kind.

A task kind names its section (`relreason.tasks.Task.data_config`): CLRS-30 graph algorithms
(`ClrsDataConfig`), lobster graphs (`LobsterDataConfig`) and CLRS-Text (`TextDataConfig`). They stand
in the data layer, beside what they configure, so that tasks and the run configuration
(`relreason.config`, which resolves and validates them with the other sections) both read them from
below. Each default carries its reason; `unused()` names keys that do not apply (hidden by
`--print-config`), `problems()` the range errors that types alone cannot express.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from relreason.data.families import parse_graph
from relreason.data.generate import graph_algorithms, v1_algorithms
from relreason.data.text import TEXT_PRESETS
from relreason.errors import RelreasonError


class DataStream(str, enum.Enum):
    """Where training batches come from."""

    CANONICAL = "canonical"  # random batches of the fixed train split (CLRS-30, the RT paper)
    IBARZ = "ibarz"  # fresh samples every batch, sizes 4..16, random edge densities (Ibarz et al. 2022)


class DataOrder(str, enum.Enum):
    """Which training examples a step takes, and what sets them (a protocol setting: the papers' reference
    code differs here, and the order is part of a seed's spread)."""

    SEEDED = "seeded"  # drawn with replacement from the split (or the ibarz stream), from the run's seed
    FIXED = "fixed"  # as `seeded`, from a stream the run's seed does not change: the seed sets only init and noise
    SEQUENTIAL = "sequential"  # the split in order, repeated, batches running across its end (tfds repeat().batch())


class ValidationDraw(str, enum.Enum):
    """How each validation reads the validation set."""

    FIXED = "fixed"  # every validation scores every sample once, with the same random positions
    RESAMPLED = "resampled"  # each draws as many samples as the set holds, with replacement, and new positions


SPLITS = ("train", "val", "test")


def _split_list_problem(key: str, splits: list[str], may_be_empty: bool) -> str | None:
    """What is wrong with `data.<key>`, a list of splits (None: nothing)."""
    if (not splits and not may_be_empty) or any(s not in SPLITS for s in splits) or len(set(splits)) < len(splits):
        return f"data.{key} must be distinct splits of {', '.join(SPLITS)}, got {list(splits)}"
    return None


@dataclass
class ClrsDataConfig:
    """Data of the CLRS-30 graph algorithms (and of several of them at once)."""

    train_size: int = 16  # CLRS-30 trains on n = 16
    train_num: int = 1000  # CLRS-30 canonical train split (the RT paper's run.py: 10,000)
    val_size: int = 16  # validation is in-distribution, as in the benchmark
    test_size: int = 64  # the OOD test size of CLRS-30
    val_num: int | None = None  # validation samples; null: the benchmark's 32 x per-algorithm multiplier
    test_num: int | None = None  # test samples; null: the benchmark's 32 x per-algorithm multiplier
    stream: DataStream = DataStream.CANONICAL  # canonical split, or the Ibarz et al. fresh-sample stream
    stream_sizes: tuple[int, ...] = (4, 7, 11, 13, 16)  # ibarz stream: training sizes (run.py train_lengths)
    order: DataOrder = DataOrder.SEEDED  # which examples a step takes; the paper recipes set their reference's
    validation: ValidationDraw = ValidationDraw.FIXED  # resampled: clrs run.py's validation (a new draw each time)
    data_dir: str = "data"  # canonical splits are generated once and cached here
    graph: str | None = None  # graph family of the graph_splits, e.g. ws:k=4,p=0.1 (relreason.data.families); null: the benchmark's
    graph_splits: tuple[str, ...] = ("test",)  # splits drawn from `graph`: the OOD test, as SALSA-CLRS (which trains and validates on ER)
    # the string matchers' splits drawn by CLRS v1.0.0's sampler (a needle of n // 4 on top of a haystack of n:
    # 20 nodes at n = 16, 80 at n = 64), as in the CLRS30 v1.0.0 dataset the CLRS-30 and Ibarz et al. papers ran on
    matcher_v1_splits: tuple[str, ...] = ()

    def unused(self) -> set[str]:
        """Keys that do not apply to this configuration (hidden by --print-config)."""
        out = {"train_size", "train_num"} if self.stream is DataStream.IBARZ else {"stream_sizes"}
        return out | ({"graph_splits"} if self.graph is None else set())

    def problems(self) -> list[str]:
        out = [f"data.{k} must be at least 2 nodes, got {getattr(self, k)}"
               for k in ("train_size", "val_size", "test_size") if getattr(self, k) < 2]
        out += [f"data.{k} must be positive, got {getattr(self, k)}"
                for k in ("train_num", "val_num", "test_num") if getattr(self, k) is not None and getattr(self, k) <= 0]
        if self.order is DataOrder.SEQUENTIAL and self.stream is DataStream.IBARZ:
            out.append("data.order sequential walks the fixed train split, and the ibarz stream has none: "
                       "use data.order seeded or fixed with it")
        if not self.stream_sizes or any(s < 2 for s in self.stream_sizes):
            out.append(f"data.stream_sizes must be a non-empty list of sizes >= 2, got {list(self.stream_sizes)}")
        return out + self._graph_problems() + self._matcher_problems()

    def _matcher_problems(self) -> list[str]:
        v1 = self.matcher_v1_splits
        if problem := _split_list_problem("matcher_v1_splits", v1, may_be_empty=True):
            return [problem]
        if self.stream is DataStream.IBARZ and {"train", "val"} & set(v1):
            return [f"data.matcher_v1_splits {list(v1)}: the ibarz stream draws its training and validation "
                    f"strings itself; with it, CLRS v1.0.0's sampler applies to the test split only"]
        return []

    def matcher_v1(self, split: str, algorithm: str) -> bool:
        """Whether `algorithm`'s `split` is drawn by CLRS v1.0.0's sampler (string matchers only)."""
        return split in self.matcher_v1_splits and algorithm in v1_algorithms()

    def _graph_problems(self) -> list[str]:
        if problem := _split_list_problem("graph_splits", self.graph_splits, may_be_empty=False):
            return [problem]
        if self.graph is None:
            return []
        try:
            spec = parse_graph(self.graph)
        except RelreasonError as e:
            return [f"data.graph: {e}"]
        if spec is None:
            return []
        if self.stream is DataStream.IBARZ and {"train", "val"} & set(self.graph_splits):
            return [f"data.graph_splits {list(self.graph_splits)}: the ibarz stream draws its training and "
                    f"validation graphs itself; with it, a graph family applies to the test split only"]
        sizes = {"train": self.train_size, "val": self.val_size, "test": self.test_size}
        return [f"data.graph {spec} needs at least {spec.min_size()} nodes, data.{s}_size is {sizes[s]}"
                for s in self.graph_splits if sizes[s] < spec.min_size()]

    def graph_of(self, split: str) -> str | None:
        """The graph family `split` is drawn from (None: the benchmark's sampler)."""
        return self.graph if split in self.graph_splits else None

    def task_problems(self, tasks: list[str]) -> list[str]:
        """What is wrong with these settings for these tasks: a graph family given to non-graph algorithms,
        CLRS v1.0.0's string matcher sampler to tasks among which no string matcher is."""
        out = []
        if self.matcher_v1_splits and not set(tasks) & set(v1_algorithms()):
            out.append(f"data.matcher_v1_splits applies to the string matchers ({', '.join(v1_algorithms())}); "
                       f"{', '.join(tasks)} {'is' if len(tasks) == 1 else 'are'} none of them")
        try:
            if self.graph is None or parse_graph(self.graph) is None:
                return out
        except RelreasonError:
            return out  # reported by problems()
        others = [t for t in tasks if t not in graph_algorithms()]
        return out + ([f"data.graph applies to graph algorithms; {', '.join(others)} draw no graph"] if others else [])


@dataclass
class LobsterDataConfig:
    """Data of the lobster shortest-path benchmark (train/validation backbones 4..33, as the RT paper)."""

    train_num: int = 2000  # training lobsters
    val_num: int = 200  # validation lobsters (backbones 4..33, in distribution)
    test_num: int = 200  # OOD test lobsters
    test_backbone: int = 100  # the RT paper's OOD backbone length (about 124 nodes with the leaves)
    data_dir: str = "data"  # splits are generated once and cached here

    def unused(self) -> set[str]:
        return set()

    def problems(self) -> list[str]:
        out = [f"data.{k} must be positive, got {getattr(self, k)}"
               for k in ("train_num", "val_num", "test_num") if getattr(self, k) <= 0]
        if self.test_backbone < 2:
            out.append(f"data.test_backbone must be at least 2, got {self.test_backbone}")
        return out


@dataclass
class TextDataConfig:
    """Data of CLRS-Text tasks (relreason.data.text): question/answer text and, for TransNAR, its graph form.

    Examples are drawn from the reference's text streams in memory (drawing is cheap; each batch is run
    and rendered when used, text and graph form from the same arrays), so nothing is cached on disk.
    Counts are per (algorithm, size): a preset split's pieces of one size, in order, cut to the count."""

    preset: str = "paper"  # named splits: paper = TransNAR's (train sizes 4..8 and 12, 70/30 train/val)
    hints: bool = False  # answers carry the hint trace (CLRS-Text `trace | ...`)
    train_num: int | None = None  # training examples per (algorithm, size); null: the preset's (7,000 in `paper`)
    val_num: int | None = 64  # validation examples per (algorithm, size): greedy decoding of each is the cost; null: all
    test_num: int | None = None  # test examples per (algorithm, size); null: 5 seeds x 125 = 625 (the reference's)
    test_sizes: tuple[int, ...] = (10, 12, 14)  # TransNAR: interpolation, in distribution, extrapolation

    def unused(self) -> set[str]:
        return set()

    def problems(self) -> list[str]:
        out = []
        if self.preset not in TEXT_PRESETS:
            out.append(f"data.preset {self.preset!r} is not a text preset ({', '.join(TEXT_PRESETS.names())})")
        out += [f"data.{k} must be positive or null, got {getattr(self, k)}"
                for k in ("train_num", "val_num", "test_num") if getattr(self, k) is not None and getattr(self, k) <= 0]
        if not self.test_sizes or any(n < 1 for n in self.test_sizes) or len(set(self.test_sizes)) < len(self.test_sizes):
            out.append(f"data.test_sizes must be a non-empty list of distinct sizes >= 1, got {list(self.test_sizes)}")
        return out
