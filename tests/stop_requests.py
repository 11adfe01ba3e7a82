"""Stopping an in-process training run after a known number of updates, as Ctrl-C would (the loop saves
`last/` after the current update), without signals or timing: for resume tests.

    with monkeypatch.context() as m:
        stop_after(m, 4)
        assert run(cfg, ...).interrupted     # trained 4 updates, saved last/
"""

from __future__ import annotations

from relreason.train import loop


def stop_after(monkeypatch, updates: int) -> None:
    """Makes the next `loop.run` stop after `updates` updates (one stop request read per update)."""

    class StopAfter(loop._StopRequests):
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

    monkeypatch.setattr(loop, "_StopRequests", StopAfter)
