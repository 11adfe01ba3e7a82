"""Training: the loop (`run`), workloads, checkpoints, and evaluating saved checkpoints."""

from relreason.train import text as _text  # noqa: F401  (registers the text workloads: WORKLOADS["text"])
from relreason.train.loop import run
from relreason.train.session import RunResult

__all__ = ["RunResult", "run"]
