"""The fuzz suite of relreason.files: every reader of a file relreason reads back, given that file
mutated, reads it correctly or raises one RelreasonError line naming it, never hangs, and changes
nothing outside the run.

One tiny run is trained for the module; each example copies it, mutates one file by one of the
classes of breakage (a value of another type, out of range, a huge integer, deep nesting, a cut,
random bytes; a FIFO, a directory, a symbolic link or a hard link in the file's place) and calls the
reader. Bounded by `max_examples`, never by wall clock; an alarm turns a hang into a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relreason.config import build_config
from relreason.errors import RelreasonError
from relreason.files import MAX_DEPTH, MAX_INT_DIGITS, json_depth, parse_json
from relreason.rundir import RunDir

TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=16", "train.eval_every_examples=16",
        "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=5", "data.val_num=4",
        "data.test_num=4"]
HANG_SECONDS = 30  # a reader that blocks (a FIFO opened for reading) fails here instead of hanging the suite
FUZZ = settings(max_examples=6, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished tiny run (best/, last/ with optimizer and trainer state, metrics, results, lock)."""
    from relreason.train import run

    from relreason.data.text.splits import resolve_text_split, write_text_split

    tmp = tmp_path_factory.mktemp("fuzz")
    cfg = build_config("mpnn", "bfs", None, TINY + [f"data.data_dir={tmp / 'data'}"])
    run(cfg, out=tmp / "runs", name="r", show_progress=False, log=lambda m: None)
    data = tmp / "runs" / "r" / "data"  # the dataset readers' files (a split, a CLRS-Text split), fuzzed here too
    data.mkdir()
    shutil.copy(sorted((tmp / "data").rglob("*.safetensors"))[0], data / "split.safetensors")
    text = write_text_split(resolve_text_split("minimum", sizes="4", num=3, seed=0, hints=False), tmp / "text")
    shutil.copy(text, data / "text.jsonl")
    shutil.copy(text.with_name(text.name.replace(".jsonl", ".meta.json")), data / "text.meta.json")
    return tmp / "runs" / "r"


# -- the readers -------------------------------------------------------------------------------------

def _model(run_dir: Path):
    from relreason.models.build import build_nar
    from relreason.tasks import task_entries
    from relreason.train.checkpoint import load_config

    cfg = load_config(RunDir(run_dir).last.path, warn=False)
    return build_nar(cfg, task_entries(cfg.task), torch.device("cpu")).model


def _read_run_lists(run_dir: Path) -> None:
    """`relreason runs` reads every file of a run and must list it (damaged or not), never raise."""
    from relreason.runs.records import read_run

    read_run(run_dir)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def _read_weights(run_dir: Path) -> None:
    """A read is correct when the model holds the file's tensors exactly: no dtype cast on the way."""
    from safetensors.torch import load_file

    from relreason.train.checkpoint import load_weights

    model = _model(run_dir)
    load_weights(RunDir(run_dir).best.path, model)
    stored = load_file(RunDir(run_dir).best.weights)
    assert all(_same(v, stored[k]) for k, v in model.state_dict().items()), "the weights read are not the file's"


def _verify_for_export(run_dir: Path) -> None:
    """`export` bundles a checkpoint once verified: then it must load faithfully into its model."""
    from relreason.train.checkpoint import verify_checkpoint

    verify_checkpoint(RunDir(run_dir).best.path)
    try:
        _read_weights(run_dir)
    except RelreasonError as e:
        raise AssertionError(f"export verified weights that the model refuses: {e}") from None


