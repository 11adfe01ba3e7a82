"""Runs as records: find the run directories under a folder (ablation cells included), read what
each holds, tell finished from running from interrupted, and aggregate seeds as mean ± std.

    from relreason.eval.runs import compare, discover_runs, render_comparison
    runs = discover_runs("runs")                  # newest first
    cmp = compare(runs, group_by="task")          # tasks as rows, models side by side
    print(render_comparison(cmp, "md"))

`relreason runs | compare | plot` are thin layers over this module. It relies only on the run
directory contract: `config.json` ({"relreason", "config": {model_name, task, train: {seed}},
"command"}), and optionally `metrics.jsonl` (one JSON line per validation, then the test),
`results.json` (the summary of a finished run) and `.lock` ({"pid", "host", "started"}, held while
the run trains). Every missing or unreadable piece has a stated fallback: a record never crashes a
listing, it carries a `problems` note instead.

Scores are stored as the metric computes them (CLRS: fractions in [0, 1]) and shown in the metric's
unit (CLRS: percent). Seeds are aggregated with the sample standard deviation (ddof = 1, relreason.eval.stats), as
`relreason ablate` and `relreason reproduce` do, so every command prints the same numbers for the same runs.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from rich.markup import escape
from rich.table import Table

from relreason.errors import RelreasonError
from relreason.eval.stats import STD_KIND, Summary as Stat
from relreason.protocol import NOT_PROTOCOL_KEYS
from relreason.registry import Registry


# ---------------------------------------------------------------------------------------------
# Metrics: what a score means and which way is better


@dataclass(frozen=True)
class Metric:
    name: str  # the key results.json stores as "metric"
    label: str  # what the numbers are, in the unit shown
    short: str  # a narrow label for the `runs` table
    percent: bool  # stored as fractions in [0, 1], shown x 100
    lower_is_better: Optional[bool]  # None: the run did not say and no registry knows

    @property
    def direction(self) -> str:
        if self.lower_is_better is None:
            return "direction unknown"
        return "lower is better" if self.lower_is_better else "higher is better"

    def describe(self) -> str:
        """E.g. "accuracy/F1 %, higher is better"."""
        return f"{self.label}, {self.direction}"


METRICS: Registry[Metric] = Registry("metric")
METRICS.register("clrs", Metric("clrs", "accuracy/F1 %", "acc/F1 % ↑", percent=True, lower_is_better=False))
METRICS.register("text_clrs", Metric("text_clrs", "CLRS-Text accuracy/F1 %", "text acc/F1 % ↑", percent=True,
                                     lower_is_better=False))
METRICS.register("relative_loss", Metric("relative_loss", "relative loss", "rel. loss ↓", percent=False,
                                         lower_is_better=True))
UNKNOWN_METRIC = Metric("unknown", "score (metric not recorded)", "?", percent=False, lower_is_better=None)

# metric_of(task) -> (metric name, lower_is_better) or None: where scores come from when a run's
# results.json predates the "metric" key (the CLI passes the task registry's answer)
MetricLookup = Callable[[str], Optional[tuple[str, bool]]]


def resolve_metric(name: Optional[str], lower_is_better: Optional[bool], task: Optional[str] = None,
                   metric_of: Optional[MetricLookup] = None) -> Metric:
    """The metric a score was computed with: what the run recorded, else what `metric_of(task)` says."""
    if name is None and task is not None and metric_of is not None:
        known = metric_of(task)
        if known is not None:
            name, recorded = known
            lower_is_better = recorded if lower_is_better is None else lower_is_better
    if name is None:
        return dataclasses.replace(UNKNOWN_METRIC, lower_is_better=lower_is_better)
    if name in METRICS:
        m = METRICS.get(name)
        if lower_is_better is not None and lower_is_better != m.lower_is_better:
            m = dataclasses.replace(m, lower_is_better=lower_is_better)
        return m
    return Metric(name, name, name, percent=False, lower_is_better=lower_is_better)


def format_score(value: Optional[float], metric: Metric) -> str:
    if value is None:
        return "-"
    return f"{value * 100:.2f}" if metric.percent else f"{value:.4f}"


# ---------------------------------------------------------------------------------------------
# One run


class Status(str, enum.Enum):
    FINISHED = "finished"  # results.json exists
    RUNNING = "running"  # its lock names a live process on this host
    INTERRUPTED = "interrupted"  # neither: killed, crashed or stopped with Ctrl-C (resumable)


@dataclass
class RunInfo:
    """What one run directory says about itself. Missing values are None, never guessed."""

    path: Path
    name: str  # relative to the folder it was found in (or the path as given)
    model: Optional[str]
    task: Optional[str]
    seed: Optional[int]
    status: Status
    metric: Metric
    examples: Optional[int]  # training examples seen (results.json, else the last validation)
    best_val: Optional[float]
    best_examples: Optional[int]
    test: Optional[float]  # OOD test headline score of the best checkpoint
    test_size: Optional[int]
    per_task: dict = field(default_factory=dict)  # multi-task runs: {task: (score, Metric)}
    config: dict = field(default_factory=dict)  # the resolved config; {} when unreadable
    started: Optional[float] = None  # epoch seconds (the lock's, else config.json's mtime)
    updated: float = 0.0  # epoch seconds of the newest file the run wrote
    ablation: Optional[str] = None  # for ablation cells: the ablation and variant directory names
    variant: Optional[str] = None
    lock: Optional[dict] = None
    problems: list = field(default_factory=list)  # unreadable files, in words

    def scores(self) -> dict:
        """{task: (OOD test score, Metric)}: one task for a single-task run, each of `per_task` else."""
        if self.per_task:
            return dict(self.per_task)
        if self.task is None:
            return {}
        return {self.task: (self.test, self.metric)}

    def to_dict(self, now: Optional[float] = None) -> dict:
        now = time.time() if now is None else now
        return {"name": self.name, "path": str(self.path), "model": self.model, "task": self.task,
                "seed": self.seed, "status": self.status.value, "metric": self.metric.name,
                "lower_is_better": self.metric.lower_is_better, "examples": self.examples,
                "best_val": self.best_val, "best_examples": self.best_examples, "test": self.test,
                "test_size": self.test_size,
                "per_task": {t: {"score": s, "metric": m.name} for t, (s, m) in self.per_task.items()},
                "ablation": self.ablation, "variant": self.variant, "started": self.started,
                "updated": self.updated, "age_seconds": round(now - self.updated, 1), "problems": self.problems}


def _read_json(path: Path, problems: list) -> Optional[dict]:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        problems.append(f"{path.name} unreadable")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name} is not a JSON object")
        return None
    return data


def read_metrics(run_dir: Path) -> list[dict]:
    """The records of `metrics.jsonl` (lines cut by a kill are skipped); [] when there is none."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            records.append(rec)
    return records


