"""Experiment trackers: where a run sends its numbers besides metrics.jsonl (`train.log`).

    tracker = TRACKERS.get(cfg.train.log).open(run_dir, resumed_at=examples)   # `none` opens a no-op
    tracker.scalars(examples, {"train/loss": 0.41, "train/lr": 1e-3})
    tracker.close()

metrics.jsonl stays the run's record (what `runs`, `compare`, `plot` and resuming read); a tracker is a
view for dashboards and is never read back. Its package is imported only when the tracker is opened, so
nothing else in relreason imports it, and a missing package is one line naming the extra to install.

`tensorboard` writes event files into the run directory itself (`tensorboard --logdir runs` shows one run
per directory) through torch.utils.tensorboard. The x axis is training examples, as in metrics.jsonl.
A resumed run appends a new event file with `purge_step` one past the example count it resumes from:
TensorBoard then hides whatever the killed session logged after its last checkpoint, and the resumed
session logs those steps again, so no step appears twice. A new run purges from step 0: the event files
of an attempt killed before its first checkpoint (whose metrics.jsonl is discarded too) are hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from relreason.errors import RelreasonError
from relreason.registry import Registry


class Tracker(Protocol):
    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Records each value under its tag at `step` (training examples)."""

    def close(self) -> None:
        """Flushes and closes (idempotent)."""


class NullTracker:
    """`train.log=none`: records nothing."""

    def scalars(self, step: int, values: dict[str, float]) -> None:
        pass

    def close(self) -> None:
        pass


class TensorBoardTracker:
    """Event files through torch.utils.tensorboard's SummaryWriter."""

    def __init__(self, run_dir: Path, resumed_at: int | None):
        from torch.utils.tensorboard import SummaryWriter

        # purge_step: events of earlier sessions at steps >= it are hidden (module docstring)
        self.writer = SummaryWriter(str(run_dir), purge_step=0 if resumed_at is None else resumed_at + 1)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        self.writer.close()


def _tensorboard_installed() -> None:
    try:
        import tensorboard  # noqa: F401
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        raise RelreasonError("train.log=tensorboard needs the tensorboard package",
                             "pip install 'relreason[tensorboard]', or drop --set train.log=tensorboard") from None


@dataclass(frozen=True)
class TrackerKind:
    """A `train.log` choice: `check()` raises the one-line install error before a run starts;
    `open(run_dir, resumed_at)` gives the Tracker (`resumed_at`: the example count a resumed run continues from)."""

    name: str
    check: Callable[[], None]
    factory: Callable[[Path, int | None], Tracker]
    summary: str

    def open(self, run_dir: Path, resumed_at: int | None = None) -> Tracker:
        self.check()
        return self.factory(Path(run_dir), resumed_at)


TRACKERS: Registry[TrackerKind] = Registry("tracker (train.log)")
TRACKERS.register("none", TrackerKind("none", lambda: None, lambda d, r: NullTracker(), "metrics.jsonl only"))
TRACKERS.register("tensorboard", TrackerKind("tensorboard", _tensorboard_installed, TensorBoardTracker,
                                             "also TensorBoard event files in the run directory"))


def scalar_tags(prefix: str, record: dict) -> dict[str, float]:
    """The finite numbers of a (nested) record as `prefix/key/...` tags: {"score": 0.9, "outputs": {"pi":
    0.9}} -> {"val/score": 0.9, "val/outputs/pi": 0.9}. Non-numbers (None, strings, lists) are left out."""
    out: dict[str, float] = {}
    for key, value in record.items():
        tag = f"{prefix}/{key}"
        if isinstance(value, dict):
            out.update(scalar_tags(tag, value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[tag] = float(value)
    return out


__all__ = ["TRACKERS", "Tracker", "TrackerKind", "NullTracker", "TensorBoardTracker", "scalar_tags"]