def _read_optimizer(run_dir: Path) -> None:
    """A read is correct when the optimizer keeps the run's hyperparameters (the learning rate aside:
    the schedule sets it) and holds the file's moments exactly."""
    from safetensors.torch import load_file

    from relreason.train.checkpoint import load_optimizer
    from relreason.train.optimizer import adam

    model = _model(run_dir)
    fresh, opt = adam(model.parameters(), 1e-3), adam(model.parameters(), 1e-3)
    load_optimizer(RunDir(run_dir).last.path, opt)
    for mine, read in zip(fresh.state_dict()["param_groups"], opt.state_dict()["param_groups"]):
        plain = lambda group: json.loads(json.dumps({k: v for k, v in group.items() if k != "lr"}))  # noqa: E731
        assert plain(read) == plain(mine), \
            "the optimizer read trains with other hyperparameters than the run's"
    stored = load_file(RunDir(run_dir).last.optimizer)
    state = opt.state_dict()["state"]
    assert all(_same(state[int(k.split(".")[0])][k.split(".", 1)[1]], v) for k, v in stored.items()), \
        "the moments read are not the file's"


def _read_trainer_state(run_dir: Path) -> None:
    from relreason.train.checkpoint import load_trainer_state

    load_trainer_state(RunDir(run_dir).last.path)


def _read_checkpoint_config(run_dir: Path) -> None:
    from relreason.train.checkpoint import load_config

    load_config(RunDir(run_dir).best.path, warn=False)


def _read_record(run_dir: Path) -> None:
    from relreason.rundir import read_run_record

    read_run_record(run_dir)


def _read_results(run_dir: Path) -> None:
    from relreason.rundir import read_results

    read_results(run_dir)


def _scan_metrics(run_dir: Path) -> None:
    from relreason.rundir import scan_metrics

    scan_metrics(RunDir(run_dir).metrics)


def _append_metrics(run_dir: Path) -> None:
    """The loop appends a row to metrics.jsonl: a write in place."""
    from relreason.rundir import ResumeRow
    from relreason.train.metrics_file import append_row as _append

    _append(RunDir(run_dir).metrics, ResumeRow(examples=16))


def _take_lock(run_dir: Path) -> None:
    """Training takes the lock: it truncates and writes .lock."""
    from relreason.runtime import RunLock, lock_holder

    lock_holder(run_dir)
    RunLock(run_dir).acquire().release()


def _read_dataset(run_dir: Path) -> None:
    """A dataset read back is one dataset: every array of its samples, the hints as long as its trajectories."""
    from relreason.data.store import load_dataset

    ds = load_dataset(run_dir / "data" / "split.safetensors")
    for group in (ds.inputs, ds.hints, ds.outputs):
        assert all(a.shape[0] == len(ds.lengths) for a in group.values()), "arrays of another sample count"


def _read_dataset_meta(run_dir: Path) -> None:
    from relreason.data.store import read_meta

    read_meta(run_dir / "data" / "split.safetensors")


def _read_text_split(run_dir: Path) -> None:
    from relreason.data.text.splits import load_text_split

    split = load_text_split(run_dir / "data" / "text.jsonl")
    assert all(isinstance(q, str) for q in split.questions + split.answers) and isinstance(split.algorithm, str)


@dataclass(frozen=True)
class Reader:
    file: str  # relative to the run directory
    read: Callable[[Path], None]
    lists: bool = False  # the reader lists damage (`runs`) instead of raising


READERS = [Reader("config.json", _read_record), Reader("config.json", _read_run_lists, lists=True),
           Reader("results.json", _read_results), Reader("results.json", _read_run_lists, lists=True),
           Reader("metrics.jsonl", _scan_metrics), Reader("metrics.jsonl", _append_metrics),
           Reader("metrics.jsonl", _read_run_lists, lists=True), Reader(".lock", _take_lock),
           Reader(".lock", _read_run_lists, lists=True), Reader("last/trainer_state.json", _read_trainer_state),
           Reader("last/optimizer.json", _read_optimizer), Reader("last/optimizer.safetensors", _read_optimizer),
           Reader("best/config.json", _read_checkpoint_config), Reader("best/model.safetensors", _read_weights),
           Reader("best/model.safetensors", _verify_for_export),
           Reader("data/split.safetensors", _read_dataset), Reader("data/split.safetensors", _read_dataset_meta),
           Reader("data/text.jsonl", _read_text_split), Reader("data/text.meta.json", _read_text_split)]


