"""Rendering a sampled problem as CLRS-Text's question and answer, character for character the
reference's (`clrs/_src/clrs_text/clrs_utils.py: format_clrs_example`): `render`, `render_dataset`.

    question, answer = render(trajectory, hints=True)

Every per-algorithm choice is the algorithm's `TextForm` (`text_form`), declared where it is
registered (relreason.data.catalog); `text_format` turns it and the spec into a rendering plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from relreason.data.algorithms import ALGORITHMS, Algorithm, TextForm
from relreason.data.specs import MASKED, Feature, Location, Stage, Type
from relreason.data.trajectory import Dataset, Trajectory
from relreason.errors import RelreasonError


def text_form(algorithm: str) -> TextForm:
    """The CLRS-Text form of a registered algorithm (a one-line error when it has none)."""
    form = ALGORITHMS.get(algorithm).text
    if form is None:
        raise RelreasonError(f"{algorithm} has no CLRS-Text form",
                             "its registration gives none (text=TextForm(...) in relreason.data.algorithms.register)")
    return form


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


__all__ = ["text_form", "TextFormat", "text_format", "chain_order", "feature_values", "render_dataset", "render"]
