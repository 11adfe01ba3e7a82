"""A CLRS-Text split on disk: what it is made from (`TextSplitRequest`, `resolve_text_split`), its JSONL
file (`write_text_split`, `load_text_split`) and the id of each line (`ExampleId`).

    request = resolve_text_split("insertion_sort", "train", "paper")
    write_text_split(request, "data")   # data/text/insertion_sort/paper_train.jsonl (+ .meta.json)

Lines are {"id", "question", "answer", "algorithm", "length"}, written to `DIR/text/ALG/<preset>_<split>[_hints].jsonl`
(custom splits: `custom_n<sizes>_s<seed>_k<num>[_hints].jsonl`) with what the split was made from in the
`.meta.json` beside it; `split_batches` gives the same examples with their graph form. An example's id
names its place in its stream, whatever split holds it ("insertion_sort/n12/s3/i17", "/hints" added for
the hint text), so an answer given by id can be scored without the file it came from (`relreason score`,
relreason.eval.text_score).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from relreason import __version__
from relreason.data.algorithms import ALGORITHMS
from relreason.data.store import atomic_path
from relreason.data.text.presets import DEFAULT_PRESET, TextPiece, text_split
from relreason.data.text.streams import CHUNK, DECIMALS, TextBatch, check_stream, text_batches
from relreason.errors import RelreasonError, write_error
from relreason.files import jsonl_lines, parse_json, read_json_object


def parse_sizes(text: str) -> tuple[int, ...]:
    """`"4-8,12"` -> (4, 5, 6, 7, 8, 12): comma-separated sizes and inclusive ranges, kept in order."""
    sizes: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if m is None:
            raise RelreasonError(f"bad --sizes {text!r}: {part.strip()!r} is not a size or a range",
                                 "write sizes like 12 or 4-8,12")
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else int(m.group(2))
        if lo < 1 or hi < lo:
            raise RelreasonError(f"bad --sizes {text!r}: {part.strip()!r} is empty or not positive",
                                 "write sizes like 12 or 4-8,12 (ranges low-high, sizes >= 1)")
        sizes.extend(range(lo, hi + 1))
    if len(set(sizes)) != len(sizes):
        raise RelreasonError(f"bad --sizes {text!r}: a size is listed twice", "list each size once")
    return tuple(sizes)


def _sizes_label(sizes: Sequence[int]) -> str:
    """(4, 5, 6, 7, 8, 12) -> "4-8+12" (file names)."""
    runs: list[list[int]] = []
    for s in sizes:
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return "+".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


@dataclass(frozen=True)
class TextSplitRequest:
    """What to write: an algorithm's pieces under a split name (preset split or custom)."""

    algorithm: str
    name: str  # e.g. "paper_train" or "custom_n4-8+12_s0_k100"
    pieces: tuple[TextPiece, ...]
    hints: bool
    preset: str | None = None
    split: str | None = None
    decimals: int | None = DECIMALS

    @property
    def num(self) -> int:
        return sum(p.num for p in self.pieces)

    def meta(self) -> dict:
        return {"algorithm": self.algorithm, "name": self.name, "preset": self.preset, "split": self.split,
                "hints": self.hints, "decimals": self.decimals, "num": self.num,
                "pieces": [[p.length, p.seed, p.num, p.skip] for p in self.pieces],
                "format": 2,  # 2: every line carries its example id (1: none), so older caches regenerate
                "relreason": __version__}


