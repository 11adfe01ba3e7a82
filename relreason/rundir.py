"""The run directory, defined once: where each file of a run lives and what each file holds.

`relreason train` writes a run directory (`runs/<name>/`; a study cell's run is `<cell>/seed<k>/run`):

    config.json     RunRecord: the resolved config, where each key came from, the recipe's deviation, the command,
                    the plugins its model and algorithms came from
    metrics.jsonl   one JSON line per event: ValidationRow at each validation, ResumeRow at each resume,
                    TestRow after the final test (appended, so a kill may cut the last line)
    results.json    RunResults: the summary of a finished run; its presence is what "finished" means
    .lock           the lock (relreason.runtime.RunLock): {"pid", "host", "started"} while a process trains
    best/ last/     checkpoints (Checkpoint): the best weights on validation; the latest state, to resume from
    .last.old       the previous last/ for the instant a new one is swapped in (relreason.train.checkpoint)
    export/         the bundle `relreason export` writes by default

    rd = RunDir("runs/mpnn-bfs-s0")
    res = read_results(rd.results)      # RunResults, validated
    res.test.score, res.config["train"]["seed"]
    rows = read_metrics(rd.metrics)     # [ValidationRow | ResumeRow | TestRow]

Every reader goes through this module and every file is validated when read: a missing or
ill-typed field is a one-line RelreasonError (FieldError) naming the file and the field. Writers
build the records here and write `to_json()`. results.json carries `schema_version`
(SCHEMA_VERSION); a file without it is version 1, the format before the key existed: the same
fields, those added after the first release (`metric`, `per_task`, `hardware`, ...) optional in it.

It stands in the core layer, below everything that reads runs (models read a NAR run's checkpoint,
eval lists and compares runs, train writes them).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import stat
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Union

from relreason.errors import RelreasonError
from relreason.files import (MAX_JSONL_BYTES, escape, kind_of, link_error, maybe_json_object, parse_json, read_bytes,
                             read_json_object)
from relreason.typecheck import JSON, Mismatch, check, kind

# -- the layout ----------------------------------------------------------------------------------

CONFIG = "config.json"
METRICS = "metrics.jsonl"
RESULTS = "results.json"
LOCK = ".lock"
BEST = "best"
LAST = "last"
EXPORT = "export"
CELL_RUN = "run"  # a study cell keeps its run in <cell>/run (beside it: run.stale-<time> after --rerun-stale)

# a checkpoint directory (best/, last/, an exported bundle)
WEIGHTS = "model.safetensors"
CHECKPOINT_CONFIG = "config.json"
OPTIMIZER = "optimizer.safetensors"
OPTIMIZER_META = "optimizer.json"
TRAINER_STATE = "trainer_state.json"

_SEED_DIR = re.compile(r"seed(\d+)")


def seed_dir(seed: int) -> str:
    """The folder of one seed in a study's cell layout: "seed3"."""
    return f"seed{seed}"


def seed_of_dir(name: str) -> Optional[int]:
    """The seed a cell folder's name says ("seed3" -> 3), or None when it is not one."""
    m = _SEED_DIR.fullmatch(name)
    return int(m.group(1)) if m else None


def old_checkpoint(path: Path) -> Path:
    """Where a checkpoint directory's previous version waits while a new one is swapped in (`.last.old`)."""
    path = Path(path)
    return path.with_name(f".{path.name}.old")


@dataclass(frozen=True)
class Checkpoint:
    """The files of a checkpoint directory: weights and config; for resuming, optimizer and loop state."""

    path: Path

    @property
    def weights(self) -> Path:
        return Path(self.path) / WEIGHTS

    @property
    def config(self) -> Path:
        return Path(self.path) / CHECKPOINT_CONFIG

    @property
    def optimizer(self) -> Path:
        return Path(self.path) / OPTIMIZER

    @property
    def optimizer_meta(self) -> Path:
        return Path(self.path) / OPTIMIZER_META

    @property
    def trainer_state(self) -> Path:
        return Path(self.path) / TRAINER_STATE


