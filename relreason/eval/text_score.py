"""Scoring anyone's CLRS-Text answers: a predictions file, the examples it answers, and TransNAR's shape,
parse and CLRS scores per algorithm and size (`relreason score`), by the code that reports our own text runs.

A predictions file is JSONL, one answer per line: the answer as "prediction" (a model's continuation: what
comes before its first newline is scored, as `relreason eval` scores our models) and the example it
answers, by "id" (`relreason.data.text.ExampleId`, as `relreason generate --text` writes them:
"insertion_sort/n12/s3/i17"), by its "question" text (exactly as generated), or by both (they must then
agree). Hints need no key of their own: an id says them ("/hints") and a question shows them; a "hints"
key given beside an id must agree with it. Other keys are ignored, so the dump of our own model's answers
(`relreason eval RUN --dump FILE`: id, question, prediction and the true answer) is a predictions file as
it stands, and also a truth file.

    preds = read_predictions("answers.jsonl")
    truth = split_truth(["insertion_sort"], split="test")          # or read_truth(["data/text/...jsonl"])
    res = score_predictions(preds, truth)     # res["per_task"]["insertion_sort@10"]["outputs"]["clrs"]

Truth. Without one, every line needs an id, and its example is drawn again from the id (the reference's
stream, as `relreason generate --text` draws it); the examples are those the file answers. With one (a
split drawn again by name, or JSONL files of ours), ids and questions are looked up in it: a question the
truth holds k times (small graphs repeat) may be answered k times, and every example of the truth that no
line answers is counted as wrong (0 on all three scores) and reported as missing, per (algorithm, size)
and in all: skipping a question never raises a score. One-line errors name the file and line: a line that
is not a JSON object or lacks a "prediction" string or both "id" and "question"; an id that is not one; an
id or question the truth does not hold; an example answered twice; an id and a question that disagree.

Scores: `relreason.data.text.score_answer` (on the final answer) for each example, averaged per
(algorithm, size) and then over algorithms by `summarize_text_scores`, the function that reports every
text evaluation (relreason.train.text), so a dump of our answers scores here exactly as `eval` printed it.
"""

from __future__ import annotations

import functools
import json
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from relreason.data.algorithms import ALGORITHMS
from relreason.data.generate import run_samples
from relreason.data.store import atomic_path
from relreason.data.text import (SCORE_TITLES, ExampleId, TextScore, check_stream, draw_sample, render_dataset,
                                 resolve_text_split, score_answer, split_batches, split_ids)
from relreason.errors import RelreasonError
from relreason.files import MAX_JSONL_BYTES, jsonl_lines, parse_json

WRONG = TextScore(0.0, 0.0, 0.0)  # a missing prediction
FORMAT_HINT = 'one JSON object per line: {"id": ... or "question": ..., "prediction": ...}'


# -- the shared aggregation ------------------------------------------------------------------------

def summarize_text_scores(split: str, cells: Sequence[tuple[str, int, Sequence[TextScore]]]) -> dict:
    """A text evaluation's result from its examples' scores, given per (algorithm, size) cell in report
    order: per cell the mean shape / parse / CLRS under `per_task["ALG@N"]`, and the run's scores, the
    mean over algorithms of each algorithm's mean over its examples. `split` opens the labels."""
    per_task, by_algorithm = {}, {}
    for alg, n, scores in cells:
        mean = TextScore.mean(scores)
        per_task[f"{alg}@{n}"] = {"score": mean.clrs, "outputs": {k: getattr(mean, k) for k in SCORE_TITLES},
                                  "hints": {}, "algorithm": alg, "size": n, "num": len(scores),
                                  "label": f"{split}, n={n}, {len(scores)} examples"}
        by_algorithm.setdefault(alg, []).extend(scores)
    means = [TextScore.mean(s) for s in by_algorithm.values()]
    outputs = {k: float(np.mean([getattr(m, k) for m in means])) for k in SCORE_TITLES}
    sizes = sorted({n for _, n, _ in cells})
    counts = sorted({len(s) for _, _, s in cells})
    per = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    label = (f"{split}, n={'/'.join(map(str, sizes))}, {per} examples per algorithm and size"
             + (f", mean over {len(means)} algorithms" if len(means) > 1 else ""))
    return {"score": outputs["clrs"], "outputs": outputs, "hints": {}, "per_task": per_task,
            "size": max(sizes), "num": sum(len(s) for _, _, s in cells), "label": label}