def validation_records(records: list[dict]) -> list[dict]:
    """Validation records with a numeric `examples` and `score`, in training order."""
    return [r for r in records if r.get("event") == "val" and _number(r.get("examples")) is not None
            and _number(r.get("score")) is not None]


def run_status(run_dir: Path) -> tuple[Status, Optional[dict]]:
    """finished if results.json exists; running if a live process holds the run's lock (an OS file lock,
    so it also answers for other hosts on a shared filesystem and never mistakes a reused pid); else
    interrupted. The second value is the holder's record ({"pid", "host", "started"}) when known."""
    from relreason.runtime import lock_holder

    run_dir = Path(run_dir)
    holder = lock_holder(run_dir)
    if (run_dir / "results.json").exists():
        return Status.FINISHED, holder
    if holder is not None:
        return Status.RUNNING, holder
    return Status.INTERRUPTED, None


def _number(x) -> Optional[float]:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def _int(x) -> Optional[int]:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _bool(x) -> Optional[bool]:
    return x if isinstance(x, bool) else None


def _str(x) -> Optional[str]:
    return x if isinstance(x, str) and x else None


def _best(values: Iterable[tuple[float, int]],
          lower_is_better: Optional[bool]) -> tuple[Optional[float], Optional[int]]:
    vals = [(v, e) for v, e in values if not math.isnan(v)]
    if not vals or lower_is_better is None:
        return None, None
    # the first of equal scores, as the training loop keeps the first checkpoint that reached it
    pick = min if lower_is_better else max
    best = pick(v for v, _ in vals)
    return best, next(e for v, e in vals if v == best)


