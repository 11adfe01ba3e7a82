"""Running `relreason` for the CLI tests: through its real entry point (`python -m relreason`) in a
subprocess (`relreason`, `succeeds`, `fails`), or in this process with typer's runner (`invoke`, `ok`,
`one_line_error`: faster, for what needs no process of its own); tiny settings, exit codes, the
one-line error format, and a way to run as a user who really lacks permissions (root ignores file
modes unless its DAC capabilities are dropped)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from relreason.cli.main import app

ENTRY = [sys.executable, "-m", "relreason"]
UMASK = 0o002  # of the shared training run: group-writable, which a fixed 0o755 (or 0o644 / 0o600) breaks

# A run of a few seconds: graphs of 5-6 nodes, a width of 8, a handful of examples.
TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=8", "train.eval_every_examples=4",
        "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=6", "data.val_num=4",
        "data.test_num=4"]


def tiny_sets(data_dir: Path, extra: tuple[str, ...] = ()) -> list[str]:
    return [x for s in [*TINY, f"data.data_dir={data_dir}", *extra] for x in ("--set", s)]


def relreason(*args, cwd=None, umask: int | None = None, unprivileged: bool = False, timeout: float = 300,
              wait: bool = True):
    """Runs `python -m relreason ARGS`; returns the CompletedProcess (or the Popen when wait=False).

    `unprivileged`: as root, drop the capabilities that let root ignore file permissions."""
    env = {**os.environ, "RELREASON_PROGRESS": "0"}
    env.pop("RELREASON_DEBUG", None)
    cmd = [*ENTRY, *map(str, args)]
    if unprivileged and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot take away root's file access")
        cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]
    preexec = (lambda: os.umask(umask)) if umask is not None else None
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
                                preexec_fn=preexec)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, preexec_fn=preexec)


def succeeds(res) -> str:
    assert res.returncode == 0, f"exit {res.returncode}\nstdout: {res.stdout[-3000:]}\nstderr: {res.stderr[-3000:]}"
    assert "Traceback" not in res.stderr
    return res.stdout


def fails(res, code: int, *messages: str) -> str:
    """Asserts the error format: exit `code`, exactly one `Error:` line naming `messages`, one `Hint:`
    line right after it, no traceback and no usage panel. Returns the error line."""
    assert res.returncode == code, f"exit {res.returncode}, wanted {code}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    lines = res.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("Error: ")]
    assert len(errors) == 1, res.stderr
    assert errors[0] + 1 < len(lines) and lines[errors[0] + 1].startswith("Hint: "), res.stderr
    assert "Traceback" not in res.stderr and "Usage:" not in res.stderr and "╭" not in res.stderr
    for m in messages:
        assert m in lines[errors[0]], f"{m!r} not in {lines[errors[0]]!r}"
    return lines[errors[0]]


# -- in this process ---------------------------------------------------------------------------------

_runner = CliRunner()


def invoke(*args, **kwargs):
    """`relreason ARGS` in this process; the Result keeps stdout and stderr apart (`.stdout`, `.output`)."""
    return _runner.invoke(app, [str(a) for a in args], **kwargs)


def ok(res) -> str:
    """The command's stdout (results; logs and progress went to stderr), after checking it succeeded."""
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    return res.stdout


def one_line_error(res, *messages: str) -> str:
    """Asserts exit 1 with exactly one `Error:` line naming `messages`, a `Hint:`, and no traceback."""
    assert res.exit_code == 1, res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "Traceback" not in res.output, res.output
    assert "Hint: " in res.output
    for m in messages:
        assert m in errors[0], (m, errors[0])
    return errors[0]
