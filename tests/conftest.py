"""Shared fixtures: small generated datasets, cached per session, and the environment every test
runs in (pinned, so that a developer's shell cannot make a test pass or fail)."""

from __future__ import annotations

import functools
import os
import signal

import pytest
import torch

from relreason.data import generate

# Tests run tiny tensors on a shared 2-core machine: a second intra-op thread only adds
# synchronisation, which under load makes model tests ~50x slower. One thread per test process.
torch.set_num_threads(1)
# ... and in every process a test starts (`python -m relreason`, scripts, torchrun, submitit jobs): torch reads
# OMP_NUM_THREADS when it starts. Without it a child takes a thread per core and, on a loaded 2-core machine,
# spins ~30x slower on the same tiny tensors (scripts/gpu_check.sh --quick: 8 s with one thread, 170 s with two).
# A run's own train.threads, and torchrun's division of the cores, still set theirs (they call set_num_threads).
TEST_THREADS = "1"
os.environ["OMP_NUM_THREADS"] = TEST_THREADS

# rich reads COLUMNS once, when a console is built (relreason.cli.common builds its consoles on import):
# pinned here, before any test module imports the CLI, and again per test for subprocesses.
TEST_COLUMNS = "120"
os.environ["COLUMNS"] = TEST_COLUMNS

# A suite started as a background job (`scripts/test.sh &` in a non-interactive shell, nohup, some CI
# runners) inherits SIGINT ignored, and so do the children it starts. Training rightly leaves an ignored
# SIGINT alone, so the Ctrl-C tests would see no Ctrl-C at all. Those tests are about Ctrl-C: Python's
# own default here, which child processes inherit as SIG_DFL across exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def pinned_environment(monkeypatch):
    """Every test sees the same environment, whatever the shell that runs pytest sets:
    - no RELREASON_DEBUG: errors are one line, not a re-raised traceback (tests assert the line);
    - COLUMNS fixed: rich tables fold the same way in-process and in subprocesses;
    - RELREASON_PROGRESS=0: no progress bars on stderr;
    - OMP_NUM_THREADS=1: one torch thread in every child process, as in this one."""
    monkeypatch.delenv("RELREASON_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", TEST_COLUMNS)
    monkeypatch.setenv("RELREASON_PROGRESS", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", TEST_THREADS)
    from relreason.cli.common import err

    monkeypatch.setattr(err, "width", int(TEST_COLUMNS))  # in case it was built before this conftest ran


@functools.lru_cache(maxsize=None)
def small_dataset(name: str, size: int = 8, num: int = 12, seed: int = 7):
    """A small custom split (cached: datasets are treated as read-only by tests)."""
    return generate(name, num=num, size=size, seed=seed)


@pytest.fixture
def matplotlib_installed():
    """For tests that draw figures: skipped (and listed by `-rs`) only where matplotlib is not installed;
    an installed matplotlib that fails to import fails the test instead of hiding it behind a skip."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed: pip install 'relreason[plot]'")
    import matplotlib  # noqa: F401  (a broken install raises here, in the test)


@pytest.fixture
def make_small():
    return small_dataset