_SEED_DIR = re.compile(r"seed\d+")


def is_run_dir(path: Path) -> bool:
    """A folder with a run's config.json (or results.json); checkpoints and bundles hold weights and are not runs."""
    path = Path(path)
    if (path / "model.safetensors").exists():
        return False
    cfg = _read_json(path / "config.json", [])
    if cfg is not None and isinstance(cfg.get("config"), dict):
        return True
    res = _read_json(path / "results.json", [])  # a run whose config.json is lost; not an ablation summary
    return res is not None and "cells" not in res and ("test" in res or "model" in res)


def read_run(path: Path, name: Optional[str] = None, metric_of: Optional[MetricLookup] = None) -> RunInfo:
    """Reads one run directory. Raises RelreasonError when `path` is not one."""
    path = Path(path)
    if not is_run_dir(path):
        raise RelreasonError(f"{path} is not a run directory (no run config.json or results.json)",
                             _not_a_run_hint(path))
    problems: list[str] = []
    root = _read_json(path / "config.json", problems) or {}
    cfg = root.get("config") if isinstance(root.get("config"), dict) else {}
    res = _read_json(path / "results.json", problems) or {}
    status, lock = run_status(path)
    train = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    model = _str(cfg.get("model_name")) or _str(res.get("model"))
    task = _str(cfg.get("task")) or _str(res.get("task"))
    seed = _int(train.get("seed"))
    seed = seed if seed is not None else _int(res.get("seed"))
    lib = _bool(res.get("lower_is_better"))
    metric = resolve_metric(_str(res.get("metric")), lib, task, metric_of)

    records = read_metrics(path)
    vals = validation_records(records)
    test_block = res.get("test") if isinstance(res.get("test"), dict) else {}
    if res:
        examples, best_val = _int(res.get("examples")), _number(res.get("best_val"))
        best_examples = _int(res.get("best_examples"))
    else:  # unfinished: what its validations so far say
        examples = _int(vals[-1]["examples"]) if vals else None
        best_val, best_examples = _best(((float(r["score"]), r["examples"]) for r in vals), metric.lower_is_better)
    per_task = {}
    if isinstance(res.get("per_task"), dict):
        for t, block in res["per_task"].items():
            block = block if isinstance(block, dict) else {"score": block}
            # the task's own record, else the run's, else what the task registry knows
            task_metric = _str(block.get("metric")) or _str(res.get("metric"))
            blib = _bool(block.get("lower_is_better"))
            per_task[t] = (_number(block.get("score")),
                           resolve_metric(task_metric, lib if blib is None else blib, t, metric_of))

    times = [p.stat().st_mtime for p in (path / "config.json", path / "metrics.jsonl", path / "results.json",
                                         path / ".lock") if p.exists()]
    started = _number(lock.get("started")) if lock else None
    if started is None and (path / "config.json").exists():
        started = (path / "config.json").stat().st_mtime
    ablation = variant = None
    parent = path.parent
    if path.name == "run" and _SEED_DIR.fullmatch(parent.name) and parent.parent.name == task:
        variant, ablation = parent.parent.parent.name, parent.parent.parent.parent.name
    return RunInfo(path=path, name=name if name is not None else str(path), model=model, task=task, seed=seed,
                   status=status, metric=metric, examples=examples, best_val=best_val, best_examples=best_examples,
                   test=_number(test_block.get("score")), test_size=_int(res.get("test_size")), per_task=per_task,
                   config=cfg, started=started, updated=max(times, default=0.0), ablation=ablation,
                   variant=variant, lock=lock, problems=problems)