@dataclass(frozen=True)
class RunDir:
    """The paths of one run directory's files (nothing is read or created)."""

    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    @property
    def best(self) -> Checkpoint:
        return Checkpoint(self.path / BEST)

    @property
    def last(self) -> Checkpoint:
        return Checkpoint(self.path / LAST)

    @property
    def export(self) -> Path:
        return self.path / EXPORT

    @property
    def files(self) -> tuple[Path, ...]:
        """The files whose times say when the run last wrote anything."""
        return self.config, self.metrics, self.results, self.lock

    def finished(self) -> bool:
        return self.results.exists()

    def has_progress(self) -> bool:
        """A checkpoint to resume from (last/, or .last.old mid-swap) or results. A run killed during its
        very first validation, or whose first last/ never landed (a full disk), left only config.json,
        metrics.jsonl and perhaps best/: nothing to resume, so it may start afresh."""
        return any(p.exists() for p in (self.last.path, self.results, old_checkpoint(self.last.path)))

    def is_run(self) -> bool:
        """A folder holding a run's config.json, or a run's results.json whose config.json is lost.
        Checkpoints and bundles hold weights and are not runs; an ablation folder's results.json
        (the study's tables: "cells") is not a run's."""
        if (self.path / WEIGHTS).exists():
            return False
        cfg = _read_object(self.config)
        if cfg is not None and isinstance(cfg.get("config"), dict):
            return True
        res = _read_object(self.results)
        if res is not None and is_run_results(res):
            return True
        # a damaged config.json beside a run's own files (its log, its lock, a checkpoint): a damaged run,
        # which `relreason runs` lists with its problem rather than leaving out
        return cfg is None and os.path.lexists(self.config) and any(
            os.path.lexists(p) for p in (self.metrics, self.lock, self.last.path, self.best.path))

    def cell(self) -> Optional[tuple[str, str, str, int]]:
        """(ablation, variant, task, seed) when this is the run of an ablation cell
        (<ablation>/<variant>/<task>/seed<k>/run), else None. `task` is the parent's name: the caller
        checks it against the run's own task."""
        seed_folder = self.path.parent
        seed = seed_of_dir(seed_folder.name)
        if self.path.name != CELL_RUN or seed is None:
            return None
        task_folder = seed_folder.parent
        return task_folder.parent.parent.name, task_folder.parent.name, task_folder.name, seed


def find_run_dirs(root: Path) -> Iterator[Path]:
    """Every run directory under `root` (`root` itself included), depth first in name order. Runs do
    not nest (best/, last/ and export/ are parts of one), and hidden folders are files being written
    (`.last.<tag>.tmp`) or swapped (`.last.old`)."""
    for dirpath, dirnames, _ in os.walk(root):
        here = Path(dirpath)
        if RunDir(here).is_run():
            dirnames[:] = []
            yield here
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))


def check_no_links(run_dir: Path) -> None:
    """Refuses a run directory in which a file or folder relreason writes or reads (config.json, the
    lock, best/, last/, their files, ...) is a symbolic link: relreason never creates one there, and
    following one would read, truncate or delete what lies outside the run. (The run directory
    itself may be a link, as runs/ may: the user made it.) Raises RelreasonError naming the link."""
    rd = RunDir(run_dir)
    checkpoints = [rd.best.path, rd.last.path, old_checkpoint(rd.best.path), old_checkpoint(rd.last.path)]
    paths = [rd.config, rd.metrics, rd.results, rd.lock, rd.export, *checkpoints]
    for folder in checkpoints:
        if folder.is_dir() and not folder.is_symlink():
            paths += [folder / name for name in (WEIGHTS, CHECKPOINT_CONFIG, OPTIMIZER, OPTIMIZER_META, TRAINER_STATE)]
    for path in paths:
        if path.is_symlink():
            raise link_error(path)
    check_kinds(run_dir)


def check_kinds(run_dir: Path) -> None:
    """Refuses a run directory whose config.json, metrics.jsonl, results.json or .lock is not a regular
    file, or whose best/ or last/ is not a folder (a FIFO there would hang a reader; a file named
    last/ would leave a resume between "nothing to resume" and "already exists"). RelreasonError."""
    rd = RunDir(run_dir)
    for path, want, test in [*((p, "a regular file", stat.S_ISREG) for p in (rd.config, rd.metrics, rd.results,
                                                                              rd.lock)),
                             *((p, "a folder", stat.S_ISDIR) for p in (rd.best.path, rd.last.path))]:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if not test(mode):
            raise RelreasonError(f"{path} is {kind_of(mode)}, not {want}",
                                 "remove it or put the run's own file back: relreason made it otherwise")


