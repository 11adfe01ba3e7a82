"""CLRS-Text workloads: the text transformer and TransNAR through the generic training loop.

    wl = build_workload(build_config("text_transformer", "text:insertion_sort"), device)
    part, = wl.step_batches(step)                      # one optimizer update per step
    loss, terms = wl.loss(wl.model, part, step)
    res = wl.evaluate("test")                          # per_task["insertion_sort@10"]["outputs"]: shape, parse, clrs

One model per run, whatever the number of algorithms: a task string naming several text tasks (a group
such as text:clrs30 or text:core8, or a comma list text:insertion_sort,text:bfs) trains one text
transformer or one TransNAR on all of them at once, as the TransNAR paper trains its models (one
dataset of every algorithm and size, seven epochs of it), and scores it per algorithm and size.
`train.train_examples` counts examples of the whole mix (one batch per step, unlike multi-task NAR runs,
which take one batch per algorithm per step): seven epochs of text:clrs30's `paper` preset are
7 x 30 x 42,000 examples.

The modules, by concern: `examples` (the streams' examples, run and rendered as text and graphs when
used), `batches` (a training step's batch as token chunks of similar lengths), `workload`
(`TextWorkload`: the model, its training batches and loss, its evaluation), `evaluation` (greedy
decoding; the scores' summary and table are relreason.eval.text_score's, shared with `relreason score`)
and `transnar` (`TransNARWorkload`: the frozen NAR beside the text model). Importing this package registers the workload family `WORKLOADS["text"]`.
"""

from __future__ import annotations

import torch

from relreason.config import Config
from relreason.models.text import TransNARModelConfig
from relreason.train.text.batches import text_generator
from relreason.train.text.transnar import TransNARWorkload
from relreason.train.text.workload import TextWorkload
from relreason.train.workloads import WORKLOADS

__all__ = ["TextWorkload", "TransNARWorkload", "build_text_workload", "text_generator"]


def build_text_workload(cfg: Config, device: torch.device) -> TextWorkload:
    cls = TransNARWorkload if isinstance(cfg.model, TransNARModelConfig) else TextWorkload
    return cls(cfg, device)


WORKLOADS.register("text", build_text_workload)
