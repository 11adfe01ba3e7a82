"""Training: the loop (`run`), workloads, checkpoints, and evaluating saved checkpoints."""

from relreason.train import text as _text  # noqa: F401  (registers the text workloads: WORKLOADS["text"])
from relreason.train.loop import RunResult, run

__all__ = ["RunResult", "run"]
