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


def test_a_write_under_a_stop_request_leaves_sigterm_to_it_and_only_the_default_action_is_replaced():
    """relreason.runtime.terminate_as_interrupt (every dataset write) replaces SIGTERM's default action only: under
    a run's StopRequests a SIGTERM stays a stop request, and any other handler installed (a deadline's) keeps it."""
    from relreason.runtime import terminate_as_interrupt

    try:
        with StopRequests(lambda _: None) as requests, terminate_as_interrupt():
            _signal(signal.SIGTERM)  # no KeyboardInterrupt: the write finishes, the run stops after its step
            assert requests.requested
        noted = []
        old = signal.signal(signal.SIGTERM, lambda signum, frame: noted.append(signum))
        try:
            with terminate_as_interrupt():
                _signal(signal.SIGTERM)
            assert noted == [signal.SIGTERM]
        finally:
            signal.signal(signal.SIGTERM, old)
    except KeyboardInterrupt:  # a failure of this test, not the end of the suite
        pytest.fail("a SIGTERM under an installed handler raised KeyboardInterrupt")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
        _signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_sigterm_while_the_first_validation_writes_its_split_saves_last_and_stops_after_a_step(tmp_path,
                                                                                                monkeypatch):
    """A run's validation split is written at its first validation, inside the training loop: a SIGTERM then (a
    deadline's, a scheduler's) ended the run without saving anything (a pack on the CPU suite lost a cell's
    checkpoint so). Now the split is finished, the step taken and last/ saved."""
    import importlib
    import json

    from relreason.config import build_config
    from relreason.train import run

    generate = importlib.import_module("relreason.data.generate")
    real = generate.iter_chunks

    def chunks(algorithm, size, num, seed, *a, **k):
        if seed == 2:  # the validation split's seed: the kill lands while it is written
            _signal(signal.SIGTERM)
        return real(algorithm, size, num, seed, *a, **k)

    monkeypatch.setattr(generate, "iter_chunks", chunks)
    said = []
    cfg = build_config("mpnn", "bfs", None, ["model.hidden=8", "train.batch_size=4", "train.train_examples=48",
                                             "train.eval_every_examples=16", "data.train_num=8",
                                             "data.train_size=5", "data.val_size=5", "data.test_size=5",
                                             f"data.data_dir={tmp_path / 'data'}"])
    result = run(cfg, out=tmp_path / "runs", name="r", show_progress=False, log=said.append)
    assert result.interrupted and not any("without saving" in s for s in said)
    state = json.loads((tmp_path / "runs" / "r" / "last" / "trainer_state.json").read_text())
    assert state["step"] == 1
