"""Learning-rate schedules: the rate of every optimizer update as a function of the examples trained.

    lr = learning_rate(cfg.train, examples)   # before the update that trains examples .. examples + batch

A schedule is `train.lr_schedule` (a decay shape, below), `train.warmup_examples` and `train.min_lr`:
1. warm-up: for the first `warmup_examples` examples the rate rises linearly, lr x (e + b) / W at the
   update that starts at example e (batch b, W = warmup_examples), so the first update is not wasted at
   rate 0 and the update that ends at W runs at lr;
2. decay: afterwards the shape takes the rate from lr (q = 0) towards min_lr (q = 1), where
   q = (e - W) / (train_examples - W) is the fraction of the post-warm-up budget trained.

The rate is a pure function of (configuration, examples): no scheduler state exists, so a run resumed
from `last/` (which stores the example count) sets exactly the rates of an uninterrupted run. A resume
that raises `train.train_examples` stretches the decay over the new budget from that point on.

Sources. No protocol relreason reproduces uses a schedule: each paper gives one Adam learning rate
(shared facts in published-tables.md: CLRS-30, Ibarz et al. 2022, the RT paper's Table 2, the Edge
Transformer's CLRS fork, TransNAR's "Adam, 1e-4" with no schedule named), and the code behind them keeps
it constant: google-deepmind/clrs baselines.py builds `optax.adam(learning_rate)` (or clipping, then
scale_by_adam and scale(-learning_rate)); Ruoss et al. 2023's randomized positional encodings, which
TransNAR uses, train with `optax.adam(learning_rate)` (google-deepmind/randomized_positional_encodings,
experiments/training.py). So `constant` is the default and the other shapes are for studies of one's
own, not any of those papers' protocols. The shapes come from: linear warm-up, Goyal et al. 2017
("Accurate, Large Minibatch SGD", gradual warm-up); cosine decay, Loshchilov & Hutter 2017 ("SGDR", one
cosine period without restarts); linear decay after a warm-up, BERT's pre-training (Devlin et al. 2019).
SALSA-CLRS (Minder et al. 2023) lowers the rate when validation plateaus (ReduceLROnPlateau, factor
0.1, patience 10): that depends on the scores, so it is not offered here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from relreason.registry import Registry


@dataclass(frozen=True)
class DecayShape:
    """How the rate goes from lr to min_lr after the warm-up: `fraction(q)` is 1 at q = 0 and the share of
    (lr - min_lr) still left at q in [0, 1]."""

    name: str
    fraction: Callable[[float], float]
    summary: str


LR_SCHEDULES: Registry[DecayShape] = Registry("learning-rate schedule")
LR_SCHEDULES.register("constant", DecayShape("constant", lambda q: 1.0, "lr throughout (every paper relreason reproduces)"))
LR_SCHEDULES.register("cosine", DecayShape("cosine", lambda q: 0.5 * (1.0 + math.cos(math.pi * q)),
                                           "half a cosine from lr to min_lr (Loshchilov & Hutter 2017)"))
LR_SCHEDULES.register("linear", DecayShape("linear", lambda q: 1.0 - q, "a straight line from lr to min_lr"))


def schedule_problems(t) -> list[str]:
    """What is wrong with the schedule keys of a TrainConfig `t` (its `problems()` reports them)."""
    out = []
    if t.lr_schedule not in LR_SCHEDULES:
        out.append(f"train.lr_schedule must be one of {', '.join(LR_SCHEDULES.names())}, got {t.lr_schedule!r}")
    if t.warmup_examples < 0:
        out.append(f"train.warmup_examples must be 0 (no warm-up) or positive, got {t.warmup_examples}")
    elif t.warmup_examples >= t.train_examples > 0:
        out.append(f"train.warmup_examples ({t.warmup_examples}) must be below train.train_examples "
                   f"({t.train_examples})")
    if not (math.isfinite(t.min_lr) and 0.0 <= t.min_lr):
        out.append(f"train.min_lr must be a finite number >= 0, got {t.min_lr}")
    elif t.lr_schedule == "constant" and t.min_lr != 0.0:
        out.append(f"train.min_lr ({t.min_lr}) applies to a decaying schedule; train.lr_schedule is constant")
    elif math.isfinite(t.lr) and t.min_lr > t.lr:
        out.append(f"train.min_lr ({t.min_lr}) must not exceed train.lr ({t.lr})")
    return out


def learning_rate(t, examples: int) -> float:
    """The rate of the update that starts after `examples` training examples, for a TrainConfig `t`
    (lr, lr_schedule, warmup_examples, min_lr, train_examples, batch_size). Under `constant` without
    warm-up it is `t.lr` itself, so the default changes no run by a bit."""
    warmup = t.warmup_examples
    if examples < warmup:
        return t.lr * min(1.0, (examples + t.batch_size) / warmup)
    q = min(1.0, (examples - warmup) / max(1, t.train_examples - warmup))
    # constant: min_lr is 0 (schedule_problems), so this is 0.0 + lr * 1.0, exactly lr
    return t.min_lr + (t.lr - t.min_lr) * LR_SCHEDULES.get(t.lr_schedule).fraction(q)


__all__ = ["LR_SCHEDULES", "DecayShape", "learning_rate", "schedule_problems"]