def _read_object(path: Path) -> Optional[dict]:
    """The JSON object in `path`; None when it is missing, unreadable, hostile or not an object."""
    return maybe_json_object(path)


# -- validation ----------------------------------------------------------------------------------


class FieldError(RelreasonError):
    """A record file whose field is missing or of the wrong type (one line: the file and the field)."""

    def __init__(self, file: str, name: str, problem: str, hint: str = ""):
        self.file, self.field, self.problem = file, name, problem
        super().__init__(f"{file}: field {name!r} {problem}", hint or _HINT)


_HINT = "the file is damaged or was not written by relreason; restore it, or train the run again"


def _check(value, tp, name: str, file: str):
    """`value` if it has type `tp` (nested dataclasses built), else FieldError (relreason.typecheck: as
    written, numbers finite)."""

    def stop(m: Mismatch) -> None:
        shown = f"a finite number, not {_shown(m.value)}" if m.finite else f"{kind(m.tp)}, not {_shown(m.value)}"
        raise FieldError(file, m.path, f"must be {shown}")

    return check(value, tp, name, stop, JSON, build=lambda cls, data, prefix: _build(cls, data, file, prefix=prefix))


def _shown(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _build(cls, data: dict, file: str, version: int = 1, prefix: str = ""):
    """An instance of the record dataclass `cls` from a JSON object, every field checked.

    A field without a default is required; one with `metadata={"since": k}` is optional in files of
    schema versions below k (it did not exist then) and required from version k on; one with
    `metadata={"min": m}` (a count, a time) must not be below m."""
    hints = _hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        name = prefix + f.name
        if f.name not in data:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required or version >= f.metadata.get("since", version + 1):
                raise FieldError(file, name, "is missing")
            continue
        values[f.name] = _check(data[f.name], hints[f.name], name, file)
        low = f.metadata.get("min")
        if low is not None and values[f.name] is not None and values[f.name] < low:
            raise FieldError(file, name, f"must be at least {low}, not {_shown(values[f.name])}")
    return cls(**values)


def _plain(obj) -> Any:
    """A record as JSON values, fields in declaration order; fields marked `omit_none` left out when None."""
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.init and not (f.metadata.get("omit_none") and getattr(obj, f.name) is None)}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def read_object(path: Path, hint: str = _HINT) -> dict:
    """The JSON object stored in `path`, read by the guarded reader (relreason.files.read_json_object).
    Raises RelreasonError (one line) when it is missing, not a regular file, a link, too large,
    unreadable, not JSON (a cut file), hostile (too deep, a huge integer) or not an object."""
    return read_json_object(path, hint)


_COUNT = {"min": 0}  # the metadata of a count or a time: never negative

# -- results.json --------------------------------------------------------------------------------

SCHEMA_VERSION = 2  # 2: the "schema_version" key, and the fields added after version 1 are required


@dataclass(frozen=True)
class TestScores:
    """The OOD test of the best checkpoint: the headline score, per output feature and per hint."""

    __test__ = False  # not a pytest test class

    score: Optional[float]
    outputs: dict[str, Any]  # {feature: score} (text tasks: shape, parse, clrs; multi-task: {task: score})
    hints: dict[str, Any]
    per_task: Optional[dict[str, dict]] = field(default=None, metadata={"omit_none": True})  # multi-task / text

    def to_dict(self) -> dict:
        return _plain(self)