# -- the mutations -----------------------------------------------------------------------------------

HUGE = "9" * 5000  # past Python's 4,300-digit int limit
DEEP = "[" * 100_000 + "]" * 100_000  # past the parser's recursion limit
SUBSTITUTES = ["@HUGE@", "@DEEP@", -1, -10**18, 10**30, 1e308, True, None, "x\n\x1b[31m", [], {}, [1, [2]],
               {"a": {"b": 1}}, 0, 2.5, "[bold]markup[/]"]


def _paths(value, prefix=()):
    """Every path into a JSON value (keys and list indices), the root included."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            yield from _paths(v, (*prefix, i))


def _replaced(value, path, new):
    if not path:
        return new
    out = dict(value) if isinstance(value, dict) else list(value)
    out[path[0]] = _replaced(value[path[0]], path[1:], new)
    return out


def _json_mutation(text: str, data: st.DataObject, lines: bool) -> str:
    """A JSON text with one value (of one line, for JSONL `lines`) swapped for a hostile one."""
    lines = text.splitlines() if lines else [text]
    k = data.draw(st.integers(0, len(lines) - 1))
    value = json.loads(lines[k])
    path = data.draw(st.sampled_from(list(_paths(value))))
    new = data.draw(st.sampled_from(SUBSTITUTES))
    mutated = json.dumps(_replaced(value, path, new)).replace('"@HUGE@"', HUGE).replace('"@DEEP@"', DEEP)
    lines[k] = mutated
    return "\n".join(lines) + "\n"


def _safetensors_mutation(raw: bytes, data: st.DataObject) -> bytes:
    """A safetensors file with one tensor's dtype, shape or offsets changed in its header only, or the
    file written again whole (consistent) with one tensor converted or reshaped."""
    from safetensors.torch import load, save

    if data.draw(st.booleans()):
        tensors = load(raw)
        name = data.draw(st.sampled_from(sorted(tensors)))
        change = data.draw(st.sampled_from(["int8", "float16", "float64", "flat", "grown"]))
        t = tensors[name]
        tensors[name] = {"int8": lambda: t.to(torch.int8), "float16": lambda: t.half(), "float64": lambda: t.double(),
                         "flat": lambda: t.reshape(-1), "grown": lambda: torch.cat([t.reshape(-1)] * 2)}[change]()
        return save(tensors)
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    name = data.draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")))
    key = data.draw(st.sampled_from(["dtype", "shape", "data_offsets"]))
    header[name][key] = data.draw(st.sampled_from(
        {"dtype": ["I8", "F16", "F64", "U8", "XX", 5], "shape": [[], [10**12], [-1], [1, 2, 3], "s"],
         "data_offsets": [[0, 0], [0, 10**15], [-1, 4], [5], "o"]}[key]))
    body = json.dumps(header).encode()
    return len(body).to_bytes(8, "little") + body + raw[8 + n:]


KINDS = ["value", "truncate", "random", "flip", "fifo", "directory", "symlink", "hardlink"]


def _mutate(file: Path, kind: str, data: st.DataObject, victim: Path) -> None:
    raw = file.read_bytes() if file.exists() else b""
    if kind == "value" and raw:
        if file.suffix == ".safetensors":
            file.write_bytes(_safetensors_mutation(raw, data))
        else:
            file.write_text(_json_mutation(raw.decode(), data, file.suffix == ".jsonl"))
    elif kind == "truncate":
        file.write_bytes(raw[:data.draw(st.integers(0, max(0, len(raw) - 1)))])
    elif kind == "random":
        file.write_bytes(data.draw(st.binary(max_size=256)))
    elif kind == "flip" and raw:
        at = data.draw(st.integers(0, len(raw) - 1))
        file.write_bytes(raw[:at] + bytes([raw[at] ^ data.draw(st.integers(1, 255))]) + raw[at + 1:])
    elif kind in ("fifo", "directory", "symlink", "hardlink"):
        file.unlink(missing_ok=True)
        {"fifo": lambda: os.mkfifo(file), "directory": lambda: file.mkdir(),
         "symlink": lambda: file.symlink_to(victim), "hardlink": lambda: os.link(victim, file)}[kind]()


@contextmanager
def _no_hang(what: str):
    def hung(*_):
        raise AssertionError(f"{what} did not return within {HANG_SECONDS} s: a blocking read")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _snapshot(folder: Path) -> dict:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", READERS, ids=lambda r: f"{r.file}-{r.read.__name__.strip('_')}")
@FUZZ
@given(data=st.data())
def test_a_mutated_file_reads_correctly_or_fails_in_one_line_naming_it(trained, reader, kind, data):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "runs" / "r"
        shutil.copytree(trained, run_dir, symlinks=True)
        victims = Path(tmp) / "victims"
        victims.mkdir()
        victim = victims / Path(reader.file).name
        victim.write_bytes(b"precious: not the run's\n")
        _mutate(run_dir / reader.file, kind, data, victim)
        outside = _snapshot(victims)
        with _no_hang(f"{reader.read.__name__} on a {kind} {reader.file}"):
            try:
                reader.read(run_dir)
            except RelreasonError as e:
                assert not reader.lists, f"the listing raised instead of listing the run as damaged: {e}"
                assert Path(reader.file).name in e.message, f"the error names no file: {e}"
                assert "\n" not in str(e), f"not one line: {e!r}"
        assert _snapshot(victims) == outside, "a file outside the run was changed"


@pytest.mark.parametrize("reader", READERS, ids=lambda r: f"{r.file}-{r.read.__name__.strip('_')}")
def test_an_intact_run_reads_back(trained, reader, tmp_path):
    """The other half of the property: the files as written read back without complaint."""
    run_dir = tmp_path / "r"
    shutil.copytree(trained, run_dir)
    reader.read(run_dir)


def test_every_file_a_run_reads_back_is_fuzzed(trained):
    """A new file in the run directory needs its reader in READERS."""
    written = {str(p.relative_to(trained)) for p in trained.rglob("*") if p.is_file()}
    fuzzed = {r.file for r in READERS}
    assert {f for f in written if not f.startswith(("export", "best/optimizer", "best/trainer"))} <= fuzzed | {
        "best/config.json", "last/config.json", "last/model.safetensors"}


# -- the JSON guard itself ---------------------------------------------------------------------------

@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children,
                                                                                       max_size=3), max_leaves=20))
def test_parse_json_reads_what_json_writes(value):
    text = json.dumps(value)
    assert parse_json(text, "f.json") == json.loads(text)
    assert json_depth(text) <= MAX_DEPTH


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.text(alphabet='[]{}"\\:,0123456789 ab-', max_size=200))
def test_parse_json_gives_a_value_or_one_line_naming_the_file(text):
    try:
        parse_json(text, "f.json")
    except RelreasonError as e:
        assert e.message.startswith("f.json") and "\n" not in e.message


@pytest.mark.parametrize("text, problem", [("[" * 100_000 + "]" * 100_000, "nests 100000 levels deep"),
                                           ('{"a": ' + "9" * 5000 + "}", "an integer of 5000 digits"),
                                           ('{"a": NaN}', "holds NaN"),
                                           ('"[[[[" ', None), ("[" * MAX_DEPTH + "]" * MAX_DEPTH, None),
                                           ("1" * MAX_INT_DIGITS, None)])
def test_parse_json_bounds_depth_and_integers_before_python_does(text, problem):
    if problem is None:
        parse_json(text, "f.json")
    else:
        with pytest.raises(RelreasonError, match=f"f.json .*{problem}"):
            parse_json(text, "f.json")