def _not_a_run_hint(path: Path) -> str:
    if not path.exists():
        return "check the path; `relreason runs` lists the runs"
    if path.is_dir():
        inside = sum(1 for _ in _walk_runs(path))
        if inside:
            return f"it holds {inside} run(s): pass --runs {path}, or list them with `relreason runs {path}`"
    return "give a folder made by `relreason train` (runs/NAME) or an ablation cell (.../seed0/run)"


def _walk_runs(root: Path):
    for dirpath, dirnames, _ in os.walk(root):
        here = Path(dirpath)
        if is_run_dir(here):
            dirnames[:] = []  # runs do not nest; best/, last/ and export/ are parts of this one
            yield here
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))  # .last.xxx.tmp: being written


def discover_runs(root: Path | str = "runs", metric_of: Optional[MetricLookup] = None) -> list[RunInfo]:
    """Every run under `root` (recursively, ablation cells included), newest first.

    Names are paths relative to `root`. Raises RelreasonError when there is none."""
    root = Path(root)
    if not root.is_dir():
        raise RelreasonError(f"{root} is not a directory",
                             "give the folder holding runs (default: runs) or an ablation folder (ablations/NAME)")
    runs = []
    for d in _walk_runs(root):
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


# ---------------------------------------------------------------------------------------------
# `relreason runs`: one row per run


def format_age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


RUN_COLUMNS = ("name", "model", "task", "seed", "examples", "best val", "OOD test", "metric", "status", "age")


def run_rows(runs: list[RunInfo], now: Optional[float] = None) -> list[dict]:
    now = time.time() if now is None else now
    rows = []
    for r in runs:
        test = format_score(r.test, r.metric)
        if r.per_task and r.test is None:
            test = f"{len(r.per_task)} tasks"
        rows.append({"name": r.name, "model": r.model or "?", "task": r.task or "?",
                     "seed": "?" if r.seed is None else str(r.seed),
                     "examples": "-" if r.examples is None else f"{r.examples:,}",
                     "best val": format_score(r.best_val, r.metric), "OOD test": test, "metric": r.metric.short,
                     "status": r.status.value, "age": format_age(now - r.updated)})
    return rows


_STATUS_STYLE = {Status.FINISHED: "green", Status.RUNNING: "yellow", Status.INTERRUPTED: "red"}


def runs_table(runs: list[RunInfo], title: str = "", now: Optional[float] = None) -> Table:
    """A rich table of runs; the name column folds rather than truncates. Text is never read as markup."""
    t = Table(title=escape(title) if title else None)
    for c in RUN_COLUMNS:
        if c == "name":
            t.add_column(c, no_wrap=True, overflow="fold")
        else:
            t.add_column(c, justify="right" if c in ("seed", "examples", "best val", "OOD test", "age") else "left",
                         no_wrap=True)
    for r, row in zip(runs, run_rows(runs, now)):
        cells = [escape(row[c]) for c in RUN_COLUMNS]
        cells[RUN_COLUMNS.index("status")] = f"[{_STATUS_STYLE[r.status]}]{row['status']}[/]"
        t.add_row(*cells)
    return t


# ---------------------------------------------------------------------------------------------
# `relreason compare`: seeds aggregated, settings side by side


class GroupBy(str, enum.Enum):
    MODEL = "model"  # one row per model (setting), tasks side by side
    TASK = "task"  # one row per task, models side by side (the papers' tables)
    SEED = "seed"  # one row per seed, every (model, task) side by side, then mean ± std


class Format(str, enum.Enum):
    TABLE = "table"  # rich, for the terminal
    JSON = "json"
    MD = "md"
    CSV = "csv"  # mean and std in separate columns, for sheets
    LATEX = "latex"


def parse_group_by(text: Optional[str]) -> Optional[GroupBy]:
    if text is None:
        return None
    try:
        return GroupBy(text)
    except ValueError:
        raise RelreasonError(f"unknown --group-by {text!r}", "use one of: " + ", ".join(g.value for g in GroupBy)) \
            from None


