"""Named CLRS-Text splits: presets (`TEXT_PRESETS`: the TransNAR paper's and the reference generator's)
that resolve a split of an algorithm to pieces (length, seed, num, skip) of its text streams.

    text_split("paper", "train", "insertion_sort")   # (TextPiece(4, 0, 7000), ...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from relreason.data.algorithms import AlgorithmView, TextForm
from relreason.data.text.rendering import text_form
from relreason.errors import RelreasonError
from relreason.registry import Registry


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


__all__ = ["TextPiece", "TextPreset", "PAPER_TRAIN_SIZES", "PAPER_TEST_SIZES", "PAPER_EXAMPLES",
           "PAPER_TRAIN_FRACTION", "REFERENCE_TRAIN_LENGTHS", "REFERENCE_VAL_STOP", "REFERENCE_TRAIN_SEEDS",
           "REFERENCE_TRAIN_EXAMPLES", "REFERENCE_VAL_SEEDS", "REFERENCE_VAL_EXAMPLES", "TEXT_PRESETS",
           "DEFAULT_PRESET", "text_split"]
