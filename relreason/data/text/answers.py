"""Reading a CLRS-Text answer: its characters and tokens, and the answer as arrays (`parse_answer`),
to compare with the true one computed from the trajectory (`answer_arrays`).

    parse_answer("[0.423 0.544 0.548]", "insertion_sort").equals(answer_arrays(trajectory))

The scores of an answer (relreason.data.text.scoring) read it with the same tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from relreason.data.text.rendering import feature_values, text_format
from relreason.data.trajectory import Trajectory

# Every character an answer can contain: digits, sign, decimal point, the exponent of floats printed
# untruncated ("1e-05"), list and group brackets, the separators ", " and " | ".
ANSWER_CHARS = frozenset("0123456789.-+e[](), |")
TOKEN = re.compile(r"[\[\](),|]|[^\s\[\](),|]+")
STRUCTURE = frozenset("[](),|")


class TextParseError(ValueError):
    """An answer text that does not parse as values of the expected structure."""


def answer_line(text: str) -> str:
    """The answer proper in a model's continuation: the text before the first newline (answers are one
    line; whatever follows is ignored), without surrounding spaces."""
    return text.split("\n", 1)[0].strip(" ")


def as_number(token: str) -> float | None:
    if not set(token) <= ANSWER_CHARS:
        return None
    try:
        return float(token)
    except ValueError:
        return None


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
        self.tokens = TOKEN.findall(text)
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
        value = None if tok in STRUCTURE else as_number(tok)
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


__all__ = ["ANSWER_CHARS", "TOKEN", "STRUCTURE", "TextParseError", "answer_line", "as_number", "ParsedAnswer",
           "parse_answer", "answer_arrays"]