def parse_format(text: str) -> Format:
    try:
        return Format(text)
    except ValueError:
        raise RelreasonError(f"unknown format {text!r}", "use one of: " + ", ".join(f.value for f in Format)) \
            from None


@dataclass(frozen=True)
class Cell:
    """A table cell holding scores: a Stat in a metric's unit."""

    stat: Stat
    metric: Metric
    show_n: bool = False  # seeds differ between cells of the table: say how many

    def text(self) -> str:
        if not self.stat.n:
            return "-"
        s = format_score(self.stat.mean, self.metric)
        if self.stat.n > 1:
            s += f" ± {format_score(self.stat.std, self.metric)}"
        return s + (f" (n={self.stat.n})" if self.show_n else "")

    def numbers(self) -> tuple[str, str]:
        scale = 100.0 if self.metric.percent else 1.0
        if not self.stat.n:
            return "", ""
        std = "" if self.stat.std is None else f"{self.stat.std * scale:.6g}"
        return f"{self.stat.mean * scale:.6g}", std


# config keys that do not change what a run learns: runs differing only in these are seeds of one setting
# (one list with the cells of ablate/reproduce: relreason.protocol.NOT_PROTOCOL_KEYS, plus the recipe's label)
_NOT_A_SETTING = {tuple(k.split(".")) for k in NOT_PROTOCOL_KEYS} | {("recipe",)}


def _flatten(tree: dict, prefix: tuple = ()) -> dict:
    flat = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            flat.update(_flatten(v, prefix + (k,)))
        else:
            flat[prefix + (k,)] = v
    return flat


def _setting(cfg: dict) -> str:
    flat = {k: v for k, v in _flatten(cfg).items() if k not in _NOT_A_SETTING}
    return json.dumps(sorted(([".".join(map(str, k)), v] for k, v in flat.items()), key=lambda kv: kv[0]),
                      default=str)


@dataclass
class Group:
    """The runs of one (model, task, setting): seeds of the same experiment."""

    model: str
    task: str
    setting: str  # the ablation variant of its runs, or what tells it apart from a same-named group; else ""
    metric: Metric
    runs: list  # [RunInfo]
    test: Stat
    best_val: Stat
    is_variant: bool = False  # `setting` is an ablation variant, a name that stands on its own

    @property
    def label(self) -> str:
        if self.is_variant:
            return self.setting
        return self.model + (f" [{self.setting}]" if self.setting else "")

    @property
    def seeds(self) -> list:
        return sorted({r.seed for r in self.runs if r.seed is not None})

    def to_dict(self) -> dict:
        return {"model": self.model, "task": self.task, "setting": self.setting, "metric": self.metric.name,
                "metric_label": self.metric.describe(), "lower_is_better": self.metric.lower_is_better,
                "runs": [r.name for r in self.runs], "seeds": self.seeds,
                "finished": sum(r.status is Status.FINISHED for r in self.runs),
                "test": self.test.to_dict(), "best_val": self.best_val.to_dict(), "std": STD_KIND}


