"""Training: the loop (`run`), checkpoints, and the evaluation they share with `relreason eval`."""

from relreason.train.loop import RunResult, run

__all__ = ["RunResult", "run"]
