"""Finding runs: every run directory under a folder (ablation cells included), newest first, and the
runs a command line names.

    runs = discover_runs("runs", metric_of)                          # [RunInfo], newest first
    runs = load_runs(["runs/a", "runs/b"], root=None, metric_of=None)   # named runs, each once

A task has one metric: an unfinished run that recorded none yet takes the metric of a finished run of
its task, so its best validation is picked in the right direction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from relreason.errors import RelreasonError
from relreason.eval.metric_kinds import UNKNOWN_METRIC, MetricLookup
from relreason.rundir import find_run_dirs
from relreason.runs.records import RunInfo, read_run


def discover_runs(root: Path | str = "runs", metric_of: Optional[MetricLookup] = None) -> list[RunInfo]:
    """Every run under `root` (recursively, ablation cells included), newest first.

    Names are paths relative to `root`. Raises RelreasonError when there is none."""
    root = Path(root)
    if not root.is_dir():
        raise RelreasonError(f"{root} is not a directory",
                             "give the folder holding runs (default: runs) or an ablation folder (ablations/NAME)")
    runs = []
    for d in find_run_dirs(root):
        rel = d.relative_to(root).as_posix()
        runs.append(read_run(d, root.name if rel == "." else rel, metric_of))
    if not runs:
        raise RelreasonError(f"no runs found under {root}", "train one: relreason train mpnn bfs --recipe quick")
    return sort_runs(_share_metrics(runs, metric_of))


def _share_metrics(runs: list[RunInfo], metric_of: Optional[MetricLookup]) -> list[RunInfo]:
    """A task has one metric: an unfinished run that recorded none takes that of a run of its task
    that did (re-read, so its best validation is picked in the right direction)."""
    known = {}
    for r in runs:
        for task, (_, m) in r.scores().items():
            if m.name != UNKNOWN_METRIC.name:
                known.setdefault(task, (m.name, m.lower_is_better))
    lookup = lambda task: known.get(task) or (metric_of(task) if metric_of else None)  # noqa: E731
    return [read_run(r.path, r.name, lookup) if r.metric.name == UNKNOWN_METRIC.name and r.task in known else r
            for r in runs]


def sort_runs(runs: list[RunInfo]) -> list[RunInfo]:
    """Newest first: by the time a run last wrote anything, then by name."""
    return sorted(runs, key=lambda r: (-r.updated, r.name))


def load_runs(paths: Iterable[Path | str], root: Optional[Path | str] = None,
              metric_of: Optional[MetricLookup] = None) -> list[RunInfo]:
    """The runs named on a command line plus every run under `root`; each directory once."""
    runs, seen = [], set()
    for p in paths:
        text = str(p).rstrip("/") or str(p)
        r = read_run(Path(p), text, metric_of)
        if r.path.resolve() not in seen:
            seen.add(r.path.resolve())
            runs.append(r)
    if root is not None:
        for r in discover_runs(root, metric_of):
            if r.path.resolve() not in seen:
                seen.add(r.path.resolve())
                runs.append(r)
    if not runs:
        raise RelreasonError("no runs given", "name run directories, or pass --runs DIR")
    return _share_metrics(runs, metric_of)


__all__ = ["discover_runs", "load_runs", "sort_runs"]
