"""The shape of a run's configuration: the `Config` of its sections, the `train:` section
(`TrainConfig`), and the range checks that types alone cannot express (`validate`).

    cfg = build_config("mpnn", "bellman_ford")     # relreason.config.resolve fills it in
    cfg.train.lr, cfg.sections(), cfg.to_dict()

A run's configuration has up to four sections:
- `data`: what the task trains and tests on; its dataclass depends on the task kind (CLRS graph
  algorithms, lobster graphs, CLRS-Text: `relreason.data.config`), so `--print-config` never shows
  keys that do not apply;
- `model`: for NAR models the encode-process-decode options (`relreason.models.config.ModelConfig`);
  for text models the text model's own config;
- `processor` (NAR models only): the processor's config dataclass, whose defaults are its paper's;
- `train`: optimisation and the validation schedule (below).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from dataclasses import dataclass, field
from typing import Any

from relreason.errors import RelreasonError
from relreason.schedules import schedule_problems
from relreason.tasks import expand_tasks, task_entries
from relreason.tracking import log_problems

PRECISIONS = ("fp32", "bf16")  # train.precision (relreason.models.precision)


@dataclass
class TrainConfig:
    batch_size: int = 32  # reference default
    lr: float = 1e-3  # reference Adam learning rate
    grad_clip: float | None = 1.0  # global-norm clipping, reference default; null: no clipping
    train_examples: int = 320_000  # 10,000 steps x batch 32, the reference schedule
    eval_every_examples: int = 1_600  # every 50 steps x batch 32, as the reference
    eval_batch_size: int | None = None  # evaluation batch; null: as large as memory allows (scores do not change)
    # the checkpoint kept as best/ and tested: best, the first with the best validation score (the reference's
    # run.py: a strict >); last, the latest validation's (a fixed-budget protocol that tests its final model, as
    # TransNAR's 7 epochs; its best_val is then that validation's score)
    select: str = "best"
    seed: int = 42  # model init and every noise draw derive from it, and the batch order under data.order seeded
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int = 0  # torch intra-op threads; 0 leaves torch's default
    precision: str = "fp32"  # fp32 | bf16: bf16 autocast of the training forward (weights, Adam, evaluation stay fp32)
    # TF32 tensor-core products for float32 matmuls on CUDA (Ampere and later; no effect on CPU), training and
    # evaluation. false: full float32, as on the CPU. The JAX reference may have run TF32: JAX's docs say "By default,
    # JAX leans toward speed: float32 dot products may be computed with reduced-precision arithmetic internally
    # (bfloat16 on TPU, TF32 on recent GPUs)" (docs.jax.dev/en/latest/201/precision.html, jax_default_matmul_precision);
    # which JAX the papers ran is not recorded, so full float32 stays the default and TF32 is a declared option
    tf32: bool = False
    lr_schedule: str = "constant"  # constant | cosine | linear (relreason.schedules): every paper reproduced here keeps lr constant
    warmup_examples: int = 0  # linear warm-up of lr over this many examples first; 0: none (no paper reproduced here warms up)
    min_lr: float = 0.0  # the rate cosine / linear decay reaches at train.train_examples; must stay 0 under constant
    # none | tensorboard (event files in the run directory) | wandb (a W&B run), or several: tensorboard,wandb
    # (pip install 'relreason[tensorboard]' / 'relreason[wandb]'); a view of metrics.jsonl, never the protocol
    log: str = "none"
    # the shape-static step: samples whose trajectory ended are masked, not dropped, so every shape is fixed
    # and nothing is read back to the host (seed groups and CUDA graphs need it); the same numbers to float
    # rounding, a little more work on CPU (finished samples still compute); dense graphs only
    static_step: bool = False
    # CUDA graphs: the static step's forward and backward captured once per batch shape and replayed with
    # one launch (relreason.train.cuda_graphs); the same numbers to float rounding. CUDA, one process, one graph
    # task (a seed group's vmapped step too: one graph for the K seeds); needs static_step
    cuda_graph: bool = False
    # fine-tuning: the checkpoint (a run directory -> its best/, a checkpoint or `export --hub` folder) whose
    # weights start the run instead of a fresh initialisation, loaded strictly; null: a fresh start
    init: str | None = None

    def problems(self) -> list[str]:
        out = [f"train.{k} must be positive, got {getattr(self, k)}"
               for k in ("batch_size", "train_examples", "eval_every_examples") if getattr(self, k) <= 0]
        if self.cuda_graph and not self.static_step:
            out.append("train.cuda_graph needs train.static_step: true (a CUDA graph needs fixed shapes and no "
                       "host reads)")
        if self.select not in ("best", "last"):
            out.append(f"train.select {self.select!r} must be best (the best validation's checkpoint) or last "
                       "(the final one)")
        if self.eval_batch_size is not None and self.eval_batch_size <= 0:
            out.append(f"train.eval_batch_size must be positive or null (automatic), got {self.eval_batch_size}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            out.append(f"train.lr must be a positive finite number, got {self.lr}")
        if self.grad_clip is not None and not (math.isfinite(self.grad_clip) and self.grad_clip > 0):
            out.append(f"train.grad_clip must be positive (or null for no clipping), got {self.grad_clip}")
        if self.seed < 0:
            out.append(f"train.seed must be non-negative, got {self.seed}")
        if self.threads < 0:
            out.append(f"train.threads must be 0 (torch's default) or positive, got {self.threads}")
        if self.precision not in PRECISIONS:
            out.append(f"train.precision must be {' or '.join(PRECISIONS)}, got {self.precision!r}")
        if self.device not in ("auto", "cpu", "cuda") and not re.fullmatch(r"cuda:\d+", self.device):
            out.append(f"train.device {self.device!r} must be auto, cpu, cuda or cuda:N")
        if self.init is not None and not self.init.strip():
            out.append("train.init must name a checkpoint directory, or be null (a fresh start)")
        out.extend(schedule_problems(self))
        out.extend(log_problems(self.log))
        return out


SECTIONS = ("data", "model", "processor", "train")


@dataclass
class Config:
    """A resolved run configuration (what `--print-config` shows and checkpoints store)."""

    model_name: str  # model registry name, e.g. "mpnn", "rt", "text_transformer"
    task: str  # a task, or a comma list / group of tasks for multi-task training ("core8")
    data: Any = None  # the task kind's data config
    model: Any = None  # ModelConfig (NAR models) or the text model's config
    processor: Any = None  # NAR models: the processor's config dataclass; text models: None
    train: TrainConfig = field(default_factory=TrainConfig)
    recipe: str | None = None  # the recipe that was applied (resolved name; "default" when none)
    # "section.key" -> the layer that set it ("recipe rt: paper Table 5"); not part of the config itself
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # the recipe's own `deviation:` statement, read when the recipe was resolved: a run stores it, so
    # no later step looks the recipe up again (a YAML path may be gone); not part of the config itself
    deviation: str | None = field(default=None, compare=False, repr=False)

    def sections(self) -> tuple[str, ...]:
        return tuple(s for s in SECTIONS if getattr(self, s) is not None)

    def to_dict(self) -> dict:
        return {"model_name": self.model_name, "task": self.task, "recipe": self.recipe,
                **{s: to_plain(getattr(self, s)) for s in self.sections()}}

    @property
    def tasks(self) -> list[str]:
        """The task names this config trains on (groups expanded)."""
        return expand_tasks(self.task)


def to_plain(obj: Any) -> Any:
    """Dataclasses/enums -> plain YAML/JSON values."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_plain(x) for x in obj]
    return obj


def validate(cfg: Config) -> None:
    """Range checks that types alone cannot express, all reported at once."""
    problems = list(cfg.train.problems())
    problems += cfg.data.problems()
    task_check = getattr(cfg.data, "task_problems", None)  # e.g. a graph family given to non-graph algorithms
    if task_check is not None:
        problems += task_check(cfg.tasks)
    check = getattr(cfg.model, "problems", None)
    if check is not None:
        problems += check()
    model_task_check = getattr(cfg.model, "task_problems", None)  # e.g. a dropped hint no task has
    if model_task_check is not None:
        problems += model_task_check({t.name: t.spec for t in task_entries(cfg.task) if t.spec is not None})
    if problems:
        raise RelreasonError("invalid configuration: " + "; ".join(problems), "fix the recipe or --set values")


__all__ = ["PRECISIONS", "SECTIONS", "TrainConfig", "Config", "to_plain", "validate"]
