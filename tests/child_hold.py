"""Holding a training child process at a known point, so that a test can signal or kill it there
without racing it: polling a checkpoint file and hoping the child is still running a moment later
fails on a loaded machine (the child may finish, or be caught between the two renames of a
checkpoint swap).

    env = hold_env(tmp_path, examples=64)
    proc = subprocess.Popen(cmd, env=env)
    wait_held(tmp_path, proc)          # the child appended its validation line at >= 64 examples and waits
    proc.send_signal(signal.SIGKILL)   # or SIGINT, then release(tmp_path) to let it go on

The child imports a `sitecustomize` (put first on PYTHONPATH) that wraps relreason.train.session's
`append_row` (rows of relreason.rundir): after the first validation row at >= `examples` examples is written, and before that
validation's checkpoint moves `last/` forward, it writes `held` and sleeps until `release` exists.
A kill there leaves a metrics line newer than the last checkpoint: the case resuming must truncate.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from relreason.train import checkpoint as ckpt

HOLD = '''
import json, os, time
from pathlib import Path

_where = Path(os.environ["RELREASON_TEST_HOLD"])
_at = int(os.environ["RELREASON_TEST_HOLD_EXAMPLES"])
import relreason.train.session as _session

_append = _session.append_row


def _holding_append(path, record):
    _append(path, record)
    if record.event == "val" and record.examples >= _at and not (_where / "held").exists():
        (_where / "held.tmp").write_text(json.dumps(record.examples))
        os.replace(_where / "held.tmp", _where / "held")  # whole when it appears: the parent reads it at once
        while not (_where / "release").exists():  # a signal's handler runs here; SIGKILL ends it here
            time.sleep(0.02)


_session.append_row = _holding_append
'''


def hold_env(where: Path, examples: int, env: dict | None = None) -> dict:
    """The environment of a child that holds at its first validation at >= `examples` examples."""
    site = Path(where) / "hold-site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(HOLD)
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), base.get("PYTHONPATH")]))
    base["RELREASON_TEST_HOLD"] = str(site)
    base["RELREASON_TEST_HOLD_EXAMPLES"] = str(examples)
    return base


def wait_held(where: Path, proc, timeout: float = 600.0) -> int:
    """Waits until the child holds; returns the examples of the validation it holds at. Fails (with the
    child's stderr) if it exits first."""
    held = Path(where) / "hold-site" / "held"
    deadline = time.time() + timeout
    while not held.exists():
        if proc.poll() is not None:
            err = proc.stderr.read() if getattr(proc, "stderr", None) else ""
            raise AssertionError(f"the child exited ({proc.returncode}) before it held: {err}")
        assert time.time() < deadline, "the child never reached the point to hold at"
        time.sleep(0.02)
    return json.loads(held.read_text())


def release(where: Path) -> None:
    """Lets a held child go on."""
    (Path(where) / "hold-site" / "release").write_text("")


def trainer_state(run_dir: Path) -> dict:
    """`last/trainer_state.json` of a run whose writer may have been killed mid-swap: the checkpoint
    is recovered first, as resuming does (relreason.train.checkpoint.recover)."""
    last = Path(run_dir) / "last"
    ckpt.recover(last)
    return json.loads((last / "trainer_state.json").read_text())