TEXT_COLUMNS = ["algorithm", "size", *SCORE_TITLES.values()]


def text_table(res: dict) -> tuple[list[dict], list[str]]:
    """Rows (algorithm, size, shape, parse, CLRS) of a text evaluation's `per_task`, then the mean; a
    "missing" column when predictions were missing (`score_predictions`)."""
    cells = (res.get("per_task") or {}).values()
    rows = [{"algorithm": r["algorithm"], "size": r["size"], **{t: r["outputs"][k] for k, t in SCORE_TITLES.items()}}
            for r in cells]
    rows.append({"algorithm": "mean", "size": "all", **{t: res["outputs"][k] for k, t in SCORE_TITLES.items()}})
    if not res.get("missing"):
        return rows, TEXT_COLUMNS
    for row, cell in zip(rows, cells):
        row["missing"] = cell["missing"]
    rows[-1]["missing"] = res["missing"]
    return rows, [*TEXT_COLUMNS, "missing"]


# -- what a file holds -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Prediction:
    """One line of a predictions file: the answer and the example it names (by id, question or both)."""

    line: int
    prediction: str
    id: ExampleId | None
    question: str | None


@dataclass(frozen=True)
class TruthExample:
    """An example and its true answer; `id` is None in files written before examples had ids."""

    algorithm: str
    length: int
    question: str
    answer: str
    id: str | None = None


@dataclass(frozen=True)
class Truth:
    """The examples a predictions file is scored against, and what they are (for messages and reports)."""

    examples: list[TruthExample]
    label: str | None  # None: the examples the predictions name by id


@dataclass(frozen=True)
class AnsweredExample:
    """One line of `relreason eval --dump`: a test example, our model's answer and the true one."""

    id: ExampleId
    question: str
    prediction: str
    answer: str

    def to_json(self) -> str:
        return json.dumps({"id": str(self.id), "question": self.question, "prediction": self.prediction,
                           "answer": self.answer, "algorithm": self.id.algorithm, "length": self.id.length})


# What one line may ask to draw again: examples 0..index of a stream of graphs of `size` nodes. The splits
# of the presets ask at most 10,000 examples at sizes up to 20 (2e5 nodes); an id past this would run
# for hours (insertion_sort/n1600/s3/i9000000 draws 1.4e10 nodes).
MAX_DRAWN_NODES = 2_000_000
# What drawing an id again costs grows with its algorithm's trajectory (floyd_warshall's n^3 values,
# lcs_length's n^2 cells each step...), not with its node count: one example's trajectory may hold
# MAX_EXAMPLE_VALUES (~80 MB as float64; floyd_warshall at n=150; the presets' sizes stay below 20),
# those of one file MAX_TRAJECTORY_VALUES (the time), and they are run CHUNK_VALUES at a time (the memory).
MAX_EXAMPLE_VALUES = 10_000_000
MAX_TRAJECTORY_VALUES = 1_000_000_000
CHUNK_VALUES = 50_000_000


@functools.lru_cache(maxsize=None)
def _trajectory_growth(algorithm: str) -> tuple[int, int, float]:
    """(n0, values at n0, exponent): how the values of one trajectory of `algorithm` grow with its size,
    measured by running it at two small sizes (n0 and 2 n0), so that every algorithm, a plugin's too,
    is bounded by its own cost without a table of complexities to keep."""
    alg = ALGORITHMS.get(algorithm)
    n0 = max(alg.min_size, 16)
    values = []
    for n in (n0, 2 * n0):
        data = run_samples(alg, [alg.sample(np.random.RandomState(0), n)])
        values.append(sum(a.size for part in (data.inputs, data.hints, data.outputs) for a in part.values()))
    return n0, values[0], max(1.0, math.log2(values[1] / values[0]))


def trajectory_values(algorithm: str, length: int) -> int:
    """About how many values one trajectory of `algorithm` at size `length` holds (_trajectory_growth)."""
    n0, values, exponent = _trajectory_growth(algorithm)
    return math.ceil(values * (length / n0) ** exponent)


