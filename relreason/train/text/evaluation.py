"""Evaluating a text run: greedy decoding, scored with TransNAR's shape / parse / CLRS scores.

Evaluation is greedy decoding with the KV cache, capped at the longest true answer of the batch +
DECODE_MARGIN tokens, scored with TransNAR's shape / parse / CLRS (relreason.data.text.score_answer,
on the final answer); positions (randomized under PositionMode.RANDOM, as in Ruoss et al.'s code) come
from a generator fixed per (split, algorithm, size), so every validation sees the same draw.
Validation: the preset's validation split, `data.val_num` per (algorithm, size); its score, which
picks the best checkpoint, is the CLRS score averaged over each algorithm's examples, then over the
algorithms. Test: at `data.test_sizes`; `per_task` holds every (algorithm, size) cell under
"insertion_sort@10" and the run's score is the mean CLRS score (relreason.eval.text_score.summarize_text_scores,
which `relreason score` shares).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

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
