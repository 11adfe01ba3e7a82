"""The TransNAR scores of a model's CLRS-Text answer against the true one (Bounsi et al. 2024):
shape, parse and CLRS (`score_answer`).

    score_answer(model_text, example.answer)   # TextScore(shape=1.0, parse=1.0, clrs=0.8)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from relreason.data.text.answers import ANSWER_CHARS, STRUCTURE, TOKEN, answer_line, as_number


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
    p_tokens, t_tokens = TOKEN.findall(pred), TOKEN.findall(true)
    p_values = [None if tok in STRUCTURE else as_number(tok) for tok in p_tokens]
    parse = float(set(pred) <= ANSWER_CHARS
                  and all(v is not None for v, tok in zip(p_values, p_tokens) if tok not in STRUCTURE))
    skeleton = lambda tokens: [tok if tok in STRUCTURE else "#" for tok in tokens]  # noqa: E731
    if skeleton(p_tokens) != skeleton(t_tokens):
        return TextScore(0.0, parse, 0.0)
    pairs = [(p, float(t)) for p, t in zip(p_values, t_tokens) if t not in STRUCTURE]
    if not pairs:
        return TextScore(1.0, parse, 1.0)
    same = sum(1 for p, t in pairs if p is not None and math.isfinite(p) and round(p * 1000) == round(t * 1000))
    return TextScore(1.0, parse, same / len(pairs))


__all__ = ["SCORE_TITLES", "TextScore", "score_answer"]