def _lines(path: Path, what: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) of every non-blank line of a JSONL file, or of a stream read once (`-` for
    standard input, /dev/stdin, a FIFO); one-line errors (a line that is not UTF-8, too long, not JSON,
    nested too deeply, holding a huge integer, or not an object). Read by relreason.files."""
    if str(path) != "-" and not os.path.exists(path):
        raise RelreasonError(f"{what} file {path} does not exist", "check the path")
    for i, line in jsonl_lines(path, MAX_JSONL_BYTES, FORMAT_HINT, follow=True, streams=True, strict=True):
        if not line.strip():
            continue
        try:
            row = parse_json(line, f"{path}:{i}", FORMAT_HINT)
        except RelreasonError as e:
            if "not valid JSON" in e.message:
                raise RelreasonError(f"{path}:{i} is not JSON", FORMAT_HINT) from None
            if " nests " in e.message:
                raise RelreasonError(f"{path}:{i} is nested too deeply to be an answer", FORMAT_HINT) from None
            raise
        if not isinstance(row, dict):
            raise RelreasonError(f"{path}:{i} is not a JSON object", FORMAT_HINT)
        yield i, row


def _string(row: dict, key: str, where: str, required: bool) -> str | None:
    value = row.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise RelreasonError(f"{where} has no {key!r} string" if value is None else f"{where}: {key!r} is not a string",
                             FORMAT_HINT)
    return value


def _id(text: str, where: str) -> ExampleId:
    try:
        return ExampleId.parse(text)
    except RelreasonError as e:
        raise RelreasonError(f"{where}: {e.message}", e.hint) from None


def read_predictions(path) -> list[Prediction]:
    """The lines of a predictions file (see the module docstring for the format and the errors)."""
    path = Path(path)
    out = []
    for i, row in _lines(path, "predictions"):
        where = f"{path}:{i}"
        prediction = _string(row, "prediction", where, True)
        id_text, question = _string(row, "id", where, False), _string(row, "question", where, False)
        if id_text is None and question is None:
            raise RelreasonError(f"{where} names no example", 'give its "id" or its "question" text')
        example = None if id_text is None else _id(id_text, where)
        hints = row.get("hints")
        if hints is not None and not isinstance(hints, bool):
            raise RelreasonError(f"{where}: 'hints' is not true or false", FORMAT_HINT)
        if hints is not None and example is not None and hints != example.hints:
            raise RelreasonError(f"{where}: 'hints' is {str(hints).lower()} but the id {example} is an example "
                                 f"{'with' if example.hints else 'without'} hints",
                                 "ids of hint examples end in /hints; drop the 'hints' key or fix the id")
        out.append(Prediction(i, prediction, example, question))
    if not out:
        raise RelreasonError(f"predictions file {path} holds no predictions", FORMAT_HINT)
    return out


def read_truth(paths: Sequence) -> Truth:
    """The examples of JSONL files of ours (`relreason generate --text` splits, `eval --dump` files)."""
    out = []
    for path in map(Path, paths):
        before = len(out)
        for i, row in _lines(path, "truth"):
            where = f"{path}:{i}"
            length = row.get("length")
            if not isinstance(length, int):
                raise RelreasonError(f"{where} is not a CLRS-Text line (no integer 'length')",
                                     "give a file written by `relreason generate --text` or `relreason eval --dump`")
            id_text = _string(row, "id", where, False)
            out.append(TruthExample(_string(row, "algorithm", where, True), length,
                                    _string(row, "question", where, True), _string(row, "answer", where, True),
                                    None if id_text is None else str(_id(id_text, where))))
        if len(out) == before:
            raise RelreasonError(f"truth file {path} holds no examples",
                                 "give a split made by `relreason generate --text`")
    return Truth(out, ", ".join(map(str, paths)))


def split_truth(algorithms: Sequence[str], split: str | None = None, preset: str | None = None, sizes=None,
                num: int | None = None, seed: int | None = None, hints: bool = False) -> Truth:
    """The examples of a split of each algorithm, drawn again as `relreason generate --text` draws them
    (a preset's split, or a custom one: `sizes`, `num` and `seed`; `relreason.data.text.resolve_text_split`)."""
    if not algorithms:
        raise RelreasonError("no algorithm to draw the split of", "name them, e.g. --algorithms insertion_sort,bfs")
    out, names = [], []
    for alg in algorithms:
        request = resolve_text_split(alg, split, preset, sizes, num, seed, hints)
        names.append(request.name + ("_hints" if hints else ""))
        ids = split_ids(request)
        for batch in split_batches(request):
            out += [TruthExample(batch.algorithm, batch.length, q, a, str(next(ids)))
                    for q, a in zip(batch.questions, batch.answers)]
    return Truth(out, f"{names[0]} of {', '.join(algorithms)}")


def named_algorithms(predictions: Sequence[Prediction]) -> list[str]:
    """The algorithms the predictions name (by id, or by a question's first line "ALGORITHM:"), in order
    of appearance; names that are no algorithm are left out (their lines fail as unknown questions)."""
    names = (p.id.algorithm if p.id is not None else p.question.partition(":\n")[0] for p in predictions)
    return [a for a in dict.fromkeys(names) if a in ALGORITHMS]


def truth_of_ids(ids: Iterable[ExampleId], chunk: int = 256) -> dict[ExampleId, TruthExample]:
    """The examples the ids name, drawn again from their streams: each stream drawn once up to its
    largest index, only the named examples run and rendered (in chunks of `chunk`)."""
    streams: dict[tuple, set[int]] = {}
    for i in ids:
        streams.setdefault((i.algorithm, i.length, i.seed, i.hints, i.decimals), set()).add(i.index)
    out = {}
    for (algorithm, length, seed, hints, decimals), wanted in streams.items():
        last = max(wanted)
        alg = check_stream(algorithm, length, seed, last + 1, decimals)
        rng = np.random.RandomState(seed)
        samples = [(k, s) for k, s in ((k, draw_sample(alg, rng, length, decimals)) for k in range(last + 1))
                   if k in wanted]
        chunk = max(1, min(chunk, CHUNK_VALUES // trajectory_values(algorithm, length)))  # bounded memory
        for start in range(0, len(samples), chunk):
            part = samples[start: start + chunk]
            questions, answers = render_dataset(run_samples(alg, [s for _, s in part]), hints)
            for (k, _), q, a in zip(part, questions, answers):
                example = ExampleId(algorithm, length, seed, k, hints, decimals)
                out[example] = TruthExample(algorithm, length, q, a, str(example))
    return out


# -- scoring -----------------------------------------------------------------------------------------

def _checked_ids(predictions: Sequence[Prediction], source: str, drawn: bool) -> None:
    """Each id's stream is one we can draw, and when the examples are `drawn` again from the ids, within
    MAX_DRAWN_NODES and, all together, MAX_TRAJECTORY_VALUES (a one-line error naming the line)."""
    total = 0
    for p in predictions:
        if p.id is not None:
            try:
                check_stream(p.id.algorithm, p.id.length, p.id.seed, p.id.index + 1, p.id.decimals)
            except RelreasonError as e:
                raise RelreasonError(f"{source}:{p.line}: id {p.id}: {e.message}", e.hint) from None
            nodes = (p.id.index + 1) * p.id.length
            if drawn and nodes > MAX_DRAWN_NODES:
                raise RelreasonError(f"{source}:{p.line}: id {p.id} asks to draw {p.id.index + 1:,} examples of "
                                     f"{p.id.length} nodes again ({nodes:,} nodes, more than the "
                                     f"{MAX_DRAWN_NODES:,} one answer may ask)",
                                     "score it against its split instead (--truth FILE made by `relreason "
                                     "generate --text`), or give ids of smaller index or size")
            values = trajectory_values(p.id.algorithm, p.id.length) if drawn else 0
            total += values
            if values > MAX_EXAMPLE_VALUES or total > MAX_TRAJECTORY_VALUES:
                what, limit = ((f"its trajectory holds about {values:,} values", MAX_EXAMPLE_VALUES)
                               if values > MAX_EXAMPLE_VALUES else
                               (f"the trajectories of the ids so far hold about {total:,} values", MAX_TRAJECTORY_VALUES))
                raise RelreasonError(f"{source}:{p.line}: id {p.id}: {what}, more than the {limit:,} it may ask to "
                                     f"draw again ({p.id.algorithm}'s grows as n^"
                                     f"{_trajectory_growth(p.id.algorithm)[2]:.1f})",
                                     "score it against its split instead (--truth FILE made by `relreason "
                                     "generate --text`), or give ids of smaller size")


def _match(predictions: Sequence[Prediction], truth: Truth, source: str) -> dict[int, Prediction]:
    """Truth index -> the prediction that answers it: ids first, then questions (each question taking the
    first of its copies in the truth that no line has taken)."""
    truth_label, truth = truth.label, truth.examples
    by_id: dict[str, int] = {}
    by_question: dict[str, list[int]] = {}
    for k, t in enumerate(truth):
        if t.id is not None:
            if t.id in by_id:
                raise RelreasonError(f"the truth ({truth_label}) holds the example {t.id} twice",
                                     "give each truth file once")
            by_id[t.id] = k
        by_question.setdefault(t.question, []).append(k)
    taken: dict[int, Prediction] = {}
    for p in sorted(predictions, key=lambda p: p.id is None):  # stable: ids first, each in file order
        where = f"{source}:{p.line}"
        if p.id is not None:
            k = by_id.get(str(p.id))
            if k is None:
                raise RelreasonError(f"{where}: the example {p.id} is not one of the truth ({truth_label})",
                                     "score it against the split that holds it, or without a truth")
            if p.question is not None and p.question != truth[k].question:
                raise RelreasonError(f"{where}: the question is not the one of {p.id}",
                                     "give the example's question exactly, or its id alone")
            if k in taken:
                raise RelreasonError(f"{where} answers {p.id} again (line {taken[k].line} answered it first)",
                                     "give one prediction per example")
        else:
            copies = by_question.get(p.question)
            if copies is None:
                raise RelreasonError(f"{where}: the question is not one of the truth ({truth_label})",
                                     "give the question exactly as generated (with --hints for hint questions), "
                                     "and the split or file that holds it")
            free = [k for k in copies if k not in taken]
            if not free:
                lines = ", ".join(str(taken[k].line) for k in copies)
                raise RelreasonError(f"{where} answers a question again: the truth holds it {len(copies)} "
                                     f"time{'s' * (len(copies) > 1)}, answered on line{'s' * (len(copies) > 1)} "
                                     f"{lines}", "give one prediction per example")
            k = free[0]
        taken[k] = p
    return taken


def score_predictions(predictions: Sequence[Prediction], truth: Truth | None = None, *,
                      source: str = "predictions") -> dict:
    """Scores predictions against the examples they answer (see the module docstring). Returns the
    shape of a text evaluation (`summarize_text_scores`, `source` opening the labels) plus "missing"
    (examples of the truth without a prediction, counted as wrong) in all and per cell, "answered" (the
    number of predictions) and "truth" (the truth's label, None without one)."""
    _checked_ids(predictions, source, drawn=truth is None)
    if truth is None:
        by_question = [p for p in predictions if p.id is None]
        if by_question:
            raise RelreasonError(f"{source}:{by_question[0].line} names its example by question, which needs "
                                 "the examples it answers",
                                 "name them: --truth FILE (a split of ours) or --split SPLIT [--preset ...]")
        examples = truth_of_ids(p.id for p in predictions)
        # each example once, in file order: the file's examples are the truth
        truth = Truth(list(dict.fromkeys(examples[p.id] for p in predictions)), None)
    taken = _match(predictions, truth, source)
    order = list(dict.fromkeys(t.algorithm for t in truth.examples))
    cells: dict[tuple[str, int], list[TextScore]] = {}
    missing: dict[tuple[str, int], int] = {}
    for k, t in enumerate(truth.examples):
        key = (t.algorithm, t.length)
        p = taken.get(k)
        cells.setdefault(key, []).append(WRONG if p is None else score_answer(p.prediction, t.answer))
        missing[key] = missing.get(key, 0) + (p is None)
    keys = sorted(cells, key=lambda c: (order.index(c[0]), c[1]))
    res = summarize_text_scores(source, [(a, n, cells[a, n]) for a, n in keys])
    for a, n in keys:
        res["per_task"][f"{a}@{n}"]["missing"] = missing[a, n]
    res["missing"] = sum(missing.values())
    res["answered"] = len(predictions)
    res["truth"] = truth.label
    return res


# -- writing our own answers -------------------------------------------------------------------------

@contextmanager
def answers_writer(path) -> Iterator[Callable[[Sequence[AnsweredExample]], None]]:
    """A function that appends answered examples to the JSONL file `path` (`AnsweredExample.to_json`); the
    file appears, whole, when the block succeeds (temp + rename), and not at all when it fails."""
    path = Path(path)
    if path.is_dir():
        raise RelreasonError(f"{path} is a directory", "give the file to write the answers to, e.g. answers.jsonl")
    with atomic_path(path) as tmp, open(tmp, "w", encoding="ascii") as f:
        yield lambda answers: f.writelines(a.to_json() + "\n" for a in answers)
