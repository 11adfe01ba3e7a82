"""Claiming a run directory (relreason.train.claim): the lock held while inside and released after, a
new run refused where one has progress, a resume let in, and a lock the caller holds left to it."""

from __future__ import annotations

import os

import pytest

from relreason.errors import RelreasonError
from relreason.runtime import RunLock, lock_holder
from relreason.train.claim import claim, has_progress
from relreason.train.distributed import Distributed

ONE = Distributed()  # one process: rank 0 claims


def with_progress(run_dir):
    """A run directory as a run leaves it after its first checkpoint."""
    (run_dir / "last").mkdir(parents=True)
    (run_dir / "last" / "trainer_state.json").write_text("{}")
    return run_dir


def test_the_lock_is_held_inside_and_released_after(tmp_path):
    run_dir = tmp_path / "r"
    with claim(run_dir, resume=False, dd=ONE, lock=None):
        assert lock_holder(run_dir)["pid"] == os.getpid()
        with pytest.raises(RelreasonError, match="in use by process"):
            RunLock(run_dir).acquire()
    assert lock_holder(run_dir) is None


def test_a_new_run_over_one_with_progress_is_refused_and_a_resume_let_in(tmp_path):
    run_dir = with_progress(tmp_path / "r")
    assert has_progress(run_dir)
    with pytest.raises(RelreasonError, match="already exists") as e:
        with claim(run_dir, resume=False, dd=ONE, lock=None):
            pass
    assert e.value.hint == "pass --resume to continue it or another --name"
    assert lock_holder(run_dir) is None
    with claim(run_dir, resume=True, dd=ONE, lock=None):
        assert lock_holder(run_dir) is not None


def test_a_directory_without_progress_is_claimed_afresh(tmp_path):
    """A run killed during its first validation left config.json and metrics.jsonl only: nothing to resume."""
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    assert not has_progress(run_dir)
    with claim(run_dir, resume=False, dd=ONE, lock=None):
        pass


def test_a_lock_the_caller_holds_is_neither_taken_again_nor_released(tmp_path):
    run_dir = tmp_path / "r"
    with RunLock(run_dir) as held:
        with claim(run_dir, resume=False, dd=ONE, lock=held):
            pass
        assert lock_holder(run_dir)["pid"] == os.getpid()  # still the caller's