@dataclass(frozen=True, kw_only=True)
class RunResults:
    """results.json: what a finished run computed and how (`relreason runs`, `compare`, `export`,
    study cells and the committed result files read it)."""

    relreason: str  # the version that wrote it
    model: str
    task: str
    tasks: Optional[list[str]] = field(default=None, metadata={"since": 2})  # the task's members
    seed: int
    recipe: Optional[str]  # the recipe's label; None: configured in Python without one
    deviation: Optional[str] = field(default=None, metadata={"since": 2})  # how the recipe departs from the papers
    command: Optional[str]  # the command line that trained it; None: the Python API
    metric: Optional[str] = field(default=None, metadata={"since": 2})  # None: written before the key existed
    lower_is_better: Optional[bool] = field(default=None, metadata={"since": 2})
    steps: int = field(metadata=_COUNT)
    examples: int = field(metadata=_COUNT)  # training examples seen
    processes: Optional[int] = field(default=None, metadata={"since": 2})
    seconds: float = field(metadata=_COUNT)  # training, validations and the final test, over every session
    hardware: Optional[list[str]] = field(default=None, metadata={"since": 2})  # every machine a session ran on
    train_seconds: Optional[float] = field(default=None, metadata={"since": 2})
    best_val: Optional[float]
    best_examples: Optional[int] = field(metadata=_COUNT)
    test_size: int = field(metadata=_COUNT)  # nodes of the OOD test graphs
    test_label: Optional[str] = field(default=None, metadata={"since": 2})  # "test, n=64, 32 samples"
    test: TestScores
    per_task: dict[str, dict] = field(default_factory=dict, metadata={"since": 2})  # {task: {"score", ...}}
    config: dict[str, Any]  # the resolved config (Config.to_dict())
    # the installed plugins its model and algorithms came from ([] : all built in; None: written before the key)
    plugins: Optional[list[dict]] = field(default=None, metadata={"omit_none": True})
    # the code of every session that trained it (relreason.runtime.code_record); None: written before the key
    code: Optional[list[dict]] = field(default=None, metadata={"omit_none": True})
    # the digest of the weights it started from (relreason.train.checkpoint.tensors_digest): the same seed under
    # another torch release starts elsewhere (2.11.0 and 2.13.0 do); None: trained before it was recorded
    init_weights: Optional[str] = field(default=None, metadata={"omit_none": True})
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_dict(cls, data: dict, file: str = RESULTS) -> "RunResults":
        """Checks every field (FieldError naming `file` and the field); a dict without "schema_version"
        is version 1."""
        version = data.get("schema_version", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise FieldError(file, "schema_version", f"must be a positive integer, not {_shown(version)}")
        if version > SCHEMA_VERSION:
            raise FieldError(file, "schema_version", f"is {version}: written by a newer relreason (this one reads "
                             f"up to {SCHEMA_VERSION})", "read it with the relreason version that wrote it")
        results = _build(cls, {**data, "schema_version": version}, file, version)
        for task, block in results.per_task.items():  # each task's block holds its own score
            _check(block.get("score"), Optional[float], f"per_task.{task}.score", file)
        return results

    def to_dict(self) -> dict:
        """The file's JSON object: "schema_version" first, then the fields as the loop has always written them."""
        plain = _plain(self)
        return {"schema_version": plain.pop("schema_version"), **plain}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def read_results(path: Path, hint: str = _HINT) -> RunResults:
    """The results.json at `path` (a file, or a run directory), validated."""
    path = Path(path)
    if path.is_dir():
        path = RunDir(path).results
    return RunResults.from_dict(read_object(path, hint), str(path))


def is_run_results(data: dict) -> bool:
    """Whether a JSON object looks like a run's results.json (not an ablation folder's tables)."""
    return "cells" not in data and ("test" in data or "model" in data)


# -- config.json ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """config.json: the configuration a run was started with (rewritten by each resume)."""

    relreason: str
    config: dict[str, Any]  # the resolved config (Config.to_dict())
    sources: Optional[dict[str, str]] = None  # "section.key" -> where its value came from; None: not recorded
    deviation: Optional[str] = None  # the recipe's own statement of how it departs from the papers
    command: Optional[str]
    # as in a checkpoint's config.json ([]: all built in); None: written before the key existed
    plugins: Optional[list[dict]] = field(default=None, metadata={"omit_none": True})
    code: Optional[dict] = field(default=None, metadata={"omit_none": True})  # the code of the session that wrote it
    recorded: frozenset = field(default=frozenset(), init=False, compare=False)  # keys the file holds

    @classmethod
    def from_dict(cls, data: dict, file: str = CONFIG) -> "RunRecord":
        record = _build(cls, data, file)
        object.__setattr__(record, "recorded", frozenset(data))
        return record

    def to_dict(self) -> dict:
        return _plain(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def read_run_record(path: Path) -> RunRecord:
    """The config.json of the run directory `path`, validated."""
    file = RunDir(path).config
    return RunRecord.from_dict(read_object(file), str(file))


# -- last/trainer_state.json ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TrainerState:
    """The loop's counters in a checkpoint (last/trainer_state.json): how far an unfinished run got."""

    step: int = field(metadata=_COUNT)
    examples: int = field(metadata=_COUNT)
    best_val: Optional[float]
    best_examples: Optional[int] = field(metadata=_COUNT)
    seconds: float = field(metadata=_COUNT)  # training and validations so far, over every session
    last_loss: Optional[float] = None
    hardware: list[str] = field(default_factory=list)  # every machine a session ran on (absent in early runs)
    code: list[dict] = field(default_factory=list)  # the code of every session (runtime.code_record; absent before)
    # the digest of the weights it started from (checkpoint.tensors_digest); None: started before it was recorded
    init_weights: Optional[str] = None

    @classmethod
    def from_dict(cls, data: dict, file: str = TRAINER_STATE) -> "TrainerState":
        """Checks every field (FieldError naming `file` and the field): counts and times not negative,
        the best validation a finite score reached within the examples trained."""
        state = _build(cls, data, file)
        if (state.best_val is None) != (state.best_examples is None):
            raise FieldError(file, "best_examples" if state.best_val is not None else "best_val",
                             "is null while the other of best_val and best_examples is not")
        if state.step > state.examples or (state.step == 0) != (state.examples == 0):
            raise FieldError(file, "step", f"is {state.step} for {state.examples} examples: every step trains "
                             "at least one example, and examples need a step")
        if state.best_examples is not None and state.best_examples > state.examples:
            raise FieldError(file, "best_examples", f"is {state.best_examples}, past the {state.examples} "
                             "examples trained")
        return state

    def to_dict(self) -> dict:
        return _plain(self)


def read_trainer_state(checkpoint: Path) -> TrainerState:
    """The trainer state of the checkpoint directory `checkpoint` (e.g. RunDir(...).last.path), validated."""
    file = Checkpoint(checkpoint).trainer_state
    return TrainerState.from_dict(read_object(file), str(file))


# -- metrics.jsonl -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ValidationRow:
    """One validation: the scores on the validation split after `examples` training examples."""

    event = "val"
    step: Optional[int] = field(default=None, metadata=_COUNT)
    examples: int = field(metadata=_COUNT)
    loss: Optional[float] = None  # of the last training batch (None before the first step)
    score: float
    outputs: dict[str, Any] = field(default_factory=dict)
    hints: dict[str, Any] = field(default_factory=dict)
    time: Optional[float] = None  # seconds of training so far
    per_task: Optional[dict[str, dict]] = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class ResumeRow:
    """A session resuming the run at `examples`, with the keys it changed ({key: [old, new]})."""

    event = "resume"
    examples: int = field(metadata=_COUNT)
    changed: dict[str, Any] = field(default_factory=dict)
    processes: int = field(default=1, metadata={"min": 1})


@dataclass(frozen=True, kw_only=True)
class TestRow:
    """The final test of the best checkpoint."""

    __test__ = False  # not a pytest test class
    event = "test"
    size: int = field(metadata=_COUNT)
    num: int = field(metadata=_COUNT)
    label: Optional[str] = None
    best_examples: Optional[int] = None
    score: Optional[float]
    outputs: dict[str, Any] = field(default_factory=dict)
    hints: dict[str, Any] = field(default_factory=dict)
    per_task: Optional[dict[str, dict]] = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class DivergedRow:
    """The loss of step `step` (after `examples` examples) was not finite: the run stopped before that
    update, and its last checkpoint is the one to resume from (with a lower train.lr)."""

    event = "diverged"
    step: int = field(metadata=_COUNT)
    examples: int = field(metadata=_COUNT)
    loss: str  # "nan", "inf" or "-inf" (JSON has no such numbers)


MetricsRow = Union[ValidationRow, ResumeRow, TestRow, DivergedRow]
_ROWS = {cls.event: cls for cls in (ValidationRow, ResumeRow, TestRow, DivergedRow)}


def row_json(row: MetricsRow) -> str:
    """One line of metrics.jsonl (without its newline): the event first, then the row's fields."""
    return json.dumps({"event": row.event, **_plain(row)}, allow_nan=True)


def parse_row(line: str, file: str = METRICS) -> Optional[MetricsRow]:
    """The row one line of metrics.jsonl holds; None for a line cut by a kill or an event this version
    does not know. Raises FieldError for a known event with a missing or ill-typed field."""
    try:
        data = parse_json(line, file, constants=True)
    except RelreasonError:
        return None
    cls = _ROWS.get(data.get("event")) if isinstance(data, dict) else None
    if cls is None:
        return None
    return _build(cls, {k: v for k, v in data.items() if k != "event"}, file)


def scan_metrics(path: Path) -> tuple[list[tuple[int, str, MetricsRow]], list[tuple[int, str]]]:
    """Every line of the metrics.jsonl `path`: (line number, text, row) of the rows that validate, and
    (line number, what is wrong, "metrics.jsonl:3: field 'score' ...") of those that do not (a line
    cut by a kill, one edited, an ill-typed field). Lines of events this version does not know are
    neither. ([], []) when there is no file. Raises RelreasonError when it is not a regular file or
    larger than MAX_JSONL_BYTES (relreason.files)."""
    path = Path(path)
    if not os.path.lexists(path):
        return [], []
    rows, damaged = [], []
    text = read_bytes(path, MAX_JSONL_BYTES).decode("utf-8", errors="replace")
    for i, line in enumerate(text.splitlines(), 1):
        where = f"{path.name}:{i}"
        try:
            data = parse_json(line, where, constants=True)
        except RelreasonError as e:
            damaged.append((i, f"{where} is cut or not JSON" if "not valid JSON" in e.message else e.message))
            continue
        if not isinstance(data, dict):
            damaged.append((i, f"{where} is not a JSON object"))
            continue
        try:
            row = parse_row(line, where)
        except FieldError as e:
            damaged.append((i, e.message))
            continue
        if row is not None:
            rows.append((i, line, row))
    return rows, damaged


def read_metrics(path: Path, problems: Optional[list] = None) -> list[MetricsRow]:
    """The rows of a metrics.jsonl (`path`: the file or its run directory), in the order written; []
    when there is none. Lines cut by a kill and rows that do not validate are skipped (a run's log
    is read to show progress, and a damaged line must not hide the others), each noted in `problems`
    when it is given."""
    path = Path(path)
    if path.is_dir():
        path = RunDir(path).metrics
    if problems is None:
        rows, damaged = scan_metrics(path)
    else:
        try:
            rows, damaged = scan_metrics(path)
        except RelreasonError as e:  # a FIFO, a directory, a huge file: the run is listed as damaged
            problems.append(escape(e.message))
            return []
    if problems is not None:
        problems.extend(escape(what) for _, what in damaged)
    return [row for _, _, row in rows]


def validations(rows: list[MetricsRow]) -> list[ValidationRow]:
    """The validation rows, in training order."""
    return [r for r in rows if isinstance(r, ValidationRow)]


__all__ = ["CONFIG", "METRICS", "RESULTS", "LOCK", "BEST", "LAST", "EXPORT", "CELL_RUN", "WEIGHTS",
           "CHECKPOINT_CONFIG", "OPTIMIZER", "OPTIMIZER_META", "TRAINER_STATE", "seed_dir", "seed_of_dir",
           "old_checkpoint", "Checkpoint", "RunDir", "find_run_dirs", "FieldError", "read_object", "SCHEMA_VERSION",
           "TestScores", "RunResults", "read_results", "is_run_results", "RunRecord", "read_run_record",
           "TrainerState", "read_trainer_state", "ValidationRow", "ResumeRow", "TestRow", "DivergedRow", "MetricsRow",
           "row_json", "parse_row", "scan_metrics", "read_metrics", "validations", "check_no_links", "check_kinds", "link_error"]