def resolve_text_split(algorithm: str, split: str | None = None, preset: str | None = None,
                       sizes: str | Sequence[int] | None = None, num: int | None = None, seed: int | None = None,
                       hints: bool = False) -> TextSplitRequest:
    """A text generation request, validated: a preset split (`split`, default "train" of the default preset)
    or a custom one (all of `sizes`, `num`, `seed`: the first `num` examples of each size's stream)."""
    alg = ALGORITHMS.get(algorithm)
    custom = [k for k, v in (("--sizes", sizes), ("--num", num), ("--seed", seed)) if v is not None]
    if custom and (split is not None or preset is not None):
        raise RelreasonError(f"{'/'.join(custom)} (a custom text split) cannot be combined with --split/--preset",
                             "pass either --split (and --preset) or --sizes, --num and --seed")
    if custom:
        missing = [k for k, v in (("--sizes", sizes), ("--num", num), ("--seed", seed)) if v is None]
        if missing:
            raise RelreasonError(f"a custom text split needs --sizes, --num and --seed (missing: {', '.join(missing)})",
                                 "or name a preset split: --split train|val|test")
        size_list = parse_sizes(sizes) if isinstance(sizes, str) else tuple(sizes)
        for n in size_list:
            check_stream(algorithm, n, seed, num)
        pieces = tuple(TextPiece(n, seed, num) for n in size_list)
        return TextSplitRequest(alg.name, f"custom_n{_sizes_label(size_list)}_s{seed}_k{num}", pieces, hints)
    preset = DEFAULT_PRESET if preset is None else preset
    split = "train" if split is None else split
    pieces = text_split(preset, split, algorithm)
    return TextSplitRequest(alg.name, f"{preset}_{split}", pieces, hints, preset, split)


def text_path(out_dir, algorithm: str, name: str, hints: bool) -> Path:
    """Where a text split lives: `out_dir/text/ALGORITHM/<name>[_hints].jsonl`, its metadata beside it in
    `<name>[_hints].meta.json` (what it was made from: pieces, hints, decimals, version)."""
    return Path(out_dir) / "text" / algorithm / f"{name}{'_hints' if hints else ''}.jsonl"


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name[: -len(".jsonl")] + ".meta.json")


@dataclass(frozen=True)
class ExampleId:
    """Where an example sits: example `index` (0-based) of the stream (algorithm, length, seed), rendered
    with or without hints, floats truncated to `decimals`. Its text, `algorithm/n<length>/s<seed>/i<index>`,
    then "/hints" with hints and "/d<decimals>" (or "/dfull") when the truncation is not DECIMALS, e.g.
    "insertion_sort/n12/s3/i17" or "bfs/n4/s0/i7000/hints". The index counts from the stream's start, so
    an example has one id in every split that holds it (the `paper` preset's val examples of size 4 are
    i7000 .. i9999 of the seed-0 stream)."""

    algorithm: str
    length: int
    seed: int
    index: int
    hints: bool = False
    decimals: int | None = DECIMALS

    def __str__(self) -> str:
        tail = ("/hints" if self.hints else "") + ("" if self.decimals == DECIMALS else
                                                   f"/d{'full' if self.decimals is None else self.decimals}")
        return f"{self.algorithm}/n{self.length}/s{self.seed}/i{self.index}{tail}"

    @staticmethod
    def parse(text: str) -> "ExampleId":
        """The id written as `text` (a one-line error when it is not one; the algorithm is not checked)."""
        m = _ID.fullmatch(text)
        if m is None:
            raise RelreasonError(f"{text!r} is not an example id",
                                 "ids read ALGORITHM/nLENGTH/sSEED/iINDEX[/hints], e.g. insertion_sort/n12/s3/i17")
        d = m.group("d")
        return ExampleId(m.group("algorithm"), int(m.group("n")), int(m.group("s")), int(m.group("i")),
                         m.group("hints") is not None, DECIMALS if d is None else None if d == "full" else int(d))


# numbers of at most 18 digits: Python's int() refuses 4,300 with a ValueError, and no stream is that long
_ID = re.compile(r"(?P<algorithm>[^/\s]+)/n(?P<n>\d{1,18})/s(?P<s>\d{1,18})/i(?P<i>\d{1,18})(?P<hints>/hints)?"
                 r"(?:/d(?P<d>\d{1,18}|full))?")


def split_ids(request: TextSplitRequest) -> Iterator[ExampleId]:
    """The ids of a split's examples, in the order `split_batches` gives them."""
    for p in request.pieces:
        for k in range(p.skip, p.skip + p.num):
            yield ExampleId(request.algorithm, p.length, p.seed, k, request.hints, request.decimals)


