"""Failure paths through the real entry point: each prints exactly one `Error:` line and one `Hint:`
line, never a traceback, with the documented exit code (README "Command line"):
2 for a wrong command line (unknown command or option, missing argument, a value of the wrong type),
1 for a failed command (known errors and every file-system error: not a directory, is a directory,
permission denied, read-only, disk full), 130 for an interruption (Ctrl-C or SIGTERM), after which
no temporary file is left behind. Disk-full and read-only file systems are simulated by a
`sitecustomize` that makes `open` fail for one path (the error the OS would give); permission
problems are real (as root, with the capabilities that ignore file modes dropped)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import fails, relreason, succeeds, tiny_sets

FAULT = '''
import builtins, errno, io, os
_name, _, _where = os.environ["RELREASON_TEST_FAULT"].partition(":")
_open = builtins.open


def _failing_open(file, mode="r", *args, **kwargs):
    if isinstance(file, (str, os.PathLike)) and _where in os.fspath(file) and any(c in mode for c in "wax+"):
        code = getattr(errno, _name)
        raise OSError(code, os.strerror(code), os.fspath(file))
    return _open(file, mode, *args, **kwargs)


builtins.open = io.open = _failing_open
'''


def leftovers(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.name.startswith(".spill-") or p.name.endswith(".tmp")]


@pytest.fixture
def fault(tmp_path, monkeypatch):
    """fault("ENOSPC", "where"): the next `relreason` processes fail to open paths containing `where`
    for writing, with that errno."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FAULT)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))

    def arm(name: str, where: str) -> None:
        monkeypatch.setenv("RELREASON_TEST_FAULT", f"{name}:{where}")

    return arm


@pytest.mark.parametrize("args, message", [
    (["train", "mpnn", "bfs", "--bogus"], "no such option: --bogus"),
    (["train", "mpnn"], "missing argument 'task'"),
    (["generate", "bfs", "--num", "many"], "invalid value for '--num'"),
    (["trian"], "no such command 'trian'"),
    (["list", "models", "extra"], "unexpected extra argument"),
])
def test_usage_errors_are_one_line_with_exit_code_2(args, message):
    res = relreason(*args)
    fails(res, 2, message)
    assert res.stdout == "" and f"Hint: see `relreason {args[0] if args[0] != 'trian' else ''}".rstrip() in res.stderr


def test_known_errors_exit_1():
    fails(relreason("train", "mpnn", "bellmanford"), 1, "bellmanford")


def test_not_a_directory(tmp_path, trained):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    fails(relreason("generate", "bfs", "--split", "val", "--out", blocker), 1, "cannot create", str(blocker))
    _, result, _ = trained
    line = fails(relreason("export", result["run"], "--out", blocker / "bundle"), 1, "not a directory", str(blocker))
    assert line.startswith("Error: not a directory:")


def test_is_a_directory(tmp_path, trained):
    fails(relreason("show", tmp_path), 1, "is a directory")
    target = tmp_path / "figure.png"
    target.mkdir()
    _, result, _ = trained
    fails(relreason("plot", result["run"], "--out", target), 1, "is a directory", str(target))


@pytest.mark.parametrize("name, message, hint", [("ENOSPC", "no space left on device", "disk is full"),
                                                 ("EROFS", "read-only file system", "read-only")])
def test_disk_full_and_read_only_while_generating(tmp_path, fault, name, message, hint):
    fault(name, ".npy")
    res = relreason("generate", "bfs", "--split", "val", "--out", tmp_path)
    fails(res, 1, message, str(tmp_path))
    assert hint in res.stderr
    assert not leftovers(tmp_path) and not list(tmp_path.rglob("*.safetensors"))


def test_disk_full_while_training(tmp_path, fault):
    fault("ENOSPC", "metrics.jsonl")
    res = relreason("train", "mpnn", "bfs", *tiny_sets(tmp_path / "data"), "--out", tmp_path / "runs", "--name", "r")
    fails(res, 1, "no space left on device", "metrics.jsonl")
    assert not leftovers(tmp_path / "runs")


@pytest.mark.parametrize("what", ["config.json", "model.safetensors", "best", "dataset"])
def test_permission_denied_is_not_corrupt(tmp_path, trained, what):
    import shutil

    root, result, _ = trained
    if what == "dataset":
        target = tmp_path / "x.safetensors"
        shutil.copyfile(next((root / "data" / "bfs").glob("*.safetensors")), target)
        args = ["show", target]
    else:
        run = tmp_path / "run"
        shutil.copytree(result["run"], run)
        target = run / "best" / what if what != "best" else run / "best"
        args = ["eval", run if what != "best" else target]
    target.chmod(0)
    try:
        line = fails(relreason(*args, unprivileged=True), 1, "permission denied", str(target))
    finally:
        target.chmod(0o755)
    assert "corrupt" not in line


def _wait_for(predicate, proc, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert proc.poll() is None, f"exited early ({proc.returncode}): {proc.stderr.read()}"
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


BIG = ["generate", "bubble_sort", "--size", "48", "--num", "5000", "--seed", "0"]  # tens of seconds of work


def test_sigterm_during_generate_cleans_up(tmp_path):
    proc = relreason(*BIG, "--out", tmp_path, wait=False)
    try:
        _wait_for(lambda: bool(leftovers(tmp_path)), proc)  # the first chunk is spilled
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Interrupted." in stderr and "Traceback" not in stderr
    assert not leftovers(tmp_path) and not list(tmp_path.rglob("*.safetensors"))


SIGTERM_MID_WRITE = """
import os, signal, sys, time
from pathlib import Path
import typer
from relreason.cli.common import report_errors
from relreason.data.store import atomic_path
app = typer.Typer()


@app.command()
@report_errors
def write(out: Path):
    with atomic_path(out / "x.json") as tmp:
        tmp.write_text("{}")
        os.kill(os.getpid(), signal.SIGTERM)  # a `kill` while any command writes
        time.sleep(60)


app()
"""


def test_sigterm_during_any_command_cleans_up_and_exits_130(tmp_path):
    """Every command runs under report_errors, which turns SIGTERM into an interruption (not only generate's)."""
    res = subprocess.run([sys.executable, "-c", SIGTERM_MID_WRITE, str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 130 and "Interrupted." in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []


def test_next_generate_removes_what_a_killed_one_left(tmp_path):
    proc = relreason(*BIG, "--out", tmp_path, wait=False)
    try:
        _wait_for(lambda: bool(leftovers(tmp_path)), proc)
        proc.kill()  # SIGKILL: no cleanup can run
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    left = [p for p in leftovers(tmp_path) if p.parent == tmp_path / "bubble_sort"]
    assert left and all(f"{proc.pid}@" in p.name for p in left)
    succeeds(relreason("generate", "bubble_sort", "--size", "5", "--num", "2", "--seed", "0", "--out", tmp_path))
    assert not leftovers(tmp_path)
