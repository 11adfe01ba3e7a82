"""`relreason score`: TransNAR's shape / parse / CLRS scores of any model's CLRS-Text answers, per algorithm
and size. Thin: the work is in relreason.eval.text_score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from relreason.cli.common import JsonOpt, err, out, report_errors
from relreason.data.text import DEFAULT_PRESET, TEXT_PRESETS
from relreason.errors import RelreasonError


@report_errors
def score_cmd(
    predictions: Annotated[Path, typer.Argument(
        help='JSONL, one answer a line: {"id": ... or "question": ..., "prediction": ...}.', show_default=False,
        readable=False)],  # checked by the reader, which says what is wrong
    truth: Annotated[Optional[list[Path]], typer.Option(
        "--truth", help="A JSONL split of ours that the answers answer (repeatable: one per algorithm).",
        show_default="none: the examples the ids name")] = None,
    split: Annotated[Optional[str], typer.Option(
        "--split", help="Or draw the truth again: this split of --preset (train, val, test).",
        show_default="none: no split drawn")] = None,
    preset: Annotated[Optional[str], typer.Option(
        "--preset", help=f"Text split preset of --split: {', '.join(TEXT_PRESETS)}.",
        show_default=DEFAULT_PRESET)] = None,
    sizes: Annotated[Optional[str], typer.Option("--sizes", help="Or a custom split: sizes, e.g. 4-8,12 "
                                                 "(with --num and --seed).", show_default="none")] = None,
    num: Annotated[Optional[int], typer.Option("--num", help="Custom split: examples per size.",
                                               show_default="none")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Custom split: the stream's seed.",
                                                show_default="none")] = None,
    hints: Annotated[bool, typer.Option("--hints", help="The split's questions show the hint trace.")] = False,
    algorithms: Annotated[Optional[str], typer.Option(
        "--algorithms", help="Algorithms of the split, comma-separated.",
        show_default="those the answers name")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Score CLRS-Text answers (an LLM's, or our own from `relreason eval RUN --dump FILE`): shape, parse
    and CLRS per algorithm and size, and their mean, exactly as `relreason eval` scores our models.

    Each line names its example by "id" (as `relreason generate --text` writes them) or by its "question"
    text. Answers by id alone need no truth: their examples are drawn again. Answers by question are
    looked up in the truth: --truth FILE, or a split drawn again (--split, or --sizes/--num/--seed). Every
    example of the truth without an answer is counted as wrong and reported as missing.

    Examples:\n
      relreason score answers.jsonl\n
      relreason score llm.jsonl --split test --algorithms insertion_sort,bfs --json\n
      relreason score llm.jsonl --truth data/text/insertion_sort/paper_test.jsonl
    """
    from relreason.eval.report import rich_table  # CLI start-up: loads on use
    from relreason.eval.text_score import named_algorithms, read_predictions, read_truth, score_predictions, \
        split_truth, text_table  # CLI start-up: loads on use
    from relreason.tasks import METRIC_LABELS  # CLI start-up: loads on use

    custom = sizes is not None or num is not None or seed is not None
    drawn = split is not None or custom
    if not drawn and (preset is not None or hints or algorithms is not None):
        raise RelreasonError("--preset, --hints and --algorithms describe a split to draw",
                             "name it: --split SPLIT, or --sizes, --num and --seed")
    if truth and drawn:
        raise RelreasonError("--truth and a split to draw (--split, --sizes, ...) name the truth twice",
                             "give one of them")
    answers = read_predictions(predictions)
    if truth:
        known = read_truth(truth)
    elif drawn:
        names = named_algorithms(answers) if algorithms is None else [a.strip() for a in algorithms.split(",")]
        known = split_truth(names, split, preset, sizes, num, seed, hints)
    else:
        known = None
    res = score_predictions(answers, known, source=str(predictions))
    if as_json:
        out.print_json(json.dumps({"file": str(predictions), "metric": "text_clrs", **res}))
        return
    title = f"{res['label']} — {METRIC_LABELS['text_clrs']}"
    out.print(rich_table(*text_table(res), title))
    if known is not None:
        err.print(f"truth: {known.label} ({len(known.examples)} examples)", highlight=False, markup=False)
    if res["missing"]:
        err.print(f"note: examples of the truth without an answer: {res['missing']} of {len(known.examples)}, "
                  "counted as wrong (column missing)", highlight=False, markup=False)