def split_batches(request: TextSplitRequest, chunk: int = CHUNK) -> Iterator[TextBatch]:
    """Every piece of a split, in order, as TextBatches (texts plus graph form)."""
    for p in request.pieces:
        yield from text_batches(request.algorithm, p.length, p.seed, p.num, hints=request.hints,
                                decimals=request.decimals, skip=p.skip, chunk=chunk)


def write_text_split(request: TextSplitRequest, out_dir, force: bool = False,
                     on_examples: Callable[[int], None] | None = None) -> Path:
    """Writes a split as JSONL lines {"id", "question", "answer", "algorithm", "length"} (`ExampleId`),
    streamed and atomic (the file and its metadata appear only when complete). `on_examples(k)` after each
    batch (progress)."""
    path = text_path(out_dir, request.algorithm, request.name, request.hints)
    if path.exists() and not force:
        raise RelreasonError(f"{path} already exists", "pass --force to overwrite it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = split_ids(request)
        with atomic_path(path) as tmp, open(tmp, "w", encoding="ascii") as f:
            for batch in split_batches(request):
                f.writelines(json.dumps({"id": str(next(ids)), "question": q, "answer": a,
                                         "algorithm": batch.algorithm, "length": batch.length}) + "\n"
                             for q, a in zip(batch.questions, batch.answers))
                if on_examples is not None:
                    on_examples(len(batch))
        with atomic_path(_meta_path(path)) as tmp:
            tmp.write_text(json.dumps(request.meta(), indent=1) + "\n")
    except PermissionError as e:
        raise RelreasonError(f"cannot write {path}: {e.strerror}", "choose a writable --out directory") from None
    except OSError as e:  # a full disk, a read-only file system: the file named, nothing half-written left
        raise write_error(path, e) from None
    return path


@dataclass
class TextSplit:
    """A text split read back: parallel lists of questions and answers, and each example's size."""

    algorithm: str
    questions: list[str]
    answers: list[str]
    lengths: np.ndarray  # [K] int64
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.questions)


def load_text_split(path) -> TextSplit:
    """Reads a JSONL split written by `write_text_split` through relreason.files' guarded readers (a regular
    file, bounded lines, bounded JSON): one-line errors name the bad line."""
    path = Path(path)
    if not os.path.lexists(path):
        raise RelreasonError(f"text split {path} does not exist", "make one with `relreason generate ALG --text`")
    hint = "regenerate the file with --force"
    questions, answers, lengths, algorithms = [], [], [], set()
    for i, line in jsonl_lines(path, hint=hint, follow=True, strict=True):
        row = parse_json(line, f"{path}:{i}", hint)
        fields = [row.get(k) for k in ("question", "answer", "length", "algorithm")] if isinstance(row, dict) else []
        if not (fields and isinstance(fields[0], str) and isinstance(fields[1], str) and type(fields[2]) is int
                and fields[2] >= 0 and isinstance(fields[3], str)):
            raise RelreasonError(f"{path}:{i} is not a CLRS-Text line (question, answer: text; length: a whole "
                                 "number; algorithm: a name)", hint)
        questions.append(fields[0])
        answers.append(fields[1])
        lengths.append(fields[2])
        algorithms.add(fields[3])
    if len(algorithms) > 1:
        raise RelreasonError(f"{path} mixes algorithms {sorted(algorithms)}", "regenerate the file with --force")
    meta_path = _meta_path(path)
    meta = read_json_object(meta_path, hint=hint, follow=True) if os.path.lexists(meta_path) else {}
    name = algorithms.pop() if algorithms else meta.get("algorithm", "")
    if not isinstance(name, str):
        raise RelreasonError(f"{meta_path}: algorithm {name!r} is not a name", hint)
    return TextSplit(name, questions, answers, np.array(lengths, dtype=np.int64), meta)