def group_runs(runs: list[RunInfo]) -> tuple[list[Group], list[str]]:
    """Groups (model, task, setting) over seeds; returns the groups and notes for the user.

    Multi-task runs contribute one entry per task of `per_task`. Raises RelreasonError when the
    runs of one group were scored with different metrics (their mean would mean nothing)."""
    entries: dict[tuple, list] = {}
    for r in runs:
        for task, (score, metric) in r.scores().items():
            # runs that differ only in seed (and machine settings) are one experiment
            key = (r.model or "?", task, _setting(r.config) if r.config else f"unknown config: {r.name}")
            entries.setdefault(key, []).append((r, score, metric))
    notes: list[str] = []
    groups = []
    for (model, task, _), items in entries.items():
        # an unfinished run that recorded no metric yet has nothing to disagree with
        scored = [(r, s, m) for r, s, m in items if s is not None or m.name != UNKNOWN_METRIC.name] or items
        if len({(m.name, m.lower_is_better) for _, _, m in scored}) > 1:
            names = ", ".join(f"{r.name} ({m.name})" for r, _, m in scored)
            raise RelreasonError(f"cannot average {model} on {task}: its runs use different metrics: {names}",
                                 "compare runs scored with one metric; re-evaluate old runs with `relreason eval`")
        seeds = [r.seed for r, _, _ in items if r.seed is not None]
        if len(seeds) != len(set(seeds)):
            notes.append(f"{model} on {task}: several runs share a seed ({', '.join(r.name for r, _, _ in items)}); "
                         "each counts in the mean")
        multi = any(r.per_task for r, _, _ in items)
        best = Stat.of([] if multi else [r.best_val for r, _, _ in items])
        groups.append(Group(model, task, "", scored[0][2], [r for r, _, _ in items],
                            Stat.of(s for _, s, _ in items), best))
    _label_settings(groups)
    unfinished = [r.name for r in runs if r.status is not Status.FINISHED]
    if unfinished:
        notes.append(f"no OOD test yet for {len(unfinished)} unfinished run(s): {', '.join(unfinished)}")
    groups.sort(key=lambda g: (g.task, g.model, g.setting))
    return groups, notes


def _label_settings(groups: list[Group]) -> None:
    """Names each group by its ablation variant (when all its runs are cells of one); groups of one
    (model, task) that would still share a name get the config values that tell them apart."""
    for g in groups:
        variants = {r.variant for r in g.runs}
        g.is_variant = len(variants) == 1 and None not in variants
        g.setting = next(iter(variants)) if g.is_variant else ""
    clashes: dict[tuple, list[Group]] = {}
    for g in groups:
        clashes.setdefault((g.model, g.task, g.setting), []).append(g)
    for same in clashes.values():
        if len(same) == 1:
            continue
        flats = [{k: v for k, v in _flatten(g.runs[0].config).items() if k not in _NOT_A_SETTING} for g in same]
        keys = sorted({k for f in flats for k in f if len({json.dumps(x.get(k), default=str) for x in flats}) > 1})
        for g, f in zip(same, flats):
            parts = [f"{'.'.join(map(str, k))}={json.dumps(f.get(k), default=str)}" for k in keys[:3]]
            diff = ", ".join(parts) + (", …" if len(keys) > 3 else "") if g.runs[0].config else "config unknown"
            g.setting = f"{g.setting}: {diff}" if g.setting else diff


@dataclass
class Comparison:
    """A table ready to render: titled columns, rows of str or Cell, notes for stderr, and the groups."""

    title: str
    columns: list
    rows: list
    groups: list
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"title": self.title, "std": STD_KIND, "groups": [g.to_dict() for g in self.groups],
                "notes": self.notes}


def _uniform(groups: Iterable[Group]) -> Optional[Metric]:
    """The one metric of these groups' numbers, or None when they differ. Groups with nothing to show
    yet (unfinished runs that recorded no metric) do not count."""
    groups = list(groups)
    shown = [g for g in groups if g.test.n or g.best_val.n] or groups
    ms = list({(g.metric.name, g.metric.lower_is_better): g.metric for g in shown}.values())
    return ms[0] if len(ms) == 1 else None


def compare(runs: list[RunInfo], group_by: Optional[GroupBy | str] = None) -> Comparison:
    """Side-by-side table of runs, seeds of one (model, task, setting) aggregated as mean ± std.

    group_by None: one row per (model, task, setting) with seeds, examples, best validation and OOD
    test; "task" / "model": one row per task / model with the other side by side; "seed": one row
    per seed. Every score column (or, when metrics differ between rows, a metric column) names its
    metric and direction. Averages over tasks appear only when every task has the same metric."""
    group_by = parse_group_by(group_by.value if isinstance(group_by, GroupBy) else group_by)
    groups, notes = group_runs(runs)
    if not groups:
        raise RelreasonError("none of these runs has a task and a score to compare",
                             "check them with `relreason runs DIR --json` (see `problems`)")
    ns = {g.test.n for g in groups if g.test.n}
    show_n = len(ns) > 1
    n = next(iter(ns)) if len(ns) == 1 else None
    seeds = "seeds" if n is None else f"{n} seed" + ("s" if n != 1 else "")
    note = f"mean ± std over {seeds}" + (", n per cell" if show_n else "") + " (sample std, ddof=1)"
    build = {None: _long, GroupBy.TASK: _by_task, GroupBy.MODEL: _by_model, GroupBy.SEED: _by_seed}[group_by]
    title, columns, rows = build(groups, show_n, note)
    return Comparison(title, columns, rows, groups, notes)


