"""Experiment trackers: where a run sends its numbers besides metrics.jsonl (`train.log`).

    tracker = open_trackers(cfg.train.log, run_dir, resumed_at=examples, about=RunAbout(...))  # `none`: a no-op
    tracker.scalars(examples, {"train/loss": 0.41, "train/lr": 1e-3})
    tracker.close()

`train.log` names one tracker or several, comma-separated (`tensorboard,wandb`); each gets every scalar.
metrics.jsonl stays the run's record (what `runs`, `compare`, `plot` and resuming read); a tracker is a
view for dashboards and is never read back. Its package is imported only when the tracker is opened, so
nothing else in relreason imports it, and a missing package is one line naming the extra to install.

`tensorboard` writes event files into the run directory itself (`tensorboard --logdir runs` shows one run
per directory) through torch.utils.tensorboard. The x axis is training examples, as in metrics.jsonl.
A resumed run appends a new event file with `purge_step` one past the example count it resumes from:
TensorBoard then hides whatever the killed session logged after its last checkpoint, and the resumed
session logs those steps again, so no step appears twice. A new run purges from step 0: the event files
of an attempt killed before its first checkpoint (whose metrics.jsonl is discarded too) are hidden.

`wandb` logs to Weights & Biases (online, or offline under WANDB_MODE=offline; WANDB_PROJECT names the
project, default relreason; its files go to WANDB_DIR, by default the run directory's wandb/): the resolved
config with the run's command, hardware and directory, grouped as W&B `group` (the study of an `ablate` /
`reproduce` cell), `job_type` (its variant, or "train") and `name` (the cell, or the run's name). W&B's step
is the example count. The run's W&B id is kept in the run directory (`wandb.json`), so a resumed run
continues the same W&B run. W&B's steps only move forward and cannot be purged offline, so `wandb.json`
also holds the last step sent (rewritten in place at every log, one small write): a resumed session sends
only the steps after it. The steps a killed session sent after its last checkpoint keep that session's
values (the same numbers on CPU, where a resumed run retraces its steps exactly); no step is sent twice.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from relreason.errors import RelreasonError
from relreason.files import maybe_json_object
from relreason.registry import Registry


class Tracker(Protocol):
    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Records each value under its tag at `step` (training examples)."""

    def close(self) -> None:
        """Flushes and closes (idempotent)."""


@dataclass(frozen=True)
class RunAbout:
    """What a tracker may show about a run besides its numbers (W&B's config, group, job type and name)."""

    name: str  # the run's display name: a cell's label, or the run directory's name
    config: dict = field(default_factory=dict)  # the resolved config (Config.to_dict())
    command: str | None = None  # the relreason command line that trains it
    hardware: tuple[str, ...] = ()  # every machine a session of the run trained on
    group: str | None = None  # the study of an ablate / reproduce cell
    job_type: str = "train"  # the cell's variant; "train" for a single run


class NullTracker:
    """`train.log=none`: records nothing."""

    def scalars(self, step: int, values: dict[str, float]) -> None:
        pass

    def close(self) -> None:
        pass


