"""CLRS-Text: the CLRS-30 problems as question/answer text, character for character the reference's.

A text example is one sampled problem rendered the way google-deepmind/clrs renders it
(`clrs/_src/clrs_text/clrs_utils.py: format_clrs_example`), drawn from the same random stream as
its text generators (`generate_clrs_text.py`, `huggingface_generators.py`): a sampler built with
`num_samples=-1` (one sample drawn per example, in order, from `RandomState(seed)`), no padding,
batch size 1, and every float input truncated toward zero to 3 decimals *before* the algorithm runs.

    insertion_sort:\\nkey: [0.548 0.715 0.602 0.544 0.423]\\npred:\\n        (question)
    [0.423 0.544 0.548 0.602 0.715]\\n\\n                                   (answer)

With hints the question ends in `, initial_trace: <hint 0>` and `trace | <names>:`, and the answer is
`<hint 1>, ..., <hint T-2> | <output>`. Every example keeps its graph form (the `Trajectory` of the
same truncated inputs), which TransNAR reads beside the text:

    for ex in text_examples("insertion_sort", length=12, seed=0, num=3, hints=True):
        ex.question, ex.answer, ex.trajectory
    batch = text_batch("bellman_ford", length=8, seed=0, num=64)   # questions, answers, one Dataset
    scores = score_answer(model_text, ex.answer)                     # shape, parse, CLRS (TransNAR)

Rendering rules (the reference's, per location and type): `pos` is dropped, and `adj` when `A` is
present; inputs print as `name: value` joined by ", " in spec order; node values as `[a b c]`, edge
values as `[[a b], [c d]]`; floats as numpy prints float64 (= Python's repr), integer arrays as ints;
mask and pointer as ints, mask_one as its index, categoricals as their class index (-1 where an edge
categorical is masked); a sorting output (should_be_permutation) prints the keys in the order it
encodes. The trace shows the hints named `<output>_h`, printed like their output, except in the
search and string tasks, which name their trace features (`TextForm.trace`); segments_intersect has
no such hint, so its text is the same with and without hints. Every per-algorithm choice is the
algorithm's `TextForm`, declared where it is registered (relreason.data.catalog); an algorithm
registered without one has no text form.

Scores (TransNAR, Bounsi et al. 2024) compare a model's answer with the true one; see `score_answer`.
Splits: named presets (`TEXT_PRESETS`: the TransNAR paper's and the reference generator's) resolve to
pieces (length, seed, num, skip) of such streams; `write_text_split` writes a split as JSONL lines
{"id", "question", "answer", "algorithm", "length"} to `DIR/text/ALG/<preset>_<split>[_hints].jsonl` (custom
splits: `custom_n<sizes>_s<seed>_k<num>[_hints].jsonl`), with what it was made from in the `.meta.json`
beside it (`load_text_split` reads it back), and `split_batches` gives the same examples with their
graph form. An example's id names its place in its stream, whatever split holds it (`ExampleId`:
"insertion_sort/n12/s3/i17", "/hints" added for the hint text), so an answer given by id can be scored
without the file it came from (`relreason score`, relreason.eval.text_score).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from relreason import __version__
from relreason.data import samplers
from relreason.data.algorithms import ALGORITHMS, Algorithm, AlgorithmView, TextForm
from relreason.data.generate import MAX_NUM, MAX_SIZE, run_samples
from relreason.data.samplers import truncate
from relreason.data.specs import MASKED, Feature, Location, Stage, Type
from relreason.data.trajectory import Dataset, Trajectory
from relreason.errors import RelreasonError, write_error
from relreason.registry import Registry

# Floats are truncated to this many decimals: CLRS-Text's setting (huggingface_generators.clrs_generator's
# default, the examples of the CLRS-Text paper). generate_clrs_text.py's --num_decimals_in_float flag
# defaults to None (untruncated); pass decimals=None for that.
DECIMALS = 3
CHUNK = 256  # examples run as one lockstep batch: amortizes the per-call cost; the text does not depend on it

# --- drawing the reference's text stream ------------------------------------------------------------


def text_form(algorithm: str) -> TextForm:
    """The CLRS-Text form of a registered algorithm (a one-line error when it has none)."""
    form = ALGORITHMS.get(algorithm).text
    if form is None:
        raise RelreasonError(f"{algorithm} has no CLRS-Text form",
                             "its registration gives none (text=TextForm(...) in relreason.data.algorithms.register)")
    return form


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


# --- rendering --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextFormat:
    """How one algorithm renders (with or without hints): which features, in which order, printed how."""

    algorithm: str
    inputs: tuple[Feature, ...]  # rendered inputs, spec order
    outputs: tuple[Feature, ...]  # the output features (spec order)
    names: tuple[str, ...]  # what the question asks for: the outputs, or the trace features
    trace: tuple[tuple[str, Feature], ...]  # (hint name, feature it prints as); empty without hints
    answer_from_trace: bool  # the final answer is the trace's last step
    parenthesized: bool
    integer_inputs: frozenset[str]

    @property
    def prints_keys(self) -> bool:
        """Whether the answer prints the sorting keys (a should_be_permutation output, or its trace)."""
        return any(f.type is Type.SHOULD_BE_PERMUTATION for f in self.outputs + tuple(f for _, f in self.trace))

    @property
    def answer_width(self) -> int:
        """Number of top-level values in the final answer (and in each trace step)."""
        return len(self.trace) if self.answer_from_trace else len(self.outputs)


_FORMATS: dict[tuple[Algorithm, bool], TextFormat] = {}


def text_format(algorithm: str, hints: bool) -> TextFormat:
    """The rendering plan of `algorithm` (cached), from its spec and its text form (the reference's choices)."""
    key = (ALGORITHMS.get(algorithm), hints)
    if key not in _FORMATS:
        form = text_form(algorithm)
        spec = key[0].spec
        inputs = tuple(f for f in spec.values() if f.stage is Stage.INPUT
                       and f.name != "pos" and not (f.name == "adj" and "A" in spec))
        outputs = tuple(f for f in spec.values() if f.stage is Stage.OUTPUT)
        special = form.trace
        trace: tuple[tuple[str, Feature], ...] = ()
        if hints:
            hint_names = [f.name for f in spec.values() if f.stage is Stage.HINT]
            if special:  # the hint prints under its own name and spec
                trace = tuple((h, spec[h]) for h in hint_names if h in special)
            else:  # `x_h` prints as the output `x` (a sorting `pred_h` as sorted keys)
                outs = {f.name for f in outputs}
                trace = tuple((h, spec[h[:-2]]) for h in hint_names if h[:-2] in outs)
        from_trace = hints and form.answer_from_trace
        names = special if hints and special else tuple(f.name for f in outputs)
        _FORMATS[key] = TextFormat(algorithm, inputs, outputs, tuple(names), trace, from_trace,
                                   hints and form.parenthesized, form.integer_inputs)
    return _FORMATS[key]


def chain_order(pred: np.ndarray) -> np.ndarray:
    """Node order [M, N] encoded by predecessor pointers [M, N] (each node points to its left neighbour,
    the first to itself): the last node is the one nothing points to (the reference's
    `predecessors_to_order`, which requires exactly one such node)."""
    m, n = pred.shape
    rows = np.arange(m)
    pointed = np.zeros((m, n), bool)
    pointed[rows[:, None], pred] = True
    if not ((~pointed).sum(axis=1) == 1).all():
        raise ValueError("a predecessor array that is not a chain cannot print as an order")
    order = np.empty((m, n), np.int64)
    order[:, -1] = (~pointed).argmax(axis=1)
    for i in range(n - 2, -1, -1):
        order[:, i] = pred[rows, order[:, i + 1]]
    return order


def feature_values(f: Feature, x: np.ndarray, keys: np.ndarray | None = None, integer: bool = False) -> np.ndarray:
    """The numbers feature `f` prints as, for values `x` with any leading axes (the reference's
    `_convert_{node,edge,graph}_features_to_str`). `keys` [..., N] (broadcastable to x) are the sorting
    keys a should_be_permutation prints; `integer` prints a scalar input as ints."""
    t, loc = f.type, f.location
    if t is Type.SCALAR:
        return x.astype(np.int64) if integer else x
    if t is Type.CATEGORICAL:
        idx = x.argmax(axis=-1)
        if loc is Location.EDGE:  # lcs_length's b: masked cells print -1
            idx[(x == MASKED).any(axis=-1)] = MASKED
        return idx
    if t is Type.MASK_ONE and loc is Location.NODE:
        return x.argmax(axis=-1)
    if t is Type.SHOULD_BE_PERMUTATION:
        flat = x.reshape(-1, x.shape[-1]).astype(np.int64)
        order = chain_order(flat)
        return np.take_along_axis(np.broadcast_to(keys, x.shape).reshape(flat.shape), order, axis=1).reshape(x.shape)
    return x.astype(np.int64)  # mask, pointer, graph mask_one: `astype(int)`


def _format_value(v) -> str:
    """One value from `.tolist()`: a number, a node list `[a b]` or an edge matrix `[[a b], [c d]]`."""
    if not isinstance(v, list):
        return str(v)  # str(float) is repr: numpy's float64 printing
    if v and isinstance(v[0], list):
        return "[" + ", ".join("[" + " ".join(map(str, row)) + "]" for row in v) + "]"
    return "[" + " ".join(map(str, v)) + "]"


def _group(parts: Sequence[str], parenthesized: bool) -> str:
    joined = ", ".join(parts)
    return f"({joined})" if parenthesized else joined


def _strings(f: Feature, x: np.ndarray, key_strings: list[list[str]] | None = None,
             integer: bool = False) -> list[str]:
    """The printed form of feature values x [M, ...], one string per row. A should_be_permutation joins
    its rows' pre-printed keys (`key_strings[m]`) in chain order: each key is printed once per example,
    not once per hint step (sorting traces would otherwise spend their time printing floats)."""
    if f.type is Type.SHOULD_BE_PERMUTATION:
        order = chain_order(x.astype(np.int64)).tolist()
        return ["[" + " ".join([ks[j] for j in o]) + "]" for ks, o in zip(key_strings, order)]
    return [_format_value(v) for v in feature_values(f, x, integer=integer).tolist()]


def render_dataset(ds: Dataset, hints: bool = False) -> tuple[list[str], list[str]]:
    """(questions, answers) of every example of a Dataset (batched: each feature printed for all at once)."""
    fmt = text_format(ds.algorithm, hints)
    key_strings = [[str(v) for v in row] for row in ds.inputs["key"].tolist()] if fmt.prints_keys else None
    inputs = [[f"{f.name}: {s}" for s in _strings(f, ds.inputs[f.name], integer=f.name in fmt.integer_inputs)]
              for f in fmt.inputs]
    heads = [f"{fmt.algorithm}:\n" + ", ".join(parts) for parts in zip(*inputs)]
    names = _group(fmt.names, fmt.parenthesized)
    outputs: list[str] = []
    if not fmt.answer_from_trace:
        per_feature = [_strings(f, ds.outputs[f.name], key_strings) for f in fmt.outputs]
        outputs = [_group(parts, fmt.parenthesized) for parts in zip(*per_feature)]
    if not fmt.trace:
        return [f"{h}\n{names}:\n" for h in heads], [f"{o}\n\n" for o in outputs]

    lengths = ds.lengths
    valid = np.arange(ds.max_length)[None, :] < lengths[:, None]  # [B, T]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    row_keys = None if key_strings is None else [key_strings[i] for i in np.repeat(np.arange(len(ds)), lengths)]
    # per trace feature: the strings of every valid (example, step), example-major
    steps = [_strings(f, ds.hints[hint][valid], row_keys) for hint, f in fmt.trace]
    questions, answers = [], []
    for i in range(len(ds)):
        lo, hi = int(starts[i]), int(starts[i + 1])
        at = lambda t: _group([s[t] for s in steps], fmt.parenthesized)  # noqa: E731 - row t of `steps`
        trace = ", ".join(at(t) for t in range(lo + 1, hi - 1))
        final = at(hi - 1) if fmt.answer_from_trace else outputs[i]
        questions.append(f"{heads[i]}, initial_trace: {at(lo)}\ntrace | {names}:\n")
        answers.append(f"{trace} | {final}\n\n")
    return questions, answers


def render(traj: Trajectory, hints: bool = False) -> tuple[str, str]:
    """(question, answer) of one trajectory (inputs already truncated, as the text stream draws them)."""
    q, a = render_dataset(Dataset.from_trajectories([traj]), hints)
    return q[0], a[0]


# --- streams ------------------------------------------------------------------------------------------


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


# --- parsing and scoring answers ------------------------------------------------------------------------

# Every character an answer can contain: digits, sign, decimal point, the exponent of floats printed
# untruncated ("1e-05"), list and group brackets, the separators ", " and " | ".
ANSWER_CHARS = frozenset("0123456789.-+e[](), |")
_TOKEN = re.compile(r"[\[\](),|]|[^\s\[\](),|]+")
_STRUCTURE = frozenset("[](),|")


class TextParseError(ValueError):
    """An answer text that does not parse as values of the expected structure."""


def answer_line(text: str) -> str:
    """The answer proper in a model's continuation: the text before the first newline (answers are one
    line; whatever follows is ignored), without surrounding spaces."""
    return text.split("\n", 1)[0].strip(" ")


def _number(token: str) -> float | None:
    if not set(token) <= ANSWER_CHARS:
        return None
    try:
        return float(token)
    except ValueError:
        return None


SCORE_TITLES = {"shape": "shape", "parse": "parse", "clrs": "CLRS"}  # TextScore field -> column title


@dataclass(frozen=True)
class TextScore:
    """The TransNAR scores of one answer: shape (0/1), parse (0/1), CLRS (fraction in [0, 1])."""

    shape: float
    parse: float
    clrs: float

    @staticmethod
    def mean(scores: Sequence["TextScore"]) -> "TextScore":
        n = max(len(scores), 1)
        return TextScore(*(sum(getattr(s, k) for s in scores) / n for k in SCORE_TITLES))


def score_answer(prediction: str, truth: str, *, trace: bool = False) -> TextScore:
    """Scores a model's answer against the true one (TransNAR's three scores).

    Both are reduced to `answer_line` and, unless `trace`, to the final answer after the last " | "
    (with hints, the output; without hints, everything). Then:
    - parse = 1 iff every character is in ANSWER_CHARS and every number parses as a float;
    - shape = 1 iff the structure is the truth's: the same sequence of brackets, commas and bars with
      the same count of numbers in every place (whitespace is free);
    - CLRS = the fraction of the truth's numbers that the prediction gets equal, position by position;
      0 when the shape is wrong. Two numbers are equal when they agree to 3 decimals,
      round(1000 x) == round(1000 y): the printed values of CLRS-Text (ints compare exactly; "1" equals
      "1.0"; a masked -1 must be printed as -1).
    """
    pred, true = answer_line(prediction), answer_line(truth)
    if not trace:
        pred, true = pred.rpartition("|")[2], true.rpartition("|")[2]
    p_tokens, t_tokens = _TOKEN.findall(pred), _TOKEN.findall(true)
    p_values = [None if tok in _STRUCTURE else _number(tok) for tok in p_tokens]
    parse = float(set(pred) <= ANSWER_CHARS
                  and all(v is not None for v, tok in zip(p_values, p_tokens) if tok not in _STRUCTURE))
    skeleton = lambda tokens: [tok if tok in _STRUCTURE else "#" for tok in tokens]  # noqa: E731
    if skeleton(p_tokens) != skeleton(t_tokens):
        return TextScore(0.0, parse, 0.0)
    pairs = [(p, float(t)) for p, t in zip(p_values, t_tokens) if t not in _STRUCTURE]
    if not pairs:
        return TextScore(1.0, parse, 1.0)
    same = sum(1 for p, t in pairs if p is not None and math.isfinite(p) and round(p * 1000) == round(t * 1000))
    return TextScore(1.0, parse, same / len(pairs))


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer as arrays: `output` one array per answer value (0-d, [N] or [N, N]); with hints, `trace`
    holds hint steps 1..T-2, each a tuple like `output`."""

    output: tuple[np.ndarray, ...]
    trace: tuple[tuple[np.ndarray, ...], ...] = ()

    def equals(self, other: "ParsedAnswer") -> bool:
        same = lambda a, b: len(a) == len(b) and all(  # noqa: E731
            x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))
        return same(self.output, other.output) and len(self.trace) == len(other.trace) and all(
            same(s, t) for s, t in zip(self.trace, other.trace))


class _Tokens:
    def __init__(self, text: str):
        if not set(text) <= ANSWER_CHARS:
            bad = "".join(sorted(set(text) - ANSWER_CHARS))
            raise TextParseError(f"illegal characters {bad!r}")
        self.tokens = _TOKEN.findall(text)
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise TextParseError(f"expected {expected or 'a value'} at token {self.i}, found {tok!r}")
        self.i += 1
        return tok

    def number(self) -> float:
        tok = self.take()
        value = None if tok in _STRUCTURE else _number(tok)
        if value is None:
            raise TextParseError(f"{tok!r} is not a number")
        return value

    def values(self, stop: str | None) -> list[np.ndarray]:
        """Comma-separated values up to `stop` (not consumed); parenthesized groups are flattened."""
        out: list[np.ndarray] = []
        if self.peek() == stop:
            return out
        while True:
            if self.peek() == "(":
                self.take("(")
                out.extend(self.values(")"))
                self.take(")")
            elif self.peek() == "[":
                out.append(self.array())
            else:
                out.append(np.array(self.number()))
            if self.peek() != ",":
                return out
            self.take(",")

    def array(self) -> np.ndarray:
        self.take("[")
        if self.peek() == "[":  # a matrix: rows separated by commas
            rows = [self.array()]
            while self.peek() == ",":
                self.take(",")
                rows.append(self.array())
            self.take("]")
            if any(r.ndim != 1 or r.shape != rows[0].shape for r in rows):
                raise TextParseError("matrix rows differ in length")
            return np.stack(rows)
        items = []
        while self.peek() != "]":
            items.append(self.number())
        self.take("]")
        return np.array(items, dtype=np.float64)


def parse_answer(text: str, algorithm: str, hints: bool = False) -> ParsedAnswer:
    """An answer text (a model's continuation or a rendered answer) as arrays.

    Tolerant of spacing, a missing final newline and anything after the first newline; strict about
    structure: raises TextParseError unless the answer holds exactly the algorithm's values (with hints:
    trace steps of that many values each, " | ", then the final answer)."""
    fmt = text_format(algorithm, hints)
    width = fmt.answer_width
    tokens = _Tokens(answer_line(text))
    trace: list[tuple[np.ndarray, ...]] = []
    if fmt.trace:
        flat = tokens.values("|")
        tokens.take("|")
        if len(flat) % width:
            raise TextParseError(f"the trace holds {len(flat)} values, not a multiple of {width}")
        trace = [tuple(flat[i: i + width]) for i in range(0, len(flat), width)]
    output = tokens.values(None)
    if tokens.peek() is not None:
        raise TextParseError(f"unexpected {tokens.peek()!r} after the answer")
    if len(output) != width:
        raise TextParseError(f"{len(output)} values where {algorithm} answers {width}")
    return ParsedAnswer(tuple(output), tuple(trace))


def answer_arrays(traj: Trajectory, hints: bool = False) -> ParsedAnswer:
    """The true answer of a trajectory as arrays (float64), computed from its arrays, not from text."""
    fmt = text_format(traj.algorithm, hints)
    keys = traj.inputs["key"] if fmt.prints_keys else None
    as_float = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
    if not fmt.trace:
        return ParsedAnswer(tuple(as_float(feature_values(f, traj.outputs[f.name], keys)) for f in fmt.outputs))
    steps = [feature_values(f, traj.hints[h], keys) for h, f in fmt.trace]  # each [T, ...]
    t = traj.length
    trace = tuple(tuple(as_float(s[i]) for s in steps) for i in range(1, t - 1))
    if fmt.answer_from_trace:
        output = tuple(as_float(s[t - 1]) for s in steps)
    else:
        output = tuple(as_float(feature_values(f, traj.outputs[f.name], keys)) for f in fmt.outputs)
    return ParsedAnswer(output, trace)


# --- named splits ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextPiece:
    """A piece of a split: examples skip+1 .. skip+num of the stream (length, seed)."""

    length: int
    seed: int
    num: int
    skip: int = 0


@dataclass(frozen=True)
class TextPreset:
    """A named set of splits; `pieces(split, algorithm)` lists the streams a split is made of, in order."""

    name: str
    source: str
    splits: Mapping[str, Callable[[str], tuple[TextPiece, ...]]]

    def pieces(self, split: str, algorithm: str) -> tuple[TextPiece, ...]:
        if split not in self.splits:
            raise RelreasonError(f"preset {self.name!r} has no split {split!r}",
                                 "use one of: " + ", ".join(self.splits))
        return self.splits[split](algorithm)


# TransNAR (Bounsi et al. 2024, section 4): train on sizes 4..8 and 12, 10,000 examples per algorithm and
# size, split 70/30 into train and validation; test at 10 (interpolation), 12 (in distribution) and 14
# (extrapolation). The paper names neither seeds nor test counts: we take the reference generator's (train
# seed 0; the validation seeds and count below for the test sets, 5 x 125 = 625 examples per size), and
# make the 70/30 split the first 7,000 / last 3,000 examples of each size's seed-0 stream.
PAPER_TRAIN_SIZES = (4, 5, 6, 7, 8, 12)
PAPER_TEST_SIZES = (10, 12, 14)
PAPER_EXAMPLES = 10_000
PAPER_TRAIN_FRACTION = 0.7

# The reference generator's defaults (clrs/_src/clrs_text/generate_clrs_text.py): train lengths per
# algorithm (its `TextForm.train_lengths`), seed 0, 10,000 examples per length; validation lengths per
# algorithm (4 to its `TextForm.val_stop`, exclusive), seeds [3, 14, 35, 81, 94], 125 examples per
# (length, seed), lengths outer, seeds inner. The two mappings are live views of the registrations.
REFERENCE_TRAIN_LENGTHS: Mapping[str, tuple[int, ...]] = AlgorithmView(
    lambda a: None if a.text is None else a.text.train_lengths)
REFERENCE_VAL_STOP: Mapping[str, int] = AlgorithmView(lambda a: None if a.text is None else a.text.val_stop)
REFERENCE_TRAIN_SEEDS = (0,)
REFERENCE_TRAIN_EXAMPLES = 10_000
REFERENCE_VAL_SEEDS = (3, 14, 35, 81, 94)
REFERENCE_VAL_EXAMPLES = 125


def _reference_form(algorithm: str) -> TextForm:
    """The text form of an algorithm the reference generator knows (a one-line error otherwise)."""
    form = text_form(algorithm)
    if form.train_lengths is None:
        raise RelreasonError(f"{algorithm} has no lengths in the reference generator (clrs_text preset)",
                             "use the paper preset, or a custom split (--sizes, --num, --seed)")
    return form


def _grid(lengths: Sequence[int], seeds: Sequence[int], num: int) -> tuple[TextPiece, ...]:
    return tuple(TextPiece(n, s, num) for n in lengths for s in seeds)


_PAPER_TRAIN = round(PAPER_EXAMPLES * PAPER_TRAIN_FRACTION)
TEXT_PRESETS: Registry[TextPreset] = Registry("text preset")
TEXT_PRESETS.register("paper", TextPreset(
    "paper", "TransNAR (Bounsi et al. 2024): train 4..8 and 12, 70/30 train/val; test 10, 12, 14", {
        "train": lambda alg: tuple(TextPiece(n, 0, _PAPER_TRAIN) for n in PAPER_TRAIN_SIZES),
        "val": lambda alg: tuple(TextPiece(n, 0, PAPER_EXAMPLES - _PAPER_TRAIN, skip=_PAPER_TRAIN)
                                 for n in PAPER_TRAIN_SIZES),
        "test": lambda alg: _grid(PAPER_TEST_SIZES, REFERENCE_VAL_SEEDS, REFERENCE_VAL_EXAMPLES),
    }))
TEXT_PRESETS.register("clrs_text", TextPreset(
    "clrs_text", "the reference generator's defaults (generate_clrs_text.py)", {
        "train": lambda alg: _grid(_reference_form(alg).train_lengths, REFERENCE_TRAIN_SEEDS, REFERENCE_TRAIN_EXAMPLES),
        "val": lambda alg: _grid(range(4, _reference_form(alg).val_stop), REFERENCE_VAL_SEEDS, REFERENCE_VAL_EXAMPLES),
    }))
DEFAULT_PRESET = "paper"


def text_split(preset: str, split: str, algorithm: str) -> tuple[TextPiece, ...]:
    """The pieces (length, seed, num, skip) of a named split, e.g. `text_split("paper", "train", "dfs")`."""
    text_form(algorithm)
    return TEXT_PRESETS.get(preset).pieces(split, algorithm)


# --- JSONL files ---------------------------------------------------------------------------------------


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
    from relreason.data.store import atomic_path

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
    """Reads a JSONL split written by `write_text_split` (one-line errors name the bad line)."""
    path = Path(path)
    if not path.is_file():
        raise RelreasonError(f"text split {path} does not exist", "make one with `relreason generate ALG --text`")
    questions, answers, lengths, algorithms = [], [], [], set()
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                questions.append(row["question"])
                answers.append(row["answer"])
                lengths.append(int(row["length"]))
                algorithms.add(row["algorithm"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise RelreasonError(f"{path}:{i} is not a CLRS-Text line",
                                     "regenerate the file with --force") from None
    if len(algorithms) > 1:
        raise RelreasonError(f"{path} mixes algorithms {sorted(algorithms)}", "regenerate the file with --force")
    meta_path = _meta_path(path)
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    name = algorithms.pop() if algorithms else meta.get("algorithm", "")
    return TextSplit(name, questions, answers, np.array(lengths, dtype=np.int64), meta)