def _long(groups: list[Group], show_n: bool, note: str):
    one = _uniform(groups)
    test_col = f"OOD test ({one.describe()})" if one else "OOD test"
    val_col = "best val" + (f" ({one.label})" if one else "")
    has_setting = any(g.setting for g in groups)
    columns = ["model"] + (["setting"] if has_setting else []) + ["task"] + ([] if one else ["metric"]) + \
        ["seeds", "finished", "examples", val_col, test_col]
    rows = []
    for g in groups:
        examples = Stat.of(r.examples for r in g.runs)
        row = {"model": g.model, "setting": g.setting, "task": g.task, "metric": g.metric.describe(),
               "seeds": ",".join(map(str, g.seeds)) or "?",
               "finished": f"{sum(r.status is Status.FINISHED for r in g.runs)}/{len(g.runs)}",
               "examples": "-" if not examples.n else f"{examples.mean:,.0f}",
               val_col: Cell(g.best_val, g.metric, show_n), test_col: Cell(g.test, g.metric, show_n)}
        rows.append(row)
    return f"runs compared: {note}", columns, rows


def _average(cells: list[Cell]) -> Optional[Cell]:
    """The mean over tasks of the per-task means (as the papers' averages); None if a task is missing."""
    if not cells or any(c is None or not c.stat.n for c in cells):
        return None
    return Cell(Stat((sum(c.stat.mean for c in cells) / len(cells),)), cells[0].metric)


def _by_task(groups: list[Group], show_n: bool, note: str):
    tasks = list(dict.fromkeys(g.task for g in groups))
    labels = list(dict.fromkeys(g.label for g in sorted(groups, key=lambda g: (g.model, g.setting))))
    cell = {(g.task, g.label): Cell(g.test, g.metric, show_n) for g in groups}
    one = _uniform(groups)
    rows = []
    for t in tasks:
        row_metric = _uniform(g for g in groups if g.task == t)
        row = {"task": t, "metric": row_metric.describe() if row_metric else "mixed"}
        row.update({lab: cell.get((t, lab)) for lab in labels})
        rows.append(row)
    columns = ["task"] + ([] if one else ["metric"]) + labels
    avg = {lab: _average([cell.get((t, lab)) for t in tasks]) for lab in labels}
    if one and len(tasks) > 1 and any(avg.values()):
        rows.append({"task": "average", **avg})
    title = f"OOD test, {one.describe()}: {note}" if one else f"OOD test: {note}"
    return title, columns, rows


def _by_model(groups: list[Group], show_n: bool, note: str):
    tasks = list(dict.fromkeys(g.task for g in groups))
    labels = list(dict.fromkeys(g.label for g in sorted(groups, key=lambda g: (g.model, g.setting))))
    cell = {(g.task, g.label): Cell(g.test, g.metric, show_n) for g in groups}
    one = _uniform(groups)
    task_metric = {t: _uniform(g for g in groups if g.task == t) for t in tasks}
    col = {t: t if one else f"{t} ({task_metric[t].describe() if task_metric[t] else 'mixed metrics'})"
           for t in tasks}
    avg = {lab: _average([cell.get((t, lab)) for t in tasks]) for lab in labels}
    with_avg = one is not None and len(tasks) > 1 and any(avg.values())
    rows = []
    for lab in labels:
        row = {"model": lab}
        row.update({col[t]: cell.get((t, lab)) for t in tasks})
        if with_avg:
            row["average"] = avg[lab]
        rows.append(row)
    columns = ["model"] + [col[t] for t in tasks] + (["average"] if with_avg else [])
    title = f"OOD test, {one.describe()}: {note}" if one else f"OOD test: {note}"
    return title, columns, rows


