"""Evaluating a text run: greedy decoding, TransNAR's shape / parse / CLRS scores, and their table.

Evaluation is greedy decoding with the KV cache, capped at the longest true answer of the batch +
DECODE_MARGIN tokens, scored with TransNAR's shape / parse / CLRS (relreason.data.text.score_answer,
on the final answer); positions (randomized under PositionMode.RANDOM, as in Ruoss et al.'s code) come
from a generator fixed per (split, algorithm, size), so every validation sees the same draw.
Validation: the preset's validation split, `data.val_num` per (algorithm, size); its score, which
picks the best checkpoint, is the CLRS score averaged over each algorithm's examples, then over the
algorithms. Test: at `data.test_sizes`; `per_task` holds every (algorithm, size) cell under
"insertion_sort@10" and the run's score is the mean CLRS score (`summarize`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn

from relreason.data.text import SCORE_TITLES, TextScore
from relreason.errors import RelreasonError
from relreason.seeds import Purpose, derive_seed
from relreason.train.text.examples import Rendered

DECODE_MARGIN = 16  # tokens a generation may run past its batch's longest true answer (a right answer never needs them)
EVAL_TOKENS = 1 << 16  # an evaluation batch holds at most this many prompt + answer-cap tokens (KV cache, activations)
EVAL_MAX_ROWS = 256
SPLIT_KEYS = {"val": 0, "test": 1}  # part of the evaluation generators' seeds


def eval_generator(seed: int, split: str, task_index: int, length: int, device: torch.device) -> torch.Generator:
    """Positions of the evaluation of one (algorithm, size): the same draw at every validation."""
    key = derive_seed(seed, Purpose.VALIDATION, SPLIT_KEYS[split], task_index, length)
    return torch.Generator(device).manual_seed(key)


def eval_rows(batch: Rendered) -> int:
    """Rows per evaluation batch of one (algorithm, size), unless train.eval_batch_size says: as many as
    EVAL_TOKENS prompt + answer-cap tokens hold, at most EVAL_MAX_ROWS."""
    prompt = max(len(q) for q in batch.questions) + 1  # + BOS
    answer = max(len(a) for a in batch.answers) + 1  # + EOS
    return max(1, min(EVAL_MAX_ROWS, EVAL_TOKENS // (prompt + answer + DECODE_MARGIN)))


@torch.no_grad()
def decode(model: nn.Module, tokenizer, batch: Rendered, context: int, device: torch.device,
           generator: torch.Generator, inputs: Callable[[Rendered], dict]) -> list[str]:
    """Greedy continuations of the batch's questions (text up to EOS), capped at the longest true
    answer + DECODE_MARGIN tokens and at the model's `context`; `inputs(batch)`: the model's extra
    inputs (TransNAR: the NAR's embeddings)."""
    prompts, mask = tokenizer.batch_prompts(batch.questions)
    cap = max(len(a) for a in batch.answers) + 1 + DECODE_MARGIN
    cap = min(cap, context - int(mask.sum(1).max()))
    if cap < 1:
        raise RelreasonError(f"a {batch.graphs[0].dataset.algorithm} question fills the model's context "
                             f"({context} tokens)", "raise model.context")
    out = model.generate(prompts.to(device), mask.to(device), cap, generator=generator, **inputs(batch))
    return tokenizer.decode_batch(out.cpu())


def summarize(split: str, algorithms: list[str], cells: dict[tuple[int, int], list[TextScore]]) -> dict:
    """An evaluation's result from the scores of each (algorithm index, size): per (algorithm, size) in
    `per_task`, the run's score the mean CLRS score over the algorithms (each the mean over its examples)."""
    per_task, by_task = {}, {}
    for (i, n), scores in sorted(cells.items()):
        alg = algorithms[i]
        mean = TextScore.mean(scores)
        per_task[f"{alg}@{n}"] = {"score": mean.clrs, "outputs": {k: getattr(mean, k) for k in SCORE_TITLES},
                                  "hints": {}, "algorithm": alg, "size": n, "num": len(scores),
                                  "label": f"{split}, n={n}, {len(scores)} examples"}
        by_task.setdefault(i, []).extend(scores)
    means = [TextScore.mean(s) for _, s in sorted(by_task.items())]
    outputs = {k: float(np.mean([getattr(m, k) for m in means])) for k in SCORE_TITLES}
    sizes = sorted({n for _, n in cells})
    counts = sorted({len(s) for s in cells.values()})
    per = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    label = (f"{split}, n={'/'.join(map(str, sizes))}, {per} examples per algorithm and size"
             + (f", mean over {len(means)} algorithms" if len(means) > 1 else ""))
    return {"score": outputs["clrs"], "outputs": outputs, "hints": {}, "per_task": per_task,
            "size": max(sizes), "num": sum(len(s) for s in cells.values()), "label": label}


TEXT_COLUMNS = ["algorithm", "size", *SCORE_TITLES.values()]


def text_table(res: dict) -> tuple[list[dict], list[str]]:
    """Rows (algorithm, size, shape, parse, CLRS) of a text evaluation's `per_task`, then the mean."""
    cells = (res.get("per_task") or {}).values()
    rows = [{"algorithm": r["algorithm"], "size": r["size"], **{t: r["outputs"][k] for k, t in SCORE_TITLES.items()}}
            for r in cells]
    rows.append({"algorithm": "mean", "size": "all", **{t: res["outputs"][k] for k, t in SCORE_TITLES.items()}})
    return rows, TEXT_COLUMNS
