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

One module per job, every public name importable from here:
- relreason.data.text.rendering: a problem as question and answer text (`render`, `text_format`);
- relreason.data.text.streams: the reference's streams of examples, in batches (`text_batches`);
- relreason.data.text.answers: an answer's tokens, and the answer as arrays (`parse_answer`);
- relreason.data.text.scoring: TransNAR's scores of an answer (`score_answer`);
- relreason.data.text.presets: the named splits (`TEXT_PRESETS`, `text_split`);
- relreason.data.text.splits: a split on disk and the ids of its lines (`write_text_split`, `ExampleId`).
"""

from relreason.data.text.answers import (ANSWER_CHARS, ParsedAnswer, TextParseError, answer_arrays, answer_line,
                                         parse_answer)
from relreason.data.text.presets import (DEFAULT_PRESET, PAPER_EXAMPLES, PAPER_TEST_SIZES, PAPER_TRAIN_FRACTION,
                                         PAPER_TRAIN_SIZES, REFERENCE_TRAIN_EXAMPLES, REFERENCE_TRAIN_LENGTHS,
                                         REFERENCE_TRAIN_SEEDS, REFERENCE_VAL_EXAMPLES, REFERENCE_VAL_SEEDS,
                                         REFERENCE_VAL_STOP, TEXT_PRESETS, TextPiece, TextPreset, text_split)
from relreason.data.text.rendering import (TextFormat, chain_order, feature_values, render, render_dataset, text_form,
                                           text_format)
from relreason.data.text.scoring import SCORE_TITLES, TextScore, score_answer
from relreason.data.text.splits import (ExampleId, TextSplit, TextSplitRequest, load_text_split, parse_sizes,
                                        resolve_text_split, split_batches, split_ids, text_path, write_text_split)
from relreason.data.text.streams import (CHUNK, DECIMALS, TextBatch, TextExample, check_stream, draw_sample, text_batch,
                                         text_batches, text_examples)

__all__ = ["render", "render_dataset", "text_form", "text_format", "TextFormat", "chain_order", "feature_values",
           "DECIMALS", "CHUNK", "draw_sample", "check_stream", "TextExample", "TextBatch", "text_batches",
           "text_examples", "text_batch",
           "ANSWER_CHARS", "TextParseError", "answer_line", "ParsedAnswer", "parse_answer", "answer_arrays",
           "SCORE_TITLES", "TextScore", "score_answer",
           "TextPiece", "TextPreset", "PAPER_TRAIN_SIZES", "PAPER_TEST_SIZES", "PAPER_EXAMPLES", "PAPER_TRAIN_FRACTION",
           "REFERENCE_TRAIN_LENGTHS", "REFERENCE_VAL_STOP", "REFERENCE_TRAIN_SEEDS", "REFERENCE_TRAIN_EXAMPLES",
           "REFERENCE_VAL_SEEDS", "REFERENCE_VAL_EXAMPLES", "TEXT_PRESETS", "DEFAULT_PRESET", "text_split",
           "parse_sizes", "TextSplitRequest", "resolve_text_split", "text_path", "ExampleId", "split_ids",
           "split_batches", "write_text_split", "TextSplit", "load_text_split"]
