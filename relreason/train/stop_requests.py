"""Stop requests: Ctrl-C and SIGTERM turned into "stop after this step" (`StopRequests`).

    with StopRequests(log) as requests:
        while ...:
            step()
            if requests.requested:
                break   # weights, optimizer and counters agree here: save last/ and stop

A single run (relreason.train.session) and a seed group (relreason.train.seed_group) train under it.
"""

from __future__ import annotations

import signal
import threading
import time


class StopRequests:
    """Ctrl-C and SIGTERM (a scheduler's stop, `kill`, torchrun passing either on) set `requested`: the
    loop stops after the current step, where weights, optimizer and counters agree, and saves there.
    A second Ctrl-C, PATIENCE seconds or more after the first, stops at once without saving. Only the
    main thread can catch signals (elsewhere nothing is installed), and an ignored SIGINT (a job
    started in the background) stays ignored."""

    PATIENCE = 2.0  # s: torchrun passes on the Ctrl-C the terminal already delivered: that is not a second one

    def __init__(self, log):
        self.log, self.requested, self._first = log, False, 0.0
        self._old: dict = {}

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum, frame) -> None:
        now = time.monotonic()
        if not self.requested:
            self.requested, self._first = True, now
            self.log("\nstopping after this step (it saves a checkpoint to resume from); Ctrl-C again stops at once")
        elif signum == signal.SIGINT and now - self._first >= self.PATIENCE:
            raise KeyboardInterrupt


__all__ = ["StopRequests"]
