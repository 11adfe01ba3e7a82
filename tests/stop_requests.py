"""Stopping an in-process training run after a known number of updates, as Ctrl-C would (the loop saves
`last/` after the current update), without signals or timing: for resume tests.

    with monkeypatch.context() as m:
        stop_after(m, 4)
        assert run(cfg, ...).interrupted     # trained 4 updates, saved last/

`sessions_with_a_lost_checkpoint` is the trackers' resume case: three sessions of one run, the second's
progress lost as after a kill -9.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from relreason.train import loop, seed_group, session
from relreason.train.stop_requests import StopRequests


def stop_after(monkeypatch, updates: int) -> None:
    """Makes the next `loop.run` (or seed group) stop after `updates` updates (one stop request read per
    update): both train under relreason.train.stop_requests' `StopRequests`, as their modules name it."""

    class StopAfter(StopRequests):
        def __enter__(self):
            self.asked = 0
            return self

        def __exit__(self, *exc):
            pass

        @property
        def requested(self):
            self.asked += 1
            return self.asked >= updates

        @requested.setter
        def requested(self, value):
            pass

    monkeypatch.setattr(session, "StopRequests", StopAfter)
    monkeypatch.setattr(seed_group, "StopRequests", StopAfter)


def sessions_with_a_lost_checkpoint(monkeypatch, cfg, runs: Path, name: str, spare: Path, between=None) -> None:
    """Session 1 stops after 2 updates (its checkpoint); session 2 resumes, stops after 6 more, and its
    checkpoint is lost (last/ put back to session 1's, as after a kill -9); session 3 resumes from
    session 1's checkpoint and finishes. `between()` runs after session 2; `spare`: an empty scratch folder."""
    d = Path(runs) / name
    with monkeypatch.context() as m:
        stop_after(m, 2)
        assert loop.run(cfg, out=runs, name=name, show_progress=False).interrupted
    shutil.copytree(d / "last", Path(spare) / "last")
    with monkeypatch.context() as m:
        stop_after(m, 6)
        loop.run(cfg, out=runs, name=name, resume=True, show_progress=False)
    if between is not None:
        between()
    shutil.rmtree(d / "last")
    shutil.copytree(Path(spare) / "last", d / "last")
    loop.run(cfg, out=runs, name=name, resume=True, show_progress=False)
