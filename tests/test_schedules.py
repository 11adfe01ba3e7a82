"""Learning-rate schedules (relreason.schedules): the rate at chosen points against the closed forms, the
configuration's checks, the default changing nothing, and the rates the loop really gives Adam, also
across a stop and resume."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from safetensors.numpy import load_file

from relreason.config import TrainConfig, build_config
from relreason.errors import RelreasonError
from relreason.schedules import LR_SCHEDULES, learning_rate
from relreason.train import run, session

from stop_requests import stop_after


def sched(kind="cosine", lr=1e-3, warmup=100, min_lr=1e-5, total=1100, batch=10):
    return SimpleNamespace(lr=lr, lr_schedule=kind, warmup_examples=warmup, min_lr=min_lr, train_examples=total,
                           batch_size=batch)


def test_warmup_rises_linearly_to_lr():
    t = sched()
    assert learning_rate(t, 0) == pytest.approx(1e-3 * 10 / 100)  # the first update is not at rate 0
    assert learning_rate(t, 40) == pytest.approx(1e-3 * 50 / 100)
    assert learning_rate(t, 90) == pytest.approx(1e-3)  # the update that ends the warm-up runs at lr
    assert learning_rate(t, 100) == pytest.approx(1e-3)


@pytest.mark.parametrize("examples", [100, 350, 600, 850, 1100])
def test_cosine_and_linear_decay_against_closed_form(examples):
    q = (examples - 100) / 1000
    cos = 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + math.cos(math.pi * q))
    lin = 1e-3 - (1e-3 - 1e-5) * q
    assert learning_rate(sched("cosine"), examples) == pytest.approx(cos, rel=1e-12)
    assert learning_rate(sched("linear"), examples) == pytest.approx(lin, rel=1e-12)


def test_decay_ends_at_min_lr_and_halves_midway():
    assert learning_rate(sched("cosine"), 1100) == pytest.approx(1e-5)
    assert learning_rate(sched("cosine", warmup=0, min_lr=0.0), 550) == pytest.approx(5e-4)
    assert learning_rate(sched("linear", warmup=0, min_lr=0.0), 275) == pytest.approx(7.5e-4)


@pytest.mark.parametrize("name", LR_SCHEDULES.names())
def test_every_shape_starts_at_lr_and_never_rises(name):
    t = sched(name, warmup=0, min_lr=1e-4 if name != "constant" else 0.0)
    rates = [learning_rate(t, e) for e in range(0, 1101, 10)]
    assert rates[0] == t.lr and all(b <= a for a, b in zip(rates, rates[1:]))
    assert min(rates) >= t.min_lr


def test_constant_default_is_exactly_lr():
    t = TrainConfig()
    assert (t.lr_schedule, t.warmup_examples, t.min_lr) == ("constant", 0, 0.0)
    for lr in (1e-3, 2.5e-4, 6.3e-5, 0.1 + 0.2):  # not representable exactly: still the same float
        t.lr = lr
        assert all(learning_rate(t, e) == lr for e in (0, 32, 10_000, 320_000))


@pytest.mark.parametrize("sets,message", [
    (["train.lr_schedule=cosin"], "train.lr_schedule must be one of constant, cosine, linear"),
    (["train.warmup_examples=-1"], "train.warmup_examples must be 0"),
    (["train.warmup_examples=320000"], "must be below train.train_examples"),
    (["train.min_lr=1e-4"], "train.lr_schedule is constant"),
    (["train.lr_schedule=cosine", "train.min_lr=0.5"], "must not exceed train.lr"),
    (["train.lr_schedule=linear", "train.min_lr=-1e-5"], "train.min_lr must be a finite number >= 0"),
])
def test_bad_schedules_are_refused(sets, message):
    with pytest.raises(RelreasonError, match=message):
        build_config("mpnn", "bfs", None, sets)


TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=40", "train.eval_every_examples=20",
        "data.train_num=16", "data.train_size=5", "data.val_size=5", "data.test_size=5", "data.val_num=4",
        "data.test_num=4"]
COSINE = ["train.lr_schedule=cosine", "train.warmup_examples=12", "train.min_lr=1e-4"]


def record_rates(monkeypatch) -> list[float]:
    """The rate of every Adam update the loop makes (read from the optimizer as it steps)."""
    rates: list[float] = []
    adam = session.adam

    def recording(params, lr):
        opt = adam(params, lr)
        step = opt.step

        def stepping(*args, **kwargs):
            rates.append(opt.param_groups[0]["lr"])
            return step(*args, **kwargs)

        opt.step = stepping
        return opt

    monkeypatch.setattr(session, "adam", recording)
    return rates


def test_the_loop_gives_adam_the_scheduled_rate(tmp_path, monkeypatch):
    rates = record_rates(monkeypatch)
    cfg = build_config("mpnn", "bfs", None, TINY + COSINE + [f"data.data_dir={tmp_path / 'data'}"])
    run(cfg, out=tmp_path / "runs", name="r", show_progress=False)
    assert rates == [learning_rate(cfg.train, 4 * k) for k in range(10)]
    assert rates[0] == pytest.approx(1e-3 / 3) and rates[-1] > 1e-4


def test_default_gives_adam_exactly_lr(tmp_path, monkeypatch):
    rates = record_rates(monkeypatch)
    cfg = build_config("mpnn", "bfs", None, TINY + ["train.lr=0.0003", f"data.data_dir={tmp_path / 'data'}"])
    run(cfg, out=tmp_path / "runs", name="r", show_progress=False)
    assert len(rates) == 10 and all(type(r) is float and r == 0.0003 for r in rates)


def test_a_stopped_and_resumed_run_keeps_the_schedule_exactly(tmp_path, monkeypatch):
    sets = TINY + COSINE + [f"data.data_dir={tmp_path / 'data'}"]
    rates = record_rates(monkeypatch)
    run(build_config("mpnn", "bfs", None, sets), out=tmp_path / "a", name="r", show_progress=False)
    whole, rates[:] = list(rates), []
    with monkeypatch.context() as m:
        stop_after(m, 4)  # 4 updates, 16 examples: past the warm-up, between two validations
        assert run(build_config("mpnn", "bfs", None, sets), out=tmp_path / "b", name="r",
                   show_progress=False).interrupted
    run(build_config("mpnn", "bfs", None, sets), out=tmp_path / "b", name="r", resume=True, show_progress=False)
    assert rates == whole  # 4 updates, then the other 6 at the rates of the run never stopped
    a, b = (load_file(str(tmp_path / d / "r" / "last" / "model.safetensors")) for d in ("a", "b"))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