def _by_seed(groups: list[Group], show_n: bool, note: str):
    one = _uniform(groups)
    col = {id(g): f"{g.label} / {g.task}" + ("" if one else f" ({g.metric.describe()})") for g in groups}
    seeds = sorted({r.seed for g in groups for r in g.runs if r.seed is not None})
    rows = []
    for s in seeds:
        row = {"seed": str(s)}
        for g in groups:
            row[col[id(g)]] = Cell(Stat.of(sc for r in g.runs if r.seed == s for sc in [r.scores()[g.task][0]]),
                                   g.metric)
        rows.append(row)
    summary = {"seed": "mean ± std"}
    summary.update({col[id(g)]: Cell(g.test, g.metric, show_n) for g in groups})
    rows.append(summary)
    title = f"OOD test per seed, {one.describe()}" if one else "OOD test per seed"
    return f"{title}; last row: {note}", ["seed"] + [col[id(g)] for g in groups], rows


def _text(v) -> str:
    if v is None:
        return "-"
    return v.text() if isinstance(v, Cell) else str(v)


def comparison_table(cmp: Comparison) -> Table:
    """A rich table of a comparison (settings such as `[processor.layers=1]` are text, not markup)."""
    t = Table(title=escape(cmp.title))
    for i, c in enumerate(cmp.columns):
        t.add_column(escape(c), justify="left" if i == 0 or c in ("model", "setting", "task", "metric") else "right",
                     overflow="fold")
    for r in cmp.rows:
        t.add_row(*[escape(_text(r.get(c))) for c in cmp.columns])
    return t


def render_comparison(cmp: Comparison, fmt: Format | str) -> str:
    """md / latex: cells as "mean ± std"; csv: each score column as "<col> mean" and "<col> std";
    json: the groups with every value."""
    from relreason.eval.report import render

    fmt = parse_format(fmt.value if isinstance(fmt, Format) else fmt)
    if fmt is Format.JSON:
        return json.dumps(cmp.to_dict(), indent=2)
    if fmt is Format.TABLE:
        raise ValueError("the rich table is comparison_table(cmp)")
    if fmt is Format.CSV:
        score_cols = [c for c in cmp.columns if any(isinstance(r.get(c), Cell) for r in cmp.rows)]
        columns = []
        for c in cmp.columns:
            columns += [f"{c} mean", f"{c} std"] if c in score_cols else [c]
        rows = []
        for r in cmp.rows:
            row = {}
            for c in cmp.columns:
                if c in score_cols:
                    v = r.get(c)
                    row[f"{c} mean"], row[f"{c} std"] = v.numbers() if isinstance(v, Cell) else ("", "")
                else:
                    row[c] = _text(r.get(c))
            rows.append(row)
        return render(rows, columns, "csv")
    rows = [{c: _text(r.get(c)) for c in cmp.columns} for r in cmp.rows]
    body = render(rows, cmp.columns, fmt.value, title=cmp.title)
    return body if fmt is not Format.LATEX else f"% {cmp.title}\n{body}"


# ---------------------------------------------------------------------------------------------
# Ablation folders (`relreason ablate` output)


def read_ablation(path: Path) -> Optional[dict]:
    """The results.json of an ablation folder ({"ablation", "variants", "tasks", "cells"}), or None."""
    data = _read_json(Path(path) / "results.json", [])
    if data is None or not isinstance(data.get("cells"), list) or "ablation" not in data:
        return None
    return data


__all__ = ["Metric", "METRICS", "resolve_metric", "format_score", "Status", "RunInfo", "read_metrics",
           "validation_records", "run_status", "is_run_dir", "read_run", "discover_runs", "load_runs",
           "sort_runs", "runs_table", "run_rows", "GroupBy", "Format", "Stat", "Cell", "Group", "group_runs",
           "Comparison", "compare", "comparison_table", "render_comparison", "read_ablation", "format_age"]