class TensorBoardTracker:
    """Event files through torch.utils.tensorboard's SummaryWriter."""

    def __init__(self, run_dir: Path, resumed_at: int | None, about: RunAbout | None = None):
        from torch.utils.tensorboard import SummaryWriter  # optional: the tensorboard extra

        # purge_step: events of earlier sessions at steps >= it are hidden (module docstring)
        self.writer = SummaryWriter(str(run_dir), purge_step=0 if resumed_at is None else resumed_at + 1)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    """A Weights & Biases run (module docstring): its id and last step sent kept in RUN_DIR/wandb.json."""

    RECORD = "wandb.json"
    WIDTH = 96  # wandb.json's fixed size: the step is rewritten in place (JSON padded with spaces)

    def __init__(self, run_dir: Path, resumed_at: int | None, about: RunAbout | None = None):
        import wandb  # optional: the wandb extra

        about = about or RunAbout(Path(run_dir).name)
        self.path = Path(run_dir) / self.RECORD
        stored = self._stored() if resumed_at is not None else {}
        self.id = stored.get("id") or "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
        self.sent = stored.get("step", -1)  # the last step the W&B run holds: a resumed session sends only later ones
        self.skip_through = self.sent
        self._write()
        self.fd = os.open(self.path, os.O_WRONLY)
        config = {**about.config, "run": {"command": about.command, "hardware": list(about.hardware),
                                          "directory": str(run_dir)}}
        self.run = wandb.init(id=self.id, resume="allow", project=os.environ.get("WANDB_PROJECT") or "relreason",
                              # WANDB_DIR read here, per run: wandb itself reads the environment once per process
                              dir=os.environ.get("WANDB_DIR") or str(run_dir), group=about.group,
                              job_type=about.job_type, name=about.name, config=config,
                              settings=wandb.Settings(console="off", quiet=True))

    def _stored(self) -> dict:
        data = maybe_json_object(self.path)  # None: none yet (the tracker came on at this resume) or unreadable
        ok = isinstance(data, dict) and isinstance(data.get("id"), str) and isinstance(data.get("step"), int)
        return data if ok else {}

    def _text(self) -> bytes:
        return json.dumps({"id": self.id, "step": self.sent}).encode().ljust(self.WIDTH)

    def _write(self) -> None:
        """The whole record, atomically (temp + rename: a kill leaves the old one or the new one)."""
        tmp = self.path.with_name(f".{self.RECORD}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask's permissions
        try:
            os.write(fd, self._text())
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if step <= self.skip_through:
            return
        self.run.log(values, step=step)
        if step != self.sent:
            self.sent = step
            os.pwrite(self.fd, self._text(), 0)  # one small write in place: survives a kill of this process

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
            os.close(self.fd)


class Trackers:
    """Several trackers as one (`train.log=tensorboard,wandb`): each gets every scalar; all are closed."""

    def __init__(self, trackers: list[Tracker]):
        self.trackers = trackers

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for t in self.trackers:
            t.scalars(step, values)

    def close(self) -> None:
        errors = []
        for t in self.trackers:
            try:
                t.close()
            except Exception as e:  # noqa: BLE001 - the others are closed first, then it is raised
                errors.append(e)
        if errors:
            raise errors[0]


def _wandb_installed() -> None:
    try:
        import wandb  # noqa: F401  (optional: the wandb extra)
    except ImportError:
        raise RelreasonError("train.log=wandb needs the wandb package",
                             "pip install 'relreason[wandb]', or drop wandb from train.log") from None


def _tensorboard_installed() -> None:
    try:
        import tensorboard  # noqa: F401  (optional: the tensorboard extra)
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401  (optional: the tensorboard extra)
    except ImportError:
        raise RelreasonError("train.log=tensorboard needs the tensorboard package",
                             "pip install 'relreason[tensorboard]', or drop --set train.log=tensorboard") from None


@dataclass(frozen=True)
class TrackerKind:
    """A `train.log` choice: `check()` raises the one-line install error before a run starts;
    `open(run_dir, resumed_at, about)` gives the Tracker (`resumed_at`: the example count a resumed run
    continues from; `about`: the run's name, config, command... for trackers that show them)."""

    name: str
    check: Callable[[], None]
    factory: Callable[[Path, int | None, RunAbout | None], Tracker]
    summary: str

    def open(self, run_dir: Path, resumed_at: int | None = None, about: RunAbout | None = None) -> Tracker:
        self.check()
        return self.factory(Path(run_dir), resumed_at, about)


TRACKERS: Registry[TrackerKind] = Registry("tracker (train.log)")
TRACKERS.register("none", TrackerKind("none", lambda: None, lambda d, r, a: NullTracker(), "metrics.jsonl only"))
TRACKERS.register("tensorboard", TrackerKind("tensorboard", _tensorboard_installed, TensorBoardTracker,
                                             "also TensorBoard event files in the run directory"))
TRACKERS.register("wandb", TrackerKind("wandb", _wandb_installed, WandbTracker,
                                       "also a Weights & Biases run (its id kept in the run directory)"))


def tracker_names(log: str) -> list[str]:
    """`train.log` -> the trackers it names: "tensorboard,wandb" -> ["tensorboard", "wandb"]; "none" -> []."""
    return [n for n in (x.strip() for x in log.split(",")) if n != "none"]


def log_problems(log: str) -> list[str]:
    """What is wrong with a `train.log` value (config validation): unknown names, repeats, none with others."""
    names = [x.strip() for x in log.split(",")]
    known = ", ".join(TRACKERS.names())
    if any(n not in TRACKERS for n in names):
        return [f"train.log must be one of {known}, or several comma-separated (tensorboard,wandb), got {log!r}"]
    if len(set(names)) < len(names) or ("none" in names and len(names) > 1):
        return [f"train.log {log!r} names a tracker twice or none with others"]
    return []


def check_trackers(log: str) -> None:
    """Raises the one-line install error of the first tracker of `log` whose package is missing."""
    for name in tracker_names(log):
        TRACKERS.get(name).check()


def open_trackers(log: str, run_dir: Path, resumed_at: int | None = None, about: RunAbout | None = None) -> Tracker:
    """The trackers `train.log` names, opened as one (a no-op for none); one that fails to open closes the
    others opened before it."""
    opened: list[Tracker] = []
    try:
        for name in tracker_names(log):
            opened.append(TRACKERS.get(name).open(run_dir, resumed_at, about))
    except BaseException:
        Trackers(opened).close()
        raise
    return opened[0] if len(opened) == 1 else Trackers(opened) if opened else NullTracker()


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


__all__ = ["TRACKERS", "Tracker", "TrackerKind", "RunAbout", "NullTracker", "TensorBoardTracker", "WandbTracker",
           "Trackers", "tracker_names", "log_problems", "check_trackers", "open_trackers", "scalar_tags"]
