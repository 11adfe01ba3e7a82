"""Stop requests (relreason.train.stop_requests): a first Ctrl-C or SIGTERM asks the loop to stop after the
step, a second Ctrl-C only after PATIENCE stops at once, and the process's own handlers come back after."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from relreason.train.stop_requests import StopRequests


def _signal(sig: int) -> None:
    """Delivers `sig` to this process; Python runs its handler at the next bytecode, on this thread."""
    os.kill(os.getpid(), sig)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_first_signal_asks_to_stop_after_the_step_and_says_so(sig):
    said = []
    with StopRequests(said.append) as requests:
        assert not requests.requested
        _signal(sig)
        assert requests.requested
    assert len(said) == 1 and said[0].startswith("\nstopping after this step")


def test_a_second_ctrl_c_stops_at_once_only_after_patience(monkeypatch):
    """torchrun passes on the Ctrl-C the terminal already delivered: one within PATIENCE is the same one."""
    with StopRequests(lambda _: None) as requests:
        _signal(signal.SIGINT)
        _signal(signal.SIGINT)  # at once: the first one again, not a second
        assert requests.requested
        _signal(signal.SIGTERM)  # a second SIGTERM never interrupts the step
    monkeypatch.setattr(StopRequests, "PATIENCE", 0.0)
    with pytest.raises(KeyboardInterrupt), StopRequests(lambda _: None):
        _signal(signal.SIGINT)
        _signal(signal.SIGINT)


def test_the_handlers_before_are_back_after_and_an_ignored_sigint_stays_ignored():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with StopRequests(lambda _: None):
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {sig: signal.getsignal(sig) for sig in before} == before
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a job started in the background
    try:
        with StopRequests(lambda _: None) as requests:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            _signal(signal.SIGINT)
            assert not requests.requested
    finally:
        signal.signal(signal.SIGINT, old)


def test_off_the_main_thread_nothing_is_installed():
    """Only the main thread can set signal handlers: elsewhere the requests never come, and nothing fails."""
    seen = []

    def body():
        with StopRequests(lambda _: None) as requests:
            seen.append((requests.requested, signal.getsignal(signal.SIGTERM)))

    before = signal.getsignal(signal.SIGTERM)
    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == [(False, before)]
